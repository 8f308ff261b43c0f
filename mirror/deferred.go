package mirror

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/klog/v2"
)

// errNamespaceTerminating defers the creation of a copy in a local
// namespace that is being deleted (namespaceForCopy).
type errNamespaceTerminating struct{ namespace string }

func (e errNamespaceTerminating) Error() string {
	return fmt.Sprintf("the local namespace %s is terminating: the copy is created once it is gone", e.namespace)
}

// deferredEvery is how often the copies deferred by a terminating
// namespace are tried again while there are any.
const deferredEvery = 2 * time.Second

// deferredCopy is a copy of the upstream's object namespace/name of gr,
// which rule mirrors, not created because its namespace was terminating.
type deferredCopy struct {
	gr              schema.GroupResource
	namespace, name string
}

// deferredCopies are the copies waiting for their namespace to go: each
// is fetched from the upstream once it is, so that it does not wait for
// its next change there. The loop that tries them runs only while there
// are some.
type deferredCopies struct {
	mu      sync.Mutex
	copies  map[deferredCopy]*rule
	running bool
	// ctx is Run's, from its start (start); wg waits for the loop.
	ctx context.Context
	wg  sync.WaitGroup
}

// start lets the loop run, until ctx ends; wait waits for it.
func (d *deferredCopies) start(ctx context.Context) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.ctx = ctx
}

func (d *deferredCopies) wait() { d.wg.Wait() }

// deferCopy records a copy deferred by its terminating namespace and
// makes sure the loop that creates it later runs.
func (m *Mirror) deferCopy(r *rule, store *Store, namespace, name string) {
	d := &m.deferred
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.copies == nil {
		d.copies = map[deferredCopy]*rule{}
	}
	k := deferredCopy{store.GVR.GroupResource(), namespace, name}
	if _, ok := d.copies[k]; !ok {
		klog.InfoS("Mirror: a copy waits for its local namespace, which is terminating, to go", "rule", r.name, "namespace", namespace, "name", name)
	}
	d.copies[k] = r
	if ctx := d.ctx; !d.running && ctx != nil && ctx.Err() == nil {
		d.running = true
		d.wg.Go(func() { m.runDeferred(ctx) })
	}
}

// runDeferred fetches the deferred copies from the upstream every
// deferredEvery, until none is left or ctx ends.
func (m *Mirror) runDeferred(ctx context.Context) {
	d := &m.deferred
	for {
		select {
		case <-ctx.Done():
		case <-time.After(deferredEvery):
		}
		d.mu.Lock()
		if ctx.Err() != nil || len(d.copies) == 0 {
			d.running = false
			d.mu.Unlock()
			return
		}
		todo := maps.Clone(d.copies)
		d.mu.Unlock()
		if !m.Connected() {
			continue
		}
		for k, r := range todo {
			if m.createDeferred(ctx, k, r) {
				d.mu.Lock()
				if d.copies[k] == r {
					delete(d.copies, k)
				}
				d.mu.Unlock()
			}
		}
	}
}

// createDeferred fetches a deferred copy's object from the upstream and
// stores it, and reports whether it is done with: stored, or gone
// upstream.
func (m *Mirror) createDeferred(ctx context.Context, k deferredCopy, r *rule) bool {
	store, err := m.stores.Store(ctx, k.gr)
	if err != nil {
		return false
	}
	u, err := m.up.upstreamClient(store, k.namespace).Get(ctx, k.name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return true
	}
	if err != nil {
		return false
	}
	op, err := m.applyObject(ctx, r, store, u, applyHow{})
	return err == nil && op != opDeferred
}

// deferredReport is one line per deferred copy, for /mirrorz?verbose.
func (m *Mirror) deferredReport() []string {
	d := &m.deferred
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []string
	for _, k := range slices.SortedFunc(maps.Keys(d.copies), func(a, b deferredCopy) int {
		return strings.Compare(a.gr.String()+"/"+a.namespace+"/"+a.name, b.gr.String()+"/"+b.namespace+"/"+b.name)
	}) {
		out = append(out, fmt.Sprintf("deferred %s %s/%s: its local namespace is terminating", k.gr, k.namespace, k.name))
	}
	return out
}
