package mirror

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/endpoints/handlers/responsewriters"
	"k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/storage"
	"k8s.io/klog/v2"
	"sigs.k8s.io/yaml"

	"github.com/kubestore/kubestore/access/node"
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

// WithWriteThrough forwards local writes to mirrored objects to the
// upstream: create (of an object a rule matches), update, patch and delete,
// of the object or its status. The write is acknowledged only once the
// upstream accepted it; the local copy is then updated from the
// upstream's answer and served as the response. While the link is down such
// a write gets 503 at once (no Retry-After: client-go would retry it ten
// times before its caller hears of it), never a silent local fork, but for
// the node's own writes, applied locally and reconciled later (ownWrite).
// It also relays the kubelet's TokenRequests for the node's pods
// (relayToken) and passes through the pods' reads of what the mirror does
// not hold (passThrough). It runs
// after authentication and authorization (it needs the RequestInfo);
// serializer writes its errors, decoder reads protobuf bodies, and a body
// over maxBody bytes is refused (--max-request-body-bytes, which the
// handlers behind would enforce).
func (m *Mirror) WithWriteThrough(next http.Handler, serializer runtime.NegotiatedSerializer, decoder runtime.Decoder, maxBody int64) http.Handler {
	return m.up.withWriteThrough(next, serializer, decoder, maxBody)
}

func (u *uplink) withWriteThrough(next http.Handler, serializer runtime.NegotiatedSerializer, decoder runtime.Decoder, maxBody int64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		info, ok := request.RequestInfoFrom(r.Context())
		if ok && info.IsResourceRequest && info.Verb == "create" && info.APIGroup == "" && info.Resource == "serviceaccounts" && info.Subresource == "token" {
			if handled, r := u.relayToken(w, r, info, decoder, maxBody); !handled {
				next.ServeHTTP(w, r)
			}
			return
		}
		if !ok || !info.IsResourceRequest || (info.Subresource != "" && info.Subresource != "status") {
			next.ServeHTTP(w, r)
			return
		}
		switch info.Verb {
		case "get", "list", "watch":
			if !u.passThrough(w, r, info, serializer) {
				next.ServeHTTP(w, r)
			}
			return
		case "create", "update", "patch", "delete", "deletecollection":
		default:
			next.ServeHTTP(w, r)
			return
		}
		gr := schema.GroupResource{Group: info.APIGroup, Resource: info.Resource}
		if isEvents(gr) && info.Verb != "delete" && info.Verb != "deletecollection" {
			u.serveEvent(next, w, r, info, decoder, maxBody)
			return
		}
		if gr == namespaces && info.Verb == "delete" && info.Subresource == "" {
			if err := u.down.namespaceDeletable(r.Context(), info.Name); err != nil {
				responsewriters.ErrorNegotiated(err, serializer, schema.GroupVersion{Version: info.APIVersion}, w, r)
				return
			}
		}
		if len(u.down.rulesFor(gr)) == 0 && (info.Verb == "create" || !u.down.mirroredOnSite(r.Context(), gr)) {
			// No rule makes it a copy. A write to an existing object of a
			// resource another gateway of the site mirrors may reach one
			// of its copies: serve finds it by the copy's annotation.
			next.ServeHTTP(w, r)
			return
		}
		wt := &writeThrough{u: u, next: next, w: w, r: r, info: info, gr: gr, serializer: serializer, decoder: decoder,
			maxBody: maxBody, gv: schema.GroupVersion{Group: info.APIGroup, Version: info.APIVersion}}
		if !wt.serve() {
			next.ServeHTTP(w, r)
		}
	})
}

