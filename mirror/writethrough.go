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
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/endpoints/handlers/responsewriters"
	"k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/storage"
	"sigs.k8s.io/yaml"
)

// retryAfterSeconds is the Retry-After of a write refused while the link is
// down. client-go retries such an answer up to ten times, waiting this long
// each time, before its caller sees the 503: a node agent's write must not
// hang for minutes.
const retryAfterSeconds = 1

// deleteSettle bounds the wait, after the upstream deleted an object, for
// the stream to bring the deletion; the local copy is then deleted
// directly.
const deleteSettle = 5 * time.Second

// WithWriteThrough forwards local writes to mirrored objects to the
// upstream: create (of an object a rule matches), update, patch and delete,
// of the object or its status. The write is acknowledged only once the
// upstream accepted it; the local copy is then updated from the
// upstream's answer and served as the response. While the link is down such
// a write gets 503 with Retry-After, never a silent local fork. It runs
// after authentication and authorization (it needs the RequestInfo);
// serializer writes its errors, decoder reads protobuf bodies, and a body
// over maxBody bytes is refused (--max-request-body-bytes, which the
// handlers behind would enforce).
func (m *Mirror) WithWriteThrough(next http.Handler, serializer runtime.NegotiatedSerializer, decoder runtime.Decoder, maxBody int64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		info, ok := request.RequestInfoFrom(r.Context())
		if !ok || !info.IsResourceRequest || (info.Subresource != "" && info.Subresource != "status") {
			next.ServeHTTP(w, r)
			return
		}
		switch info.Verb {
		case "create", "update", "patch", "delete", "deletecollection":
		default:
			next.ServeHTTP(w, r)
			return
		}
		gr := schema.GroupResource{Group: info.APIGroup, Resource: info.Resource}
		if gr == namespaces && info.Verb == "delete" && info.Subresource == "" {
			if err := m.namespaceDeletable(r.Context(), info.Name); err != nil {
				responsewriters.ErrorNegotiated(err, serializer, schema.GroupVersion{Version: info.APIVersion}, w, r)
				return
			}
		}
		if len(m.rulesFor(gr)) == 0 {
			next.ServeHTTP(w, r)
			return
		}
		wt := &writeThrough{m: m, next: next, w: w, r: r, info: info, gr: gr, serializer: serializer, decoder: decoder,
			maxBody: maxBody, gv: schema.GroupVersion{Group: info.APIGroup, Version: info.APIVersion}}
		if !wt.serve() {
			next.ServeHTTP(w, r)
		}
	})
}

// writeThrough is one write to a resource some rule mirrors.
type writeThrough struct {
	m          *Mirror
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
	// local is the local copy of the object written, nil on create.
	local metav1.Object
}

// serve handles the write if it concerns a mirrored object, and reports
// whether it did.
func (wt *writeThrough) serve() bool {
	ctx := wt.r.Context()
	store, err := wt.m.stores.Store(ctx, wt.gr)
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
		for _, rl := range wt.m.rulesFor(wt.gr) {
			if rl.covers(wt.info.Namespace) {
				wt.fail(&apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: http.StatusMethodNotAllowed,
					Reason: metav1.StatusReasonMethodNotAllowed, Message: fmt.Sprintf("deletecollection of %s in namespace %q is not supported: they are mirrored from the upstream %s; delete them one by one, or there",
						wt.gr, wt.info.Namespace, wt.m.host)}}, "")
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
		if err != nil || wt.m.matching(store, wt.gr, wt.info.Namespace, obj) == nil {
			// Local, or malformed: the local server answers either.
			return false
		}
	} else {
		obj := store.New()
		err := store.Get(ctx, store.Key(wt.info.Namespace, wt.info.Name), storage.GetOptions{}, obj)
		if err != nil {
			return false
		}
		a, err := meta.Accessor(obj)
		if err != nil || wt.m.mirroredBy(a) == nil {
			return false
		}
		wt.local = a
	}
	if !wt.m.Connected() {
		wt.refuse(nil)
		return true
	}
	wt.forward()
	return true
}

// namespaceDeletable refuses the deletion of a namespace that holds
// mirrored objects: the namespace controller would delete them below the
// mirror, a local fork the upstream never hears of.
func (m *Mirror) namespaceDeletable(ctx context.Context, namespace string) error {
	for _, r := range m.rules {
		if !r.covers(namespace) {
			continue
		}
		store, err := m.stores.Store(ctx, r.gr)
		if err != nil || !store.Namespaced {
			continue
		}
		local, err := m.localObjects(ctx, r, store, namespace, "")
		if err != nil {
			return apierrors.NewInternalError(err)
		}
		if len(local) > 0 {
			return apierrors.NewConflict(namespaces, namespace, fmt.Errorf("it holds %d %s mirrored from the upstream %s by rule %s; they go when the upstream deletes them, or the rule is removed",
				len(local), r.gr, m.host, r.name))
		}
	}
	return nil
}

// covers reports whether the rule mirrors objects of namespace.
func (r *rule) covers(namespace string) bool {
	if len(r.cfg.Namespaces) == 0 || namespace == "" {
		return true
	}
	for _, ns := range r.cfg.Namespaces {
		if ns == namespace {
			return true
		}
	}
	return false
}

