package serviceip

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"reflect"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	discoveryv1client "k8s.io/client-go/kubernetes/typed/discovery/v1"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/kubestore/kubestore/config"
)

// KubernetesServiceName is the Service, Endpoints and EndpointSlice in
// the default namespace that lead a cluster's pods to its API server.
const KubernetesServiceName = "kubernetes"

// KubernetesServiceElection is the etcd election whose holder keeps
// default/kubernetes when several processes share one etcd.
const KubernetesServiceElection = "kubernetes-service"

// KubernetesServiceReader reads default/kubernetes's objects, as a
// controller reads its informers' listers (the watch cache): NotFound when
// there is none. The objects are read only.
type KubernetesServiceReader interface {
	Service(ctx context.Context) (*corev1.Service, error)
	Endpoints(ctx context.Context) (*corev1.Endpoints, error)
	EndpointSlice(ctx context.Context) (*discoveryv1.EndpointSlice, error)
}

// KubernetesService keeps the Service default/kubernetes, its Endpoints
// and its EndpointSlice as kube-apiserver keeps them (its
// kubernetesservice controller and endpoint reconciler,
// pkg/controlplane/controller/kubernetesservice and
// pkg/controlplane/reconcilers in k8s.io/kubernetes): the Service at the
// first address of the service range, port 443 to the API's port, so that
// the kubelet gives every pod KUBERNETES_SERVICE_HOST and _PORT and
// client-go's InClusterConfig finds the API; its endpoint the advertised
// address. Without an advertised address the Service has no endpoint (and
// an endpoint kubestore wrote before is removed): pods see the variables,
// and their connections are refused.
//
// Every write carries the resourceVersion it was computed from, and a
// create of what another writer created first is AlreadyExists: the next
// pass reads again. Processes sharing one etcd run it elected (one writes
// its own address, as the last kube-apiserver to reconcile does with the
// master-count reconciler).
type KubernetesService struct {
	ip      netip.Addr
	port    int32
	address netip.Addr // invalid: none
	read    KubernetesServiceReader
	write   KubernetesServiceWriter

	reported string
}

// KubernetesServiceWriter writes default/kubernetes's Service, Endpoints
// and EndpointSlice: the two groups of kubernetes.Interface it needs.
// kubestore passes the two typed clients alone (NewKubernetesServiceWriter):
// a whole kubernetes.Clientset in the binary keeps every group's typed
// client and apply configurations, 16 MB of it (docs/PERFORMANCE.md).
type KubernetesServiceWriter interface {
	CoreV1() corev1client.CoreV1Interface
	DiscoveryV1() discoveryv1client.DiscoveryV1Interface
}

// NewKubernetesServiceWriter is a KubernetesServiceWriter on cfg.
func NewKubernetesServiceWriter(cfg *rest.Config) (KubernetesServiceWriter, error) {
	core, err := corev1client.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	discovery, err := discoveryv1client.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return serviceWriter{core: core, discovery: discovery}, nil
}

type serviceWriter struct {
	core      corev1client.CoreV1Interface
	discovery discoveryv1client.DiscoveryV1Interface
}

func (w serviceWriter) CoreV1() corev1client.CoreV1Interface                { return w.core }
func (w serviceWriter) DiscoveryV1() discoveryv1client.DiscoveryV1Interface { return w.discovery }

// NewKubernetesService keeps default/kubernetes at the first address of
// cidr (the primary service range) to port on address (invalid: none).
func NewKubernetesService(cidr netip.Prefix, port int, address netip.Addr, read KubernetesServiceReader, write KubernetesServiceWriter) *KubernetesService {
	return &KubernetesService{ip: config.KubernetesServiceIP(cidr), port: int32(port), address: address, read: read, write: write}
}

