package mirror

import (
	"bytes"
	"context"
	"encoding/json"
	"github.com/kubestore/kubestore/records/family"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/storage"
	"k8s.io/klog/v2"
)

// The outbox's bounds: the queued Events of the node's agents, at most
// maxQueuedEvents of at most maxQueuedEventBytes in all; past either the
// oldest are dropped, and counted.
const (
	maxQueuedEvents     = 1000
	maxQueuedEventBytes = 1 << 20
)

var (
	coreEvents    = schema.GroupResource{Resource: "events"}
	eventsV1      = schema.GroupResource{Group: "events.k8s.io", Resource: "events"}
	coreEventsGVR = schema.GroupVersionResource{Version: "v1", Resource: "events"}
)

// outboxState names the queued Events in the mirror's state.
var outboxState = family.MirrorEvents.Dir() + "/"

// queuedEvent is an Event of the node's agents that the upstream has not
// got yet: its name, and its size when it was queued. The Event itself is
// read from the local store when it is sent, so the upstream gets its
// latest count and time.
type queuedEvent struct {
	Namespace string    `json:"namespace"`
	Name      string    `json:"name"`
	Bytes     int       `json:"bytes"`
	Queued    time.Time `json:"queued"`
	// writes counts the local writes of the Event since it was queued: a
	// send that read an earlier one leaves it queued.
	writes uint64
}

func (q queuedEvent) key() string { return outboxState + q.Namespace + "/" + q.Name }

// outbox sends the Events the node's agents write locally about mirrored
// objects (a Pod of the node, the Node) to the upstream, so that a cloud
// operator's kubectl describe shows them: at once while the link is up,
// after it comes back when not, durably (the queue is in the local etcd)
// and bounded.
type outbox struct {
	u    *uplink
	wake chan struct{}

	mu    sync.Mutex
	queue map[string]queuedEvent
	bytes int
}

func newOutbox(u *uplink) *outbox {
	return &outbox{u: u, wake: make(chan struct{}, 1), queue: map[string]queuedEvent{}}
}

// isEvents reports whether gr is the Events: core/v1's and events.k8s.io's
// are one store.
func isEvents(gr schema.GroupResource) bool { return gr == coreEvents || gr == eventsV1 }

// written queues the Event namespace/name that a local agent just wrote,
// if it is about an object a rule mirrors.
func (o *outbox) written(ctx context.Context, namespace, name string) {
	ev, size, err := o.event(ctx, namespace, name)
	if err != nil || ev == nil || !o.u.mirroredObject(ctx, ev.InvolvedObject) {
		return
	}
	q := queuedEvent{Namespace: namespace, Name: name, Bytes: size, Queued: time.Now()}
	o.mu.Lock()
	cur, queued := o.queue[q.key()]
	if queued {
		// It goes with its latest state: once more if a send of it is
		// under way, which may have read it before this write.
		cur.writes++
		o.queue[q.key()] = cur
	}
	o.mu.Unlock()
	if queued {
		o.signal()
		return
	}
	data, _ := json.Marshal(q)
	if err := o.u.state.PutState(ctx, o.durable(q.key()), data); err != nil {
		klog.V(2).InfoS("Mirror: queueing an Event for the upstream", "namespace", namespace, "name", name, "err", err)
		return
	}
	for _, d := range o.enqueue(q) {
		o.forget(ctx, d)
		eventsSent.WithLabelValues("dropped").Inc()
	}
	o.signal()
}

// enqueue adds q to the queue and returns the oldest Events dropped past
// its bounds.
func (o *outbox) enqueue(q queuedEvent) []queuedEvent {
	o.mu.Lock()
	defer o.mu.Unlock()
	// Queued meanwhile by a write beside this one: counted once.
	if old, ok := o.queue[q.key()]; ok {
		o.bytes -= old.Bytes
	}
	o.queue[q.key()] = q
	o.bytes += q.Bytes
	return o.trimLocked()
}

// trimLocked removes the oldest queued Events past the bounds and returns
// them.
func (o *outbox) trimLocked() []queuedEvent {
	if len(o.queue) <= maxQueuedEvents && o.bytes <= maxQueuedEventBytes {
		return nil
	}
	all := o.sortedLocked()
	var dropped []queuedEvent
	for len(o.queue) > maxQueuedEvents || o.bytes > maxQueuedEventBytes {
		d := all[0]
		all = all[1:]
		delete(o.queue, d.key())
		o.bytes -= d.Bytes
		dropped = append(dropped, d)
	}
	return dropped
}