// matching is the rule that would mirror obj, of store's resource gr, or
// nil when obj is local. A rule's selectors match as the local server's
// list would select obj (store.Attrs: an unset spec.hostNetwork is
// "false" there).
func (m *Mirror) matching(store *Store, gr schema.GroupResource, namespace string, obj *unstructured.Unstructured) *rule {
	if obj.GetNamespace() != "" {
		namespace = obj.GetNamespace()
	}
	rules := m.rulesFor(gr)
	if len(rules) == 0 {
		return nil
	}
	typed, err := store.Convert(obj.Object)
	if err != nil {
		return nil
	}
	a, err := meta.Accessor(typed)
	if err != nil {
		return nil
	}
	if store.Namespaced {
		a.SetNamespace(namespace)
	}
	ls, fs, err := store.Attrs(typed)
	if err != nil {
		return nil
	}
	for _, r := range rules {
		if !r.covers(namespace) || !r.labels.Matches(ls) || !r.fields.Matches(fs) {
			continue
		}
		if r.referencedBy != "" && !m.refs.referenced(r, namespace, obj.GetName()) || r.object != "" && r.object != obj.GetName() {
			continue
		}
		return r
	}
	return nil
}

// decode reads a create or update body (JSON, YAML or protobuf).
func (wt *writeThrough) decode(body []byte) (*unstructured.Unstructured, error) {
	mediaType, _, _ := mime.ParseMediaType(wt.r.Header.Get("Content-Type"))
	var data []byte
	switch mediaType {
	case runtime.ContentTypeProtobuf:
		obj, gvk, err := wt.decoder.Decode(body, nil, nil)
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

// forward sends the write to the upstream and answers the client.
func (wt *writeThrough) forward() {
	ctx := wt.r.Context()
	body, contentType, err := wt.upstreamBody()
	if err != nil {
		wt.fail(err, "")
		return
	}
	req := wt.m.raw.Verb(wt.r.Method).AbsPath(wt.r.URL.Path).SetHeader("Content-Type", contentType)
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
	wt.m.reached(err)
	if err != nil {
		if isNetworkError(err) {
			wt.refuse(err)
			return
		}
		writeThroughs.WithLabelValues(fmt.Sprint(code)).Inc()
		wt.fail(err, "upstream "+wt.m.host+": ")
		return
	}
	writeThroughs.WithLabelValues(fmt.Sprint(code)).Inc()
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(raw); err != nil {
		wt.fail(apierrors.NewInternalError(fmt.Errorf("reading the upstream's answer: %w", err)), "")
		return
	}
	if len(wt.r.URL.Query()["dryRun"]) > 0 {
		wt.writeRaw(code, raw)
		return
	}
	if u.GetKind() == "Status" {
		// The object is gone upstream: the stream brings the deletion;
		// if it is late, the local copy goes now.
		wt.awaitDeletion(ctx)
		wt.writeRaw(code, raw)
		return
	}
	rl := wt.m.matching(wt.store, wt.gr, wt.info.Namespace, u)
	if wt.local != nil {
		if owner := wt.m.mirroredBy(wt.local); owner != nil {
			rl = owner
		}
	}
	if rl != nil {
		if _, err := wt.m.apply(ctx, rl, wt.store, u); err != nil {
			wt.fail(apierrors.NewInternalError(fmt.Errorf("the upstream accepted the write, storing its answer failed (the mirror will retry): %w", err)), "")
			return
		}
	}
	wt.serveLocal(code, u.GetName())
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
	return unstructured.SetNestedField(obj, wt.local.GetAnnotations()[AnnotationUpstreamResourceVersion], path...)
}

// stripAnnotations removes the mirror's annotations from an object or
// patch: they are the local copy's, not the upstream's.
func stripAnnotations(obj map[string]any) {
	for _, a := range []string{AnnotationRule, AnnotationUpstreamResourceVersion} {
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
	if rl := wt.m.mirroredBy(wt.local); rl != nil {
		wt.m.remove(ctx, rl, wt.store, wt.local.GetNamespace(), wt.local.GetName(), "", false) //nolint:errcheck // the stream deletes it too
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

// codeWriter replaces a 200 with code.
type codeWriter struct {
	http.ResponseWriter
	code int
}

func (c *codeWriter) WriteHeader(code int) {
	if code == http.StatusOK {
		code = c.code
	}
	c.ResponseWriter.WriteHeader(code)
}

func (c *codeWriter) Unwrap() http.ResponseWriter { return c.ResponseWriter }

func (wt *writeThrough) writeRaw(code int, raw []byte) {
	wt.w.Header().Set("Content-Type", runtime.ContentTypeJSON)
	wt.w.WriteHeader(code)
	wt.w.Write(raw) //nolint:errcheck // the client went away
}

// refuse answers 503 naming the upstream, with Retry-After.
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
		wt.gr, wt.info.Namespace, name, wt.m.host, why))
	err.ErrStatus.Details = &metav1.StatusDetails{Group: wt.gr.Group, Kind: wt.gr.Resource, Name: wt.info.Name, RetryAfterSeconds: retryAfterSeconds}
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
