package serviceip

import (
	"context"
	"net/netip"
	"reflect"
	"strconv"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// fakeServiceCIDRs holds ServiceCIDRs in memory with etcd's rules (create
// refused when present, updates refused on a stale resourceVersion) and
// records the writes.
type fakeServiceCIDRs struct {
	objs   map[string]*networkingv1.ServiceCIDR
	rv     int
	writes []string
}

func newFakeServiceCIDRs(objs ...*networkingv1.ServiceCIDR) *fakeServiceCIDRs {
	f := &fakeServiceCIDRs{objs: map[string]*networkingv1.ServiceCIDR{}}
	for _, o := range objs {
		f.put(o.DeepCopy())
	}
	return f
}

var serviceCIDRResource = networkingv1.SchemeGroupVersion.WithResource("servicecidrs").GroupResource()

func (f *fakeServiceCIDRs) put(c *networkingv1.ServiceCIDR) *networkingv1.ServiceCIDR {
	f.rv++
	c.ResourceVersion = strconv.Itoa(f.rv)
	f.objs[c.Name] = c
	return c.DeepCopy()
}

func (f *fakeServiceCIDRs) Get(_ context.Context, name string, _ metav1.GetOptions) (*networkingv1.ServiceCIDR, error) {
	if c, ok := f.objs[name]; ok {
		return c.DeepCopy(), nil
	}
	return nil, apierrors.NewNotFound(serviceCIDRResource, name)
}

func (f *fakeServiceCIDRs) Create(_ context.Context, c *networkingv1.ServiceCIDR, _ metav1.CreateOptions) (*networkingv1.ServiceCIDR, error) {
	f.writes = append(f.writes, "create")
	if _, ok := f.objs[c.Name]; ok {
		return nil, apierrors.NewAlreadyExists(serviceCIDRResource, c.Name)
	}
	return f.put(c.DeepCopy()), nil
}

func (f *fakeServiceCIDRs) update(verb string, c *networkingv1.ServiceCIDR, apply func(stored, c *networkingv1.ServiceCIDR)) (*networkingv1.ServiceCIDR, error) {
	f.writes = append(f.writes, verb)
	stored, ok := f.objs[c.Name]
	if !ok {
		return nil, apierrors.NewNotFound(serviceCIDRResource, c.Name)
	}
	if c.ResourceVersion != stored.ResourceVersion {
		return nil, apierrors.NewConflict(serviceCIDRResource, c.Name, nil)
	}
	next := stored.DeepCopy()
	apply(next, c)
	return f.put(next), nil
}

func (f *fakeServiceCIDRs) Update(_ context.Context, c *networkingv1.ServiceCIDR, _ metav1.UpdateOptions) (*networkingv1.ServiceCIDR, error) {
	return f.update("update", c, func(stored, c *networkingv1.ServiceCIDR) { stored.Spec = c.Spec })
}

func (f *fakeServiceCIDRs) UpdateStatus(_ context.Context, c *networkingv1.ServiceCIDR, _ metav1.UpdateOptions) (*networkingv1.ServiceCIDR, error) {
	return f.update("status", c, func(stored, c *networkingv1.ServiceCIDR) { stored.Status = c.Status })
}

const (
	testIPv4CIDR = "10.16.0.0/16"
	testIPv6CIDR = "2001:db8::/64"
)

func prefixes(cidrs ...string) []netip.Prefix {
	var out []netip.Prefix
	for _, c := range cidrs {
		out = append(out, netip.MustParsePrefix(c))
	}
	return out
}

func defaultServiceCIDR(cidrs []string, ready metav1.ConditionStatus) *networkingv1.ServiceCIDR {
	c := &networkingv1.ServiceCIDR{ObjectMeta: metav1.ObjectMeta{Name: DefaultServiceCIDRName}, Spec: networkingv1.ServiceCIDRSpec{CIDRs: cidrs}}
	if ready != "" {
		c.Status.Conditions = []metav1.Condition{{Type: networkingv1.ServiceCIDRConditionReady, Status: ready, Reason: "SomeReason"}}
	}
	return c
}

// The cases of TestControllerSync and TestControllerSyncConversions in
// k8s.io/kubernetes pkg/controlplane/controller/defaultservicecidr: the
// writes one pass makes. Upstream's status "patch" (a server-side apply)
// is an update of the status here ("status").
func TestDefaultServiceCIDRSync(t *testing.T) {
	dual := []string{testIPv4CIDR, testIPv6CIDR}
	deleting := defaultServiceCIDR(dual, "")
	deleting.DeletionTimestamp = &metav1.Time{}
	other := defaultServiceCIDR(dual, "")
	other.Name = "non-default-cidr"
	tests := []struct {
		name     string
		flags    []string
		existing *networkingv1.ServiceCIDR
		writes   []string
		ready    bool // the default ServiceCIDR is Ready=True after the pass
	}{
		{"no existing service CIDRs", dual, nil, []string{"create", "status"}, true},
		{"existing default service CIDR update Ready condition", dual, defaultServiceCIDR(dual, ""), []string{"status"}, true},
		{"existing default service CIDR not matching cidrs", dual, defaultServiceCIDR([]string{"fd00::/112"}, ""), nil, false},
		{"existing default service CIDR not ready", dual, defaultServiceCIDR(dual, metav1.ConditionFalse), nil, false},
		{"existing default service CIDR being deleted", dual, deleting, nil, false},
		{"existing service CIDRs but not default", dual, other, []string{"create", "status"}, true},
		{"existing Ready=True condition -> no patch", dual, defaultServiceCIDR(dual, metav1.ConditionTrue), nil, true},
		{"existing Ready=Unknown condition -> set True", dual, defaultServiceCIDR(dual, metav1.ConditionUnknown), []string{"status"}, true},
		{"IPv4 to IPv4 IPv6 is ok", dual, defaultServiceCIDR([]string{testIPv4CIDR}, ""), []string{"update"}, false},
		{"IPv4 to IPv6 IPv4 - switching primary IP family leaves in inconsistent state",
			[]string{testIPv6CIDR, testIPv4CIDR}, defaultServiceCIDR([]string{testIPv4CIDR}, ""), nil, false},
		{"IPv6 to IPv6 IPv4", []string{testIPv6CIDR, testIPv4CIDR}, defaultServiceCIDR([]string{testIPv6CIDR}, ""), []string{"update"}, false},
		{"IPv6 to IPv4 IPv6 - switching primary IP family leaves in inconsistent state", dual, defaultServiceCIDR([]string{testIPv6CIDR}, ""), nil, false},
		{"IPv6 IPv4 to IPv4 IPv6 - switching primary IP family leaves in inconsistent state",
			dual, defaultServiceCIDR([]string{testIPv6CIDR, testIPv4CIDR}, ""), nil, false},
		{"IPv4 IPv6 to IPv4 - needs operator attention for the IPv6 remaining Services", []string{testIPv4CIDR}, defaultServiceCIDR(dual, ""), nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var client *fakeServiceCIDRs
			if tt.existing != nil {
				client = newFakeServiceCIDRs(tt.existing)
			} else {
				client = newFakeServiceCIDRs()
			}
			d := NewDefaultServiceCIDR(prefixes(tt.flags...), client)
			if err := d.sync(t.Context()); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(client.writes, tt.writes) {
				t.Errorf("writes %v, want %v", client.writes, tt.writes)
			}
			c, err := client.Get(t.Context(), DefaultServiceCIDRName, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got := apimeta.IsStatusConditionTrue(c.Status.Conditions, networkingv1.ServiceCIDRConditionReady); got != tt.ready {
				t.Errorf("Ready=True is %v, want %v: %v", got, tt.ready, c.Status.Conditions)
			}
		})
	}
}

// The dual-stack upgrade ends Ready on the next pass, as upstream's
// periodic sync does.
func TestDefaultServiceCIDRUpgradeThenReady(t *testing.T) {
	client := newFakeServiceCIDRs(defaultServiceCIDR([]string{testIPv4CIDR}, ""))
	d := NewDefaultServiceCIDR(prefixes(testIPv4CIDR, testIPv6CIDR), client)
	for range 3 {
		if err := d.sync(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	c, _ := client.Get(t.Context(), DefaultServiceCIDRName, metav1.GetOptions{})
	if !reflect.DeepEqual(c.Spec.CIDRs, []string{testIPv4CIDR, testIPv6CIDR}) || !apimeta.IsStatusConditionTrue(c.Status.Conditions, networkingv1.ServiceCIDRConditionReady) {
		t.Errorf("after three passes: %v %v", c.Spec.CIDRs, c.Status.Conditions)
	}
	if want := []string{"update", "status"}; !reflect.DeepEqual(client.writes, want) {
		t.Errorf("writes %v, want %v", client.writes, want)
	}
}

// staleRead hands out what the store held before another writer changed
// it: the controller's status write must be refused, not overwrite it.
type staleRead struct {
	*fakeServiceCIDRs
	meanwhile func()
}

func (s staleRead) Get(ctx context.Context, name string, opts metav1.GetOptions) (*networkingv1.ServiceCIDR, error) {
	c, err := s.fakeServiceCIDRs.Get(ctx, name, opts)
	if s.meanwhile != nil {
		s.meanwhile()
	}
	return c, err
}

// A second process marked the default ServiceCIDR Ready=False between
// this one's read and its write: the write conflicts, and the next pass
// leaves the False alone.
func TestDefaultServiceCIDRStaleRead(t *testing.T) {
	dual := []string{testIPv4CIDR, testIPv6CIDR}
	client := newFakeServiceCIDRs(defaultServiceCIDR(dual, ""))
	once := false
	d := NewDefaultServiceCIDR(prefixes(dual...), staleRead{client, func() {
		if once {
			return
		}
		once = true
		client.put(defaultServiceCIDR(dual, metav1.ConditionFalse))
	}})
	if err := d.sync(t.Context()); !apierrors.IsConflict(err) {
		t.Fatalf("a pass on a stale read: %v, want a Conflict", err)
	}
	if err := d.sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	c, _ := client.Get(t.Context(), DefaultServiceCIDRName, metav1.GetOptions{})
	if !apimeta.IsStatusConditionFalse(c.Status.Conditions, networkingv1.ServiceCIDRConditionReady) {
		t.Errorf("Ready=False was overwritten: %v", c.Status.Conditions)
	}
}

// Two processes race to create: the loser reads the winner's object and
// finds nothing to do once the winner set Ready.
func TestDefaultServiceCIDRCreateRace(t *testing.T) {
	client := newFakeServiceCIDRs()
	winner := NewDefaultServiceCIDR(prefixes(testIPv4CIDR), client)
	// The loser's Get ran before the winner's create.
	loser := NewDefaultServiceCIDR(prefixes(testIPv4CIDR), &staleNotFound{client, func() {
		if err := winner.sync(t.Context()); err != nil {
			t.Error(err)
		}
	}})
	if err := loser.sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	if want := []string{"create", "status", "create"}; !reflect.DeepEqual(client.writes, want) {
		t.Errorf("writes %v, want %v: the loser rewrote the status", client.writes, want)
	}
}

// staleNotFound answers NotFound once, then lets another writer run.
type staleNotFound struct {
	*fakeServiceCIDRs
	meanwhile func()
}

func (s *staleNotFound) Get(ctx context.Context, name string, opts metav1.GetOptions) (*networkingv1.ServiceCIDR, error) {
	if s.meanwhile != nil {
		s.meanwhile()
		s.meanwhile = nil
		return nil, apierrors.NewNotFound(serviceCIDRResource, name)
	}
	return s.fakeServiceCIDRs.Get(ctx, name, opts)
}
