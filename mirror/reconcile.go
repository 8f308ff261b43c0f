package mirror

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/apiserver/pkg/storage"
	"k8s.io/client-go/dynamic"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
)

// reconcileEvery is how often pending writes are tried while the link is
// up; they are tried at once when it comes up.
const reconcileEvery = 5 * time.Second

// Outcomes of reconciling a pending write.
const (
	reconciledPushed = "pushed"
	// reconciledGone: the object is gone upstream; reconciledRecreated:
	// deleted and created again upstream (another uid): the node's
	// writes were to the object that went, and are dropped.
	reconciledGone      = "gone"
	reconciledRecreated = "recreated"
	reconciledRefused   = "refused"
)

// reconcileTimeout bounds the upstream requests of one record's
// reconciliation, as forwardTimeout bounds a forwarded write.
const reconcileTimeout = 2 * forwardTimeout

// reconcileLoop reconciles the pending writes whenever the link comes up,
// and every reconcileEvery while some are pending, until ctx ends.
func (u *uplink) reconcileLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-u.linkComesUp():
			u.pending.retryAll()
		case <-time.After(reconcileEvery):
		}
		if u.Connected() {
			u.reconcile(ctx)
		}
	}
}

// reconcile sends each pending write that is due to the upstream, oldest
// first. A record the upstream cannot take now (a 5xx, a timeout) is held
// back with a growing wait while the others go on; only a failure to
// reach the upstream at all (refused, reset) stops the round, and marks
// the link down.
func (u *uplink) reconcile(ctx context.Context) {
	now := time.Now()
	for _, rec := range u.pending.all() {
		if ctx.Err() != nil || !u.Connected() {
			return
		}
		if !u.pending.due(rec, now) {
			continue
		}
		if err := u.reconcileRecord(ctx, rec); err != nil && unreachable(err) {
			u.reached(err)
			return
		}
	}
}

// reconcileRecord reconciles the pending writes of rec's object now. A
// write of the node to the object forwarded while the record is pending
// calls it first, so that the upstream gets the node's writes in their
// order. It returns the error of a reconciliation to try again.
func (u *uplink) reconcileRecord(ctx context.Context, rec pendingRecord) error {
	unlock := u.pending.lock(rec)
	defer unlock()
	rec, ok := u.pending.get(rec.gr(), rec.Namespace, rec.Name)
	if !ok {
		return nil
	}
	u.pending.begin(rec)
	outcome, err := u.reconcileOne(ctx, rec)
	if err != nil {
		if retryable(err) {
			wait, quarantine := u.pending.failed(rec, answered(err))
			klog.V(2).InfoS("Mirror: the upstream cannot take the node's offline write yet", "resource", rec.Resource,
				"namespace", rec.Namespace, "name", rec.Name, "err", err, "retryIn", wait)
			if quarantine {
				u.quarantine(ctx, rec, err)
			}
			return err
		}
		klog.InfoS("Mirror: the upstream refused the node's offline write; its state stands", "resource", rec.Resource,
			"namespace", rec.Namespace, "name", rec.Name, "err", err)
		outcome = reconciledRefused
		if err := u.refetch(ctx, rec); err != nil {
			u.pending.failed(rec, false)
			klog.V(2).InfoS("Mirror: reading the upstream's state after a refusal", "resource", rec.Resource, "name", rec.Name, "err", err)
			return err
		}
	}
	cleared, err := u.pending.clear(ctx, rec)
	if err != nil {
		klog.V(2).InfoS("Mirror: clearing a reconciled write", "resource", rec.Resource, "name", rec.Name, "err", err)
		return localError{err}
	}
	if cleared {
		reconciled.WithLabelValues(outcome).Inc()
		klog.V(2).InfoS("Mirror: reconciled the node's offline write", "resource", rec.Resource, "namespace", rec.Namespace,
			"name", rec.Name, "writes", rec.Writes, "outcome", outcome, "pendingFor", time.Since(rec.Since).Round(time.Second))
	}
	return nil
}

