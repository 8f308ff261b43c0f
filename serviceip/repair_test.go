package serviceip

import (
	"context"
	"net/netip"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubestore/kubestore/cacher/cachertest"
	"github.com/kubestore/kubestore/registry"
)

// The repair releases a record no Service holds only when two passes in a
// row saw it so, and records an IP a Service holds without one.
func TestRepairOnce(t *testing.T) {
	ctx := t.Context()
	b := cachertest.Records(cachertest.Open(t))
	c, err := registry.NewClusterIPs(ctx, []netip.Prefix{netip.MustParsePrefix("10.0.0.0/24")}, b)
	if err != nil {
		t.Fatal(err)
	}
	// A record written for a Service that a crash kept from being stored.
	crashed := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "crashed"}}
	if err := c.Record(ctx, netip.MustParseAddr("10.0.0.9"), crashed); err != nil {
		t.Fatal(err)
	}
	held := corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "old", UID: "u1"}, Spec: corev1.ServiceSpec{ClusterIP: "10.0.0.20", ClusterIPs: []string{"10.0.0.20"}}}
	outside := corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "mirrored"}, Spec: corev1.ServiceSpec{ClusterIP: "172.16.0.1", ClusterIPs: []string{"172.16.0.1"}}}
	services := func(context.Context) ([]corev1.Service, error) { return []corev1.Service{held, outside}, nil }
	suspects, err := repairOnce(ctx, c, services, map[registry.Allocation]bool{})
	if err != nil {
		t.Fatal(err)
	}
	records := allocated(t, c)
	if _, ok := records["10.0.0.9"]; !ok {
		t.Error("the leaked record went on the first pass")
	}
	if a, ok := records["10.0.0.20"]; !ok || a.Namespace != "ns" || a.Name != "old" {
		t.Errorf("the held IP was not recorded as ns/old: %+v", a)
	}
	if _, ok := records["172.16.0.1"]; ok {
		t.Error("an IP outside the range was recorded")
	}
	if _, err := repairOnce(ctx, c, services, suspects); err != nil {
		t.Fatal(err)
	}
	records = allocated(t, c)
	if _, ok := records["10.0.0.9"]; ok || len(records) != 1 {
		t.Errorf("records after the second pass: %v, want only 10.0.0.20", records)
	}
	// The range's record shares the IP records' prefix but is no IP.
	if r, _ := b.GetState(ctx, "clusterip-range"); string(r) != "10.0.0.0/24" {
		t.Errorf("the range's record after two passes: %q, want 10.0.0.0/24", r)
	}
}

// allocated are the allocator's records by IP.
func allocated(t *testing.T, c *registry.ClusterIPs) map[string]registry.Allocation {
	t.Helper()
	list, err := c.Allocations(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]registry.Allocation{}
	for _, a := range list {
		out[a.IP.String()] = a
	}
	return out
}
