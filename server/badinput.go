package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/endpoints/handlers/responsewriters"
	"k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/kubestore/kubestore/server/query"
)

// Bad input gets a 4xx Status that names the parameter or field at fault.
// Upstream answers a few malformed requests with a 500 (a plain error from
// deep inside, which the handlers cannot tell from a server fault) or with
// a message that does not say which parameter it is about; the two guards
// here close those gaps. server/malformed_test.go is the suite that found
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

// checkedUpdate is the object of a PUT or PATCH, checked before the store
// uses it. Errors that applying the request to the stored object returns
// as plain errors (a strategic merge patch with an unknown $patch
// directive, a server-side apply of a field the schema does not have) are
// the request's fault: 400, not 500. A metadata.resourceVersion that is not
// a number made the store fail with a 500 too.
type checkedUpdate struct {
	rest.UpdatedObjectInfo
}

func (u checkedUpdate) UpdatedObject(ctx context.Context, old runtime.Object) (runtime.Object, error) {
	obj, err := u.UpdatedObjectInfo.UpdatedObject(ctx, old)
	if err != nil {
		var status apierrors.APIStatus
		if errors.As(err, &status) || ctx.Err() != nil {
			return nil, err
		}
		return nil, apierrors.NewBadRequest(err.Error())
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, err
	}
	if rv := m.GetResourceVersion(); rv != "" {
		if _, err := strconv.ParseUint(rv, 10, 64); err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid metadata.resourceVersion %q: must be a resourceVersion returned by the server (a decimal number)", rv))
		}
	}
	return obj, nil
}

// checkCreate refuses an object to create that carries a resourceVersion:
// the etcd store refuses a number with a plain error (a 500) and ignores
// anything else.
func checkCreate(obj runtime.Object) error {
	m, err := meta.Accessor(obj)
	if err != nil {
		return err
	}
	if rv := m.GetResourceVersion(); rv != "" {
		return apierrors.NewBadRequest(fmt.Sprintf("invalid metadata.resourceVersion %q: must not be set on create", rv))
	}
	return nil
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