// writeThrough is one write to a resource some rule mirrors.
type writeThrough struct {
	u          *uplink
	next       http.Handler
	w          http.ResponseWriter
	r          *http.Request
	info       *request.RequestInfo
	gr         schema.GroupResource
	gv         schema.GroupVersion
	serializer runtime.NegotiatedSerializer
	decoder    runtime.Decoder
	maxBody    int64
	store      *Store
	body       []byte
	// local is the local copy of the object written, nil on create;
	// localObj is the same, typed. created is the object a create sends.
	local    metav1.Object
	localObj runtime.Object
	created  *unstructured.Unstructured
	// rule mirrors the object; own says whether the write is one of the
	// node's own, which the link's state does not refuse.
	rule *rule
	own  ownWrite
}

// serve handles the write if it concerns a mirrored object, and reports
// whether it did.
func (wt *writeThrough) serve() bool {
	ctx := wt.r.Context()
	store, err := wt.u.stores.Store(ctx, wt.gr)
	if errors.Is(err, ErrStopping) {
		// Which objects are mirrored can no longer be told: none is
		// written locally.
		wt.refuse(err)
		return true
	}
	if err != nil {
		// A custom resource whose definition is not mirrored yet: the
		// local server answers (404).
		return false
	}
	wt.store = store
	if wt.info.Verb == "deletecollection" {
		for _, rl := range wt.u.down.rulesFor(wt.gr) {
			if rl.covers(wt.info.Namespace) {
				wt.fail(&apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: http.StatusMethodNotAllowed,
					Reason: metav1.StatusReasonMethodNotAllowed, Message: fmt.Sprintf("deletecollection of %s in namespace %q is not supported: they are mirrored from the upstream %s; delete them one by one, or there",
						wt.gr, wt.info.Namespace, wt.u.host)}}, "")
				return true
			}
		}
		return false
	}
	if wt.body, err = io.ReadAll(io.LimitReader(wt.r.Body, wt.maxBody+1)); err != nil {
		wt.fail(apierrors.NewBadRequest("reading the request body: "+err.Error()), "")
		return true
	}
	if int64(len(wt.body)) > wt.maxBody {
		wt.fail(apierrors.NewRequestEntityTooLargeError(fmt.Sprintf("limit is %d", wt.maxBody)), "")
		return true
	}
	wt.r.Body = io.NopCloser(bytes.NewReader(wt.body))
	if wt.info.Verb == "create" {
		obj, err := wt.decode(wt.body)
		if err != nil {
			// Malformed: the local server answers.
			return false
		}
		if wt.rule = wt.u.down.matching(store, wt.gr, wt.info.Namespace, obj); wt.rule == nil {
			return false
		}
		wt.created = obj
		// A create of an object that exists answers 409, online or not,
		// as the upstream would.
		if name := obj.GetName(); name != "" {
			existing := store.New()
			if err := store.Get(ctx, store.Key(wt.namespace(), name), storage.GetOptions{}, existing); err == nil {
				wt.fail(apierrors.NewAlreadyExists(wt.gr, name), "")
				return true
			}
		}
	} else {
		obj := store.New()
		err := store.Get(ctx, store.Key(wt.info.Namespace, wt.info.Name), storage.GetOptions{}, obj)
		if err != nil {
			return false
		}
		a, err := meta.Accessor(obj)
		if err != nil {
			return false
		}
		if wt.rule = wt.u.down.mirroredBy(store, obj); wt.rule == nil {
			return false
		}
		wt.local, wt.localObj = a, obj
		if view := a.GetAnnotations()[mirrored.AnnotationView]; view != "" && wt.info.Verb == "update" {
			// The copy's endpoints are the gateway's, not the cluster's:
			// an update would write them up. A patch or a delete says
			// only what it changes, and goes up as any other.
			wt.fail(apierrors.NewForbidden(wt.gr, wt.info.Name, fmt.Errorf("this copy is the node's view of the upstream's object, its endpoint the gateway's (%s): update the object on the upstream %s, or patch it here",
				view, wt.u.host)), "")
			return true
		}
	}
	wt.own = wt.ownWrite()
	if wt.byAKubelet() && !wt.admittedLocally() {
		return true
	}
	if !wt.u.Connected() {
		wt.offline(nil)
		return true
	}
	wt.forward()
	return true
}

