package registry

import (
	"context"
	"encoding/json"
	"fmt"
	"math/big"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/klog/v2"

	"github.com/kubestore/kubestore/records/family"
)

// IPRecords keep one record per allocated ClusterIP in etcd (kubestore's
// own records: package records): uniqueness is an atomic create, across
// restarts and across kubestores sharing one etcd, as kube-apiserver's
// IPAddress-based allocator (KEP-1880) makes it with one IPAddress object
// per IP.
type IPRecords interface {
	CreateState(ctx context.Context, name string, value []byte) (bool, error)
	GetState(ctx context.Context, name string) ([]byte, error)
	PutState(ctx context.Context, name string, value []byte) error
	ListState(ctx context.Context, dir string) (map[string][]byte, error)
	DeleteStateIf(ctx context.Context, name string, value []byte) (bool, error)
}

// ClusterIPs allocates Services' cluster IPs from --service-cluster-ip-range
// as kube-apiserver's Service REST does (pkg/registry/core/service/storage
// in k8s.io/kubernetes): families and policy defaulted, requested IPs
// checked, free ones picked at random, released on delete.
type ClusterIPs struct {
	cidrs   []netip.Prefix // the primary family first
	records IPRecords
}

// NewClusterIPs allocates from cidrs (config.Completed.ServiceCIDRs). It
// records the range; a range changed since the last start is logged, and
// Services keep the IPs they have.
func NewClusterIPs(ctx context.Context, cidrs []netip.Prefix, records IPRecords) (*ClusterIPs, error) {
	var names []string
	for _, c := range cidrs {
		names = append(names, c.String())
	}
	want := strings.Join(names, ",")
	old, err := records.GetState(ctx, family.ClusterIPRange.Name())
	if err != nil {
		return nil, err
	}
	if string(old) != want {
		if old != nil {
			klog.InfoS("The service cluster IP range changed; existing Services keep their IPs", "was", string(old), "now", want)
		}
		if err := records.PutState(ctx, family.ClusterIPRange.Name(), []byte(want)); err != nil {
			return nil, err
		}
	}
	return &ClusterIPs{cidrs: cidrs, records: records}, nil
}

// ipRecord is what a record holds: the Service that has the IP.
type ipRecord struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	UID       string `json:"uid"`
}

func (r ipRecord) bytes() []byte {
	b, _ := json.Marshal(r)
	return b
}

func familyOf(a netip.Addr) corev1.IPFamily {
	if a.Is4() {
		return corev1.IPv4Protocol
	}
	return corev1.IPv6Protocol
}

// cidr is the configured range of a family.
func (c *ClusterIPs) cidr(f corev1.IPFamily) (netip.Prefix, bool) {
	for _, p := range c.cidrs {
		if familyOf(p.Addr()) == f {
			return p, true
		}
	}
	return netip.Prefix{}, false
}

func (c *ClusterIPs) dualStack() bool { return len(c.cidrs) == 2 }

// needsIPs reports whether a Service gets cluster IPs.
func needsIPs(s *corev1.Service) bool {
	return s.Spec.Type != corev1.ServiceTypeExternalName && s.Spec.ClusterIP != corev1.ClusterIPNone
}

// defaultFamilies sets spec.ipFamilyPolicy and spec.ipFamilies as
// upstream's Service REST does (initIPFamilyFields in alloc.go), or says
// which field is wrong for this cluster.
func (c *ClusterIPs) defaultFamilies(s *corev1.Service) field.ErrorList {
	sp := &s.Spec
	path := field.NewPath("spec")
	if sp.Type == corev1.ServiceTypeExternalName {
		sp.IPFamilies, sp.IPFamilyPolicy = nil, nil
		return nil
	}
	headless := sp.ClusterIP == corev1.ClusterIPNone
	// Families of the requested IPs.
	for i, ip := range sp.ClusterIPs {
		a, err := netip.ParseAddr(ip)
		if err != nil {
			continue // validation says why
		}
		f := familyOf(a)
		switch {
		case i < len(sp.IPFamilies) && sp.IPFamilies[i] != f:
			return field.ErrorList{field.Invalid(path.Child("clusterIPs").Index(i), ip, fmt.Sprintf("expected an %s value as indicated by `ipFamilies[%d]`", sp.IPFamilies[i], i))}
		case i >= len(sp.IPFamilies):
			sp.IPFamilies = append(sp.IPFamilies, f)
		}
	}
	if sp.IPFamilyPolicy == nil {
		policy := corev1.IPFamilyPolicySingleStack
		if len(sp.ClusterIPs) == 2 || len(sp.IPFamilies) == 2 || headless && len(sp.Selector) == 0 && c.dualStack() {
			// Two IPs or families ask for both; a headless Service without a
			// selector takes what the cluster has.
			policy = corev1.IPFamilyPolicyRequireDualStack
			if headless && len(sp.Selector) == 0 {
				policy = corev1.IPFamilyPolicyPreferDualStack
			}
		}
		sp.IPFamilyPolicy = &policy
	}
	policy := *sp.IPFamilyPolicy
	if policy == corev1.IPFamilyPolicyRequireDualStack && !c.dualStack() {
		return field.ErrorList{field.Invalid(path.Child("ipFamilyPolicy"), policy, "this cluster is not configured for dual-stack services")}
	}
	if policy == corev1.IPFamilyPolicySingleStack && len(sp.IPFamilies) > 1 {
		return field.ErrorList{field.Invalid(path.Child("ipFamilies"), sp.IPFamilies, "when ipFamilyPolicy is SingleStack, at most one family may be given")}
	}
	for i, f := range sp.IPFamilies {
		if _, ok := c.cidr(f); !ok && !(headless && policy != corev1.IPFamilyPolicySingleStack) {
			return field.ErrorList{field.Invalid(path.Child("ipFamilies").Index(i), f, "not configured on this cluster")}
		}
	}
	if len(sp.IPFamilies) == 0 {
		sp.IPFamilies = []corev1.IPFamily{familyOf(c.cidrs[0].Addr())}
	}
	if policy != corev1.IPFamilyPolicySingleStack && c.dualStack() && len(sp.IPFamilies) == 1 {
		for _, p := range c.cidrs {
			if f := familyOf(p.Addr()); f != sp.IPFamilies[0] {
				sp.IPFamilies = append(sp.IPFamilies, f)
			}
		}
	}
	return nil
}