// quarantine sets rec aside, failed by the upstream for quarantineAfter
// (the last time with err), with the owned part the node left: its
// object follows the cluster again, and the record is tried every
// retryMax.
func (u *uplink) quarantine(ctx context.Context, rec pendingRecord, err error) {
	owned := rec.Final
	if store, serr := u.stores.Store(ctx, rec.gr()); serr == nil {
		if _, lu, lerr := u.localCopy(ctx, store, rec); lerr == nil && lu != nil {
			owned, _ = json.Marshal(lu[ownedPart(rec.gr())])
		}
	}
	if owned == nil {
		owned = json.RawMessage("null")
	}
	if qerr := u.pending.quarantine(ctx, rec, owned); qerr != nil {
		klog.V(2).InfoS("Mirror: quarantining a pending write", "resource", rec.Resource, "name", rec.Name, "err", qerr)
		return
	}
	klog.InfoS("Mirror: the upstream keeps failing the node's offline write; quarantined: the object follows the cluster again, and the write is tried every few minutes",
		"resource", rec.Resource, "namespace", rec.Namespace, "name", rec.Name, "failingFor", quarantineAfter, "err", err)
	if err := u.refetch(ctx, rec); err != nil {
		// The stream brings the cluster's state at its next change.
		klog.V(2).InfoS("Mirror: reading the upstream's state of a quarantined write's object", "resource", rec.Resource, "name", rec.Name, "err", err)
	}
}

// answered reports whether the upstream answered a failed reconciliation
// (a 5xx, a 429, a conflict at every try), which counts towards its
// quarantine; a link that failed it (refused, timed out) says nothing of
// the record.
func answered(err error) bool {
	code := statusCode(err)
	return code >= http.StatusInternalServerError || code == http.StatusTooManyRequests || apierrors.IsConflict(err)
}

// retryable reports whether a reconciliation that failed with err may
// succeed later: the upstream was not reached, was slow or could not
// serve, the local store failed, or the object changed at every try;
// anything else is the upstream's refusal.
func retryable(err error) bool {
	code := statusCode(err)
	return code == 0 || code >= http.StatusInternalServerError || code == http.StatusTooManyRequests ||
		apierrors.IsConflict(err) || errors.As(err, new(localError))
}

// unreachable reports whether err says the upstream was not reached at
// all: a connection refused, reset or broken. A request that timed out or
// was answered with an error says nothing of the link: the probe and the
// connections' pings judge it.
func unreachable(err error) bool {
	return statusCode(err) == 0 && !errors.Is(err, context.DeadlineExceeded) && !errors.As(err, new(localError)) &&
		!errors.Is(err, errOwnerNotYet) && isNetworkError(err)
}

func statusCode(err error) int {
	if s, ok := err.(apierrors.APIStatus); ok {
		return int(s.Status().Code)
	}
	return 0
}

// upstreamClient is the upstream's client of the object of rec.
func (u *uplink) upstreamClient(store *Store, namespace string) dynamic.ResourceInterface {
	r := u.dyn.Resource(store.GVR)
	if store.Namespaced {
		return r.Namespace(namespace)
	}
	return r
}

// reconcileOne sends one pending record. What the node changed in the part
// of the object it writes (ownedPart), the difference between the record's
// base and the local copy, is sent as a strategic merge patch onto the
// cluster's current object, as the kubelet patches its Node's and pods'
// status: every field the node did not change stays the cluster's (a
// Node's volumesAttached, a pod's DisruptionTarget), and a field both
// changed takes the node's value. Each try reads both sides again. A final
// delete follows the terminal status written before it.
func (u *uplink) reconcileOne(ctx context.Context, rec pendingRecord) (string, error) {
	r := u.down.rule(rec.Rule)
	if r == nil {
		return reconciledGone, nil
	}
	store, err := u.stores.Store(ctx, rec.gr())
	if err != nil {
		return "", localError{err}
	}
	ctx, cancel := context.WithTimeout(ctx, reconcileTimeout)
	defer cancel()
	up := u.upstreamClient(store, rec.Namespace)
	if rec.has(ownDelete) {
		return u.reconcileFinalDelete(ctx, r, store, up, rec)
	}
	created := rec.has(ownCreate)
	for range 5 {
		local, lu, err := u.localCopy(ctx, store, rec)
		if err != nil {
			return "", err
		}
		var owned any
		switch {
		case rec.Quarantined:
			// The local copy follows the cluster: what the node wrote is
			// the record's.
			if err := json.Unmarshal(rec.Owned, &owned); err != nil {
				return "", localError{err}
			}
		case local == nil:
			// Gone locally (the upstream deleted it): whatever the
			// upstream has of the name now is fetched, not left to a
			// change of it.
			return reconciledGone, u.refetch(ctx, rec)
		default:
			owned = lu[ownedPart(rec.gr())]
		}
		cur, err := up.Get(ctx, rec.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			if !created {
				return reconciledGone, u.refetch(ctx, rec)
			}
			obj := forUpstream(lu, store)
			if err := u.upstreamOwners(ctx, obj); err != nil {
				return "", err
			}
			answer, err := up.Create(ctx, obj, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				continue
			}
			if err != nil {
				return "", err
			}
			return reconciledPushed, u.applyReconciled(ctx, r, store, answer, true)
		}
		if err != nil {
			return "", err
		}
		// The object the node wrote: its record's (a record of a
		// release before it kept the uid is the local copy's).
		wrote := types.UID(rec.UID)
		if wrote == "" && local != nil {
			wrote = local.GetUID()
		}
		if !created && cur.GetUID() != wrote {
			// Deleted and created again upstream: the node wrote to the
			// object that went. The new one stands, and replaces the
			// local copy.
			return reconciledRecreated, u.applyReconciled(ctx, r, store, cur, true)
		}
		var base json.RawMessage
		if !created {
			base = rec.Base
		}
		patch, err := nodePatch(store, rec, base, owned, cur)
		if err != nil {
			return "", err
		}
		answer := cur
		if patch != nil {
			answer, err = up.Patch(ctx, rec.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, rec.kind().subresources()...)
			if apierrors.IsConflict(err) {
				continue
			}
			if err != nil {
				return "", err
			}
		}
		return reconciledPushed, u.applyReconciled(ctx, r, store, answer, created)
	}
	return "", apierrors.NewConflict(rec.gr(), rec.Name, fmt.Errorf("changed upstream at every one of 5 tries"))
}

