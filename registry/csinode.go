package registry

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// csiNodeDef is upstream's pkg/registry/storage/csinode with the
// validation of pkg/apis/storage/validation: a kubelet creates its
// node's CSINode and updates the drivers registered on it. Feature gates
// at their 1.37 defaults: a driver's allocatable count may change
// (MutableCSINodeAllocatableCount, GA); status.storageHealth is kept only
// once stored (CSIVolumeHealth, alpha and off), so a status update cannot
// set it on a CSINode that has none.
func csiNodeDef() *resourceDef {
	return &resourceDef{
		gvr:         storagev1.SchemeGroupVersion.WithResource("csinodes"),
		kind:        "CSINode",
		singular:    "csinode",
		keyPrefix:   "csinodes",
		newFunc:     func() runtime.Object { return &storagev1.CSINode{} },
		newListFunc: func() runtime.Object { return &storagev1.CSINodeList{} },
		validate: func(obj runtime.Object) field.ErrorList {
			return validateCSINodeDrivers(obj.(*storagev1.CSINode).Spec.Drivers, field.NewPath("spec", "drivers"))
		},
		validateUpdate: validateCSINodeUpdate,
		status: &statusDef{
			keepStatus:    func(obj, old runtime.Object) { obj.(*storagev1.CSINode).Status = old.(*storagev1.CSINode).Status },
			keepSpec:      func(obj, old runtime.Object) { obj.(*storagev1.CSINode).Spec = old.(*storagev1.CSINode).Spec },
			resetOnCreate: func(obj runtime.Object) { obj.(*storagev1.CSINode).Status = storagev1.CSINodeStatus{} },
			validate:      validateCSINodeStatusUpdate,
			keepMetadata:  true,
			prepare:       dropDisabledCSINodeStatus,
		},
		conditionalUpdate:   true,
		returnDeletedObject: true,
		columns: []metav1.TableColumnDefinition{
			nameCol,
			col("Drivers", "integer", "Drivers indicates the number of CSI drivers registered on the node"),
			ageCol,
		},
		row: func(obj runtime.Object) []any {
			n := obj.(*storagev1.CSINode)
			return []any{n.Name, int64(len(n.Spec.Drivers)), age(n.CreationTimestamp)}
		},
	}
}

// dropDisabledCSINodeStatus is dropDisabledCSINodeFields with
// CSIVolumeHealth off: storage health is written only where it already
// is.
func dropDisabledCSINodeStatus(obj, old runtime.Object) {
	if len(old.(*storagev1.CSINode).Status.StorageHealth) == 0 {
		obj.(*storagev1.CSINode).Status.StorageHealth = nil
	}
}

const csiNodeIDMaxLength = 256

// validateCSINodeDrivers: each driver once, with a valid name, a node ID
// of at most 256 characters, a count of volumes not negative and unique,
// qualified topology keys.
func validateCSINodeDrivers(drivers []storagev1.CSINodeDriver, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	names := sets.New[string]()
	for i, d := range drivers {
		p := path.Index(i)
		errs = append(errs, validateCSIDriverName(d.Name, p.Child("name"))...)
		if len(d.NodeID) == 0 {
			errs = append(errs, field.Required(p.Child("nodeID"), d.NodeID))
		}
		if len(d.NodeID) > csiNodeIDMaxLength {
			errs = append(errs, field.Invalid(p.Child("nodeID"), d.NodeID, fmt.Sprintf("must be %d characters or less", csiNodeIDMaxLength)))
		}
		if a := d.Allocatable; a != nil && a.Count != nil {
			errs = append(errs, validation.ValidateNonnegativeField(int64(*a.Count), p.Child("allocatable", "count"))...)
		}
		if names.Has(d.Name) {
			errs = append(errs, field.Duplicate(p.Child("name"), d.Name))
		}
		names.Insert(d.Name)
		keys := sets.New[string]()
		for _, key := range d.TopologyKeys {
			if len(key) == 0 {
				errs = append(errs, field.Required(p, key))
			}
			if keys.Has(key) {
				errs = append(errs, field.Duplicate(p, key))
			}
			keys.Insert(key)
			errs = append(errs, qualifiedName(p, key)...)
		}
	}
	return errs
}

