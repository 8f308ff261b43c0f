package mirror

import (
	"context"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/storage"
	"sigs.k8s.io/yaml"

	"github.com/kubestore/kubestore/mirrored"
)

// forwardTimeout bounds a forwarded write: an upstream that does not answer
// in time is taken as not reachable, and the write is refused (or, for the
// node's own writes, applied locally) instead of hanging on a dead link.
const forwardTimeout = 5 * time.Second

// deleteSettle bounds the wait, after the upstream deleted an object, for
// the stream to bring the deletion; the local copy is then deleted
// directly.
const deleteSettle = 5 * time.Second

// forward sends the write to the upstream and answers the client. An
// upstream that does not answer within forwardTimeout, or answers that it
// cannot serve (a 5xx), is taken as not reachable for the node's own
// writes, which are then applied locally.
func (wt *writeThrough) forward() {
	if wt.own != ownNotOwned && !wt.reconciledFirst() {
		return
	}
	ctx, cancel := context.WithTimeout(wt.r.Context(), forwardTimeout)
	defer cancel()
	body, contentType, err := wt.upstreamBody()
	if err != nil {
		wt.fail(err, "")
		return
	}
	client, err := wt.u.upstreamFor(wt.r)
	if err != nil {
		wt.fail(apierrors.NewForbidden(wt.gr, wt.info.Name, err), "")
		return
	}
	req := client.Verb(wt.r.Method).AbsPath(wt.r.URL.Path).SetHeader("Content-Type", contentType)
	for k, vs := range wt.r.URL.Query() {
		for _, v := range vs {
			req.Param(k, v)
		}
	}
	if len(body) > 0 {
		req.Body(body)
	}
	if wt.u.wire.protobuf(wt.store.GVR) {
		// The answer as the kubelet gets it, half of its JSON; read as
		// JSON from here on.
		req.SetHeader("Accept", protoAccept)
	}
	var code int
	res := req.Do(ctx).StatusCode(&code)
	raw, err := res.Raw()
	if raw, err = wt.u.wire.asJSON(raw, err); err != nil {
		err = upstreamStatus(err, raw)
	}
	if wt.r.Context().Err() != nil {
		// The client went away: that says nothing of the link.
		return
	}
	if err != nil && code == 0 {
		// client-go keeps the code of an error answer in the error.
		code = statusCode(err)
	}
	// An answer says the link is up; only a connection that failed says
	// it is down. One slow write or one 5xx says nothing of it: the probe
	// and the connections' pings judge a link that hangs.
	switch {
	case err == nil || code != 0 && code < http.StatusInternalServerError:
		wt.u.reached(nil)
	case unreachable(err):
		wt.u.reached(err)
	}
	if err != nil {
		if isNetworkError(err) || wt.own != ownNotOwned && code >= http.StatusInternalServerError {
			wt.offline(err)
			return
		}
		writeThroughs.WithLabelValues(fmt.Sprint(code)).Inc()
		wt.fail(err, "upstream "+wt.u.host+": ")
		return
	}
	writeThroughs.WithLabelValues(fmt.Sprint(code)).Inc()
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(raw); err != nil {
		// Not an answer an API server gives: something between is broken.
		err = errUnreadable{fmt.Errorf("reading the upstream's answer: %w", err)}
		wt.u.reached(err)
		wt.offline(err)
		return
	}
	if wt.dryRun() {
		wt.writeRaw(code, raw)
		return
	}
	if u.GetKind() == "Status" || wt.info.Verb == "delete" {
		// Gone upstream, or going: the stream brings the deletion, or the
		// deletion's mark; a deleted object's copy goes now if it is late.
		if u.GetKind() == "Status" {
			if wt.local != nil {
				wt.u.down.deletedUpstream(ctx, wt.local.GetUID())
			}
			wt.awaitDeletion(ctx)
		}
		wt.writeRaw(code, raw)
		return
	}
	how := applyHow{answer: true, mayCreate: wt.info.Verb == "create", overPending: wt.own != ownNotOwned}
	op, err := wt.u.down.applyObject(ctx, wt.rule, wt.store, u, how)
	if err != nil {
		wt.fail(apierrors.NewInternalError(fmt.Errorf("the upstream accepted the write, storing its answer failed (the mirror will retry): %w", err)), "")
		return
	}
	if op == opDeferred || op == opUnchanged && wt.local != nil && wt.local.GetUID() != u.GetUID() {
		// No local copy of the object written yet (none, or an older
		// object of its name, deleted and created again upstream, which
		// the stream replaces): the upstream's own answer, never the
		// older object's as if it had been written.
		wt.writeRaw(code, raw)
		return
	}
	wt.serveLocal(code, u.GetName())
}

// upstreamStatus is the upstream's own Status in the answer body of a
// refused write: client-go's Raw keeps the code and a generic message
// only, which would drop what the client needs of the refusal (an
// Invalid's field paths, a Conflict's kind and name).
func upstreamStatus(err error, body []byte) error {
	var st metav1.Status
	if json.Unmarshal(body, &st) != nil || st.Kind != "Status" || st.Status != metav1.StatusFailure {
		return err
	}
	return &apierrors.StatusError{ErrStatus: st}
}

