package serviceip

import (
	"context"
	"net/netip"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"

	"github.com/kubestore/kubestore/registry"
)

// Allocator is the cluster IP allocator's records as the repair reads and
// mends them: registry.ClusterIPs has them.
type Allocator interface {
	// Allocations lists the records of the allocated IPs.
	Allocations(ctx context.Context) ([]registry.Allocation, error)
	// Record records ip as s's when ip is of the range and has no record.
	Record(ctx context.Context, ip netip.Addr, s *corev1.Service) error
	// ReleaseIfUnchanged releases the IP of a when its record is still a's.
	ReleaseIfUnchanged(ctx context.Context, a registry.Allocation) error
}

// RepairInterval is how often Repair compares the records with the
// Services, upstream's repair interval.
const RepairInterval = 3 * time.Minute

// Repair keeps the records of ips true to the Services until ctx is done,
// as upstream's repair controller (pkg/registry/core/service/ipallocator/
// controller/repairip.go): a record whose Service is gone or holds
// another IP (a crash between the claim and the write) is released once it
// was seen so on two passes in a row; an IP of the range a Service holds
// without a record (written while the allocator was off) is recorded.
// Every write is conditional, so several kubestores may repair at once.
func Repair(ctx context.Context, ips Allocator, services func(ctx context.Context) ([]corev1.Service, error)) {
	suspects := map[registry.Allocation]bool{}
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		var err error
		if suspects, err = repairOnce(ctx, ips, services, suspects); err != nil {
			klog.ErrorS(err, "Repairing the cluster IP records")
		}
	}, RepairInterval)
}

// repairOnce is one pass. suspects are the records the pass before saw no
// Service hold; it returns the ones this pass saw so and kept.
func repairOnce(ctx context.Context, ips Allocator, services func(ctx context.Context) ([]corev1.Service, error), suspects map[registry.Allocation]bool) (map[registry.Allocation]bool, error) {
	allocations, err := ips.Allocations(ctx)
	if err != nil {
		return suspects, err
	}
	recorded := map[netip.Addr]bool{}
	for _, a := range allocations {
		if a.IP.IsValid() {
			recorded[a.IP] = true
		}
	}
	list, err := services(ctx)
	if err != nil {
		return suspects, err
	}
	holders := map[netip.Addr]*corev1.Service{}
	for i := range list {
		s := &list[i]
		for _, a := range registry.ServiceIPs(s) {
			holders[a] = s
			if recorded[a] {
				continue
			}
			if err := ips.Record(ctx, a, s); err != nil {
				return suspects, err
			}
		}
	}
	next := map[registry.Allocation]bool{}
	for _, a := range allocations {
		if h, ok := holders[a.IP]; ok && a.Namespace == h.Namespace && a.Name == h.Name {
			continue
		}
		if suspects[a] {
			if err := ips.ReleaseIfUnchanged(ctx, a); err != nil {
				return suspects, err
			}
			klog.InfoS("Released a cluster IP no Service holds", "ip", a.IP.String())
			continue
		}
		next[a] = true
	}
	return next, nil
}
