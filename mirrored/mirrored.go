// Package mirrored is the contract of a mirrored object: the annotations
// the mirror (package mirror) puts on its copies of an upstream cluster's
// objects, and what each tells the rest of kubestore. It imports nothing
// of kubestore or Kubernetes, so that a controller honours the contract
// without the mirror.
//
// A copy belongs to the upstream: kubestore's own controllers (garbage
// collection, the namespace and ServiceAccount controllers) never write
// or delete it; the upstream's controllers do, and the mirror carries
// their writes. A local object that kubestore keeps may say that a copy
// takes its place (AnnotationReplaceable). No write through the API sets
// or changes the mirror's annotations (mirror.Annotations), but the
// mirror's own (WithCopyWrite).
package mirrored

import "context"

const (
	// AnnotationRule names the rule that mirrored an object; every copy
	// has it, and only copies.
	AnnotationRule = "mirror.kubestore.io/rule"
	// AnnotationUpstreamResourceVersion is the upstream's resourceVersion
	// of the copy's content: a resync writes only what changed since.
	AnnotationUpstreamResourceVersion = "mirror.kubestore.io/upstream-resource-version"
	// AnnotationReplaceable marks a local object that kubestore's own
	// controllers keep (the default ServiceAccount of a namespace): a
	// mirrored object of the same name takes its place, as the cluster's
	// own controllers keep it there.
	AnnotationReplaceable = "mirror.kubestore.io/replaceable"
	// AnnotationView marks a copy that is the node's view of the
	// upstream's object, not the object itself: the endpoints of the
	// Service default/kubernetes lead the node's pods to the gateway (its
	// value, address:port) instead of the cluster's API servers.
	AnnotationView = "mirror.kubestore.io/view"
)

type copyWriteKey struct{}

// WithCopyWrite marks a request the mirror makes through the API on the
// node's behalf (its creation of its own objects offline), which may set
// the annotations above.
func WithCopyWrite(ctx context.Context) context.Context {
	return context.WithValue(ctx, copyWriteKey{}, true)
}

// CopyWrite reports whether ctx is such a request's.
func CopyWrite(ctx context.Context) bool {
	v, _ := ctx.Value(copyWriteKey{}).(bool)
	return v
}

type standInKey struct{}

// WithStandIn marks a TokenRequest for a mirrored ServiceAccount that the
// upstream could not answer (the link is down, or it refused): kubestore
// issues the token in its stead, short-lived, so that the kubelet asks
// again, and gets the upstream's, soon after the link is back.
func WithStandIn(ctx context.Context) context.Context {
	return context.WithValue(ctx, standInKey{}, true)
}

// StandIn reports whether ctx is such a request's.
func StandIn(ctx context.Context) bool {
	v, _ := ctx.Value(standInKey{}).(bool)
	return v
}

// Is reports whether an object with these annotations is a mirror's copy.
func Is(annotations map[string]string) bool {
	_, ok := annotations[AnnotationRule]
	return ok
}