// validateCSINodeUpdate is the rest of ValidateCSINodeUpdate: a driver
// that stays keeps its node ID and topology keys; only its allocatable
// count may change. Drivers may come and go.
func validateCSINodeUpdate(obj, old runtime.Object) field.ErrorList {
	n, o := obj.(*storagev1.CSINode), old.(*storagev1.CSINode)
	var errs field.ErrorList
	for _, od := range o.Spec.Drivers {
		for _, nd := range n.Spec.Drivers {
			if od.Name != nd.Name {
				continue
			}
			od, nd := od.DeepCopy(), nd.DeepCopy()
			od.Allocatable, nd.Allocatable = nil, nil
			errs = append(errs, validation.ValidateImmutableField(nd, od, field.NewPath("spec").Child("drivers"))...)
		}
	}
	return errs
}

var (
	storageHealthStatuses    = sets.New(storagev1.StorageUnreachable, storagev1.StorageDegraded)
	storageHealthAccessModes = sets.New(corev1.ReadWriteOnce, corev1.ReadOnlyMany, corev1.ReadWriteMany, corev1.ReadWriteOncePod)
)

const maxStorageHealthConditions = 16

// validateCSINodeStatusUpdate is ValidateCSINodeStatusUpdate but for the
// metadata the strategy checks: one entry per driver, each with at most
// 16 valid conditions.
func validateCSINodeStatusUpdate(obj, _ runtime.Object) field.ErrorList {
	var errs field.ErrorList
	path := field.NewPath("status", "storageHealth")
	seen := sets.New[string]()
	for i, h := range obj.(*storagev1.CSINode).Status.StorageHealth {
		p := path.Index(i)
		if seen.Has(h.Name) {
			errs = append(errs, field.Duplicate(p, h.Name))
		}
		seen.Insert(h.Name)
		errs = append(errs, validateStorageHealth(h, p)...)
	}
	return errs
}

func validateStorageHealth(h storagev1.StorageHealth, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(h.Name) == 0 {
		errs = append(errs, field.Required(path.Child("name"), ""))
	} else {
		errs = append(errs, validateCSIDriverName(h.Name, path.Child("name"))...)
	}
	if len(h.HealthConditions) > maxStorageHealthConditions {
		return append(errs, field.TooMany(path.Child("healthConditions"), len(h.HealthConditions), maxStorageHealthConditions))
	}
	for i, c := range h.HealthConditions {
		p := path.Child("healthConditions").Index(i)
		if !storageHealthStatuses.Has(c.Status) {
			errs = append(errs, field.NotSupported(p.Child("status"), c.Status, sets.List(storageHealthStatuses)))
		}
		if len(c.Reason) == 0 {
			errs = append(errs, field.Required(p.Child("reason"), ""))
		} else {
			errs = append(errs, invalidEach(p.Child("reason"), c.Reason, metav1validation.IsValidConditionReason(c.Reason))...)
			if len(c.Reason) > 256 {
				errs = append(errs, field.TooLong(p.Child("reason"), c.Reason, 256))
			}
		}
		if len(c.Message) > 1024 {
			errs = append(errs, field.TooLong(p.Child("message"), c.Message, 1024))
		}
		if c.AccessMode != nil && !storageHealthAccessModes.Has(*c.AccessMode) {
			errs = append(errs, field.NotSupported(p.Child("accessMode"), *c.AccessMode, sets.List(storageHealthAccessModes)))
		}
		if c.VolumeMode != nil && *c.VolumeMode != corev1.PersistentVolumeFilesystem && *c.VolumeMode != corev1.PersistentVolumeBlock {
			errs = append(errs, field.NotSupported(p.Child("volumeMode"), *c.VolumeMode,
				[]corev1.PersistentVolumeMode{corev1.PersistentVolumeFilesystem, corev1.PersistentVolumeBlock}))
		}
	}
	return errs
}