func (o *outbox) sortedLocked() []queuedEvent {
	all := make([]queuedEvent, 0, len(o.queue))
	for _, q := range o.queue {
		all = append(all, q)
	}
	sort.Slice(all, func(i, j int) bool {
		if !all[i].Queued.Equal(all[j].Queued) {
			return all[i].Queued.Before(all[j].Queued)
		}
		return all[i].key() < all[j].key()
	})
	return all
}

func (o *outbox) signal() {
	select {
	case o.wake <- struct{}{}:
	default:
	}
}

// forget deletes a queued Event's record.
func (o *outbox) forget(ctx context.Context, q queuedEvent) {
	if err := o.u.state.DeleteState(ctx, o.durable(q.key())); err != nil {
		klog.V(2).InfoS("Mirror: forgetting a queued Event", "namespace", q.Namespace, "name", q.Name, "err", err)
	}
}

// event reads a local Event and its size.
func (o *outbox) event(ctx context.Context, namespace, name string) (*corev1.Event, int, error) {
	store, err := o.u.stores.Store(ctx, coreEvents)
	if err != nil {
		return nil, 0, err
	}
	obj := store.New()
	if err := store.Get(ctx, store.Key(namespace, name), storage.GetOptions{}, obj); err != nil {
		if storage.IsNotFound(err) {
			return nil, 0, nil
		}
		return nil, 0, err
	}
	ev, ok := obj.(*corev1.Event)
	if !ok {
		return nil, 0, nil
	}
	return ev, ev.Size(), nil
}

// mirroredObject reports whether ref names an object a rule mirrors, or
// one the node deleted while the link was down.
func (u *uplink) mirroredObject(ctx context.Context, ref corev1.ObjectReference) bool {
	return u.pendingDelete(ctx, ref) || u.down.mirrors(ctx, ref)
}

// pendingDelete reports whether ref names an object whose final delete by
// the node is pending.
func (u *uplink) pendingDelete(ctx context.Context, ref corev1.ObjectReference) bool {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return false
	}
	for _, rec := range u.pending.all() {
		if !rec.has(ownDelete) || rec.Name != ref.Name {
			continue
		}
		store, err := u.stores.Store(ctx, rec.gr())
		if err == nil && store.GVK.Kind == ref.Kind && store.GVK.Group == gv.Group && (!store.Namespaced || rec.Namespace == ref.Namespace) {
			return true
		}
	}
	return false
}

// aboutThisNode reports whether queued Event q of a release before
// per-node queues is about this node's objects (legacyMine).
func (o *outbox) aboutThisNode(ctx context.Context, q queuedEvent, alone bool) bool {
	ev, _, err := o.event(ctx, q.Namespace, q.Name)
	if err != nil || ev == nil {
		return alone
	}
	ref := ev.InvolvedObject
	k := ownedKindOf(ref.Kind)
	if k == nil {
		return alone
	}
	return o.u.legacyMine(ctx, k.gr, ref.Namespace, ref.Name, alone)
}

// durable is the key in the mirror's state of the queued Event of key:
// under the node's own prefix, so that gateways sharing one store each
// send their own agents' Events.
func (o *outbox) durable(key string) string {
	return nodeState(family.MirrorEvents, o.u.node) + strings.TrimPrefix(key, outboxState)
}

