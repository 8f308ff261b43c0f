package registry

import (
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func csiNode(name string, drivers ...storagev1.CSINodeDriver) *storagev1.CSINode {
	return &storagev1.CSINode{ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: "1"}, Spec: storagev1.CSINodeSpec{Drivers: drivers}}
}

func csiNodeDriver(name, nodeID string, keys ...string) storagev1.CSINodeDriver {
	return storagev1.CSINodeDriver{Name: name, NodeID: nodeID, TopologyKeys: keys}
}

func withCount(d storagev1.CSINodeDriver, count *int32) storagev1.CSINodeDriver {
	d.Allocatable = &storagev1.VolumeNodeResources{Count: count}
	return d
}

// The cases of TestCSINodeValidation in k8s.io/kubernetes
// pkg/apis/storage/validation/validation_test.go, with the error each
// invalid one gets.
func TestCSINodeValidate(t *testing.T) {
	zones := []string{"company.com/zone1", "company.com/zone2"}
	tests := []struct {
		name string
		node *storagev1.CSINode
		err  string // "" when valid
	}{
		{name: "driver name: dot only", node: csiNode("foo1", csiNodeDriver("io.kubernetes.storage.csi.driver", "nodeA", zones...))},
		{name: "driver name: dash only", node: csiNode("foo2", csiNodeDriver("io-kubernetes-storage-csi-driver", "nodeA", zones...))},
		{name: "driver name: numbers", node: csiNode("foo3", csiNodeDriver("1io-kubernetes-storage-2-csi-driver3", "nodeA", zones...))},
		{name: "driver name: dot, dash", node: csiNode("foo4", csiNodeDriver("io.kubernetes.storage-csi-driver", "nodeA", zones...))},
		{name: "driver name: dot, dash, and numbers", node: csiNode("foo5", csiNodeDriver("1io.kubernetes-storage-2-csi-driver3", "nodeA", zones...))},
		{name: "driver name length 1", node: csiNode("foo2", csiNodeDriver("a", "nodeA", zones...))},
		{name: "multiple drivers with different node IDs, topology keys", node: csiNode("foo6",
			csiNodeDriver("driver1", "node1", "key1", "key2"), csiNodeDriver("driverB", "nodeA", "keyA", "keyB"))},
		{name: "multiple drivers with same node IDs, topology keys", node: csiNode("foo7",
			csiNodeDriver("driver1", "node1", "key1"), csiNodeDriver("driver2", "node1", "key1"))},
		{name: "volume limits being zero", node: csiNode("foo11", withCount(csiNodeDriver("io.kubernetes.storage.csi.driver", "nodeA", zones...), ptrTo(int32(0))))},
		{name: "volume limits with positive number", node: csiNode("foo11", withCount(csiNodeDriver("io.kubernetes.storage.csi.driver", "nodeA", zones...), ptrTo(int32(1))))},
		{name: "topology key names with -, _, and dot .", node: csiNode("foo8",
			csiNodeDriver("driver1", "node1", "zone_1", "zone.2"), csiNodeDriver("driver2", "node1", "zone-3", "zone.4"))},
		{name: "topology prefix with - and dot.", node: csiNode("foo9", csiNodeDriver("driver1", "node1", "company-com/zone1", "company.com/zone2"))},
		{name: "no topology keys", node: csiNode("foo10", csiNodeDriver("driver-name", "nodeA"))},
		{name: "no drivers", node: csiNode("foo10")},

		{name: "empty driver name", node: csiNode("foo1", csiNodeDriver("", "nodeA", zones...)), err: "spec.drivers[0].name: Required value"},
		{name: "invalid start char in driver name", node: csiNode("foo3", csiNodeDriver("_io.kubernetes.storage.csi.driver", "nodeA", zones...)),
			err: "spec.drivers[0].name: Invalid value: \"_io.kubernetes.storage.csi.driver\""},
		{name: "invalid end char in driver name", node: csiNode("foo4", csiNodeDriver("io.kubernetes.storage.csi.driver/", "nodeA", zones...)),
			err: "spec.drivers[0].name: Invalid value"},
		{name: "invalid separators in driver name", node: csiNode("foo5", csiNodeDriver("io/kubernetes/storage/csi~driver", "nodeA", zones...)),
			err: "spec.drivers[0].name: Invalid value"},
		{name: "driver name: underscore only", node: csiNode("foo6", csiNodeDriver("io_kubernetes_storage_csi_driver", "nodeA", zones...)),
			err: "spec.drivers[0].name: Invalid value"},
		{name: "driver name length > 63", node: csiNode("foo7", csiNodeDriver(strings.Repeat("a", 88), "nodeA", zones...)),
			err: "spec.drivers[0].name: Too long: may not be more than 63 bytes"},
		{name: "empty individual topology key", node: csiNode("foo9", csiNodeDriver("driver-name", "nodeA", "company.com/zone1", "")),
			err: "spec.drivers[0]: Required value"},
		{name: "duplicate drivers in driver specs", node: csiNode("foo10",
			csiNodeDriver("driver1", "node1", "key1", "key2"), csiNodeDriver("driver1", "nodeX", "keyA", "keyB")),
			err: "spec.drivers[1].name: Duplicate value: \"driver1\""},
		{name: "single driver with duplicate topology keys in driver specs", node: csiNode("foo11", csiNodeDriver("driver1", "node1", "key1", "key1")),
			err: "spec.drivers[0]: Duplicate value: \"key1\""},
		{name: "multiple drivers with one set of duplicate topology keys in driver specs", node: csiNode("foo12",
			csiNodeDriver("driver1", "node1", "key1"), csiNodeDriver("driver2", "nodeX", "keyA", "keyA")),
			err: "spec.drivers[1]: Duplicate value: \"keyA\""},
		{name: "empty NodeID", node: csiNode("foo13", csiNodeDriver("driver-name", "", zones...)), err: "spec.drivers[0].nodeID: Required value"},
		{name: "volume limits with negative number", node: csiNode("foo11", withCount(csiNodeDriver("io.kubernetes.storage.csi.driver", "nodeA", zones...), ptrTo(int32(-1)))),
			err: "spec.drivers[0].allocatable.count: Invalid value: -1: must be greater than or equal to 0"},
		{name: "topology prefix should be lower case", node: csiNode("foo14", csiNodeDriver("driver-name", "node1", "Company.Com/zone1", "company.com/zone2")),
			err: "spec.drivers[0]: Invalid value: \"Company.Com/zone1\""},
		{name: "node ID too long", node: csiNode("foo15", csiNodeDriver("driver-name", strings.Repeat("a", 257), zones...)),
			err: "spec.drivers[0].nodeID: Invalid value: \"" + strings.Repeat("a", 257) + "\": must be 256 characters or less"},
		{name: "invalid name", node: csiNode("Node_1"), err: "metadata.name: Invalid value"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errorsContain(t, validateCreate(t, csiNodeDef(), tt.node), tt.err)
		})
	}
}

