package cacher

import (
	"context"
	"fmt"
	"path"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/storage"
	"k8s.io/component-base/metrics/legacyregistry"

	k8smetrics "k8s.io/component-base/metrics"

	"github.com/kubestore/kubestore/memory"
)

// HeapGuard refuses creates, of every resource, while the live heap (as of
// the last garbage collection) is above memory.HeapGuardPercent of the
// memory limit. Updates and deletes pass: they are how a device makes
// room.
type HeapGuard struct {
	limit     int64
	watermark uint64
	from      string
}

var heapRejections = k8smetrics.NewCounterVec(&k8smetrics.CounterOpts{
	Namespace:      "kubestore",
	Name:           "heap_watermark_rejections_total",
	Help:           "Creates refused because the live heap was above the memory limit's watermark.",
	StabilityLevel: k8smetrics.ALPHA,
}, []string{"resource"})

var registerHeapMetrics sync.Once

// NewHeapGuard guards the memory limit of l, described by its LimitFrom
// (the flag, GOMEMLIMIT or the device it was derived from); nil when l
// has no limit.
func NewHeapGuard(l memory.Limits) *HeapGuard {
	if l.Limit <= 0 {
		return nil
	}
	registerHeapMetrics.Do(func() { legacyregistry.MustRegister(heapRejections) })
	return &HeapGuard{limit: l.Limit, watermark: l.HeapGuardWatermark(), from: l.LimitFrom}
}

// admit refuses a create of key while the live heap is above the watermark.
func (g *HeapGuard) admit(gr schema.GroupResource, key string) error {
	live := memory.LiveHeap()
	if live <= g.watermark {
		return nil
	}
	heapRejections.WithLabelValues(gr.String()).Inc()
	return apierrors.NewForbidden(gr, path.Base(key), fmt.Errorf(
		"kubestore's live heap is %d MiB, above %d%% of its memory limit of %d MiB (%s): new objects are refused until deletes make room or the limit is raised",
		live>>20, memory.HeapGuardPercent, g.limit>>20, g.from))
}

// withHeapGuard wraps s so that its creates pass g first; s itself when
// g is nil.
func withHeapGuard(s storage.Interface, gr schema.GroupResource, g *HeapGuard) storage.Interface {
	if g == nil {
		return s
	}
	return &heapGuarded{Interface: s, gr: gr, guard: g}
}

type heapGuarded struct {
	storage.Interface
	gr    schema.GroupResource
	guard *HeapGuard
}

func (h *heapGuarded) Create(ctx context.Context, key string, obj, out runtime.Object, ttl uint64) error {
	if err := h.guard.admit(h.gr, key); err != nil {
		return err
	}
	return h.Interface.Create(ctx, key, obj, out, ttl)
}