// reconcileFinalDelete replays a pod's final delete, as the kubelet makes
// it (grace 0, the pod's uid as precondition), after the status the node
// wrote before it: a Job counts the pod by the phase it ended in.
func (u *uplink) reconcileFinalDelete(ctx context.Context, r *rule, store *Store, up dynamic.ResourceInterface, rec pendingRecord) (string, error) {
	if rec.has(ownStatus) {
		status := rec.Final
		if rec.Quarantined {
			status = rec.Owned
		} else if local, lu, err := u.localCopy(ctx, store, rec); err != nil {
			return "", err
		} else if lu != nil && string(local.GetUID()) == rec.UID {
			// Still there locally (a finalizer holds it): its status is
			// the latest.
			if status, err = json.Marshal(lu[ownedPart(rec.gr())]); err != nil {
				return "", err
			}
		}
		var owned any
		if err := json.Unmarshal(status, &owned); err != nil {
			return "", localError{err}
		}
		cur, err := up.Get(ctx, rec.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return reconciledGone, u.refetch(ctx, rec)
		case err != nil:
			return "", err
		case string(cur.GetUID()) != rec.UID:
			return reconciledRecreated, u.applyReconciled(ctx, r, store, cur, true)
		}
		patch, err := nodePatch(store, rec, rec.Base, owned, cur)
		if err != nil {
			return "", err
		}
		if patch != nil {
			_, err := up.Patch(ctx, rec.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, rec.kind().subresources()...)
			if err != nil && !apierrors.IsNotFound(err) && retryable(err) {
				return "", err
			}
			if err != nil {
				klog.InfoS("Mirror: the upstream refused the terminal status of a pod the node deleted; the delete goes on", "namespace", rec.Namespace, "name", rec.Name, "err", err)
			}
		}
	}
	err := up.Delete(ctx, rec.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0),
		Preconditions: &metav1.Preconditions{UID: ptr.To(types.UID(rec.UID))}})
	outcome := reconciledPushed
	switch {
	case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
		// Gone already, or another pod of that name.
		outcome = reconciledGone
	case err != nil:
		return "", err
	}
	// Gone, or held by a finalizer upstream: the local copy follows.
	cur, err := up.Get(ctx, rec.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err) || err == nil && string(cur.GetUID()) != rec.UID:
		u.down.deletedUpstream(ctx, types.UID(rec.UID))
		return outcome, nil
	case err != nil:
		return "", err
	}
	return outcome, u.applyReconciled(ctx, r, store, cur, false)
}

