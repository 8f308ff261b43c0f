package registry

import (
	"context"
	"net/netip"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubestore/kubestore/cacher/cachertest"
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

// The repair releases a record no Service holds only when two passes in a
// row saw it so, and records an IP a Service holds without one.
func TestRepairOnce(t *testing.T) {
	ctx := t.Context()
	b := cachertest.Records(openTestBackend(t))
	c, err := NewClusterIPs(ctx, []netip.Prefix{netip.MustParsePrefix("10.0.0.0/24")}, b)
	if err != nil {
		t.Fatal(err)
	}
	leaked := ipRecord{Namespace: "ns", Name: "crashed"}.bytes()
	if ok, err := b.CreateState(ctx, ipRecordPrefix+"10.0.0.9", leaked); !ok || err != nil {
		t.Fatal(ok, err)
	}
	held := corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "old", UID: "u1"}, Spec: corev1.ServiceSpec{ClusterIP: "10.0.0.20", ClusterIPs: []string{"10.0.0.20"}}}
	outside := corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "mirrored"}, Spec: corev1.ServiceSpec{ClusterIP: "172.16.0.1", ClusterIPs: []string{"172.16.0.1"}}}
	services := func(context.Context) ([]corev1.Service, error) { return []corev1.Service{held, outside}, nil }
	suspects, err := c.repairOnce(ctx, services, map[string][]byte{})
	if err != nil {
		t.Fatal(err)
	}
	records, _ := b.ListState(ctx, ipRecordPrefix)
	if _, ok := records[ipRecordPrefix+"10.0.0.9"]; !ok {
		t.Error("the leaked record went on the first pass")
	}
	if _, ok := records[ipRecordPrefix+"10.0.0.20"]; !ok {
		t.Error("the held IP was not recorded")
	}
	if _, ok := records[ipRecordPrefix+"172.16.0.1"]; ok {
		t.Error("an IP outside the range was recorded")
	}
	if _, err := c.repairOnce(ctx, services, suspects); err != nil {
		t.Fatal(err)
	}
	records, _ = b.ListState(ctx, ipRecordPrefix)
	if _, ok := records[ipRecordPrefix+"10.0.0.9"]; ok || len(records) != 2 {
		t.Errorf("records after the second pass: %v, want only 10.0.0.20 and the range's", records)
	}
	// The range's record shares the IP records' prefix but is no IP.
	if r, _ := b.GetState(ctx, "clusterip-range"); string(r) != "10.0.0.0/24" {
		t.Errorf("the range's record after two passes: %q, want 10.0.0.0/24", r)
	}
}