// admittedLocally runs a kubelet's write as a dry run through the local
// server, whose admission (NodeRestriction) knows the kubelet: the
// upstream sees the edge's credentials only. A refusal (403) is the
// answer; anything else lets the write go on.
func (wt *writeThrough) admittedLocally() bool {
	r, err := wt.asDryRun()
	if err != nil {
		// Not a body the local server reads: it answers.
		wt.next.ServeHTTP(wt.w, wt.r)
		return false
	}
	answer := newBufferedResponse()
	wt.next.ServeHTTP(answer, r)
	if answer.code == http.StatusForbidden {
		answer.writeTo(wt.w)
		return false
	}
	wt.r.Body = io.NopCloser(bytes.NewReader(wt.body))
	return true
}

// asDryRun is the request as a dry run, which writes nothing: dryRun=All
// in the query, where a create, update or patch takes its options from,
// and for a delete with a body in its DeleteOptions too, since the
// apiserver then reads the options from the body alone and ignores the
// query's (k8s.io/apiserver pkg/endpoints/handlers/delete.go). client-go
// always sends a delete's options as a body, the kubelet's in protobuf:
// it is sent on as JSON.
func (wt *writeThrough) asDryRun() (*http.Request, error) {
	r := wt.r.Clone(wt.r.Context())
	q := r.URL.Query()
	q.Set("dryRun", metav1.DryRunAll)
	r.URL.RawQuery = q.Encode()
	body := wt.body
	if wt.info.Verb == "delete" && len(body) > 0 {
		opts, err := wt.decode(body)
		if err != nil {
			return nil, err
		}
		opts.Object["dryRun"] = []any{metav1.DryRunAll}
		if body, err = json.Marshal(opts.Object); err != nil {
			return nil, err
		}
		r.Header = r.Header.Clone()
		r.Header.Set("Content-Type", runtime.ContentTypeJSON)
	}
	r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
	return r, nil
}

// namespace is the namespace of the object written: the URL's, or a
// create body's.
func (wt *writeThrough) namespace() string {
	if !wt.store.Namespaced {
		return ""
	}
	if wt.created != nil && wt.created.GetNamespace() != "" {
		return wt.created.GetNamespace()
	}
	return wt.info.Namespace
}

// ownWrite says whether the write is one of the node's own (see ownWrite)
// and which. Only the node's kubelet (system:node:<node>) or the admin
// (system:masters, whose kubeconfig a kubelet may be given) writes as the
// node: another user's write of the node's objects is no node's own.
func (wt *writeThrough) ownWrite() ownWrite {
	if !wt.byNode() {
		return ownNotOwned
	}
	nodeName, info := wt.u.node, wt.info
	name := info.Name
	if wt.created != nil {
		name = wt.created.GetName()
	}
	update := info.Verb == "update" || info.Verb == "patch"
	switch wt.gr {
	case nodesResource:
		switch {
		case name != nodeName:
		case info.Verb == "create":
			return ownCreate
		case update && info.Subresource == "status":
			return ownStatus
		}
	case leasesResource, csiNodesResource:
		switch {
		case name != nodeName || wt.gr == leasesResource && wt.namespace() != leaseNS || info.Subresource != "":
		case info.Verb == "create":
			return ownCreate
		case update:
			return ownSpec
		}
	case podsResource:
		pod, ok := wt.localObj.(*corev1.Pod)
		switch {
		case !ok || pod.Spec.NodeName != nodeName:
		case update && info.Subresource == "status":
			return ownStatus
		case info.Verb == "delete" && info.Subresource == "" && pod.DeletionTimestamp != nil && wt.finalDelete(pod.UID):
			return ownDelete
		}
	}
	return ownNotOwned
}

