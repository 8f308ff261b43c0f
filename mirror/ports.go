package mirror

// The mirror's ports: what it is given of the server (the local stores,
// its records, the elections, the cluster issuer's trust, the node's
// view) and what the uplink is given of the downstream, in one place.

import (
	"context"
	"errors"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubestore/kubestore/cacher"
)

// Store is the local storage of one resource, as the mirror writes it.
type Store struct {
	*cacher.RawStore
	// GVR is the resource and the version it is stored in, the version
	// the mirror reads from the upstream; GVK its kind.
	GVR        schema.GroupVersionResource
	GVK        schema.GroupVersionKind
	Namespaced bool
	// New makes the stored type; Convert turns an upstream object into it.
	New     func() runtime.Object
	NewList func() runtime.Object
	Convert func(u map[string]any) (runtime.Object, error)
	// Attrs are a stored object's labels and selectable fields, those the
	// local server selects by: a rule's selectors match an object as a
	// list of the local server would.
	Attrs func(obj runtime.Object) (labels.Set, fields.Set, error)
}

// MetadataAttrs are the attributes of a kind with no selectable fields but
// metadata.name and, when namespaced, metadata.namespace.
func MetadataAttrs(namespaced bool) func(obj runtime.Object) (labels.Set, fields.Set, error) {
	return func(obj runtime.Object) (labels.Set, fields.Set, error) {
		a, err := meta.Accessor(obj)
		if err != nil {
			return nil, nil, err
		}
		fs := fields.Set{"metadata.name": a.GetName()}
		if namespaced {
			fs["metadata.namespace"] = a.GetNamespace()
		}
		return labels.Set(a.GetLabels()), fs, nil
	}
}

// ErrStopping is Stores' error once the server stops.
var ErrStopping = errors.New("the server is stopping")

// Stores gives the mirror the local store of a resource. It fails while a
// custom resource's definition is not yet stored, and with ErrStopping
// once the server stops.
type Stores interface {
	Store(ctx context.Context, gr schema.GroupResource) (*Store, error)
	// Builtin reports whether gr is served without a
	// CustomResourceDefinition.
	Builtin(gr schema.GroupResource) bool
}

// State keeps the mirror's records in the local etcd, under kubestore's
// own prefix (package records): each stream's last upstream
// resourceVersion, the rules' records, the node's pending offline writes,
// the queued Events and the uids deleted through the edge.
type State interface {
	GetState(ctx context.Context, name string) ([]byte, error)
	PutState(ctx context.Context, name string, value []byte) error
	UpdateState(ctx context.Context, name string, update func(old []byte) ([]byte, bool)) error
	// ListState lists a directory of records (name/…); ListStatePrefix
	// the records whose names start with prefix (package records).
	ListState(ctx context.Context, dir string) (map[string][]byte, error)
	ListStatePrefix(ctx context.Context, prefix string) (map[string][]byte, error)
	DeleteState(ctx context.Context, name string) error
}

// Elector runs fn while this process leads the election named key, once
// per term (fn's context ends with the term), until ctx ends. Processes
// that share one etcd (a site's gateways, or kubestores on an external
// cluster) elect one streamer per rule through it.
type Elector func(ctx context.Context, key string, fn func(term context.Context))

// The node's pods' own identity. While the link is up, the kubelet's
// TokenRequest for a pod the cluster bound to the node (of a mirrored
// ServiceAccount) is relayed to the cluster, so the pod's token is one
// the cluster accepts; kubestore trusts the cluster's issuer for it
// (TokenTrust: its keys kept locally, so the token keeps working offline
// and after a restart). The pod's own writes that go up, and the reads
// passed through, carry that token, never the gateway's credentials: the
// cluster's RBAC and audit log see the pod. While the link is down a
// TokenRequest gets the cluster's token given before for the same request,
// while it is good, else one of kubestore's own issuer, short-lived: the
// pod starts, and its token is good at the gateway.

// TokenTrust keeps the cluster's token issuer the gateway trusts
// (serviceaccount.Trusted).
type TokenTrust interface {
	// Learn trusts the issuer of token, the cluster's answer to a
	// TokenRequest for audiences, with the keys jwks reads when it needs
	// them.
	Learn(ctx context.Context, token string, audiences []string, jwks func(context.Context) ([]byte, error)) error
	// Issued reports whether token, which authenticated, is the trusted
	// issuer's.
	Issued(token string) bool
}

