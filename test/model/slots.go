package model

import (
	"fmt"
	"sort"
	"strings"
)

// The fields the writers of a schedule set, each with a value unique to
// its write (the step's V), and whose each is. The driver writes them, as
// the kubelet and the cluster's controllers write those fields; the model
// reads them back from each side's objects (Slots).
//
//	Node     ready, disk: the kubelet's Ready (a heartbeat) and
//	         DiskPressure conditions; volumes: the attach-detach
//	         controller's volumesAttached; taint, label: the cluster's;
//	         cluster-condition: a condition another controller reports.
//	Lease    duration: the kubelet's leaseDurationSeconds (its renewTime
//	         is not replayed, by design); label: the cluster's.
//	CSINode  driver: the kubelet's driver registration (a driver's nodeID
//	         is immutable: each write registers a driver of another name);
//	         label.
//	Pod      phase, ready, probe: the kubelet's status (a probe's
//	         condition is a readiness gate's); disruption: the disruption
//	         controller's DisruptionTarget; label: the cluster's;
//	         local-label: a local user's, forwarded by the edge.
//	Event    count: the kubelet's Event about its pod.
const (
	SlotReady            = "ready"
	SlotDisk             = "disk"
	SlotVolumes          = "volumes"
	SlotTaint            = "taint"
	SlotLabel            = "label"
	SlotLocalLabel       = "local-label"
	SlotClusterCondition = "cluster-condition"
	SlotDuration         = "duration"
	SlotDriver           = "driver"
	SlotPhase            = "phase"
	SlotProbe            = "probe"
	SlotDisruption       = "disruption"
	SlotCount            = "count"
)

// The names the driver writes under.
const (
	LabelCluster     = "model.kubestore.io/cluster"
	LabelLocal       = "model.kubestore.io/local"
	TaintKey         = "model.kubestore.io/taint"
	ProbeCondition   = "model.kubestore.io/Probe"
	ClusterCondition = "model.kubestore.io/Cluster"
	CSIDriver        = ".csi.kubestore.io"
)

// owners are the slots of each kind, and whose each is.
var owners = map[Kind]map[string]Owner{
	NodeKind: {SlotReady: NodeOwned, SlotDisk: NodeOwned, SlotVolumes: ClusterOwned, SlotTaint: ClusterOwned, SlotLabel: ClusterOwned,
		SlotClusterCondition: ClusterOwned},
	LeaseKind:   {SlotDuration: NodeOwned, SlotLabel: ClusterOwned},
	CSINodeKind: {SlotDriver: NodeOwned, SlotLabel: ClusterOwned},
	PodKind: {SlotPhase: NodeOwned, SlotReady: NodeOwned, SlotProbe: NodeOwned, SlotDisruption: ClusterOwned, SlotLabel: ClusterOwned,
		SlotLocalLabel: ClusterOwned},
	EventKind: {SlotCount: NodeOwned},
}

// OwnerOf is whose slot of kind is.
func OwnerOf(kind Kind, slot string) Owner { return owners[kind][slot] }

// Slots reads the slots of an object of kind (as JSON decodes it).
func Slots(kind Kind, obj map[string]any) map[string]string {
	out := map[string]string{}
	labels := nested[map[string]any](obj, "metadata", "labels")
	status := nested[map[string]any](obj, "status")
	spec := nested[map[string]any](obj, "spec")
	for slot := range owners[kind] {
		var v string
		switch slot {
		case SlotLabel:
			v = str(labels[LabelCluster])
		case SlotLocalLabel:
			v = str(labels[LabelLocal])
		case SlotReady:
			v = condition(status, "Ready")
		case SlotDisk:
			v = condition(status, "DiskPressure")
		case SlotProbe:
			v = condition(status, ProbeCondition)
		case SlotDisruption:
			v = condition(status, "DisruptionTarget")
		case SlotClusterCondition:
			v = condition(status, ClusterCondition)
		case SlotPhase:
			v = str(status["phase"])
		case SlotVolumes:
			var names []string
			for _, a := range list(status["volumesAttached"]) {
				names = append(names, str(a["name"]))
			}
			sort.Strings(names)
			v = strings.Join(names, ",")
		case SlotTaint:
			for _, t := range list(spec["taints"]) {
				if t["key"] == TaintKey {
					v = str(t["value"])
				}
			}
		case SlotDuration:
			v = str(spec["leaseDurationSeconds"])
		case SlotDriver:
			for _, d := range list(spec["drivers"]) {
				if name := str(d["name"]); strings.HasSuffix(name, CSIDriver) {
					v = name
				}
			}
		case SlotCount:
			v = str(obj["count"])
		}
		out[slot] = v
	}
	return out
}

// ConditionValue is how a condition reads in a slot: status/message.
func ConditionValue(status, message string) string { return status + "/" + message }

func condition(status map[string]any, typ string) string {
	for _, c := range list(status["conditions"]) {
		if c["type"] == typ {
			return ConditionValue(str(c["status"]), str(c["message"]))
		}
	}
	return ""
}

func nested[T any](obj map[string]any, path ...string) T {
	var zero T
	var cur any = obj
	for _, p := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return zero
		}
		cur = m[p]
	}
	v, _ := cur.(T)
	return v
}

func list(v any) []map[string]any {
	items, _ := v.([]any)
	var out []map[string]any
	for _, i := range items {
		if m, ok := i.(map[string]any); ok {
			out = append(out, m)
		}
	}
	return out
}

func str(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case float64:
		return fmt.Sprint(int64(x))
	default:
		return fmt.Sprint(x)
	}
}