// allocate gives s an IP of each of its families it lacks, requested ones
// checked and claimed, and returns what it claimed.
func (c *ClusterIPs) allocate(ctx context.Context, s *corev1.Service) ([]netip.Addr, error) {
	if errs := c.defaultFamilies(s); len(errs) > 0 {
		return nil, apierrors.NewInvalid(corev1.SchemeGroupVersion.WithKind("Service").GroupKind(), s.Name, errs)
	}
	if !needsIPs(s) {
		if s.Spec.ClusterIP == corev1.ClusterIPNone {
			s.Spec.ClusterIPs = []string{corev1.ClusterIPNone}
		}
		return nil, nil
	}
	rec := ipRecord{Namespace: s.Namespace, Name: s.Name, UID: string(s.UID)}.bytes()
	var claimed []netip.Addr
	release := func() { c.release(context.WithoutCancel(ctx), claimed, rec) }
	if len(s.Spec.ClusterIPs) == 0 && s.Spec.ClusterIP != "" {
		s.Spec.ClusterIPs = []string{s.Spec.ClusterIP}
	}
	ips := slices.Clone(s.Spec.ClusterIPs)
	for i, f := range s.Spec.IPFamilies {
		cidr, ok := c.cidr(f)
		if !ok {
			continue
		}
		if i < len(ips) && ips[i] != "" {
			a, err := netip.ParseAddr(ips[i])
			if err != nil {
				continue // validation says why
			}
			// Upstream names the list, not its entry
			// (pkg/registry/core/service/storage/alloc.go).
			path, value := field.NewPath("spec", "clusterIPs"), slices.Clone(ips)
			if !cidr.Contains(a) || a == cidr.Masked().Addr() || a.Is4() && a == lastAddr(cidr) {
				release()
				return nil, apierrors.NewInvalid(corev1.SchemeGroupVersion.WithKind("Service").GroupKind(), s.Name, field.ErrorList{field.Invalid(path, value,
					fmt.Sprintf("failed to allocate IP %s: the provided IP (%s) is not in the valid range. The range of valid IPs is %s", ips[i], ips[i], cidr))})
			}
			ok, err := c.records.CreateState(ctx, family.ClusterIPs.For(a.String()), rec)
			if err != nil {
				release()
				return nil, apierrors.NewInternalError(err)
			}
			if !ok {
				release()
				return nil, apierrors.NewInvalid(corev1.SchemeGroupVersion.WithKind("Service").GroupKind(), s.Name, field.ErrorList{field.Invalid(path, value,
					fmt.Sprintf("failed to allocate IP %s: provided IP is already allocated", ips[i]))})
			}
			claimed = append(claimed, a)
			continue
		}
		a, err := c.allocateNext(ctx, cidr, rec)
		if err != nil {
			release()
			return nil, err
		}
		claimed = append(claimed, a)
		if i < len(ips) {
			ips[i] = a.String()
		} else {
			ips = append(ips, a.String())
		}
	}
	s.Spec.ClusterIPs = ips
	if len(ips) > 0 {
		s.Spec.ClusterIP = ips[0]
	}
	return claimed, nil
}

// randomTries is how many random IPs are tried before the range's records
// are read to find a free one.
const randomTries = 16

