package mirror

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/klog/v2"

	"github.com/kubestore/kubestore/mirrored"
)

// offline serves the write while the upstream is not reachable (cause, when
// known, says why): the node's own writes are applied locally and kept
// pending, to be reconciled once the link is back (a dry run of one is
// answered locally and kept nowhere); any other is refused.
func (wt *writeThrough) offline(cause error) {
	if wt.own == ownNotOwned {
		wt.refuse(cause)
		return
	}
	wt.r.Body, wt.r.ContentLength = io.NopCloser(bytes.NewReader(wt.body)), int64(len(wt.body))
	if wt.dryRun() {
		wt.next.ServeHTTP(wt.w, wt.r)
		return
	}
	ctx := wt.r.Context()
	rec := pendingRecord{Resource: wt.gr.String(), Namespace: wt.namespace(), Name: wt.info.Name, Rule: wt.rule.name}
	if wt.local != nil {
		rec.UID = string(wt.local.GetUID())
		base, err := basePart(wt.gr, wt.localObj)
		if err != nil {
			wt.fail(apierrors.NewInternalError(err), "")
			return
		}
		rec.Base = base
	} else {
		rec.Name = wt.created.GetName()
	}
	if wt.own == ownDelete {
		wt.finalDeleteOffline(rec)
		return
	}
	applied, err := wt.u.pending.record(ctx, rec, wt.own)
	if err != nil {
		wt.fail(apierrors.NewInternalError(fmt.Errorf("recording the node's write while the upstream %s is not reachable: %w", wt.u.host, err)), "")
		return
	}
	defer applied()
	pendingWrites.WithLabelValues(string(wt.own)).Inc()
	body := wt.body
	if wt.created != nil {
		// Created while offline, the object is the rule's from the
		// start: the stream and the relist leave it to the
		// reconciliation, which creates it upstream.
		obj := wt.created.DeepCopy()
		ann := obj.GetAnnotations()
		if ann == nil {
			ann = map[string]string{}
		}
		ann[mirrored.AnnotationRule] = wt.rule.name
		obj.SetAnnotations(ann)
		var err error
		if body, err = obj.MarshalJSON(); err != nil {
			wt.fail(apierrors.NewBadRequest(err.Error()), "")
			return
		}
		wt.r.Header.Set("Content-Type", runtime.ContentTypeJSON)
		wt.r = wt.r.WithContext(mirrored.WithCopyWrite(wt.r.Context()))
	}
	wt.r.Body, wt.r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
	wt.next.ServeHTTP(wt.w, wt.r)
}

// finalDeleteOffline applies the kubelet's final delete of a pod locally,
// recorded before, with the pod's status then (the terminal status the
// delete follows): from the record on, the pod's copy stands as the node
// left it, so neither the stream nor a reconciliation of an earlier
// status can bring the cluster's copy back in the moment between the
// local delete and its record (whose status the delete would then
// replay). A delete that fails locally is not the node's to replay: its
// record goes back to what it was.
func (wt *writeThrough) finalDeleteOffline(rec pendingRecord) {
	rec.Final = rec.Base
	ctx := wt.r.Context()
	var before *pendingRecord
	if prev, ok := wt.u.pending.get(rec.gr(), rec.Namespace, rec.Name); ok {
		before = &prev
	}
	applied, err := wt.u.pending.record(ctx, rec, ownDelete)
	if err != nil {
		wt.fail(apierrors.NewInternalError(fmt.Errorf("recording the node's delete while the upstream %s is not reachable: %w", wt.u.host, err)), "")
		return
	}
	defer applied()
	answer := newBufferedResponse()
	wt.next.ServeHTTP(answer, wt.r)
	if answer.code >= http.StatusOK && answer.code < http.StatusMultipleChoices {
		pendingWrites.WithLabelValues(string(ownDelete)).Inc()
	} else if err := wt.u.pending.undo(context.WithoutCancel(ctx), rec, before); err != nil {
		klog.InfoS("Mirror: taking back the record of a final delete that failed locally", "namespace", rec.Namespace, "name", rec.Name, "err", err)
	}
	answer.writeTo(wt.w)
}
