package mirror

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/kubestore/kubestore/records/family"
	"maps"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apiserver/pkg/storage"
	"k8s.io/klog/v2"

	"github.com/kubestore/kubestore/mirrored"
)

// errUnchanged aborts a write that would change nothing.
var errUnchanged = errors.New("unchanged")

// newer reports whether upstream resourceVersion a is newer than b. Both
// come from one upstream resource; when they are not the integers etcd
// gives (the comparison KEP-5504 allows), any difference counts.
func newer(a, b string) bool {
	c, err := resourceversion.CompareResourceVersion(a, b)
	if err != nil {
		return a != b
	}
	return c > 0
}

// apply writes the upstream object u into the local store unless the local
// copy already has its content (the same or a newer upstream
// resourceVersion), in which case nothing is written and no local event
// happens. It reports what it did: opCreated, opUpdated or opUnchanged.
func (m *Mirror) apply(ctx context.Context, r *rule, store *Store, u *unstructured.Unstructured) (string, error) {
	return m.applyObject(ctx, r, store, u, applyHow{})
}

// applyObject is apply, as how says.
func (m *Mirror) applyObject(ctx context.Context, r *rule, store *Store, u *unstructured.Unstructured, how applyHow) (string, error) {
	upstreamRV := u.GetResourceVersion()
	if m.deleted.has(u.GetUID()) {
		// Deleted upstream: a late event, relist page or answer.
		applied.WithLabelValues(r.base, opUnchanged).Inc()
		return opUnchanged, nil
	}
	obj, err := store.Convert(u.Object)
	if err != nil {
		return "", skippedError{fmt.Errorf("converting %s %s/%s: %w", r.gr, u.GetNamespace(), u.GetName(), err)}
	}
	a, err := meta.Accessor(obj)
	if err != nil {
		return "", err
	}
	ann := maps.Clone(a.GetAnnotations())
	if ann == nil {
		ann = map[string]string{}
	}
	ann[mirrored.AnnotationRule] = r.name
	ann[mirrored.AnnotationUpstreamResourceVersion] = upstreamRV
	delete(ann, mirrored.AnnotationView)
	view := m.viewOf(r.gr, obj)
	if view != "" {
		ann[mirrored.AnnotationView] = view
	}
	a.SetAnnotations(ann)
	a.SetResourceVersion("")
	if !store.Namespaced {
		a.SetNamespace("")
	}
	key := store.Key(a.GetNamespace(), a.GetName())
	// A copy is created only in a namespace that exists and is not
	// terminating (namespaceForCopy).
	creatable := func() error {
		err := m.namespaceForCopy(ctx, a.GetNamespace())
		var terminating errNamespaceTerminating
		if errors.As(err, &terminating) {
			m.deferCopy(r, store, a.GetNamespace(), a.GetName())
			return err
		}
		if err != nil {
			return localError{err}
		}
		return nil
	}
	held := func() holding {
		if how.overPending {
			return notHeld
		}
		return m.up.pending.holds(r.gr, a.GetNamespace(), a.GetName(), a.GetUID())
	}
	if how.absent && held() != heldWhole {
		if err := creatable(); err != nil {
			if errors.As(err, new(errNamespaceTerminating)) {
				applied.WithLabelValues(r.base, opDeferred).Inc()
				return opDeferred, nil
			}
			return "", err
		}
		err := store.Create(ctx, key, obj.DeepCopyObject(), store.New(), 0)
		if err == nil {
			applied.WithLabelValues(r.base, opCreated).Inc()
			m.refs.changed(r, obj)
			return opCreated, nil
		}
		if !storage.IsExist(err) {
			return "", localError{fmt.Errorf("storing %s %s: %w", r.gr, key, err)}
		}
	}
	var op string
	// The checks run in the update function, on the local copy it read:
	// a write of the node that lands between them and the write makes the
	// store read again and check again.
	err = store.GuaranteedUpdate(ctx, key, store.New(), true, nil, func(input runtime.Object, res storage.ResponseMeta) (runtime.Object, *uint64, error) {
		hold := held()
		if hold == heldWhole {
			op = opUnchanged
			return nil, nil, errUnchanged
		}
		if res.ResourceVersion == 0 {
			if how.answer && !how.mayCreate {
				op = opUnchanged
				return nil, nil, errUnchanged
			}
			if err := creatable(); err != nil {
				return nil, nil, err
			}
			op = opCreated
			return obj.DeepCopyObject(), nil, nil
		}
		cur, err := meta.Accessor(input)
		if err != nil {
			return nil, nil, err
		}
		if cur.GetUID() != a.GetUID() {
			if m.mirroredBy(store, input) == nil {
				if how.answer {
					return nil, nil, fmt.Errorf("%w: %s %s exists locally and no rule mirrored it", errLocalObject, r.gr, key)
				}
				// A local object of the same name: the upstream's takes
				// its place, in one write (a delete first would have
				// kubestore's own controllers create a replaceable one
				// again). The cluster's pods that reference the name
				// mean the cluster's object, never a local one.
				if cur.GetAnnotations()[mirrored.AnnotationReplaceable] == "" {
					replacedLocal.WithLabelValues(r.base).Inc()
					klog.InfoS("Mirror: an upstream object replaced a local object of the same name", "rule", r.name,
						"resource", r.gr, "namespace", a.GetNamespace(), "name", a.GetName(), "localUID", cur.GetUID())
				}
				op = opUpdated
				return obj.DeepCopyObject(), nil, nil
			}
			if how.answer && !how.mayCreate {
				op = opUnchanged
				return nil, nil, errUnchanged
			}
			// Deleted and created again upstream while the link was
			// down (or created by the node while offline, and now by the
			// upstream): the local copy goes the same way.
			op = opRecreated
			return nil, nil, errRecreated
		}
		// Over the node's pending writes, a copy of the same upstream
		// resourceVersion is written too: the cluster's changes stored
		// around them carried it, not the cluster's owned part. An older
		// one is not, as anywhere.
		have := cur.GetAnnotations()[mirrored.AnnotationUpstreamResourceVersion]
		stale := !newer(upstreamRV, have)
		if how.overPending {
			stale = newer(have, upstreamRV)
		}
		if have != "" && cur.GetAnnotations()[mirrored.AnnotationRule] == r.name && stale && cur.GetAnnotations()[mirrored.AnnotationView] == view {
			op = opUnchanged
			return nil, nil, errUnchanged
		}
		op = opUpdated
		if hold == heldOwned {
			// The cluster's change, around the node's pending write.
			out, err := withOwnedPart(r.gr, obj, input)
			return out, nil, err
		}
		return obj.DeepCopyObject(), nil, nil
	}, nil)
	switch {
	case errors.Is(err, errUnchanged):
		applied.WithLabelValues(r.base, opUnchanged).Inc()
		return opUnchanged, nil
	case errors.As(err, new(errNamespaceTerminating)):
		applied.WithLabelValues(r.base, opDeferred).Inc()
		return opDeferred, nil
	case errors.Is(err, errRecreated):
		if _, err := m.remove(ctx, r, store, a.GetNamespace(), a.GetName(), "", true); err != nil {
			return "", err
		}
		how.absent = false
		return m.applyObject(ctx, r, store, u, how)
	case err != nil:
		return "", localError{fmt.Errorf("storing %s %s: %w", r.gr, key, err)}
	}
	applied.WithLabelValues(r.base, op).Inc()
	m.refs.changed(r, obj)
	return op, nil
}

