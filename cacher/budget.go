package cacher

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/apiserver/pkg/storage"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"

	"github.com/kubestore/kubestore/config"
)

// A resource's budget (--max-objects, --max-bytes, or the byte budget
// --memory-limit derives) bounds what its watch cache must hold: every live
// object, decoded. budgeted enforces it at the storage layer, below
// admission and above etcd, so every write path (create, update, apply,
// the namespace controller) passes through it:
//
//   - a create that would exceed the object or byte budget is refused with a
//     Kubernetes Forbidden (403) naming the resource and its budget;
//   - an update that would grow the stored bytes beyond the byte budget is
//     refused the same way; deletes and shrinking updates always pass.
//
// The usage comes from a watch on the resource's own storage (the cacher
// when cached), so objects that leave by other paths (event TTLs, another
// kubestore on the same external etcd) are counted out as they go. Creates
// admitted but not yet seen by that watch are held as reservations, so
// concurrent creates cannot overshoot the object budget.
type budgeted struct {
	storage.Interface
	gr     schema.GroupResource
	budget config.Budget
	usage  *usage
}

var (
	budgetLimit = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Namespace:      "kubestore",
		Name:           "resource_budget_limit",
		Help:           "Budget of a resource: objects, or stored (encoded) bytes.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"resource", "budget"})
	budgetUsage = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Namespace:      "kubestore",
		Name:           "resource_budget_usage",
		Help:           "What a budgeted resource stores: objects, or stored (encoded) bytes.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"resource", "budget"})
	budgetRejections = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace:      "kubestore",
		Name:           "resource_budget_rejections_total",
		Help:           "Writes refused because they would exceed a resource's budget.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"resource", "budget"})
	registerBudgetMetrics sync.Once
)

const (
	budgetObjects = "objects"
	budgetBytes   = "bytes"
)

// withBudget wraps s in the resource's budget, or returns s when it has
// none. The usage watch runs until the returned stop is called.
func withBudget(s storage.Interface, gr schema.GroupResource, b config.Budget, resourcePrefix string, keyFunc func(runtime.Object) (string, error)) (storage.Interface, func()) {
	if b.Unbounded() {
		return s, func() {}
	}
	registerBudgetMetrics.Do(func() {
		legacyregistry.MustRegister(budgetLimit, budgetUsage, budgetRejections)
	})
	resource := gr.String()
	if b.Objects > 0 {
		budgetLimit.WithLabelValues(resource, budgetObjects).Set(float64(b.Objects))
	}
	if b.Bytes > 0 {
		budgetLimit.WithLabelValues(resource, budgetBytes).Set(float64(b.Bytes))
	}
	ctx, cancel := context.WithCancel(context.Background())
	u := &usage{
		resource: resource,
		sizes:    map[string]int64{},
		pending:  map[string]*reservation{},
		synced:   make(chan struct{}),
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		u.run(ctx, s, resourcePrefix, keyFunc)
	}()
	return &budgeted{Interface: s, gr: gr, budget: b, usage: u}, func() {
		cancel()
		<-done
	}
}

func (b *budgeted) Create(ctx context.Context, key string, obj, out runtime.Object, ttl uint64) error {
	release, err := b.admit(ctx, key, encodedSize(obj))
	if err != nil {
		return err
	}
	err = b.Interface.Create(ctx, key, obj, out, ttl)
	release(err == nil)
	return err
}

func (b *budgeted) GuaranteedUpdate(ctx context.Context, key string, destination runtime.Object, ignoreNotFound bool,
	preconditions *storage.Preconditions, tryUpdate storage.UpdateFunc, cachedExistingObject runtime.Object) error {
	if b.budget.Bytes == 0 {
		return b.Interface.GuaranteedUpdate(ctx, key, destination, ignoreNotFound, preconditions, tryUpdate, cachedExistingObject)
	}
	if err := b.usage.waitSynced(ctx); err != nil {
		return err
	}
	checked := func(input runtime.Object, res storage.ResponseMeta) (runtime.Object, *uint64, error) {
		updated, ttl, err := tryUpdate(input, res)
		if err != nil {
			return updated, ttl, err
		}
		if err := b.admitGrowth(key, encodedSize(updated)); err != nil {
			return nil, nil, err
		}
		return updated, ttl, nil
	}
	return b.Interface.GuaranteedUpdate(ctx, key, destination, ignoreNotFound, preconditions, checked, cachedExistingObject)
}

