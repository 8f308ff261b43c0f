package mirror

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"

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

	"github.com/kubestore/kubestore/access/node"
	"github.com/kubestore/kubestore/mirrored"
)

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
	k := ownedKinds[wt.gr]
	if k == nil || !wt.byNode() {
		return ownNotOwned
	}
	name := wt.info.Name
	if wt.created != nil {
		name = wt.created.GetName()
	}
	if !k.mine(wt.u.node, wt.namespace(), name, wt.localObj) {
		return ownNotOwned
	}
	return k.write(wt.info.Verb, wt.info.Subresource, func() bool {
		return wt.local.GetDeletionTimestamp() != nil && wt.finalDelete(wt.local.GetUID())
	})
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