// withOwnedPart is obj with the part of it the node writes (ownedPart)
// taken from local.
func withOwnedPart(gr schema.GroupResource, obj, local runtime.Object) (runtime.Object, error) {
	o, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	l, err := runtime.DefaultUnstructuredConverter.ToUnstructured(local)
	if err != nil {
		return nil, err
	}
	part := ownedPart(gr)
	if v, ok := l[part]; ok {
		o[part] = v
	} else {
		delete(o, part)
	}
	out := obj.DeepCopyObject()
	return out, runtime.DefaultUnstructuredConverter.FromUnstructured(o, out)
}

var errRecreated = errors.New("recreated upstream")

// skippedError is an upstream object the local store cannot take (it does
// not convert to the served type): its stream skips it and goes on.
type skippedError struct{ error }

func (e skippedError) Unwrap() error { return e.error }

// errLocalObject refuses to store the answer to a forwarded write over a
// local object of the same name.
var errLocalObject = errors.New("not mirrored over a local object")

// remove deletes the local copy of namespace/name if rule r mirrored it
// (or any rule, when anyRule; never a local object) and, when upstreamRV is set, it is not newer
// than that deletion. It reports whether it deleted.
func (m *Mirror) remove(ctx context.Context, r *rule, store *Store, namespace, name, upstreamRV string, anyRule bool) (bool, error) {
	out := store.New()
	err := store.Delete(ctx, store.Key(namespace, name), out, nil, func(_ context.Context, obj runtime.Object) error {
		a, err := meta.Accessor(obj)
		if err != nil {
			return err
		}
		ann := a.GetAnnotations()
		// A local object (no rule's) is never the mirror's to delete.
		if owner := ann[mirrored.AnnotationRule]; owner == "" || !anyRule && !r.owns(store, owner, obj) {
			return errUnchanged
		}
		if have := ann[mirrored.AnnotationUpstreamResourceVersion]; upstreamRV != "" && have != "" && newer(have, upstreamRV) {
			return errUnchanged
		}
		return nil
	}, nil, storage.DeleteOptions{})
	switch {
	case storage.IsNotFound(err) || errors.Is(err, errUnchanged):
		return false, nil
	case err != nil:
		return false, localError{fmt.Errorf("deleting %s %s/%s: %w", r.gr, namespace, name, err)}
	}
	applied.WithLabelValues(r.base, opDeleted).Inc()
	m.refs.changed(r, deletedObject{out})
	return true, nil
}