// Run passes at once and then every DefaultServiceCIDRInterval (upstream's
// endpoint interval) until ctx is done. A failed pass is logged, once
// until the failure changes.
func (k *KubernetesService) Run(ctx context.Context) {
	t := time.NewTicker(DefaultServiceCIDRInterval)
	defer t.Stop()
	for {
		err := k.Sync(ctx)
		switch {
		case ctx.Err() != nil:
			return
		case err == nil:
			k.reported = ""
		case apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err):
			klog.V(2).InfoS("default/kubernetes changed after it was read; the next pass reads it again", "err", err)
		case err.Error() != k.reported:
			k.reported = err.Error()
			klog.ErrorS(err, "Keeping the Service default/kubernetes")
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Sync is one pass over the Service, its Endpoints and its EndpointSlice.
func (k *KubernetesService) Sync(ctx context.Context) error {
	if err := k.syncService(ctx); err != nil {
		return err
	}
	if err := k.syncEndpoints(ctx); err != nil {
		return err
	}
	return k.syncEndpointSlice(ctx)
}

func (k *KubernetesService) ports() []corev1.ServicePort {
	return []corev1.ServicePort{{Name: "https", Protocol: corev1.ProtocolTCP, Port: 443, TargetPort: intstr.FromInt32(k.port)}}
}

// syncService creates the Service, or sets its ports back to the API's
// (upstream reconciles the ports and leaves the rest).
func (k *KubernetesService) syncService(ctx context.Context) error {
	svc, err := k.read.Service(ctx)
	switch {
	case apierrors.IsNotFound(err):
		family := corev1.IPv4Protocol
		if k.ip.Is6() {
			family = corev1.IPv6Protocol
		}
		klog.InfoS("Creating the Service default/kubernetes", "clusterIP", k.ip, "targetPort", k.port)
		_, err := k.write.CoreV1().Services(metav1.NamespaceDefault).Create(ctx, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: KubernetesServiceName, Namespace: metav1.NamespaceDefault,
				Labels: map[string]string{"component": "apiserver", "provider": "kubernetes"}},
			Spec: corev1.ServiceSpec{
				Type: corev1.ServiceTypeClusterIP, ClusterIP: k.ip.String(), ClusterIPs: []string{k.ip.String()},
				IPFamilies: []corev1.IPFamily{family}, IPFamilyPolicy: ptr.To(corev1.IPFamilyPolicySingleStack),
				Ports: k.ports(), SessionAffinity: corev1.ServiceAffinityNone,
			},
		}, metav1.CreateOptions{FieldManager: "kube-apiserver"})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating the Service default/kubernetes at %s: %w", k.ip, err)
		}
		return err
	case err != nil:
		return err
	}
	want := k.ports()
	if len(svc.Spec.Ports) == 1 && svc.Spec.Ports[0].Name == want[0].Name && svc.Spec.Ports[0].Port == want[0].Port &&
		svc.Spec.Ports[0].Protocol == want[0].Protocol && svc.Spec.Ports[0].TargetPort == want[0].TargetPort {
		return nil
	}
	svc = svc.DeepCopy()
	svc.Spec.Ports = want
	klog.InfoS("Setting the ports of the Service default/kubernetes", "targetPort", k.port)
	_, err = k.write.CoreV1().Services(metav1.NamespaceDefault).Update(ctx, svc, metav1.UpdateOptions{FieldManager: "kube-apiserver"})
	return err
}

