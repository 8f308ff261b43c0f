package mirror

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// ownWrite is a write the node makes to a mirrored object of its own, as
// upstream's NodeRestriction admission scopes a node: its Node's status,
// its Lease and CSINode, the status of its pods, the final delete of a pod
// the upstream marked for deletion, and the registration of its Node. While
// the link is down these are applied locally and kept pending; every other
// write to a mirrored object is refused.
type ownWrite string

const (
	ownStatus   ownWrite = "status" // nodes/<node>/status, pods/<pod>/status of the node's pods
	ownSpec     ownWrite = "spec"   // the node's Lease and CSINode: the node writes them whole
	ownCreate   ownWrite = "create" // the node's Node, Lease or CSINode, created while offline
	ownDelete   ownWrite = "delete" // the final delete of a pod of the node marked for deletion
	ownNotOwned ownWrite = ""       // any other write
)

// ownedKind is what the node owns of a kind it writes: how its own object
// is told from the others, the part of it the node writes and where, what
// it may do offline, and what the node's view wins on its return. One entry
// per kind in ownedKinds drives the write-through's decision (ownWrite),
// the pending records (their base, the legacy records' owner) and the
// reconciliation (the patch of the owned part, the conditions reasserted)
// alike: adding a kind the node writes is one entry, plus its tests.
type ownedKind struct {
	gr schema.GroupResource
	// kind is the Kind an Event's involvedObject names it by.
	kind string
	// namespace holds the node's object of a kind named after the node
	// ("" cluster-scoped).
	namespace string
	// boundTo, when set, tells the node an object of the kind is bound
	// to (a pod's spec.nodeName), for a kind whose objects are not named
	// after their node: the node owns those bound to it.
	boundTo func(runtime.Object) (node string, ok bool)
	// part is the part of the object the node writes, at subresource
	// ("" the object itself): the node's change to it is what a
	// reconciliation patches.
	part, subresource string
	// createOffline: the node registers the object itself (the kubelet
	// creates its Node, Lease and CSINode) and may do so offline.
	createOffline bool
	// finalDelete: the node's last write of the object is a delete (the
	// kubelet's final delete of a terminated pod: grace 0, the pod's uid as
	// precondition), which it may make offline.
	finalDelete bool
	// conditions are the condition types the kubelet reports of the
	// object (k8s.io/kubernetes pkg/kubelet/nodestatus, pkg/kubelet/status):
	// the node's own, whoever else wrote them while it was away.
	conditions []string
	// notReplayed are fields of the owned part a reconciliation never
	// replays late, unless the node created the object offline: a Lease's
	// renewal says the node was alive then, and the kubelet renews it
	// once online.
	notReplayed [][]string
}

// ownedKinds are the kinds the node writes, by resource.
var ownedKinds = map[schema.GroupResource]*ownedKind{}

func init() {
	for _, k := range []*ownedKind{
		{
			gr: nodesResource, kind: "Node",
			part: "status", subresource: "status", createOffline: true,
			conditions: []string{"Ready", "MemoryPressure", "DiskPressure", "PIDPressure"},
		},
		{
			gr: leasesResource, kind: "Lease", namespace: leaseNS,
			part: "spec", createOffline: true,
			notReplayed: [][]string{{"spec", "renewTime"}},
		},
		{
			gr: csiNodesResource, kind: "CSINode",
			part: "spec", createOffline: true,
		},
		{
			gr: podsResource, kind: "Pod",
			boundTo: func(obj runtime.Object) (string, bool) {
				pod, ok := obj.(*corev1.Pod)
				if !ok {
					return "", false
				}
				return pod.Spec.NodeName, true
			},
			part: "status", subresource: "status", finalDelete: true,
			conditions: []string{"Ready", "ContainersReady", "Initialized", "PodReadyToStartContainers"},
		},
	} {
		ownedKinds[k.gr] = k
	}
}

// leaseNS holds the nodes' Leases.
const leaseNS = "kube-node-lease"

var (
	nodesResource    = schema.GroupResource{Resource: "nodes"}
	podsResource     = schema.GroupResource{Resource: "pods"}
	leasesResource   = schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}
	csiNodesResource = schema.GroupResource{Group: "storage.k8s.io", Resource: "csinodes"}
)

// ownedKindOf is the entry of the kind an Event's involvedObject names,
// nil for a kind the node does not write.
func ownedKindOf(kind string) *ownedKind {
	for _, k := range ownedKinds {
		if k.kind == kind {
			return k
		}
	}
	return nil
}

// subresources is where the owned part is written, as a dynamic client's
// trailing arguments.
func (k *ownedKind) subresources() []string {
	if k == nil || k.subresource == "" {
		return nil
	}
	return []string{k.subresource}
}

// ownedPart is the part of an object of gr the node writes ("" for a kind
// it does not).
func ownedPart(gr schema.GroupResource) string {
	if k := ownedKinds[gr]; k != nil {
		return k.part
	}
	return ""
}

// mine reports whether the object namespace/name of the kind is node's
// own; obj is the object, which a kind bound by its object needs (nil:
// not known, so not the node's).
func (k *ownedKind) mine(node, namespace, name string, obj runtime.Object) bool {
	if k.boundTo != nil {
		if obj == nil {
			return false
		}
		bound, ok := k.boundTo(obj)
		return ok && bound == node
	}
	return name == node && namespace == k.namespace
}

// write is which of the node's own writes a request of verb to
// subresource is, for the node's own object of the kind: ownDelete only
// when final says the delete is the node's final one.
func (k *ownedKind) write(verb, subresource string, final func() bool) ownWrite {
	switch {
	case verb == "create" && subresource == "" && k.createOffline:
		return ownCreate
	case (verb == "update" || verb == "patch") && subresource == k.subresource:
		if k.part == "status" {
			return ownStatus
		}
		return ownSpec
	case verb == "delete" && subresource == "" && k.finalDelete && final():
		return ownDelete
	}
	return ownNotOwned
}