// deletedObject marks an object refs should forget.
type deletedObject struct{ runtime.Object }

func refOf(a metav1.Object) localRef {
	return localRef{a.GetNamespace(), a.GetName(), string(a.GetUID()), a.GetAnnotations()[mirrored.AnnotationUpstreamResourceVersion]}
}

// localObjects are the local copies rule r mirrored in namespace (all when
// ""), or the one named name, by "namespace/name".
func (m *Mirror) localObjects(ctx context.Context, r *rule, store *Store, namespace, name string) (map[string]localRef, error) {
	out := map[string]localRef{}
	if name != "" {
		obj := store.New()
		err := store.Get(ctx, store.Key(namespace, name), storage.GetOptions{}, obj)
		if storage.IsNotFound(err) {
			return out, nil
		}
		if err != nil {
			return nil, localError{err}
		}
		if a, err := meta.Accessor(obj); err == nil && r.owns(store, a.GetAnnotations()[mirrored.AnnotationRule], obj) {
			out[a.GetNamespace()+"/"+a.GetName()] = refOf(a)
		}
		return out, nil
	}
	prefix := store.Prefix + "/"
	if namespace != "" && store.Namespaced {
		prefix += namespace + "/"
	}
	list := store.NewList()
	if err := store.GetList(ctx, prefix, storage.ListOptions{Recursive: true, Predicate: storage.Everything}, list); err != nil {
		return nil, localError{fmt.Errorf("listing local %s: %w", r.gr, err)}
	}
	err := meta.EachListItem(list, func(obj runtime.Object) error {
		a, err := meta.Accessor(obj)
		if err != nil {
			return err
		}
		if r.owns(store, a.GetAnnotations()[mirrored.AnnotationRule], obj) {
			out[a.GetNamespace()+"/"+a.GetName()] = refOf(a)
		}
		return nil
	})
	return out, err
}

// formerCopies are the copies of shared rule r that its former selectors
// (a stream's record, "label|field") selected, for the relist after the
// configuration changed them: a copy is a shared rule's only in its
// selection (owns), so without this the copies the new selectors leave
// out would stay. None when another gateway of the site runs a rule of
// r's name: they may be its.
// It returns them with the rule as it selected then, which owns them.
func (m *Mirror) formerCopies(ctx context.Context, r *rule, store *Store, namespace, former string) (map[string]localRef, *rule, error) {
	others, err := m.othersShared(ctx)
	if err != nil || others[r.name] {
		return nil, nil, err
	}
	label, field, _ := strings.Cut(former, "|")
	old := *r
	if old.labels, err = labels.Parse(label); err != nil {
		return nil, nil, nil
	}
	if old.fields, err = fields.ParseSelector(field); err != nil {
		return nil, nil, nil
	}
	copies, err := m.localObjects(ctx, &old, store, namespace, "")
	return copies, &old, err
}