// byAKubelet reports whether the request's user is a kubelet (any node's,
// not the admin).
func (wt *writeThrough) byAKubelet() bool {
	u, ok := request.UserFrom(wt.r.Context())
	if !ok || slices.Contains(u.GetGroups(), user.SystemPrivilegedGroup) {
		return false
	}
	_, isNode := node.Identity(u)
	return isNode
}

// byNode reports whether the request's user is this node's kubelet or the
// admin.
func (wt *writeThrough) byNode() bool {
	u, ok := request.UserFrom(wt.r.Context())
	if !ok {
		return false
	}
	name, isNode := node.Identity(u)
	return slices.Contains(u.GetGroups(), user.SystemPrivilegedGroup) || isNode && name == wt.u.node
}

// finalDelete reports whether a delete of the pod of uid is the kubelet's
// final delete: grace 0 with the pod's uid as precondition (k8s.io/kubernetes
// pkg/kubelet/status: the status manager deletes a pod it has finished
// with so). Any other delete of a terminating pod is not the node's to
// make offline. A dry run of it is the node's too, answered locally
// offline and kept nowhere, as a dry run of its status is.
func (wt *writeThrough) finalDelete(uid types.UID) bool {
	opts, ok := wt.deleteOptions()
	return ok && opts.GracePeriodSeconds != nil && *opts.GracePeriodSeconds == 0 &&
		opts.Preconditions != nil && opts.Preconditions.UID != nil && *opts.Preconditions.UID == uid
}

// deleteOptions are the options of a delete's body, which the apiserver
// reads instead of the query's when there is one; false when there is
// none or it cannot be read (a delete without a body names no uid
// precondition: it is no final delete).
func (wt *writeThrough) deleteOptions() (metav1.DeleteOptions, bool) {
	var opts metav1.DeleteOptions
	if len(wt.body) == 0 {
		return opts, false
	}
	u, err := wt.decode(wt.body)
	if err != nil {
		return opts, false
	}
	return opts, runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &opts) == nil
}

// dryRun reports whether the write is a dry run, which writes nothing: by
// its query, or a delete with a body by the body's options.
func (wt *writeThrough) dryRun() bool {
	if wt.info.Verb == "delete" && len(wt.body) > 0 {
		opts, ok := wt.deleteOptions()
		return ok && len(opts.DryRun) > 0
	}
	return len(wt.r.URL.Query()["dryRun"]) > 0
}

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

// bufferedResponse holds an answer until it is sent.
type bufferedResponse struct {
	header http.Header
	code   int
	body   bytes.Buffer
}

func newBufferedResponse() *bufferedResponse { return &bufferedResponse{header: http.Header{}} }

func (b *bufferedResponse) Header() http.Header { return b.header }

func (b *bufferedResponse) WriteHeader(code int) {
	if b.code == 0 {
		b.code = code
	}
}

func (b *bufferedResponse) Write(p []byte) (int, error) {
	if b.code == 0 {
		b.code = http.StatusOK
	}
	return b.body.Write(p)
}

func (b *bufferedResponse) writeTo(w http.ResponseWriter) {
	for k, v := range b.header {
		w.Header()[k] = v
	}
	w.WriteHeader(b.code)
	w.Write(b.body.Bytes()) //nolint:errcheck // the client went away
}

// decode reads a create or update body (JSON, YAML or protobuf).
func (wt *writeThrough) decode(body []byte) (*unstructured.Unstructured, error) {
	return decodeBody(wt.r.Header.Get("Content-Type"), body, wt.decoder)
}