// The cases of TestCSINodeUpdateValidation in validation_test.go with
// MutableCSINodeAllocatableCount on (GA): drivers come and go, one that
// stays keeps its node ID and topology keys, its count may change.
func TestCSINodeValidateUpdate(t *testing.T) {
	zones := []string{"company.com/zone1", "company.com/zone2"}
	driver1 := csiNodeDriver("io.kubernetes.storage.csi.driver-1", "nodeA", zones...)
	driver2 := withCount(csiNodeDriver("io.kubernetes.storage.csi.driver-2", "nodeA", zones...), ptrTo(int32(20)))
	old := csiNode("foo1", driver1, driver2)
	tests := []struct {
		name string
		new  *storagev1.CSINode
		err  string
	}{
		{name: "no change", new: csiNode("foo1", driver1, driver2)},
		{name: "remove a driver", new: csiNode("foo1", driver1)},
		{name: "add a driver", new: csiNode("foo1", driver1, driver2,
			withCount(csiNodeDriver("io.kubernetes.storage.csi.driver-3", "nodeA", zones...), ptrTo(int32(30))))},
		{name: "remove a driver and add a driver", new: csiNode("foo1", driver1,
			withCount(csiNodeDriver("io.kubernetes.storage.csi.new-driver", "nodeA", zones...), ptrTo(int32(30))))},
		{name: "update allocatable with a different volume limit", new: csiNode("foo1", driver1, withCount(driver2, ptrTo(int32(21))))},
		{name: "set a previously unset allocatable", new: csiNode("foo1", withCount(driver1, ptrTo(int32(10))), driver2)},
		{name: "remove allocatable", new: csiNode("foo1", driver1, csiNodeDriver("io.kubernetes.storage.csi.driver-2", "nodeA", zones...))},

		{name: "invalid change node id", new: csiNode("foo1", csiNodeDriver("io.kubernetes.storage.csi.driver-1", "nodeB", zones...), driver2),
			err: "spec.drivers: Invalid value"},
		{name: "invalid change topology keys", new: csiNode("foo1", driver1,
			withCount(csiNodeDriver("io.kubernetes.storage.csi.driver-2", "nodeA", "company.com/zone2"), ptrTo(int32(20)))),
			err: "spec.drivers: Invalid value"},
		{name: "invalid new driver", new: csiNode("foo1", driver1, driver2, csiNodeDriver("d3", "")), err: "spec.drivers[2].nodeID: Required value"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errs := validateUpdate(t, csiNodeDef(), tt.new, old)
			errorsContain(t, errs, tt.err)
			if tt.err == "spec.drivers: Invalid value" && !strings.Contains(errs.ToAggregate().Error(), "field is immutable") {
				t.Errorf("errors %v do not say the driver is immutable", errs)
			}
		})
	}
}

