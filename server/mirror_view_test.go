package server_test

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubestore/kubestore/config"
	"github.com/kubestore/kubestore/mirrored"
)

// Through the mirror, the node's pods call the cluster's Service
// default/kubernetes and reach the gateway: the node's copies of its
// Endpoints and EndpointSlice carry the gateway's advertised address on
// its port (marked as the node's view), the cluster's objects keep the
// cluster's, an update of the view is refused while a patch goes up, a
// restart without an advertised address brings the cluster's endpoints
// back, and a Service address the serving certificate does not cover is
// a problem /mirrorz names.
func TestNodeSeesTheGatewayAsTheKubernetesService(t *testing.T) {
	upCfg := testConfig(t)
	upCfg.Server.AdvertiseAddress = "192.0.2.10"
	up := startServer(t, upCfg)
	cfg := edgeConfig(t, up, up.rest.Host, "edge-a")
	cfg.Mirror.Rules = append(config.DefaultMirrorRules(), config.MirrorRule{Name: "endpoints", Resource: "endpoints"})
	cfg.Server.AdvertiseAddress = "192.0.2.20"
	edge := startServer(t, cfg)
	p := &mirrorPair{up: up, edge: edge, node: "edge-a"}
	p.waitMirrorz(t, http.StatusOK)
	ctx := t.Context()
	upPort, edgePort := portOf(t, up), portOf(t, edge)

	wantEndpoint(t, edge.client, "192.0.2.20", edgePort)
	wantEndpoint(t, up.client, "192.0.2.10", upPort)
	slices := edge.client.DiscoveryV1().EndpointSlices(metav1.NamespaceDefault)
	upSlice, err := up.client.DiscoveryV1().EndpointSlices(metav1.NamespaceDefault).Get(ctx, "kubernetes", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := slices.Get(ctx, "kubernetes", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	view := "192.0.2.20:" + strconv.Itoa(edgePort)
	if s.UID != upSlice.UID || s.Annotations[mirrored.AnnotationView] != view || !mirrored.Is(s.Annotations) {
		t.Errorf("the node's EndpointSlice: uid %s (the cluster's %s), annotations %v; want the cluster's copy, viewed at %s", s.UID, upSlice.UID, s.Annotations, view)
	}
	svc, err := edge.client.CoreV1().Services(metav1.NamespaceDefault).Get(ctx, "kubernetes", metav1.GetOptions{})
	if err != nil || svc.Spec.ClusterIP != "10.0.0.1" || svc.Annotations[mirrored.AnnotationView] != "" {
		t.Errorf("the node's Service default/kubernetes: %v, %v; want the cluster's, at 10.0.0.1", svc, err)
	}

	// An update would write the gateway's endpoint up: refused. A patch
	// says what it changes: it goes up, and the answer is viewed again.
	s.Annotations["x"] = "y"
	if _, err := slices.Update(ctx, s, metav1.UpdateOptions{}); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "node's view") {
		t.Errorf("an update of the node's view: %v, want 403 naming the view", err)
	}
	if _, err := slices.Patch(ctx, "kubernetes", types.MergePatchType, []byte(`{"metadata":{"annotations":{"seen":"by the edge"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	upSlice, err = up.client.DiscoveryV1().EndpointSlices(metav1.NamespaceDefault).Get(ctx, "kubernetes", metav1.GetOptions{})
	if err != nil || upSlice.Annotations["seen"] != "by the edge" || upSlice.Endpoints[0].Addresses[0] != "192.0.2.10" {
		t.Errorf("the cluster's EndpointSlice after the edge's patch: %v, %v; want the annotation, the cluster's endpoint", upSlice, err)
	}
	eventually(t, 10*time.Second, "the patched copy, viewed", func() (bool, error) {
		s, err := slices.Get(ctx, "kubernetes", metav1.GetOptions{})
		return err == nil && s.Annotations["seen"] == "by the edge" && s.Annotations[mirrored.AnnotationView] == view &&
			s.Endpoints[0].Addresses[0] == "192.0.2.20", err
	})

	// Started again with no advertised address and a service range whose
	// first address is not the cluster's Service's: the node sees the
	// cluster's endpoints again, and /mirrorz names the address the
	// serving certificate no longer covers.
	edge.stop()
	cfg.Server.AdvertiseAddress = ""
	cfg.Server.ServiceClusterIPRange = "10.1.0.0/24"
	edge = startServer(t, cfg)
	wantEndpoint(t, edge.client, "192.0.2.10", upPort)
	s, err = edge.client.DiscoveryV1().EndpointSlices(metav1.NamespaceDefault).Get(ctx, "kubernetes", metav1.GetOptions{})
	if err != nil || s.Annotations[mirrored.AnnotationView] != "" || s.AddressType != discoveryv1.AddressTypeIPv4 {
		t.Errorf("the node's EndpointSlice without an advertised address: %v, %v; want the cluster's, no view", s, err)
	}
	p.edge = edge
	eventually(t, 10*time.Second, "/mirrorz naming the uncovered address", func() (bool, error) {
		code, body, err := edge.get("/mirrorz")
		return code == http.StatusServiceUnavailable && strings.Contains(body, "10.0.0.1, which the serving certificate does not cover"), err
	})
}

// portOf is the port ts serves on.
func portOf(t *testing.T, ts *testServer) int {
	t.Helper()
	u, err := url.Parse(ts.rest.Host)
	if err != nil {
		t.Fatal(err)
	}
	port, err := strconv.Atoi(u.Port())
	if err != nil {
		t.Fatal(err)
	}
	return port
}
