package mirror

import (
	"context"
	"fmt"
	"net/http"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
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
	reconciledPushed  = "pushed"
	reconciledGone    = "gone"
	reconciledRefused = "refused"
)

// reconcileLoop reconciles the pending writes whenever the link comes up,
// and every reconcileEvery while some are pending, until ctx ends.
func (m *Mirror) reconcileLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-m.linkComesUp():
		case <-time.After(reconcileEvery):
		}
		if m.Connected() {
			m.reconcile(ctx)
		}
	}
}

// reconcile sends each pending write to the upstream once, with the
// object's latest local state, oldest first. It stops at the first write
// the upstream cannot take now (not reachable, or a 5xx): the rest wait for
// the next try. A write the upstream refuses (a 4xx) is dropped, and the
// local copy takes the upstream's state.
func (m *Mirror) reconcile(ctx context.Context) {
	for _, rec := range m.pending.all() {
		if ctx.Err() != nil || !m.Connected() {
			return
		}
		m.pending.begin(rec)
		outcome, err := m.reconcileOne(ctx, rec)
		if err != nil {
			if isNetworkError(err) || statusCode(err) >= http.StatusInternalServerError {
				m.reached(err)
				klog.V(2).InfoS("Mirror: the upstream cannot take the node's offline write yet", "resource", rec.Resource,
					"namespace", rec.Namespace, "name", rec.Name, "err", err)
				return
			}
			klog.InfoS("Mirror: the upstream refused the node's offline write; its state stands", "resource", rec.Resource,
				"namespace", rec.Namespace, "name", rec.Name, "err", err)
			outcome = reconciledRefused
			if err := m.refetch(ctx, rec); err != nil {
				klog.V(2).InfoS("Mirror: reading the upstream's state after a refusal", "resource", rec.Resource, "name", rec.Name, "err", err)
				return
			}
		}
		cleared, err := m.pending.clear(ctx, rec)
		if err != nil {
			klog.V(2).InfoS("Mirror: clearing a reconciled write", "resource", rec.Resource, "name", rec.Name, "err", err)
			return
		}
		if cleared {
			reconciled.WithLabelValues(outcome).Inc()
			klog.V(2).InfoS("Mirror: reconciled the node's offline write", "resource", rec.Resource, "namespace", rec.Namespace,
				"name", rec.Name, "writes", rec.Writes, "outcome", outcome, "pendingFor", time.Since(rec.Since).Round(time.Second))
		}
	}
}

func statusCode(err error) int {
	if s, ok := err.(apierrors.APIStatus); ok {
		return int(s.Status().Code)
	}
	return 0
}

// upstreamClient is the upstream's client of the object of rec.
func (m *Mirror) upstreamClient(store *Store, namespace string) dynamic.ResourceInterface {
	r := m.dyn.Resource(store.GVR)
	if store.Namespaced {
		return r.Namespace(namespace)
	}
	return r
}

// reconcileOne sends one pending write. The node's fields win: the status
// of its Node and pods, the whole of its Lease and CSINode; the upstream's
// spec and metadata stay. A final delete is replayed.
func (m *Mirror) reconcileOne(ctx context.Context, rec pendingRecord) (string, error) {
	r := m.rule(rec.Rule)
	if r == nil {
		return reconciledGone, nil
	}
	store, err := m.stores.Store(ctx, rec.gr())
	if err != nil {
		return "", localError{err}
	}
	up := m.upstreamClient(store, rec.Namespace)
	if rec.has(ownDelete) {
		err := up.Delete(ctx, rec.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0),
			Preconditions: &metav1.Preconditions{UID: ptr.To(types.UID(rec.UID))}})
		switch {
		case err == nil:
			m.deleted.add(types.UID(rec.UID))
			return reconciledPushed, nil
		case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
			// Gone already, or another pod of that name.
			m.deleted.add(types.UID(rec.UID))
			return reconciledGone, nil
		}
		return "", err
	}
	local := store.New()
	if err := store.Get(ctx, store.Key(rec.Namespace, rec.Name), storage.GetOptions{}, local); err != nil {
		if storage.IsNotFound(err) {
			return reconciledGone, nil
		}
		return "", localError{err}
	}
	la, err := meta.Accessor(local)
	if err != nil {
		return "", err
	}
	lu, err := runtime.DefaultUnstructuredConverter.ToUnstructured(local)
	if err != nil {
		return "", localError{err}
	}
	created := rec.has(ownCreate)
	for range 5 {
		cur, err := up.Get(ctx, rec.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			if !created {
				return reconciledGone, nil
			}
			answer, err := up.Create(ctx, forUpstream(lu, store), metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				continue
			}
			if err != nil {
				return "", err
			}
			return reconciledPushed, m.applyReconciled(ctx, r, store, answer, true)
		}
		if err != nil {
			return "", err
		}
		if cur.GetUID() != la.GetUID() && !created {
			// Deleted and created again upstream: its state stands.
			return reconciledGone, nil
		}
		var answer *unstructured.Unstructured
		if rec.has(ownStatus) || rec.gr() == nodesResource {
			cur.Object["status"] = lu["status"]
			answer, err = up.UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		} else {
			cur.Object["spec"] = lu["spec"]
			answer, err = up.Update(ctx, cur, metav1.UpdateOptions{})
		}
		if apierrors.IsConflict(err) {
			continue
		}
		if err != nil {
			return "", err
		}
		return reconciledPushed, m.applyReconciled(ctx, r, store, answer, created)
	}
	return "", apierrors.NewConflict(rec.gr(), rec.Name, fmt.Errorf("changed upstream at every one of 5 tries"))
}

// applyReconciled stores the upstream's answer to a reconciled write over
// the pending local copy.
func (m *Mirror) applyReconciled(ctx context.Context, r *rule, store *Store, answer *unstructured.Unstructured, mayCreate bool) error {
	_, err := m.applyObject(ctx, r, store, answer, applyHow{answer: true, mayCreate: mayCreate, overPending: true})
	return err
}

// refetch stores the upstream's state of rec's object over the local copy,
// after the upstream refused the node's write.
func (m *Mirror) refetch(ctx context.Context, rec pendingRecord) error {
	r := m.rule(rec.Rule)
	if r == nil {
		return nil
	}
	store, err := m.stores.Store(ctx, rec.gr())
	if err != nil {
		return err
	}
	cur, err := m.upstreamClient(store, rec.Namespace).Get(ctx, rec.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = m.remove(ctx, r, store, rec.Namespace, rec.Name, "", false)
		return err
	}
	if err != nil {
		return err
	}
	_, err = m.applyObject(ctx, r, store, cur, applyHow{overPending: true})
	return err
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