// reconciledFirst reconciles the node's pending offline writes of the
// object before a write of the node to it is forwarded, so the upstream
// gets them in their order (an older offline write never lands over a
// newer one), and reads the local copy again. It reports whether the
// write goes on; when it does not, it has been answered.
func (wt *writeThrough) reconciledFirst() bool {
	name := wt.info.Name
	if wt.created != nil {
		name = wt.created.GetName()
	}
	rec, ok := wt.u.pending.get(wt.gr, wt.namespace(), name)
	if !ok {
		return true
	}
	if err := wt.u.reconcileRecord(wt.r.Context(), rec); err != nil {
		if unreachable(err) {
			wt.u.reached(err)
		}
		wt.offline(err)
		return false
	}
	if wt.local == nil {
		return true
	}
	obj := wt.store.New()
	if err := wt.store.Get(wt.r.Context(), wt.store.Key(wt.info.Namespace, wt.info.Name), storage.GetOptions{}, obj); err != nil {
		// Gone meanwhile: the local server answers.
		wt.next.ServeHTTP(wt.w, wt.r)
		return false
	}
	a, err := meta.Accessor(obj)
	if err != nil {
		wt.fail(apierrors.NewInternalError(err), "")
		return false
	}
	wt.local, wt.localObj = a, obj
	return true
}

// upstreamBody is the body to send upstream: the client's, with the local
// resourceVersion a client may send (in the object, a patch or delete
// preconditions) replaced by the upstream's, and the mirror's annotations
// removed. A local resourceVersion that is not the local copy's is a
// conflict, as the local store would say.
func (wt *writeThrough) upstreamBody() ([]byte, string, error) {
	contentType := wt.r.Header.Get("Content-Type")
	if len(wt.body) == 0 {
		return nil, contentType, nil
	}
	mediaType, _, _ := mime.ParseMediaType(contentType)
	switch wt.info.Verb {
	case "create", "update", "delete":
		u, err := wt.decode(wt.body)
		if err != nil {
			return nil, "", apierrors.NewBadRequest(err.Error())
		}
		if wt.info.Verb == "delete" {
			if err := wt.translate(u.Object, "preconditions", "resourceVersion"); err != nil {
				return nil, "", err
			}
		} else {
			if err := wt.translate(u.Object, "metadata", "resourceVersion"); err != nil {
				return nil, "", err
			}
			stripAnnotations(u.Object)
			return wt.u.wire.body(wt.store.GVR, u)
		}
		data, err := json.Marshal(u.Object)
		return data, runtime.ContentTypeJSON, err
	}
	// patch
	switch types.PatchType(mediaType) {
	case types.JSONPatchType:
		var ops []map[string]any
		if err := json.Unmarshal(wt.body, &ops); err != nil {
			return wt.body, contentType, nil
		}
		for _, op := range ops {
			if op["path"] == "/metadata/resourceVersion" {
				if err := wt.translate(op, "value"); err != nil {
					return nil, "", err
				}
			}
		}
		data, err := json.Marshal(ops)
		return data, contentType, err
	default:
		data, err := yaml.YAMLToJSON(wt.body)
		if err != nil {
			return wt.body, contentType, nil
		}
		var patch map[string]any
		if err := json.Unmarshal(data, &patch); err != nil {
			return wt.body, contentType, nil
		}
		if err := wt.translate(patch, "metadata", "resourceVersion"); err != nil {
			return nil, "", err
		}
		stripAnnotations(patch)
		data, err = json.Marshal(patch)
		return data, contentType, err
	}
}

// translate replaces the local resourceVersion at path in obj by the
// upstream's.
func (wt *writeThrough) translate(obj map[string]any, path ...string) error {
	v, ok, _ := unstructured.NestedString(obj, path...)
	if !ok || v == "" {
		return nil
	}
	if wt.local == nil {
		unstructured.RemoveNestedField(obj, path...)
		return nil
	}
	if v != wt.local.GetResourceVersion() {
		return apierrors.NewConflict(wt.gr, wt.info.Name, fmt.Errorf("the object has been modified; please apply your changes to the latest version and try again"))
	}
	return unstructured.SetNestedField(obj, wt.local.GetAnnotations()[mirrored.AnnotationUpstreamResourceVersion], path...)
}

// stripAnnotations removes the mirror's annotations from an object or
// patch: they are the local copy's, not the upstream's.
func stripAnnotations(obj map[string]any) {
	for _, a := range []string{mirrored.AnnotationRule, mirrored.AnnotationUpstreamResourceVersion} {
		unstructured.RemoveNestedField(obj, "metadata", "annotations", a)
	}
}

// awaitDeletion waits for the stream to delete the local copy, at most
// deleteSettle, then deletes it.
func (wt *writeThrough) awaitDeletion(ctx context.Context) {
	if wt.local == nil {
		return
	}
	key := wt.store.Key(wt.local.GetNamespace(), wt.local.GetName())
	deadline := time.Now().Add(deleteSettle)
	for time.Now().Before(deadline) {
		obj := wt.store.New()
		err := wt.store.Get(ctx, key, storage.GetOptions{}, obj)
		if storage.IsNotFound(err) {
			return
		}
		if a, err := meta.Accessor(obj); err == nil && a.GetUID() != wt.local.GetUID() {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
	if rl := wt.u.down.mirroredBy(wt.store, wt.localObj); rl != nil {
		wt.u.down.remove(ctx, rl, wt.store, wt.local.GetNamespace(), wt.local.GetName(), "", false) //nolint:errcheck // the stream deletes it too
	}
}