// load reads the queue this node left; the Events of a release before
// queues were kept per node are moved under the node's when they are
// about its objects.
func (o *outbox) load(ctx context.Context) error {
	own, err := o.u.state.ListState(ctx, nodeState(family.MirrorEvents, o.u.node))
	if err != nil {
		return err
	}
	legacy, err := o.u.state.ListState(ctx, outboxState)
	if err != nil {
		return err
	}
	if own == nil {
		own = map[string][]byte{}
	}
	alone := o.u.aloneOnStore(ctx)
	for key, data := range legacy {
		var q queuedEvent
		if json.Unmarshal(data, &q) != nil || !o.aboutThisNode(ctx, q, alone) {
			continue
		}
		if err := o.u.state.PutState(ctx, o.durable(key), data); err != nil {
			return err
		}
		if err := o.u.state.DeleteState(ctx, key); err != nil {
			return err
		}
		own[o.durable(key)] = data
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, data := range own {
		var q queuedEvent
		if json.Unmarshal(data, &q) == nil {
			if old, ok := o.queue[q.key()]; ok {
				o.bytes -= old.Bytes
			}
			o.queue[q.key()] = q
			o.bytes += q.Bytes
		}
	}
	return nil
}

// run loads the queue and sends it while the link is up, until ctx ends.
func (o *outbox) run(ctx context.Context) {
	if err := o.load(ctx); err != nil {
		klog.ErrorS(err, "Mirror: reading the queued Events")
	}
	for {
		if o.u.Connected() {
			o.send(ctx)
		}
		select {
		case <-ctx.Done():
			return
		case <-o.wake:
		case <-o.u.linkComesUp():
		case <-time.After(reconcileEvery):
		}
	}
}

// send sends the queued Events, oldest first, until the upstream cannot
// take one now.
func (o *outbox) send(ctx context.Context) {
	o.mu.Lock()
	all := o.sortedLocked()
	o.mu.Unlock()
	for _, q := range all {
		if ctx.Err() != nil || !o.u.Connected() {
			return
		}
		outcome, err := o.sendOne(ctx, q)
		if err != nil {
			if isNetworkError(err) || statusCode(err) >= http.StatusInternalServerError {
				if unreachable(err) {
					o.u.reached(err)
				}
				return
			}
			klog.V(2).InfoS("Mirror: the upstream refused an Event of the node", "namespace", q.Namespace, "name", q.Name, "err", err)
			outcome = "refused"
		}
		// Written again since it was read (a newer count): it stays, with
		// its record, to go again.
		o.mu.Lock()
		cur, ok := o.queue[q.key()]
		sent := ok && cur.Queued.Equal(q.Queued) && cur.writes == q.writes
		if sent {
			delete(o.queue, q.key())
			o.bytes -= cur.Bytes
		}
		o.mu.Unlock()
		if sent {
			o.forget(ctx, q)
		}
		eventsSent.WithLabelValues(outcome).Inc()
	}
}

// sendOne creates the Event upstream, or updates the upstream's copy with
// its count and times.
func (o *outbox) sendOne(ctx context.Context, q queuedEvent) (string, error) {
	ev, _, err := o.event(ctx, q.Namespace, q.Name)
	if err != nil {
		return "", localError{err}
	}
	if ev == nil {
		// Expired locally (the Events' TTL) before the link came back.
		return "expired", nil
	}
	data, err := runtime.DefaultUnstructuredConverter.ToUnstructured(ev)
	if err != nil {
		return "", localError{err}
	}
	store := &Store{GVK: corev1.SchemeGroupVersion.WithKind("Event"), Namespaced: true}
	u := forUpstream(data, store)
	up := o.u.dyn.Resource(coreEventsGVR).Namespace(q.Namespace)
	for range 5 {
		_, err = up.Create(ctx, u, metav1.CreateOptions{})
		if !apierrors.IsAlreadyExists(err) {
			break
		}
		cur, gerr := up.Get(ctx, q.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(gerr) {
			continue
		}
		if gerr != nil {
			return "", gerr
		}
		for _, f := range []string{"count", "lastTimestamp", "message", "series", "eventTime"} {
			if v, ok := u.Object[f]; ok {
				cur.Object[f] = v
			}
		}
		if _, err = up.Update(ctx, cur, metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
			break
		}
	}
	if err != nil {
		return "", err
	}
	return "sent", nil
}

// queued is the queue's length and bytes, for /mirrorz and the metrics.
func (o *outbox) queued() (int, int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.queue), o.bytes
}

// serveEvent serves a local agent's write of an Event, then queues the
// Event for the upstream if it is about a mirrored object.
func (u *uplink) serveEvent(next http.Handler, w http.ResponseWriter, r *http.Request, info *request.RequestInfo, decoder runtime.Decoder, maxBody int64) {
	name := info.Name
	if info.Verb == "create" {
		body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
		if err != nil || int64(len(body)) > maxBody {
			// The local server answers what it cannot read.
			r.Body = io.NopCloser(io.MultiReader(bytes.NewReader(body), r.Body))
			next.ServeHTTP(w, r)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		if u, err := decodeBody(r.Header.Get("Content-Type"), body, decoder); err == nil {
			name = u.GetName()
		}
	}
	cw := &codeWriter{ResponseWriter: w}
	next.ServeHTTP(cw, r)
	if name != "" && cw.written/100 == 2 {
		u.events.written(r.Context(), info.Namespace, name)
	}
}