// admit reserves room for a create of key; release(stored) ends the
// reservation when the create failed (a stored object's reservation ends
// when the usage watch sees it).
func (b *budgeted) admit(ctx context.Context, key string, size int64) (release func(stored bool), err error) {
	u := b.usage
	if err := u.waitSynced(ctx); err != nil {
		return nil, err
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	_, exists := u.sizes[key]
	_, racing := u.pending[key]
	if exists || racing {
		// The create fails with AlreadyExists, or races another create
		// of the same name that holds the reservation: nothing to add.
		return func(bool) {}, nil
	}
	if n := int64(len(u.sizes) + len(u.pending)); b.budget.Objects > 0 && n+1 > b.budget.Objects {
		return nil, b.refuse(key, budgetObjects, fmt.Sprintf("the budget of %d objects (--%s=%s#%d) is reached",
			b.budget.Objects, config.FlagMaxObjects, b.gr, b.budget.Objects))
	}
	if total := u.bytes + u.pendingBytes + size; b.budget.Bytes > 0 && total > b.budget.Bytes {
		return nil, b.refuse(key, budgetBytes, fmt.Sprintf("storing %d more bytes would take %s to %d bytes, over the budget of %d bytes (%s)",
			size, b.gr, total, b.budget.Bytes, b.budget.BytesFrom))
	}
	r := &reservation{size: size, at: time.Now()}
	u.reserve(key, r)
	return func(stored bool) {
		u.mu.Lock()
		defer u.mu.Unlock()
		if u.pending[key] != r {
			return // the watch already counted it
		}
		if stored {
			r.created = true
			return
		}
		u.unreserve(key)
	}, nil
}

// admitGrowth refuses an update that would grow the resource's stored bytes
// beyond its byte budget.
func (b *budgeted) admitGrowth(key string, size int64) error {
	u := b.usage
	u.mu.Lock()
	defer u.mu.Unlock()
	growth := size - u.sizes[key]
	if growth <= 0 {
		return nil
	}
	if total := u.bytes + u.pendingBytes + growth; total > b.budget.Bytes {
		return b.refuse(key, budgetBytes, fmt.Sprintf("growing it by %d bytes would take %s to %d bytes, over the budget of %d bytes (%s)",
			growth, b.gr, total, b.budget.Bytes, b.budget.BytesFrom))
	}
	return nil
}

func (b *budgeted) refuse(key, budget, why string) error {
	budgetRejections.WithLabelValues(b.gr.String(), budget).Inc()
	return apierrors.NewForbidden(b.gr, path.Base(key), errors.New(why))
}

// reservation is a create admitted but not yet seen by the usage watch.
type reservation struct {
	size int64
	at   time.Time
	// created is set once the create succeeded.
	created bool
}

// usage is what one resource stores, as its watch reports it.
type usage struct {
	resource string

	mu           sync.Mutex
	sizes        map[string]int64 // key → encoded size
	bytes        int64            // sum of sizes
	pending      map[string]*reservation
	pendingBytes int64

	synced     chan struct{}
	syncedOnce sync.Once
}

func (u *usage) waitSynced(ctx context.Context) error {
	select {
	case <-u.synced:
		return nil
	case <-ctx.Done():
		return apierrors.NewTimeoutError(fmt.Sprintf("the usage of %s is not known yet", u.resource), 1)
	}
}

func (u *usage) reserve(key string, r *reservation) {
	u.pending[key] = r
	u.pendingBytes += r.size
}

func (u *usage) unreserve(key string) {
	if r, ok := u.pending[key]; ok {
		delete(u.pending, key)
		u.pendingBytes -= r.size
	}
}

// set records key's size as the watch saw it; size < 0 removes it.
func (u *usage) set(key string, size int64) {
	u.unreserve(key)
	u.bytes -= u.sizes[key]
	if size < 0 {
		delete(u.sizes, key)
	} else {
		u.sizes[key] = size
		u.bytes += size
	}
}

// replace installs the state of a fresh initial list taken from start on:
// reservations of creates that finished before it are either in it or
// already gone.
func (u *usage) replace(sizes map[string]int64, start time.Time) {
	u.sizes, u.bytes = sizes, 0
	for _, n := range sizes {
		u.bytes += n
	}
	for key, r := range u.pending {
		if _, listed := sizes[key]; listed || (r.created && r.at.Before(start)) {
			u.unreserve(key)
		}
	}
}

func (u *usage) report() {
	budgetUsage.WithLabelValues(u.resource, budgetObjects).Set(float64(len(u.sizes)))
	budgetUsage.WithLabelValues(u.resource, budgetBytes).Set(float64(u.bytes))
}

// run keeps the usage current until ctx ends: a WatchList-style watch
// (initial events, then an initial-events-end bookmark) and, whenever it
// ends, a fresh one.
func (u *usage) run(ctx context.Context, s storage.Interface, resourcePrefix string, keyFunc func(runtime.Object) (string, error)) {
	backoff := wait.Backoff{Duration: 100 * time.Millisecond, Factor: 2, Steps: 8, Cap: 10 * time.Second}
	for ctx.Err() == nil {
		err := u.watch(ctx, s, resourcePrefix, keyFunc)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			klog.V(2).InfoS("Budget usage watch ended; starting again", "resource", u.resource, "err", err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(backoff.Step()):
		}
	}
}

func (u *usage) watch(ctx context.Context, s storage.Interface, resourcePrefix string, keyFunc func(runtime.Object) (string, error)) error {
	start := time.Now()
	sendInitial := true
	everything := storage.Everything
	everything.AllowWatchBookmarks = true
	w, err := s.Watch(ctx, resourcePrefix, storage.ListOptions{
		ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan,
		SendInitialEvents:    &sendInitial,
		Recursive:            true,
		Predicate:            everything,
	})
	if err != nil {
		return err
	}
	defer w.Stop()
	initial := map[string]int64{}
	for ev := range w.ResultChan() {
		switch ev.Type {
		case watch.Error:
			return apierrors.FromObject(ev.Object)
		case watch.Bookmark:
			if initial == nil {
				continue
			}
			if m, err := meta.Accessor(ev.Object); err == nil && m.GetAnnotations()[metav1.InitialEventsAnnotationKey] == "true" {
				u.mu.Lock()
				u.replace(initial, start)
				u.report()
				u.mu.Unlock()
				initial = nil
				u.syncedOnce.Do(func() { close(u.synced) })
			}
			continue
		}
		obj := ev.Object
		if c, ok := obj.(runtime.CacheableObject); ok {
			obj = c.GetObject()
		}
		key, err := keyFunc(obj)
		if err != nil {
			return fmt.Errorf("key of a %s watch event: %w", u.resource, err)
		}
		size := encodedSize(obj)
		if ev.Type == watch.Deleted {
			size = -1
		}
		if initial != nil {
			if size >= 0 {
				initial[key] = size
			} else {
				delete(initial, key)
			}
			continue
		}
		u.mu.Lock()
		u.set(key, size)
		u.report()
		u.mu.Unlock()
	}
	return nil
}

// encodedSize approximates the size of obj in etcd: its protobuf size for
// built-in types, its JSON size otherwise (custom resources).
func encodedSize(obj runtime.Object) int64 {
	if s, ok := obj.(interface{ Size() int }); ok {
		return int64(s.Size())
	}
	data, err := json.Marshal(obj)
	if err != nil {
		return 0
	}
	return int64(len(data))
}
