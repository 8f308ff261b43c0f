package cacher

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/storage"

	"github.com/kubestore/kubestore/config"
	"github.com/kubestore/kubestore/etcdembed"
)

// withSizeLimit answers a write whose object is too large for etcd (its
// request over etcd's --max-request-bytes, or over the gRPC client's
// largest message), or for the room left below the quota's watermark
// while smaller writes fit (etcdembed.RoomError), with 413 Request Entity
// Too Large naming the limit,
// where the etcd3 store returns etcd's or gRPC's own error and
// kube-apiserver answers 500 (docs/REGISTRY-DIFFERENCES.md): bad input,
// which a client can only act on if it is told so. The error still reads
// as etcd's to the request handlers, which retry a create, update or
// patch once without its managedFields when etcd found it too large
// (k8s.io/apiserver/pkg/endpoints/handlers/rest.go, isTooLargeError).
func withSizeLimit(s storage.Interface, gr schema.GroupResource, limit string) storage.Interface {
	return sizeLimited{Interface: s, gr: gr, limit: limit}
}

// requestLimit names the limit an object too large for etcd passed.
func (b *Backend) requestLimit() string {
	if b.etcd.External() {
		return "the etcd servers' request limit (their --max-request-bytes, 1.5 MiB unless set) or the etcd client's of 2 MiB"
	}
	return fmt.Sprintf("the embedded etcd's request limit of %s (--%s)", b.etcd.MaxRequestBytes, config.FlagEtcdMaxRequestBytes)
}

type sizeLimited struct {
	storage.Interface
	gr    schema.GroupResource
	limit string
}

func (s sizeLimited) Create(ctx context.Context, key string, obj, out runtime.Object, ttl uint64) error {
	return s.answer(key, s.Interface.Create(ctx, key, obj, out, ttl))
}

func (s sizeLimited) GuaranteedUpdate(ctx context.Context, key string, destination runtime.Object, ignoreNotFound bool,
	preconditions *storage.Preconditions, tryUpdate storage.UpdateFunc, cachedExistingObject runtime.Object) error {
	return s.answer(key, s.Interface.GuaranteedUpdate(ctx, key, destination, ignoreNotFound, preconditions, tryUpdate, cachedExistingObject))
}

func (s sizeLimited) answer(key string, err error) error {
	var room *etcdembed.RoomError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &room):
		return &tooLargeError{status: apierrors.NewRequestEntityTooLargeError(fmt.Sprintf(
			"%s %q is too large for the room left in the store: its write would take %d bytes of the etcd quota (--%s), %d are left below its watermark; smaller writes still fit",
			s.gr.String(), path.Base(key), room.Write, config.FlagEtcdQuotaBackendBytes, room.Left)).ErrStatus}
	case tooLargeForEtcd(err):
		return &tooLargeError{status: apierrors.NewRequestEntityTooLargeError(fmt.Sprintf(
			"%s %q is too large to store: its encoding passes %s; make it smaller (a ConfigMap or Secret holds at most 1 MiB of data)",
			s.gr.String(), path.Base(key), s.limit)).ErrStatus}
	}
	return err
}

// tooLargeForEtcd reports whether err is etcd's refusal of a request over
// its --max-request-bytes, or the gRPC client's of a message over its
// largest.
func tooLargeForEtcd(err error) bool {
	if errors.Is(err, rpctypes.ErrRequestTooLarge) || errors.Is(err, rpctypes.ErrGRPCRequestTooLarge) {
		return true
	}
	st, ok := status.FromError(err)
	return ok && st.Code() == codes.ResourceExhausted && strings.Contains(st.Message(), "larger than max")
}

// tooLargeError is the 413 of an object too large for etcd, which the
// request handlers still recognize as etcd's "request is too large" (the
// Code and Error of rpctypes.ErrRequestTooLarge) to retry the write once
// without its managedFields, as they do on kube-apiserver.
type tooLargeError struct {
	status metav1.Status
}

func (e *tooLargeError) Error() string         { return rpctypes.ErrRequestTooLarge.Error() }
func (e *tooLargeError) Code() codes.Code      { return codes.InvalidArgument }
func (e *tooLargeError) Status() metav1.Status { return e.status }
