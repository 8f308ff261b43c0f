package kubelets

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/registry/rest"
)

// DefaultPort is the kubelet's port when its Node reports none
// (kube-apiserver's --kubelet-port).
const DefaultPort = 10250

// PreferredAddressTypes is the order in which a Node's addresses are
// tried, as kubeadm sets kube-apiserver's --kubelet-preferred-address-types:
// InternalIP first, since a gateway's hostname need not resolve.
var PreferredAddressTypes = []corev1.NodeAddressType{
	corev1.NodeInternalIP, corev1.NodeInternalDNS, corev1.NodeExternalIP, corev1.NodeExternalDNS, corev1.NodeHostName,
}

// node is where a node's kubelet listens, and what it declares.
type node struct {
	host, port string
	features   []string
}

// url is the kubelet's URL for path and query.
func (n node) url(path string, query url.Values) *url.URL {
	return &url.URL{Scheme: "https", Host: net.JoinHostPort(n.host, n.port), Path: path, RawQuery: query.Encode()}
}

// supports reports whether the kubelet declares feature
// (node.status.declaredFeatures).
func (n node) supports(feature string) bool {
	for _, f := range n.features {
		if f == feature {
			return true
		}
	}
	return false
}

// locate finds the kubelet of the Node name: its first address of the
// preferred types, and the port it reports. A Node without any is
// kube-apiserver's error (nodeutil.GetPreferredNodeAddress), a 500.
func locate(ctx context.Context, nodes rest.Getter, name string) (node, error) {
	n, err := GetNode(ctx, nodes, name)
	if err != nil {
		return node{}, err
	}
	host := PreferredAddress(n)
	if host == "" {
		return node{}, fmt.Errorf("no preferred addresses found; known addresses: %v", n.Status.Addresses)
	}
	port := int(n.Status.DaemonEndpoints.KubeletEndpoint.Port)
	if port <= 0 {
		port = DefaultPort
	}
	return node{host: host, port: strconv.Itoa(port), features: n.Status.DeclaredFeatures}, nil
}

// GetNode reads the Node name from the nodes store.
func GetNode(ctx context.Context, nodes rest.Getter, name string) (*corev1.Node, error) {
	obj, err := nodes.Get(ctx, name, &metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	n, ok := obj.(*corev1.Node)
	if !ok {
		return nil, fmt.Errorf("nodes %q: got %T", name, obj)
	}
	return n, nil
}

// PreferredAddress is the Node's address a kubelet is reached at: the
// first of PreferredAddressTypes; "" when it reports none.
func PreferredAddress(n *corev1.Node) string {
	for _, t := range PreferredAddressTypes {
		for _, a := range n.Status.Addresses {
			if a.Type == t && a.Address != "" {
				return a.Address
			}
		}
	}
	return ""
}

// getPod is the pod name of the request's namespace.
func getPod(ctx context.Context, pods rest.Getter, name string) (*corev1.Pod, error) {
	obj, err := pods.Get(ctx, name, &metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return nil, fmt.Errorf("pods %q: got %T", name, obj)
	}
	return pod, nil
}

// container is the container a request names, or the pod's only one, as
// kube-apiserver's validateContainer: any other answer is a 400 that
// names the choices.
func container(pod *corev1.Pod, name string) (string, error) {
	var names []string
	for _, c := range pod.Spec.InitContainers {
		names = append(names, c.Name)
	}
	for _, c := range pod.Spec.Containers {
		names = append(names, c.Name)
	}
	for _, c := range pod.Spec.EphemeralContainers {
		names = append(names, c.Name)
	}
	if name == "" {
		switch len(pod.Spec.Containers) {
		case 1:
			return pod.Spec.Containers[0].Name, nil
		case 0:
			return "", apierrors.NewBadRequest(fmt.Sprintf("a container name must be specified for pod %s", pod.Name))
		}
		return "", apierrors.NewBadRequest(fmt.Sprintf("a container name must be specified for pod %s, choose one of: %s", pod.Name, names))
	}
	for _, n := range names {
		if n == name {
			return name, nil
		}
	}
	return "", apierrors.NewBadRequest(fmt.Sprintf("container %s is not valid for pod %s", name, pod.Name))
}

// noHost is kube-apiserver's answer to a stream of a pod not scheduled.
func noHost(pod string) error {
	return apierrors.NewBadRequest(fmt.Sprintf("pod %s does not have a host assigned", pod))
}