// allocateNext claims a free IP of cidr: random ones from the upper band
// first (upstream keeps the lower band for IPs that Services request,
// KEP-3070), then any free one.
func (c *ClusterIPs) allocateNext(ctx context.Context, cidr netip.Prefix, rec []byte) (netip.Addr, error) {
	size := rangeSize(cidr)
	offset := min(max(16, size/16), 256)
	if offset >= size {
		offset = 1
	}
	for range randomTries {
		a := nthAddr(cidr, offset+rand.Int64N(size-offset))
		if ok, err := c.records.CreateState(ctx, family.ClusterIPs.For(a.String()), rec); err != nil {
			return netip.Addr{}, apierrors.NewInternalError(err)
		} else if ok {
			return a, nil
		}
	}
	used, err := c.records.ListState(ctx, family.ClusterIPs.Dir())
	if err != nil {
		return netip.Addr{}, apierrors.NewInternalError(err)
	}
	start := rand.Int64N(size-1) + 1
	for i := range size - 1 {
		a := nthAddr(cidr, 1+(start-1+i)%(size-1))
		if _, taken := used[family.ClusterIPs.For(a.String())]; taken {
			continue
		}
		if ok, err := c.records.CreateState(ctx, family.ClusterIPs.For(a.String()), rec); err != nil {
			return netip.Addr{}, apierrors.NewInternalError(err)
		} else if ok {
			return a, nil
		}
	}
	return netip.Addr{}, apierrors.NewInternalError(fmt.Errorf("failed to allocate a serviceIP: range is full"))
}

// rangeSize is the number of addresses a Service may get in cidr, from
// offset 1: the network address is never given, nor IPv4's broadcast.
func rangeSize(cidr netip.Prefix) int64 {
	n := int64(1) << (cidr.Addr().BitLen() - cidr.Bits())
	if cidr.Addr().Is4() {
		n-- // broadcast
	}
	return n
}

func nthAddr(cidr netip.Prefix, n int64) netip.Addr {
	b := new(big.Int).SetBytes(cidr.Masked().Addr().AsSlice())
	b.Add(b, big.NewInt(n))
	raw := b.FillBytes(make([]byte, cidr.Addr().BitLen()/8))
	a, _ := netip.AddrFromSlice(raw)
	return a
}

func lastAddr(cidr netip.Prefix) netip.Addr {
	return nthAddr(cidr, int64(1)<<(cidr.Addr().BitLen()-cidr.Bits())-1)
}

// release frees IPs whose records still name the Service of rec.
func (c *ClusterIPs) release(ctx context.Context, ips []netip.Addr, rec []byte) {
	for _, a := range ips {
		if _, err := c.records.DeleteStateIf(ctx, family.ClusterIPs.For(a.String()), rec); err != nil {
			klog.ErrorS(err, "Releasing a cluster IP; the repair loop will", "ip", a)
		}
	}
}

// ServiceIPs are the cluster IPs s holds, parsed; the allocator and its
// repair (package serviceip) read a Service's IPs by it.
func ServiceIPs(s *corev1.Service) []netip.Addr {
	var out []netip.Addr
	for _, ip := range s.Spec.ClusterIPs {
		if a, err := netip.ParseAddr(ip); err == nil {
			out = append(out, a)
		}
	}
	return out
}