func csiNodeWithHealth(health ...storagev1.StorageHealth) *storagev1.CSINode {
	n := csiNode("node1", csiNodeDriver("driver1", "node1"))
	n.ResourceVersion = "2"
	n.Status.StorageHealth = health
	return n
}

func healthOf(name string, conditions ...storagev1.StorageHealthCondition) storagev1.StorageHealth {
	return storagev1.StorageHealth{Name: name, HealthConditions: conditions}
}

// The cases of TestValidateCSINodeStatusUpdate in validation_test.go,
// through the status subresource's validation.
func TestCSINodeValidateStatusUpdate(t *testing.T) {
	old := csiNode("node1", csiNodeDriver("driver1", "node1"))
	unreachable := func(reason string) storagev1.StorageHealthCondition {
		return storagev1.StorageHealthCondition{Status: storagev1.StorageUnreachable, Reason: reason}
	}
	tests := []struct {
		name string
		new  *storagev1.CSINode
		err  string
	}{
		{name: "valid status with StorageUnreachable", new: csiNodeWithHealth(healthOf("driver1", unreachable("BackendDown")))},
		{name: "valid status with StorageDegraded", new: csiNodeWithHealth(healthOf("driver1",
			storagev1.StorageHealthCondition{Status: storagev1.StorageDegraded, Reason: "HighLatency"}))},
		{name: "empty status is valid", new: csiNodeWithHealth()},
		{name: "duplicate conditions are allowed within the bound", new: csiNodeWithHealth(healthOf("driver1", unreachable("BackendDown"), unreachable("BackendDown")))},
		{name: "invalid status type", new: csiNodeWithHealth(healthOf("driver1", storagev1.StorageHealthCondition{Status: "InvalidType", Reason: "SomeReason"})),
			err: "status.storageHealth[0].healthConditions[0].status: Unsupported value: \"InvalidType\""},
		{name: "empty driver name", new: csiNodeWithHealth(healthOf("", unreachable("BackendDown"))), err: "status.storageHealth[0].name: Required value"},
		{name: "empty reason", new: csiNodeWithHealth(healthOf("driver1", unreachable(""))), err: "status.storageHealth[0].healthConditions[0].reason: Required value"},
		{name: "invalid reason format", new: csiNodeWithHealth(healthOf("driver1", unreachable("invalid;val"))),
			err: "status.storageHealth[0].healthConditions[0].reason: Invalid value"},
		{name: "duplicate driver", new: csiNodeWithHealth(healthOf("driver1"), healthOf("driver1")), err: "status.storageHealth[1]: Duplicate value: \"driver1\""},
		{name: "reason too long", new: csiNodeWithHealth(healthOf("driver1", unreachable(strings.Repeat("a", 257)))),
			err: "status.storageHealth[0].healthConditions[0].reason: Too long"},
		{name: "too many conditions", new: csiNodeWithHealth(healthOf("driver1", make([]storagev1.StorageHealthCondition, maxStorageHealthConditions+1)...)),
			err: "status.storageHealth[0].healthConditions: Too many: 17: must have at most 16 items"},
		{name: "invalid access mode", new: csiNodeWithHealth(healthOf("driver1", storagev1.StorageHealthCondition{
			Status: storagev1.StorageUnreachable, Reason: "BackendDown", AccessMode: ptrTo(corev1.PersistentVolumeAccessMode("invalid"))})),
			err: "status.storageHealth[0].healthConditions[0].accessMode: Unsupported value"},
		{name: "invalid volume mode", new: csiNodeWithHealth(healthOf("driver1", storagev1.StorageHealthCondition{
			Status: storagev1.StorageUnreachable, Reason: "BackendDown", VolumeMode: ptrTo(corev1.PersistentVolumeMode("invalid"))})),
			err: "status.storageHealth[0].healthConditions[0].volumeMode: Unsupported value: \"invalid\": supported values: \"Filesystem\", \"Block\""},
	}
	st := statusStrategy{strategy: newStrategy(nil, csiNodeDef())}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errorsContain(t, st.ValidateUpdate(t.Context(), tt.new, old), tt.err)
		})
	}
}