// localCopy is the local copy of rec's object, typed and as a map; nil when
// there is none.
func (u *uplink) localCopy(ctx context.Context, store *Store, rec pendingRecord) (metav1.Object, map[string]any, error) {
	local := store.New()
	if err := store.Get(ctx, store.Key(rec.Namespace, rec.Name), storage.GetOptions{}, local); err != nil {
		if storage.IsNotFound(err) {
			return nil, nil, nil
		}
		return nil, nil, localError{err}
	}
	la, err := meta.Accessor(local)
	if err != nil {
		return nil, nil, localError{err}
	}
	lu, err := runtime.DefaultUnstructuredConverter.ToUnstructured(local)
	if err != nil {
		return nil, nil, localError{err}
	}
	return la, lu, nil
}

// basePart is the owned part of obj, as a record's base.
func basePart(gr schema.GroupResource, obj runtime.Object) (json.RawMessage, error) {
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	data, err := json.Marshal(u[ownedPart(gr)])
	return data, err
}

// wholeConditions makes each condition the patch changes the node's whole
// condition of that type, as the edge holds it: a condition is the
// node's report (the kubelet's Ready, a pod's Ready), and a field of it
// alone (a newer heartbeat) merged onto the cluster's (Unknown, written by
// the node-lifecycle controller while the node was away) would say
// neither's.
func wholeConditions(patch map[string]any, owned any) {
	part, _ := patch["status"].(map[string]any)
	local, _ := owned.(map[string]any)
	changed, _ := part["conditions"].([]any)
	all, _ := local["conditions"].([]any)
	for i, c := range changed {
		cm, ok := c.(map[string]any)
		if !ok || cm["type"] == nil || cm["$patch"] != nil {
			continue
		}
		for _, l := range all {
			if lm, ok := l.(map[string]any); ok && lm["type"] == cm["type"] {
				changed[i] = lm
			}
		}
	}
}

// reassertConditions adds to the patch each condition the kubelet reports
// that the cluster holds otherwise than the node does: the node-lifecycle
// controller marks a node Unknown and its pods not Ready while it is away,
// and the node's view when it is back is the truth (the kubelet would
// write it again at its next status sync, seconds later). A condition of
// another writer (DisruptionTarget) stays the cluster's.
func reassertConditions(k *ownedKind, patch map[string]any, owned any, cur *unstructured.Unstructured) {
	var types []string
	if k != nil {
		types = k.conditions
	}
	local, _ := owned.(map[string]any)
	mine, _ := local["conditions"].([]any)
	theirs, _, _ := unstructured.NestedSlice(cur.Object, "status", "conditions")
	byType := func(list []any, t string) map[string]any {
		for _, c := range list {
			if m, ok := c.(map[string]any); ok && m["type"] == t {
				return m
			}
		}
		return nil
	}
	for _, t := range types {
		m := byType(mine, t)
		if m == nil {
			continue
		}
		if c := byType(theirs, t); c != nil && c["status"] == m["status"] && c["reason"] == m["reason"] {
			continue
		}
		part, _ := patch["status"].(map[string]any)
		if part == nil {
			part = map[string]any{}
			patch["status"] = part
		}
		list, _ := part["conditions"].([]any)
		if byType(list, t) != nil {
			continue
		}
		part["conditions"] = append(list, m)
		if order, ok := part["$setElementOrder/conditions"].([]any); ok && byType(order, t) == nil {
			part["$setElementOrder/conditions"] = append(order, map[string]any{"type": t})
		}
	}
	if part, ok := patch["status"].(map[string]any); ok {
		inSetElementOrder(part)
	}
}

// inSetElementOrder sorts part's conditions in the order its
// $setElementOrder/conditions gives: the apiserver refuses a patch whose
// list is in another (strategicpatch: "doesn't match $setElementOrder
// list"), and a condition reasserted was appended after those changed.
func inSetElementOrder(part map[string]any) {
	order, _ := part["$setElementOrder/conditions"].([]any)
	list, _ := part["conditions"].([]any)
	at := func(c any) int {
		m, _ := c.(map[string]any)
		for i, o := range order {
			if om, ok := o.(map[string]any); ok && m != nil && om["type"] == m["type"] {
				return i
			}
		}
		return len(order) // a directive ($patch: delete) goes after
	}
	slices.SortStableFunc(list, func(a, b any) int { return at(a) - at(b) })
}