// decodeBody reads a body of contentType (JSON, YAML or protobuf, which
// decoder reads) as an object.
func decodeBody(contentType string, body []byte, decoder runtime.Decoder) (*unstructured.Unstructured, error) {
	mediaType, _, _ := mime.ParseMediaType(contentType)
	var data []byte
	switch mediaType {
	case runtime.ContentTypeProtobuf:
		obj, gvk, err := decoder.Decode(body, nil, nil)
		if err != nil {
			return nil, err
		}
		obj.GetObjectKind().SetGroupVersionKind(*gvk)
		if data, err = json.Marshal(obj); err != nil {
			return nil, err
		}
	case runtime.ContentTypeYAML:
		var err error
		if data, err = yaml.YAMLToJSON(body); err != nil {
			return nil, err
		}
	default:
		data = body
	}
	// A body may leave apiVersion and kind out: the URL says them, as
	// kube-apiserver accepts.
	var object map[string]any
	if err := json.Unmarshal(data, &object); err != nil {
		return nil, err
	}
	if object == nil {
		return nil, fmt.Errorf("the body is not an object")
	}
	return &unstructured.Unstructured{Object: object}, nil
}

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
	var code int
	res := req.Do(ctx).StatusCode(&code)
	raw, err := res.Raw()
	if err != nil {
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

// serveLocal answers with the local copy, read as a GET of it through the
// local server (its encoding, negotiated as for any read), with the
// upstream's status code (201 for a create).
func (wt *writeThrough) serveLocal(code int, name string) {
	info := *wt.info
	info.Verb, info.Name = "get", name
	path := wt.r.URL.Path
	if wt.info.Verb == "create" {
		path = strings.TrimSuffix(path, "/") + "/" + name
	}
	r := wt.r.Clone(request.WithRequestInfo(wt.r.Context(), &info))
	r.Method = http.MethodGet
	r.URL.Path, r.URL.RawPath, r.URL.RawQuery = path, "", ""
	r.Body, r.ContentLength = http.NoBody, 0
	r.Header.Del("Content-Type")
	wt.next.ServeHTTP(&codeWriter{ResponseWriter: wt.w, code: code}, r)
}

// codeWriter replaces a 200 with code, when set, and records the code
// written.
type codeWriter struct {
	http.ResponseWriter
	code    int
	written int
}

func (c *codeWriter) WriteHeader(code int) {
	if code == http.StatusOK && c.code != 0 {
		code = c.code
	}
	c.written = code
	c.ResponseWriter.WriteHeader(code)
}

func (c *codeWriter) Write(b []byte) (int, error) {
	if c.written == 0 {
		c.written = http.StatusOK
	}
	return c.ResponseWriter.Write(b)
}

func (c *codeWriter) Unwrap() http.ResponseWriter { return c.ResponseWriter }

func (wt *writeThrough) writeRaw(code int, raw []byte) {
	wt.w.Header().Set("Content-Type", runtime.ContentTypeJSON)
	wt.w.WriteHeader(code)
	wt.w.Write(raw) //nolint:errcheck // the client went away
}

// refuse answers 503 naming the upstream, at once and with no Retry-After:
// client-go retries a 503 that has one ten times before its caller hears
// of it.
func (wt *writeThrough) refuse(cause error) {
	writeRefused.Inc()
	name := wt.info.Name
	if name == "" {
		name = "(new)"
	}
	why := ""
	if cause != nil {
		why = " (" + cause.Error() + ")"
	}
	err := apierrors.NewServiceUnavailable(fmt.Sprintf("%s %s/%s is mirrored from the upstream %s, which is not reachable%s: writes to it are refused until the link is back",
		wt.gr, wt.info.Namespace, name, wt.u.host, why))
	err.ErrStatus.Details = &metav1.StatusDetails{Group: wt.gr.Group, Kind: wt.gr.Resource, Name: wt.info.Name}
	responsewriters.ErrorNegotiated(err, wt.serializer, wt.gv, wt.w, wt.r)
}

// fail answers err, its message prefixed.
func (wt *writeThrough) fail(err error, prefix string) {
	status := responsewriters.ErrorToAPIStatus(err)
	if prefix != "" {
		status.Message = prefix + status.Message
	}
	responsewriters.ErrorNegotiated(&apierrors.StatusError{ErrStatus: *status}, wt.serializer, wt.gv, wt.w, wt.r)
}
