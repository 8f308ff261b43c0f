package registry

import (
	"net/netip"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubestore/kubestore/cacher/cachertest"
	"github.com/kubestore/kubestore/records/family"
)

// Families and policy as upstream defaults and checks them
// (pkg/registry/core/service/storage/storage_test.go
// TestCreateInitIPFields, in part), on a single- and a dual-stack range.
func TestDefaultFamilies(t *testing.T) {
	single := &ClusterIPs{cidrs: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/24")}}
	dual := &ClusterIPs{cidrs: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/24"), netip.MustParsePrefix("fd00::/112")}}
	policy := func(p corev1.IPFamilyPolicy) *corev1.IPFamilyPolicy { return &p }
	for _, tc := range []struct {
		name       string
		c          *ClusterIPs
		spec       corev1.ServiceSpec
		wantPolicy corev1.IPFamilyPolicy
		wantFams   []corev1.IPFamily
		wantErr    string
	}{
		{"single, nothing asked", single, corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP}, corev1.IPFamilyPolicySingleStack, []corev1.IPFamily{"IPv4"}, ""},
		{"dual, nothing asked", dual, corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP}, corev1.IPFamilyPolicySingleStack, []corev1.IPFamily{"IPv4"}, ""},
		{"dual, PreferDualStack", dual, corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, IPFamilyPolicy: policy(corev1.IPFamilyPolicyPreferDualStack)}, corev1.IPFamilyPolicyPreferDualStack, []corev1.IPFamily{"IPv4", "IPv6"}, ""},
		{"single, PreferDualStack", single, corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, IPFamilyPolicy: policy(corev1.IPFamilyPolicyPreferDualStack)}, corev1.IPFamilyPolicyPreferDualStack, []corev1.IPFamily{"IPv4"}, ""},
		{"single, RequireDualStack", single, corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, IPFamilyPolicy: policy(corev1.IPFamilyPolicyRequireDualStack)}, "", nil, "spec.ipFamilyPolicy"},
		{"dual, IPv6 first", dual, corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, IPFamilies: []corev1.IPFamily{"IPv6"}, IPFamilyPolicy: policy(corev1.IPFamilyPolicyRequireDualStack)}, corev1.IPFamilyPolicyRequireDualStack, []corev1.IPFamily{"IPv6", "IPv4"}, ""},
		{"two IPs", dual, corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIPs: []string{"fd00::5", "10.0.0.5"}}, corev1.IPFamilyPolicyRequireDualStack, []corev1.IPFamily{"IPv6", "IPv4"}, ""},
		{"single, IPv6 asked", single, corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, IPFamilies: []corev1.IPFamily{"IPv6"}}, "", nil, "spec.ipFamilies[0]"},
		{"IP against its family", dual, corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIPs: []string{"10.0.0.5"}, IPFamilies: []corev1.IPFamily{"IPv6"}}, "", nil, "spec.clusterIPs[0]"},
		{"headless without selector, dual", dual, corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: "None"}, corev1.IPFamilyPolicyPreferDualStack, []corev1.IPFamily{"IPv4", "IPv6"}, ""},
		{"ExternalName", dual, corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, IPFamilyPolicy: policy(corev1.IPFamilyPolicySingleStack)}, "", nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &corev1.Service{Spec: tc.spec}
			errs := tc.c.defaultFamilies(s)
			if tc.wantErr != "" {
				if len(errs) != 1 || errs[0].Field != tc.wantErr {
					t.Fatalf("errors %v, want one on %s", errs, tc.wantErr)
				}
				return
			}
			if len(errs) > 0 {
				t.Fatal(errs)
			}
			var got corev1.IPFamilyPolicy
			if s.Spec.IPFamilyPolicy != nil {
				got = *s.Spec.IPFamilyPolicy
			}
			if got != tc.wantPolicy || len(s.Spec.IPFamilies) != len(tc.wantFams) {
				t.Fatalf("policy %q families %v, want %q %v", got, s.Spec.IPFamilies, tc.wantPolicy, tc.wantFams)
			}
			for i := range tc.wantFams {
				if s.Spec.IPFamilies[i] != tc.wantFams[i] {
					t.Errorf("families %v, want %v", s.Spec.IPFamilies, tc.wantFams)
				}
			}
		})
	}
}

// What the repair (package serviceip) reads and writes: the IP records
// without the range's, which shares their prefix; a record written for a
// Service; a release that finds the record changed leaves it.
func TestAllocations(t *testing.T) {
	ctx := t.Context()
	b := cachertest.Records(openTestBackend(t))
	c, err := NewClusterIPs(ctx, []netip.Prefix{netip.MustParsePrefix("10.0.0.0/24")}, b)
	if err != nil {
		t.Fatal(err)
	}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a", UID: "u1"}}
	for _, ip := range []string{"10.0.0.9", "172.16.0.1"} {
		if err := c.Record(ctx, netip.MustParseAddr(ip), svc); err != nil {
			t.Fatal(err)
		}
	}
	if ok, err := b.CreateState(ctx, family.ClusterIPs.For("10.0.0.10"), []byte("not json")); !ok || err != nil {
		t.Fatal(ok, err)
	}
	got, err := c.Allocations(ctx)
	if err != nil {
		t.Fatal(err)
	}
	byIP := map[string]Allocation{}
	for _, a := range got {
		byIP[a.IP.String()] = a
	}
	if len(got) != 2 || byIP["10.0.0.9"].Namespace != "ns" || byIP["10.0.0.9"].Name != "a" {
		t.Fatalf("allocations %+v, want 10.0.0.9 of ns/a and 10.0.0.10 (the range's record and an IP outside it are none)", got)
	}
	if a := byIP["10.0.0.10"]; a.Namespace != "" || a.Name != "" {
		t.Errorf("an unreadable record names %s/%s", a.Namespace, a.Name)
	}
	// Another writer changed the record since it was read.
	stale := byIP["10.0.0.9"]
	if err := b.PutState(ctx, family.ClusterIPs.For("10.0.0.9"), ipRecord{Namespace: "ns", Name: "b"}.bytes()); err != nil {
		t.Fatal(err)
	}
	if err := c.ReleaseIfUnchanged(ctx, stale); err != nil {
		t.Fatal(err)
	}
	if r, _ := b.GetState(ctx, family.ClusterIPs.For("10.0.0.9")); r == nil {
		t.Error("a changed record was released")
	}
	if err := c.ReleaseIfUnchanged(ctx, byIP["10.0.0.10"]); err != nil {
		t.Fatal(err)
	}
	if r, _ := b.GetState(ctx, family.ClusterIPs.For("10.0.0.10")); r != nil {
		t.Error("an unchanged record was kept")
	}
}