// namespaceForCopy makes sure a copy can be created in namespace ns: it
// creates the namespace, as a local object, unless it exists (local
// agents write their own objects, Events and Leases, next to the mirrored
// ones, and the namespace lifecycle refuses writes in a namespace that
// does not exist), and refuses while it is terminating: a copy created
// there would wait for the upstream to delete it, which keeps the
// namespace terminating (namespaces' controller never deletes a copy), and
// before that rule a pod's copy was deleted with it and the kubelet's
// final delete of it forwarded to the cluster. The namespace is read each
// time: one read of etcd per copy created, never per update.
func (m *Mirror) namespaceForCopy(ctx context.Context, ns string) error {
	if ns == "" {
		return nil
	}
	store, err := m.stores.Store(ctx, namespaces)
	if err != nil {
		return err
	}
	key := store.Key("", ns)
	cur := store.New()
	err = store.Get(ctx, key, storage.GetOptions{}, cur)
	if err == nil {
		if a, aerr := meta.Accessor(cur); aerr == nil && a.GetDeletionTimestamp() != nil {
			return errNamespaceTerminating{ns}
		}
		return nil
	}
	if !storage.IsNotFound(err) {
		return fmt.Errorf("reading namespace %s: %w", ns, err)
	}
	obj := &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{Name: ns, UID: uuid.NewUUID(), CreationTimestamp: metav1.Now(),
			Labels: map[string]string{corev1.LabelMetadataName: ns}},
		Spec:   corev1.NamespaceSpec{Finalizers: []corev1.FinalizerName{corev1.FinalizerKubernetes}},
		Status: corev1.NamespaceStatus{Phase: corev1.NamespaceActive},
	}
	err = store.Create(ctx, key, obj, nil, 0)
	if storage.IsExist(err) {
		// Created meanwhile (another gateway of the site): checked again.
		return m.namespaceForCopy(ctx, ns)
	}
	if err != nil {
		return fmt.Errorf("creating namespace %s: %w", ns, err)
	}
	klog.InfoS("Mirror: created the namespace of mirrored objects", "namespace", ns)
	return nil
}

// deletedFor is how long the uid of an object the upstream deleted is
// remembered; maxDeleted bounds how many are.
const (
	deletedFor = 30 * time.Minute
	maxDeleted = 10000
)

// deletedUIDs are the uids of objects the upstream deleted. A uid is never
// reused, so an object that carries one is a late copy (an answer, a
// relist page or an event racing the deletion) and is not applied: the
// edge never brings back what the upstream deleted.
type deletedUIDs struct {
	mu sync.Mutex
	at map[types.UID]time.Time
}

func (d *deletedUIDs) add(uid types.UID) { d.addAt(uid, time.Now()) }

// addAt remembers uid as deleted at when.
func (d *deletedUIDs) addAt(uid types.UID, when time.Time) {
	if uid == "" {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.at == nil {
		d.at = map[types.UID]time.Time{}
	}
	now := time.Now()
	if len(d.at) >= maxDeleted {
		oldest, first := types.UID(""), now
		for u, t := range d.at {
			if now.Sub(t) > deletedFor {
				delete(d.at, u)
			} else if t.Before(first) {
				oldest, first = u, t
			}
		}
		if len(d.at) >= maxDeleted {
			delete(d.at, oldest)
		}
	}
	d.at[uid] = when
}

func (d *deletedUIDs) has(uid types.UID) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	t, ok := d.at[uid]
	return ok && time.Since(t) <= deletedFor
}

// deletedState names the uids of deleted objects in the mirror's state.
var deletedState = family.MirrorDeleted.Start()

// deletedUpstream remembers uid as deleted upstream, durably: its local
// copy went without the stream's checkpoint passing the deletion (a
// forwarded or replayed delete), so a restart replays the stream from
// before it, and its events of the object must not bring it back.
func (m *Mirror) deletedUpstream(ctx context.Context, uid types.UID) {
	m.deleted.add(uid)
	data, _ := json.Marshal(time.Now())
	if err := m.state.PutState(ctx, deletedState+string(uid), data); err != nil {
		klog.V(2).InfoS("Mirror: recording a deleted uid", "uid", uid, "err", err)
	}
}

// loadDeleted reads the uids of deleted objects a previous run recorded,
// and deletes the records older than deletedFor. It runs at the start and
// every deletedFor.
func (m *Mirror) loadDeleted(ctx context.Context) {
	recs, err := m.state.ListState(ctx, deletedState)
	if err != nil {
		klog.V(2).InfoS("Mirror: reading the deleted uids", "err", err)
		return
	}
	for key, data := range recs {
		var at time.Time
		if json.Unmarshal(data, &at) != nil || time.Since(at) > deletedFor {
			if err := m.state.DeleteState(ctx, key); err != nil {
				klog.V(2).InfoS("Mirror: forgetting a deleted uid", "key", key, "err", err)
			}
			continue
		}
		m.deleted.addAt(types.UID(strings.TrimPrefix(key, deletedState)), at)
	}
}