// nodePatch is the strategic merge patch of what the node changed in the
// owned part, from base (nil: nothing, for an object it created) to
// owned, onto cur: with cur's uid and resourceVersion as preconditions, so
// the patch lands on the object read or conflicts. A Lease's renewal is
// not replayed: the kubelet renews it once online, and a renewal replayed
// late says the node was alive when it no longer is. Nil when the node
// changed nothing.
func nodePatch(store *Store, rec pendingRecord, base json.RawMessage, owned any, cur *unstructured.Unstructured) ([]byte, error) {
	part := ownedPart(rec.gr())
	original := []byte("{}")
	if len(base) > 0 && string(base) != "null" {
		original = []byte(`{"` + part + `":` + string(base) + `}`)
	}
	modified, err := json.Marshal(map[string]any{part: owned})
	if err != nil {
		return nil, err
	}
	diff, err := strategicpatch.CreateTwoWayMergePatch(original, modified, store.New())
	if err != nil {
		return nil, localError{fmt.Errorf("the node's changes to %s %s: %w", rec.Resource, rec.Name, err)}
	}
	var patch map[string]any
	if err := json.Unmarshal(diff, &patch); err != nil {
		return nil, err
	}
	wholeConditions(patch, owned)
	reassertConditions(rec.kind(), patch, owned, cur)
	if k := rec.kind(); k != nil && !rec.has(ownCreate) {
		for _, field := range k.notReplayed {
			unstructured.RemoveNestedField(patch, field...)
			if p, ok := patch[field[0]].(map[string]any); ok && len(p) == 0 {
				delete(patch, field[0])
			}
		}
	}
	if len(patch) == 0 {
		return nil, nil
	}
	patch["metadata"] = map[string]any{"uid": string(cur.GetUID()), "resourceVersion": cur.GetResourceVersion()}
	return json.Marshal(patch)
}

// applyReconciled stores the upstream's answer to a reconciled write over
// the pending local copy.
func (u *uplink) applyReconciled(ctx context.Context, r *rule, store *Store, answer *unstructured.Unstructured, mayCreate bool) error {
	_, err := u.down.applyObject(ctx, r, store, answer, applyHow{answer: true, mayCreate: mayCreate, overPending: true})
	return err
}

// refetch stores the upstream's state of rec's object over the local copy,
// after the upstream refused the node's write.
func (u *uplink) refetch(ctx context.Context, rec pendingRecord) error {
	r := u.down.rule(rec.Rule)
	if r == nil {
		return nil
	}
	store, err := u.stores.Store(ctx, rec.gr())
	if err != nil {
		return err
	}
	cur, err := u.upstreamClient(store, rec.Namespace).Get(ctx, rec.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = u.down.remove(ctx, r, store, rec.Namespace, rec.Name, "", false)
		return err
	}
	if err != nil {
		return err
	}
	_, err = u.down.applyObject(ctx, r, store, cur, applyHow{overPending: true})
	return err
}

// errOwnerNotYet holds back the create of an object whose owner the node
// also created offline, until the owner is created upstream.
var errOwnerNotYet = errors.New("its owner is not created upstream yet")

// upstreamOwners names the owners of u, an object the node created
// offline, by their upstream uid. Its Lease and CSINode are owned by its
// Node, which the edge knew offline by the uid it gave it: the cluster's
// garbage collector deletes an object whose owner's uid it does not know.
func (u *uplink) upstreamOwners(ctx context.Context, obj *unstructured.Unstructured) error {
	refs := obj.GetOwnerReferences()
	for i, ref := range refs {
		if ref.APIVersion != "v1" || ref.Kind != "Node" {
			continue
		}
		owner, err := u.dyn.Resource(corev1.SchemeGroupVersion.WithResource("nodes")).Get(ctx, ref.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("%w: Node %s", errOwnerNotYet, ref.Name)
		}
		if err != nil {
			return err
		}
		refs[i].UID = owner.GetUID()
	}
	if len(refs) > 0 {
		obj.SetOwnerReferences(refs)
	}
	return nil
}

// forUpstream is a local object as the upstream takes it in a create: its
// kind, without the local identity, revision and the mirror's annotations.
func forUpstream(local map[string]any, store *Store) *unstructured.Unstructured {
	u := (&unstructured.Unstructured{Object: local}).DeepCopy()
	u.SetGroupVersionKind(store.GVK)
	for _, f := range []string{"uid", "resourceVersion", "creationTimestamp", "generation", "managedFields", "selfLink"} {
		unstructured.RemoveNestedField(u.Object, "metadata", f)
	}
	stripAnnotations(u.Object)
	if len(u.GetAnnotations()) == 0 {
		unstructured.RemoveNestedField(u.Object, "metadata", "annotations")
	}
	return u
}