// TestPrepareForCreate_ClearsStatus, TestPrepareForUpdate_PreservesStatus,
// TestStatusPrepareForUpdate_PreservesSpec and
// TestDropDisabledCSINodeFields_GateOff in k8s.io/kubernetes
// pkg/registry/storage/csinode/strategy_test.go, with CSIVolumeHealth
// off as it is by default: storage health is kept only where it is
// already stored.
func TestCSINodeStrategy(t *testing.T) {
	ctx := t.Context()
	st := newStrategy(nil, csiNodeDef())
	status := statusStrategy{strategy: st}
	health := healthOf("driver1", storagev1.StorageHealthCondition{Status: storagev1.StorageUnreachable, Reason: "BackendDown"})

	created := csiNodeWithHealth(health)
	st.PrepareForCreate(ctx, created)
	if len(created.Status.StorageHealth) != 0 {
		t.Errorf("create kept status %v", created.Status)
	}

	updated := csiNode("node1")
	st.PrepareForUpdate(ctx, updated, csiNodeWithHealth(health))
	if len(updated.Status.StorageHealth) != 1 {
		t.Errorf("an update of the main resource changed status to %v", updated.Status)
	}

	// A status update keeps spec and metadata, and cannot add health.
	old := csiNode("node1", csiNodeDriver("driver1", "node1"))
	old.Labels = map[string]string{"a": "b"}
	viaStatus := csiNodeWithHealth(health)
	viaStatus.Spec.Drivers = nil
	viaStatus.Labels = map[string]string{"c": "d"}
	status.PrepareForUpdate(ctx, viaStatus, old)
	if !reflect.DeepEqual(viaStatus.Spec, old.Spec) || !reflect.DeepEqual(viaStatus.Labels, old.Labels) {
		t.Errorf("a status update changed spec %v or labels %v", viaStatus.Spec, viaStatus.Labels)
	}
	if len(viaStatus.Status.StorageHealth) != 0 {
		t.Errorf("a status update added storage health with CSIVolumeHealth off: %v", viaStatus.Status)
	}

	// Health already stored stays writable.
	kept := csiNodeWithHealth(health, healthOf("driver2"))
	status.PrepareForUpdate(ctx, kept, csiNodeWithHealth(health))
	if len(kept.Status.StorageHealth) != 2 {
		t.Errorf("a status update dropped stored storage health: %v", kept.Status)
	}

	// Server-side apply: the main resource does not own status, status
	// owns neither metadata nor spec.
	if got := st.GetResetFields()["storage.k8s.io/v1"].String(); got != ".status" {
		t.Errorf("main reset fields %q, want .status", got)
	}
	if got := status.GetResetFields()["storage.k8s.io/v1"].String(); got != ".metadata\n.spec" {
		t.Errorf("status reset fields %q, want .metadata and .spec", got)
	}
}

// printCSINode in k8s.io/kubernetes pkg/printers/internalversion/printers.go.
func TestCSINodeTable(t *testing.T) {
	n := csiNode("n", csiNodeDriver("a", "n"), csiNodeDriver("b", "n"))
	if got, want := tableRow(t, csiNodeDef(), n), []any{"n", int64(2), "<unknown>"}; !reflect.DeepEqual(got, want) {
		t.Errorf("row = %#v, want %#v", got, want)
	}
}
