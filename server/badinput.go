package server

import (
	"context"
	"fmt"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/endpoints/handlers/responsewriters"
	"k8s.io/apiserver/pkg/endpoints/request"

	"github.com/kubestore/kubestore/server/query"
)

// Bad input gets a 4xx Status that names the parameter or field at fault.
// Upstream answers a few malformed requests with a 500 (a plain error from
// deep inside, which the handlers cannot tell from a server fault) or with
// a message that does not say which parameter it is about. checkQuery
// closes those gaps for query parameters, package registry's stores for
// the objects written. server/malformed_test.go is the suite that found
// them.

// checkQuery refuses resource requests whose query parameters cannot be
// parsed, before any handler sees them: a GET or WATCH with a
// resourceVersion that is not a number got a 500 from the storage layer,
// a negative timeoutSeconds an empty watch that ended at once, and
// selector errors did not name the parameter.
func checkQuery(handler http.Handler, s runtime.NegotiatedSerializer) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		info, ok := request.RequestInfoFrom(req.Context())
		if !ok || !info.IsResourceRequest || req.URL.RawQuery == "" {
			handler.ServeHTTP(w, req)
			return
		}
		if err := query.Check(req.URL.Query()); err != nil {
			gv := schema.GroupVersion{Group: info.APIGroup, Version: info.APIVersion}
			responsewriters.ErrorNegotiated(apierrors.NewBadRequest(err.Error()), s, gv, w, req)
			return
		}
		handler.ServeHTTP(w, req)
	})
}

// notFound answers paths no handler serves with a NotFound Status, as the
// API's own 404s are, instead of net/http's plain text; before the server
// has installed every path it defers to upstream's 503.
type notFound struct {
	upstream   http.Handler
	complete   func(context.Context) bool
	serializer runtime.NegotiatedSerializer
}

func (h notFound) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if !h.complete(req.Context()) {
		h.upstream.ServeHTTP(w, req)
		return
	}
	err := &apierrors.StatusError{ErrStatus: metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    http.StatusNotFound,
		Reason:  metav1.StatusReasonNotFound,
		Message: fmt.Sprintf("the server could not find the requested resource (%s %s)", req.Method, req.URL.Path),
	}}
	responsewriters.ErrorNegotiated(err, h.serializer, schema.GroupVersion{}, w, req)
}
