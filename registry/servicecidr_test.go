package registry

import (
	"context"
	"reflect"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func newServiceCIDR(name string, cidrs ...string) *networkingv1.ServiceCIDR {
	return &networkingv1.ServiceCIDR{ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: "1"}, Spec: networkingv1.ServiceCIDRSpec{CIDRs: cidrs}}
}

// TestValidateServiceCIDR in k8s.io/kubernetes
// pkg/apis/networking/validation/validation_test.go, every case.
func TestServiceCIDRValidate(t *testing.T) {
	tests := map[string]struct {
		errs  int
		cidrs []string
	}{
		"empty-iprange":              {1, nil},
		"three-ipranges":             {1, []string{"192.168.0.0/24", "fd00::/64", "10.0.0.0/16"}},
		"good-iprange-ipv4":          {0, []string{"192.168.0.0/24"}},
		"good-iprange-ipv6":          {0, []string{"fd00:1234::/64"}},
		"good-iprange-ipv4-ipv6":     {0, []string{"192.168.0.0/24", "fd00:1234::/64"}},
		"not-iprange-ipv4":           {1, []string{"asdasdasd"}},
		"iponly-iprange-ipv4":        {1, []string{"192.168.0.1"}},
		"badip-iprange-ipv4":         {1, []string{"192.168.0.1/24"}},
		"badip-iprange-ipv6":         {1, []string{"fd00:1234::2/64"}},
		"badip-iprange-caps-ipv6":    {1, []string{"FD00:1234::0/64"}},
		"good-iprange-ipv4-bad-ipv6": {1, []string{"192.168.0.0/24", "FD00:1234::/64"}},
		"good-iprange-ipv6-bad-ipv4": {1, []string{"192.168.007.0/24", "fd00:1234::/64"}},
		"bad-iprange-ipv6-bad-ipv4":  {2, []string{"192.168.007.0/24", "MN00:1234::/64"}},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			if errs := validateCreate(t, serviceCIDRDef(), newServiceCIDR("test-name", tt.cidrs...)); len(errs) != tt.errs {
				t.Errorf("%d errors, want %d: %v", len(errs), tt.errs, errs)
			}
		})
	}
}

// TestValidateServiceCIDRUpdate in k8s.io/kubernetes
// pkg/apis/networking/validation/validation_test.go, every case, with
// upstream's error strings: the update validation is that alone, an
// unchanged spec is not validated again.
func TestServiceCIDRValidateUpdate(t *testing.T) {
	v4, v6, dual := []string{"192.168.0.0/24"}, []string{"fd00:1234::/64"}, []string{"192.168.0.0/24", "fd00:1234::/64"}
	cidrs := field.NewPath("spec").Child("cidrs")
	immutable := func(p *field.Path, v any) *field.Error {
		return field.Invalid(p, v, apimachineryvalidation.FieldImmutableErrorMsg)
	}
	tests := []struct {
		name     string
		old, new []string
		want     field.ErrorList
	}{
		{"Successful update, no changes (dual)", dual, dual, nil},
		{"Successful update, no changes (v4)", v4, v4, nil},
		{"Successful update, single IPv4 to dual stack upgrade", v4, []string{"192.168.0.0/24", "fd00:1234::/64"}, nil},
		{"Successful update, single IPv6 to dual stack upgrade", v6, []string{"fd00:1234::/64", "192.168.0.0/24"}, nil},
		{"Failed update, change CIDRs (dual)", dual, []string{"10.0.0.0/16", "fd00:abcd::/64"},
			field.ErrorList{immutable(cidrs.Index(0), "10.0.0.0/16"), immutable(cidrs.Index(1), "fd00:abcd::/64")}},
		{"Failed update, change CIDRs (single)", v4, []string{"10.0.0.0/16"}, field.ErrorList{immutable(cidrs.Index(0), "10.0.0.0/16")}},
		{"Failed update, single IPv4 to dual stack upgrade with primary change", v4, []string{"10.0.0.0/16", "fd00:1234::/64"},
			field.ErrorList{immutable(cidrs.Index(0), "10.0.0.0/16")}},
		{"Failed update, single IPv6 to dual stack upgrade with primary change", v6, []string{"fd00:abcd::/64", "192.168.0.0/24"},
			field.ErrorList{immutable(cidrs.Index(0), "fd00:abcd::/64")}},
		{"Failed update, dual stack downgrade to single", dual, []string{"192.168.0.0/24"}, field.ErrorList{immutable(cidrs, []string{"192.168.0.0/24"})}},
		{"Failed update, dual stack reorder", dual, []string{"fd00:1234::/64", "192.168.0.0/24"},
			field.ErrorList{immutable(cidrs.Index(0), "fd00:1234::/64"), immutable(cidrs.Index(1), "192.168.0.0/24")}},
		{"Failed update, add invalid CIDR during upgrade", v4, []string{"192.168.0.0/24", "invalid-cidr"},
			field.ErrorList{field.Invalid(cidrs.Index(1), "invalid-cidr", "must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)")}},
		{"Failed update, add duplicate family CIDR during upgrade", v4, []string{"192.168.0.0/24", "10.0.0.0/16"},
			field.ErrorList{field.Invalid(cidrs, []string{"192.168.0.0/24", "10.0.0.0/16"}, "may specify no more than one IP for each IP family, i.e 192.168.0.0/24 and 2001:db8::/64")}},
		{"Failed update, dual stack remove one cidr", dual, dual[:1], field.ErrorList{immutable(cidrs, []string{"192.168.0.0/24"})}},
		{"Failed update, dual stack remove all cidrs", dual, []string{}, field.ErrorList{immutable(cidrs, []string{})}},
		{"Failed update, single stack remove cidr", v4, []string{}, field.ErrorList{immutable(cidrs, []string{})}},
		{"Failed update, add additional cidrs", dual, []string{"192.168.0.0/24", "fd00:1234::/64", "172.16.0.0/24"},
			field.ErrorList{immutable(cidrs, []string{"192.168.0.0/24", "fd00:1234::/64", "172.16.0.0/24"})}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errs := validateUpdate(t, serviceCIDRDef(), newServiceCIDR("mysvc", tt.new...), newServiceCIDR("mysvc", tt.old...))
			if len(errs) != len(tt.want) {
				t.Fatalf("%d errors, want %d: %v", len(errs), len(tt.want), errs)
			}
			for i := range tt.want {
				if errs[i].Error() != tt.want[i].Error() {
					t.Errorf("error %d: %v, want %v", i, errs[i], tt.want[i])
				}
			}
		})
	}
}