// The node's view of the Service default/kubernetes. In a cluster its
// endpoints are the cluster's API servers; the node's pods, whose
// in-cluster clients (client-go's InClusterConfig) call the Service, must
// reach the gateway instead: it serves them from local data, online and
// offline, and forwards what must go up (as YurtHub rewrites the
// Service's endpoints it serves to its node, openyurtio/openyurt#2158).
// So the mirror's copies of the Service's Endpoints and EndpointSlice
// carry the gateway's endpoint (--advertise-address on its port), marked
// mirrored.AnnotationView, while the cluster's objects stay untouched: a
// view is never written up. The Service itself is the cluster's (its
// ClusterIP is where the pods call); the gateway's serving certificate
// must cover that address, and kubestore says so when it does not. The
// CA the pods verify with, the ConfigMap kube-root-ca.crt, is the
// gateway's already (localOnly).

// View is where the node's pods reach the gateway's API.
type View struct {
	// Endpoint is the gateway's endpoint, address:port; empty (no
	// advertised address) leaves the cluster's endpoints as they are.
	Endpoint string
	// Subsets, AddressType, Endpoints and Ports are the Endpoints' and the
	// EndpointSlice's parts at that endpoint (serviceip.KubernetesEndpoint).
	Subsets     []corev1.EndpointSubset
	AddressType discoveryv1.AddressType
	Endpoints   []discoveryv1.Endpoint
	Ports       []discoveryv1.EndpointPort
	// Covers reports whether the gateway's serving certificate covers an
	// IP address.
	Covers func(netip.Addr) bool
}

// downstream is what the uplink needs of the streams' side of the
// mirror: which rule mirrors an object, and writing the upstream's answer
// into the local store as a stream would, so that the copy a forwarded
// write or a reconciliation leaves is the one the stream would have
// written.
type downstream interface {
	// rulesFor are the rules of gr; rule the rule named name.
	rulesFor(gr schema.GroupResource) []*rule
	rule(name string) *rule
	// matching is the rule that would mirror obj, nil for a local object;
	// mirroredBy the rule whose copy obj is, this gateway's or
	// another gateway's of the site.
	matching(store *Store, gr schema.GroupResource, namespace string, obj *unstructured.Unstructured) *rule
	mirroredBy(store *Store, obj runtime.Object) *rule
	// mirrors reports whether ref names a local copy of a mirrored object.
	mirrors(ctx context.Context, ref corev1.ObjectReference) bool
	// mirroredOnSite reports whether a rule of any gateway of the site
	// mirrors gr.
	mirroredOnSite(ctx context.Context, gr schema.GroupResource) bool
	// namespaceDeletable refuses to delete a namespace holding copies.
	namespaceDeletable(ctx context.Context, namespace string) error
	// applyObject writes the upstream's u as r's copy; remove deletes the
	// copy of namespace/name; localObjects are r's copies there.
	applyObject(ctx context.Context, r *rule, store *Store, u *unstructured.Unstructured, how applyHow) (string, error)
	remove(ctx context.Context, r *rule, store *Store, namespace, name, upstreamRV string, anyRule bool) (bool, error)
	localObjects(ctx context.Context, r *rule, store *Store, namespace, name string) (map[string]localRef, error)
	// deletedUpstream records that the upstream deleted uid.
	deletedUpstream(ctx context.Context, uid types.UID)
}

// localError is a failure of the local store, not of the upstream.
type localError struct{ error }

func (e localError) Unwrap() error { return e.error }

// applyHow says where an object to apply comes from.
type applyHow struct {
	// absent says a relist found no local copy, so the object is created
	// without reading it first (a concurrent write of it makes that fail,
	// and the read-compare-write then runs).
	absent bool
	// answer says it is the upstream's answer to a write: it updates the
	// local copy of the same uid, and creates one only when mayCreate (the
	// answer to a create). A late answer never brings back an object the
	// upstream deleted meanwhile.
	answer, mayCreate bool
	// overPending writes over the node's pending writes: the answer to a
	// forwarded or reconciled write of the node holds them, or the
	// upstream refused or quarantined them.
	overPending bool
}

// localRef is a local copy: its name, uid and upstream resourceVersion.
type localRef struct{ namespace, name, uid, upstreamRV string }

// The operations applyObject reports.
const (
	opCreated   = "created"
	opUpdated   = "updated"
	opDeleted   = "deleted"
	opUnchanged = "unchanged"
	opRecreated = "recreated"
	// opDeferred: not created, its local namespace is terminating; it is
	// once the namespace is gone (deferred.go).
	opDeferred = "deferred"
)
