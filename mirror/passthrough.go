package mirror

import (
	"fmt"
	"net/http"
	"net/http/httputil"
	"net/url"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	"k8s.io/apiserver/pkg/endpoints/handlers/responsewriters"
	"k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/storage"
	"k8s.io/client-go/rest"
)

// The cluster's pods read what the mirror holds locally, and the rest from
// the cluster. A read (get, list, watch) of a ServiceAccount the mirror
// holds, of objects no rule mirrors whole (another kind, another
// namespace, a ConfigMap of a rule that mirrors only what the node's pods
// reference), is the cluster's to answer: it is passed through while the
// link is up, with the pod's own token, and refused with 503 naming the
// upstream while it is down. The local store would answer it with a part,
// or with the gateway's own objects, as if that were the cluster. What a
// rule mirrors whole, and a copy the gateway holds, is served locally with
// local resourceVersions, online and offline.

// passThrough serves a read of the cluster's ServiceAccount that the
// mirror does not hold, and reports whether it did.
func (u *uplink) passThrough(w http.ResponseWriter, r *http.Request, info *request.RequestInfo, serializer runtime.NegotiatedSerializer) bool {
	user, ok := request.UserFrom(r.Context())
	if !ok || u.trust == nil {
		return false
	}
	ns, name, err := serviceaccount.SplitUsername(user.GetName())
	if err != nil {
		return false
	}
	// What the mirror holds first: no read of the ServiceAccount for the
	// reads served locally.
	gr := schema.GroupResource{Group: info.APIGroup, Resource: info.Resource}
	if u.holds(r, info, gr) || !u.isCopy(r.Context(), "ServiceAccount", ns, name) {
		return false
	}
	gv := schema.GroupVersion{Group: info.APIGroup, Version: info.APIVersion}
	fail := func(err error) {
		responsewriters.ErrorNegotiated(err, serializer, gv, w, r)
	}
	if !u.Connected() {
		writeRefused.Inc()
		fail(apierrors.NewServiceUnavailable(fmt.Sprintf("%s in namespace %q is not mirrored whole: the upstream %s answers its reads, and it is not reachable",
			gr, info.Namespace, u.host)))
		return true
	}
	token, _ := r.Context().Value(podTokenKey{}).(string)
	if token == "" || !u.trust.Issued(token) {
		fail(apierrors.NewForbidden(gr, info.Name, fmt.Errorf("%s in namespace %q is not mirrored whole: the upstream %s answers its reads, with %s's own token of the upstream's, which this request does not carry",
			gr, info.Namespace, u.host, user.GetName())))
		return true
	}
	cfg := u.podConfig(token)
	rt, err := rest.TransportFor(cfg)
	if err != nil {
		fail(apierrors.NewInternalError(err))
		return true
	}
	target, err := url.Parse(cfg.Host)
	if err != nil {
		fail(apierrors.NewInternalError(err))
		return true
	}
	passedThrough.Inc()
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.URL.Path, pr.Out.URL.RawPath = r.URL.Path, r.URL.RawPath
			pr.Out.Header.Del("Authorization")
			pr.Out.Header.Del("Impersonate-User")
		},
		Transport:     rt,
		FlushInterval: -1, // a watch's events as they come
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if unreachable(err) {
				u.reached(err)
			}
			fail(apierrors.NewServiceUnavailable(fmt.Sprintf("reading %s from the upstream %s: %v", gr, u.host, err)))
		},
	}
	proxy.ServeHTTP(w, r)
	return true
}

// holds reports whether the local store answers the read as the cluster
// would: a copy the gateway holds (a get), or what a rule mirrors whole
// in the namespace read, selected at least as narrowly as the rule (a
// list or a watch).
func (u *uplink) holds(r *http.Request, info *request.RequestInfo, gr schema.GroupResource) bool {
	if info.Verb == "get" {
		store, err := u.stores.Store(r.Context(), gr)
		if err != nil {
			return false
		}
		obj := store.New()
		if err := store.Get(r.Context(), store.Key(info.Namespace, info.Name), storage.GetOptions{}, obj); err == nil {
			return u.down.mirroredBy(store, obj) != nil
		}
	}
	q := r.URL.Query()
	ls, err := labels.Parse(q.Get("labelSelector"))
	if err != nil {
		return true // the local server refuses it
	}
	fs, err := fields.ParseSelector(q.Get("fieldSelector"))
	if err != nil {
		return true
	}
	if info.Name != "" {
		fs = fields.AndSelectors(fs, fields.OneTermEqualSelector("metadata.name", info.Name))
	}
	for _, rl := range u.down.rulesFor(gr) {
		if rl.referencedBy != "" || rl.object != "" {
			continue
		}
		if info.Namespace == "" && len(rl.cfg.Namespaces) > 0 || !rl.covers(info.Namespace) {
			continue
		}
		label, field := rl.cfg.Selectors(u.node)
		rls, err1 := labels.Parse(label)
		rfs, err2 := fields.ParseSelector(field)
		if err1 != nil || err2 != nil {
			continue
		}
		if narrower(ls, rls) && narrowerFields(fs, rfs) {
			return true
		}
	}
	return false
}

// narrower reports whether sel requires every requirement of rule.
func narrower(sel, rule labels.Selector) bool {
	have, _ := sel.Requirements()
	want, _ := rule.Requirements()
	for _, w := range want {
		if !slices.ContainsFunc(have, func(h labels.Requirement) bool { return h.Equal(w) }) {
			return false
		}
	}
	return true
}

// narrowerFields is narrower, of field selectors.
func narrowerFields(sel, rule fields.Selector) bool {
	have := sel.Requirements()
	for _, w := range rule.Requirements() {
		if !slices.Contains(have, w) {
			return false
		}
	}
	return true
}