// TestServiceCIDRStrategy and TestServiceCIDRStatusStrategy in
// k8s.io/kubernetes pkg/registry/networking/servicecidr/strategy_test.go;
// and, with ServiceCIDRStatusFieldWiping on (upstream's default), create
// drops the status, an update of the main resource keeps the stored one,
// a status update keeps the spec and the labels.
func TestServiceCIDRStrategy(t *testing.T) {
	ready := networkingv1.ServiceCIDRStatus{Conditions: []metav1.Condition{{Type: networkingv1.ServiceCIDRConditionReady, Status: metav1.ConditionTrue}}}
	st := newStrategy(nil, serviceCIDRDef())
	ctx := context.Background()

	// Upstream's counts: no name and a bad CIDR on create; only the
	// changed CIDR on update; status updates check metadata only (here
	// the missing resourceVersion).
	bad := &networkingv1.ServiceCIDR{Spec: networkingv1.ServiceCIDRSpec{CIDRs: []string{"bad cidr"}}}
	if errs := st.Validate(ctx, bad); len(errs) != 2 {
		t.Errorf("create: %d errors, want 2: %v", len(errs), errs)
	}
	if errs := st.ValidateUpdate(ctx, newServiceCIDR("c", "bad cidr"), newServiceCIDR("c", "10.0.0.0/24")); len(errs) != 1 {
		t.Errorf("update: %d errors, want 1: %v", len(errs), errs)
	}
	badStatus := &networkingv1.ServiceCIDR{Status: networkingv1.ServiceCIDRStatus{Conditions: []metav1.Condition{{Type: "bad type", Status: "bad status"}}}}
	if errs := (statusStrategy{strategy: st}).ValidateUpdate(ctx, badStatus, &networkingv1.ServiceCIDR{}); len(errs) != 1 {
		t.Errorf("status update: %d errors, want 1: %v", len(errs), errs)
	}

	c := newServiceCIDR("c", "10.0.0.0/24")
	c.Status = ready
	st.PrepareForCreate(ctx, c)
	if len(c.Status.Conditions) != 0 {
		t.Errorf("create kept the status: %v", c.Status)
	}

	old := newServiceCIDR("c", "10.0.0.0/24")
	old.Status = ready
	upd := newServiceCIDR("c", "10.0.0.0/24")
	st.PrepareForUpdate(ctx, upd, old)
	if !reflect.DeepEqual(upd.Status, ready) {
		t.Errorf("an update of the main resource changed the status: %v", upd.Status)
	}

	status := newServiceCIDR("c", "10.1.0.0/24")
	status.Labels = map[string]string{"by": "status"}
	statusStrategy{strategy: st}.PrepareForUpdate(ctx, status, old)
	if !reflect.DeepEqual(status.Spec, old.Spec) || status.Labels != nil {
		t.Errorf("a status update changed spec %v or labels %v", status.Spec, status.Labels)
	}
}

// printServiceCIDR in k8s.io/kubernetes pkg/printers/internalversion.
func TestServiceCIDRTable(t *testing.T) {
	got := tableRow(t, serviceCIDRDef(), newServiceCIDR("kubernetes", "10.0.0.0/24", "fd00::/108"))
	if want := []any{"kubernetes", "10.0.0.0/24,fd00::/108", "<unknown>"}; !reflect.DeepEqual(got, want) {
		t.Errorf("row = %#v, want %#v", got, want)
	}
}
