package server_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
)

// The Service default/kubernetes, as kube-apiserver keeps it: at the first
// address of the service range, port 443 to the API's port, so that the
// kubelet gives pods KUBERNETES_SERVICE_HOST; no other Service may take
// that address; its endpoint is --advertise-address on the API's port,
// in an Endpoints and an EndpointSlice, kept when changed or deleted, and
// removed when the address is no longer advertised (a loopback bind
// address advertises none).
func TestKubernetesService(t *testing.T) {
	cfg := testConfig(t)
	cfg.Server.AdvertiseAddress = "192.0.2.10"
	ts := startServer(t, cfg)
	ctx := t.Context()
	services := ts.client.CoreV1().Services(metav1.NamespaceDefault)
	port := portOf(t, ts)

	var svc *corev1.Service
	var err error
	eventually(t, 10*time.Second, "the Service default/kubernetes", func() (bool, error) {
		svc, err = services.Get(ctx, "kubernetes", metav1.GetOptions{})
		return err == nil, err
	})
	wantPorts := []corev1.ServicePort{{Name: "https", Protocol: corev1.ProtocolTCP, Port: 443, TargetPort: intstr.FromInt(port)}}
	if svc.Spec.ClusterIP != "10.0.0.1" || !slices.Equal(svc.Spec.ClusterIPs, []string{"10.0.0.1"}) || !slices.Equal(svc.Spec.Ports, wantPorts) ||
		svc.Labels["component"] != "apiserver" || svc.Labels["provider"] != "kubernetes" || svc.Spec.Type != corev1.ServiceTypeClusterIP {
		t.Errorf("default/kubernetes: labels %v, spec %+v; want 10.0.0.1, %+v", svc.Labels, svc.Spec, wantPorts)
	}
	taken := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "squatter"},
		Spec: corev1.ServiceSpec{ClusterIP: "10.0.0.1", Ports: []corev1.ServicePort{{Port: 80}}}}
	if _, err := services.Create(ctx, taken, metav1.CreateOptions{}); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "already allocated") {
		t.Errorf("another Service at 10.0.0.1: %v, want Invalid, already allocated", err)
	}

	wantEndpoint(t, ts.client, "192.0.2.10", port)
	// Changed and deleted, they come back within a pass (10 s).
	svc.Spec.Ports[0].TargetPort = intstr.FromInt(1)
	if _, err := services.Update(ctx, svc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := ts.client.DiscoveryV1().EndpointSlices(metav1.NamespaceDefault).Delete(ctx, "kubernetes", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 15*time.Second, "default/kubernetes's port set back", func() (bool, error) {
		svc, err := services.Get(ctx, "kubernetes", metav1.GetOptions{})
		return err == nil && slices.Equal(svc.Spec.Ports, wantPorts), err
	})
	wantEndpoint(t, ts.client, "192.0.2.10", port)

	// Started again on a loopback bind address and no advertised one:
	// the Service stays, its endpoint goes.
	ts.stop()
	cfg.Server.AdvertiseAddress = ""
	ts = startServer(t, cfg)
	eventually(t, 15*time.Second, "default/kubernetes's endpoint removed", func() (bool, error) {
		_, err1 := ts.client.CoreV1().Endpoints(metav1.NamespaceDefault).Get(ctx, "kubernetes", metav1.GetOptions{})
		_, err2 := ts.client.DiscoveryV1().EndpointSlices(metav1.NamespaceDefault).Get(ctx, "kubernetes", metav1.GetOptions{})
		return apierrors.IsNotFound(err1) && apierrors.IsNotFound(err2), nil
	})
	if _, err := ts.client.CoreV1().Services(metav1.NamespaceDefault).Get(ctx, "kubernetes", metav1.GetOptions{}); err != nil {
		t.Errorf("default/kubernetes without an advertised address: %v", err)
	}
}

// wantEndpoint waits until default/kubernetes's Endpoints and
// EndpointSlice name address on port.
func wantEndpoint(t *testing.T, c kubernetes.Interface, address string, port int) {
	t.Helper()
	ctx := t.Context()
	eventually(t, 15*time.Second, "default/kubernetes's endpoint "+address, func() (bool, error) {
		ep, err := c.CoreV1().Endpoints(metav1.NamespaceDefault).Get(ctx, "kubernetes", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if len(ep.Subsets) != 1 || len(ep.Subsets[0].Addresses) != 1 || ep.Subsets[0].Addresses[0].IP != address ||
			len(ep.Subsets[0].Ports) != 1 || ep.Subsets[0].Ports[0].Port != int32(port) || ep.Labels[discoveryv1.LabelSkipMirror] != "true" {
			return false, nil
		}
		s, err := c.DiscoveryV1().EndpointSlices(metav1.NamespaceDefault).Get(ctx, "kubernetes", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return s.AddressType == discoveryv1.AddressTypeIPv4 && s.Labels[discoveryv1.LabelServiceName] == "kubernetes" &&
			len(s.Endpoints) == 1 && slices.Equal(s.Endpoints[0].Addresses, []string{address}) &&
			s.Endpoints[0].Conditions.Ready != nil && *s.Endpoints[0].Conditions.Ready &&
			len(s.Ports) == 1 && *s.Ports[0].Port == int32(port) && *s.Ports[0].Name == "https", nil
	})
}