// hooks are the Service store's: allocate on create, on an update that
// needs IPs it lacked, release on delete and when a type change drops
// them.
func (c *ClusterIPs) hooks(store *genericregistry.Store) {
	store.BeginCreate = func(ctx context.Context, obj runtime.Object, _ *metav1.CreateOptions) (genericregistry.FinishFunc, error) {
		s := obj.(*corev1.Service)
		claimed, err := c.allocate(ctx, s)
		if err != nil {
			return nil, err
		}
		rec := ipRecord{Namespace: s.Namespace, Name: s.Name, UID: string(s.UID)}.bytes()
		return func(ctx context.Context, success bool) {
			if !success {
				c.release(context.WithoutCancel(ctx), claimed, rec)
			}
		}, nil
	}
	store.BeginUpdate = func(ctx context.Context, obj, old runtime.Object, _ *metav1.UpdateOptions) (genericregistry.FinishFunc, error) {
		s, o := obj.(*corev1.Service), old.(*corev1.Service)
		s.UID = o.UID
		oldIPs := ServiceIPs(o)
		oldRec := ipRecord{Namespace: o.Namespace, Name: o.Name, UID: string(o.UID)}.bytes()
		// Upstream's patchAllocatedValues: what was allocated stays when
		// the update does not say otherwise.
		if needsIPs(s) && needsIPs(o) && s.Spec.ClusterIP == "" && len(s.Spec.ClusterIPs) == 0 {
			s.Spec.ClusterIP, s.Spec.ClusterIPs = o.Spec.ClusterIP, slices.Clone(o.Spec.ClusterIPs)
			if s.Spec.IPFamilies == nil {
				s.Spec.IPFamilies = slices.Clone(o.Spec.IPFamilies)
			}
			if s.Spec.IPFamilyPolicy == nil {
				s.Spec.IPFamilyPolicy = o.Spec.IPFamilyPolicy
			}
		}
		if s.Spec.Type == corev1.ServiceTypeExternalName {
			s.Spec.ClusterIP, s.Spec.ClusterIPs = "", nil
		}
		var claimed []netip.Addr
		switch {
		case needsIPs(s) && !needsIPs(o):
			// ExternalName to ClusterIP: allocate as a create does.
			var err error
			if claimed, err = c.allocate(ctx, s); err != nil {
				return nil, err
			}
		case needsIPs(s):
			// Upgrades to dual stack allocate the second family.
			if len(s.Spec.ClusterIPs) < 2 && s.Spec.IPFamilyPolicy != nil && *s.Spec.IPFamilyPolicy != corev1.IPFamilyPolicySingleStack && c.dualStack() {
				s.Spec.IPFamilies = s.Spec.IPFamilies[:min(1, len(s.Spec.IPFamilies))]
				var err error
				if claimed, err = c.allocate(ctx, s); err != nil {
					return nil, err
				}
				// The primary was claimed before; allocate only claimed
				// the new family's.
				claimed = slices.DeleteFunc(claimed, func(a netip.Addr) bool { return slices.Contains(oldIPs, a) })
			} else if errs := c.defaultFamilies(s); len(errs) > 0 {
				return nil, apierrors.NewInvalid(corev1.SchemeGroupVersion.WithKind("Service").GroupKind(), s.Name, errs)
			}
		default:
			c.defaultFamilies(s)
		}
		rec := ipRecord{Namespace: s.Namespace, Name: s.Name, UID: string(s.UID)}.bytes()
		return func(ctx context.Context, success bool) {
			ctx = context.WithoutCancel(ctx)
			if !success {
				c.release(ctx, claimed, rec)
				return
			}
			var dropped []netip.Addr
			for _, a := range oldIPs {
				if !slices.Contains(ServiceIPs(s), a) {
					dropped = append(dropped, a)
				}
			}
			c.release(ctx, dropped, oldRec)
		}, nil
	}
	store.AfterDelete = func(obj runtime.Object, _ *metav1.DeleteOptions) {
		s := obj.(*corev1.Service)
		c.release(context.Background(), ServiceIPs(s), ipRecord{Namespace: s.Namespace, Name: s.Name, UID: string(s.UID)}.bytes())
	}
}

// Allocation is the record of a cluster IP as the repair (package
// serviceip, upstream's repair controller) reads it: the Service the IP
// was given to.
type Allocation struct {
	// IP is the allocated IP; not valid when the record's name is not one
	// as the allocator writes it.
	IP netip.Addr
	// Namespace and Name are the Service's the record names; both empty
	// when the record cannot be read.
	Namespace, Name string
	// key and value are the record as stored: ReleaseIfUnchanged
	// releases it only while it holds value.
	key, value string
}

// Allocations lists the records of the allocated IPs.
func (c *ClusterIPs) Allocations(ctx context.Context) ([]Allocation, error) {
	records, err := c.records.ListState(ctx, family.ClusterIPs.Dir())
	if err != nil {
		return nil, err
	}
	var out []Allocation
	for name, value := range records {
		ip := strings.TrimPrefix(name, family.ClusterIPs.Start())
		a := Allocation{key: name, value: string(value)}
		if addr, err := netip.ParseAddr(ip); err == nil && addr.String() == ip {
			a.IP = addr
		}
		var rec ipRecord
		if json.Unmarshal(value, &rec) == nil {
			a.Namespace, a.Name = rec.Namespace, rec.Name
		}
		out = append(out, a)
	}
	return out, nil
}

// Record records ip as s's when ip is of the range and has no record: an
// IP a Service holds that was written while the allocator was off.
func (c *ClusterIPs) Record(ctx context.Context, ip netip.Addr, s *corev1.Service) error {
	if !slices.ContainsFunc(c.cidrs, func(p netip.Prefix) bool { return p.Contains(ip) }) {
		return nil
	}
	_, err := c.records.CreateState(ctx, family.ClusterIPs.For(ip.String()), ipRecord{Namespace: s.Namespace, Name: s.Name, UID: string(s.UID)}.bytes())
	return err
}

// ReleaseIfUnchanged releases the IP of a when its record is still a's:
// the repair's release of an IP no Service holds.
func (c *ClusterIPs) ReleaseIfUnchanged(ctx context.Context, a Allocation) error {
	_, err := c.records.DeleteStateIf(ctx, a.key, []byte(a.value))
	return err
}