// syncEndpoints keeps the Endpoints: the advertised address on the API's
// port, not mirrored to an EndpointSlice (kubestore writes that too, as
// kube-apiserver does).
func (k *KubernetesService) syncEndpoints(ctx context.Context) error {
	client := k.write.CoreV1().Endpoints(metav1.NamespaceDefault)
	cur, err := k.read.Endpoints(ctx)
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	if !k.address.IsValid() {
		if err != nil {
			return nil
		}
		klog.InfoS("Removing the endpoint of default/kubernetes: no advertised address")
		return ignoreNotFound(client.Delete(ctx, KubernetesServiceName, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &cur.ResourceVersion}}))
	}
	labels := map[string]string{discoveryv1.LabelSkipMirror: "true"}
	subsets := NewKubernetesEndpoint(k.address, k.port).Subsets
	if err != nil {
		_, err := client.Create(ctx, &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: KubernetesServiceName, Namespace: metav1.NamespaceDefault, Labels: labels},
			Subsets: subsets}, metav1.CreateOptions{FieldManager: "kube-apiserver"})
		return err
	}
	if reflect.DeepEqual(cur.Subsets, subsets) && maps.Equal(cur.Labels, labels) {
		return nil
	}
	cur = cur.DeepCopy()
	cur.Labels, cur.Subsets = labels, subsets
	_, err = client.Update(ctx, cur, metav1.UpdateOptions{FieldManager: "kube-apiserver"})
	return err
}

// syncEndpointSlice keeps the EndpointSlice of the same endpoint.
func (k *KubernetesService) syncEndpointSlice(ctx context.Context) error {
	client := k.write.DiscoveryV1().EndpointSlices(metav1.NamespaceDefault)
	cur, err := k.read.EndpointSlice(ctx)
	if apierrors.IsNotFound(err) {
		cur = nil
	} else if err != nil {
		return err
	}
	if !k.address.IsValid() {
		if cur == nil {
			return nil
		}
		return ignoreNotFound(client.Delete(ctx, KubernetesServiceName, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &cur.ResourceVersion}}))
	}
	ep := NewKubernetesEndpoint(k.address, k.port)
	addressType, endpoints, ports := ep.AddressType, ep.Endpoints, ep.Ports
	labels := map[string]string{discoveryv1.LabelServiceName: KubernetesServiceName}
	if cur != nil && cur.AddressType != addressType {
		// The address type is immutable: a new slice.
		if err := ignoreNotFound(client.Delete(ctx, KubernetesServiceName, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &cur.ResourceVersion}})); err != nil {
			return err
		}
		cur = nil
	}
	if cur == nil {
		_, err := client.Create(ctx, &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: KubernetesServiceName, Namespace: metav1.NamespaceDefault, Labels: labels},
			AddressType: addressType, Endpoints: endpoints, Ports: ports}, metav1.CreateOptions{FieldManager: "kube-apiserver"})
		return err
	}
	if reflect.DeepEqual(cur.Endpoints, endpoints) && reflect.DeepEqual(cur.Ports, ports) && maps.Equal(cur.Labels, labels) {
		return nil
	}
	cur = cur.DeepCopy()
	cur.Labels, cur.Endpoints, cur.Ports = labels, endpoints, ports
	_, err = client.Update(ctx, cur, metav1.UpdateOptions{FieldManager: "kube-apiserver"})
	return err
}

// KubernetesEndpoint is the endpoint of default/kubernetes at one
// address, as its Endpoints' subsets and its EndpointSlice's parts: one
// shape for kubestore's own objects and the mirror's view of a cluster's
// (mirror.View).
type KubernetesEndpoint struct {
	Subsets     []corev1.EndpointSubset
	AddressType discoveryv1.AddressType
	Endpoints   []discoveryv1.Endpoint
	Ports       []discoveryv1.EndpointPort
}

// NewKubernetesEndpoint is the endpoint at address, on the API's port.
func NewKubernetesEndpoint(address netip.Addr, port int32) KubernetesEndpoint {
	addressType := discoveryv1.AddressTypeIPv4
	if address.Is6() {
		addressType = discoveryv1.AddressTypeIPv6
	}
	return KubernetesEndpoint{
		Subsets: []corev1.EndpointSubset{{
			Addresses: []corev1.EndpointAddress{{IP: address.String()}},
			Ports:     []corev1.EndpointPort{{Name: "https", Port: port, Protocol: corev1.ProtocolTCP}},
		}},
		AddressType: addressType,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{address.String()}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("https"), Port: ptr.To(port), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}
}

func ignoreNotFound(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
