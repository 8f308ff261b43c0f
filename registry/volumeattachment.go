package registry

import (
	"math"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// volumeAttachmentDef is upstream's pkg/registry/storage/volumeattachment
// with the validation of pkg/apis/storage/validation: the attach/detach
// controller asks for a volume on a node in the spec, the CSI attacher
// reports in status. MutableCSINodeAllocatableCount is GA, so a status
// keeps the error codes it is given.
func volumeAttachmentDef() *resourceDef {
	return &resourceDef{
		gvr:         storagev1.SchemeGroupVersion.WithResource("volumeattachments"),
		kind:        "VolumeAttachment",
		singular:    "volumeattachment",
		keyPrefix:   "volumeattachments",
		newFunc:     func() runtime.Object { return &storagev1.VolumeAttachment{} },
		newListFunc: func() runtime.Object { return &storagev1.VolumeAttachmentList{} },
		validate: func(obj runtime.Object) field.ErrorList {
			return validateVolumeAttachment(obj.(*storagev1.VolumeAttachment))
		},
		validateUpdate: validateVolumeAttachmentUpdate,
		status: &statusDef{
			keepStatus: func(obj, old runtime.Object) {
				obj.(*storagev1.VolumeAttachment).Status = old.(*storagev1.VolumeAttachment).Status
			},
			keepSpec: func(obj, old runtime.Object) {
				obj.(*storagev1.VolumeAttachment).Spec = old.(*storagev1.VolumeAttachment).Spec
			},
			resetOnCreate: func(obj runtime.Object) {
				obj.(*storagev1.VolumeAttachment).Status = storagev1.VolumeAttachmentStatus{}
			},
			// The status strategy validates the whole object, as the main one.
			validate: func(obj, old runtime.Object) field.ErrorList {
				return append(validateVolumeAttachment(obj.(*storagev1.VolumeAttachment)), validateVolumeAttachmentUpdate(obj, old)...)
			},
			keepMetadata: true,
		},
		conditionalUpdate:   true,
		returnDeletedObject: true,
		columns: []metav1.TableColumnDefinition{
			nameCol,
			{Name: "Attacher", Type: "string", Format: "name", Description: storagev1.VolumeAttachmentSpec{}.SwaggerDoc()["attacher"]},
			col("PV", "string", storagev1.VolumeAttachmentSource{}.SwaggerDoc()["persistentVolumeName"]),
			col("Node", "string", storagev1.VolumeAttachmentSpec{}.SwaggerDoc()["nodeName"]),
			col("Attached", "boolean", storagev1.VolumeAttachmentStatus{}.SwaggerDoc()["attached"]),
			ageCol,
		},
		row: func(obj runtime.Object) []any {
			va := obj.(*storagev1.VolumeAttachment)
			pv := ""
			if va.Spec.Source.PersistentVolumeName != nil {
				pv = *va.Spec.Source.PersistentVolumeName
			}
			return []any{va.Name, va.Spec.Attacher, pv, va.Spec.NodeName, va.Status.Attached, age(va.CreationTimestamp)}
		},
	}
}

const (
	maxAttachedVolumeMetadataSize = 256 * (1 << 10) // 256 kB
	maxVolumeErrorMessageSize     = 1024
)

// validateVolumeAttachment is ValidateVolumeAttachment but for the
// metadata the strategy checks: a valid attacher, exactly one source and
// a valid node name; in status, at most 256 kB of metadata, error
// messages of at most 1024 characters and error codes not negative.
func validateVolumeAttachment(va *storagev1.VolumeAttachment) field.ErrorList {
	spec := field.NewPath("spec")
	errs := validateCSIDriverName(va.Spec.Attacher, spec.Child("attacher"))
	errs = append(errs, validateVolumeAttachmentSource(&va.Spec.Source, spec.Child("source"))...)
	errs = append(errs, invalidEach(spec.Child("nodeName"), va.Spec.NodeName, validation.NameIsDNSSubdomain(va.Spec.NodeName, false))...)

	status := field.NewPath("status")
	var size int64
	for k, v := range va.Status.AttachmentMetadata {
		size += int64(len(k)) + int64(len(v))
	}
	if size > maxAttachedVolumeMetadataSize {
		errs = append(errs, field.TooLong(status.Child("attachmentMetadata"), "", maxAttachedVolumeMetadataSize))
	}
	errs = append(errs, validateVolumeError(va.Status.AttachError, status.Child("attachError"))...)
	errs = append(errs, validateVolumeError(va.Status.DetachError, status.Child("detachError"))...)

	if name := va.Spec.Source.PersistentVolumeName; name != nil {
		errs = append(errs, invalidEach(field.NewPath("spec.source.persistentVolumeName"), *name, validation.NameIsDNSSubdomain(*name, false))...)
	}
	return errs
}

func validateVolumeAttachmentSource(source *storagev1.VolumeAttachmentSource, path *field.Path) field.ErrorList {
	switch {
	case source.InlineVolumeSpec == nil && source.PersistentVolumeName == nil:
		return field.ErrorList{field.Required(path, "must specify exactly one of inlineVolumeSpec and persistentVolumeName")}
	case source.InlineVolumeSpec != nil && source.PersistentVolumeName != nil:
		return field.ErrorList{field.Forbidden(path, "must specify exactly one of inlineVolumeSpec and persistentVolumeName")}
	case source.PersistentVolumeName != nil:
		if len(*source.PersistentVolumeName) == 0 {
			return field.ErrorList{field.Required(path.Child("persistentVolumeName"), "must specify non empty persistentVolumeName")}
		}
		return nil
	}
	return validateInlinePersistentVolumeSpec(source.InlineVolumeSpec, path.Child("inlineVolumeSpec"))
}

func validateVolumeError(e *storagev1.VolumeError, path *field.Path) field.ErrorList {
	if e == nil {
		return nil
	}
	var errs field.ErrorList
	if len(e.Message) > maxVolumeErrorMessageSize {
		errs = append(errs, field.TooLong(path.Child("message"), "", maxVolumeErrorMessageSize))
	}
	if e.ErrorCode != nil && *e.ErrorCode < 0 {
		errs = append(errs, field.Invalid(path.Child("errorCode"), *e.ErrorCode, utilvalidation.InclusiveRangeError(0, math.MaxInt32)))
	}
	return errs
}

// validateVolumeAttachmentUpdate is the rest of
// ValidateVolumeAttachmentUpdate: the spec never changes.
func validateVolumeAttachmentUpdate(obj, old runtime.Object) field.ErrorList {
	return validation.ValidateImmutableField(obj.(*storagev1.VolumeAttachment).Spec, old.(*storagev1.VolumeAttachment).Spec, field.NewPath("spec"))
}

var persistentVolumeAccessModes = sets.New(corev1.ReadWriteOnce, corev1.ReadOnlyMany, corev1.ReadWriteMany, corev1.ReadWriteOncePod)

// validateInlinePersistentVolumeSpec is upstream's ValidatePersistentVolumeSpec
// for an inline volume (validateInlinePersistentVolumeSpec true), the
// spec of an in-tree volume migrated to CSI: a CSI source and no other,
// access modes, no capacity, claim, node affinity or storage class, the
// Retain policy and the Filesystem mode if any. A source other than CSI is
// refused for being there, its own fields are not checked.
func validateInlinePersistentVolumeSpec(spec *corev1.PersistentVolumeSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	const inline = "may not be specified in the context of inline volumes"
	if spec.ClaimRef != nil {
		errs = append(errs, field.Forbidden(path.Child("claimRef"), inline))
	}
	if len(spec.Capacity) != 0 {
		errs = append(errs, field.Forbidden(path.Child("capacity"), inline))
	}
	if spec.CSI == nil {
		errs = append(errs, field.Required(path.Child("csi"), "has to be specified in the context of inline volumes"))
	}
	if len(spec.AccessModes) == 0 {
		errs = append(errs, field.Required(path.Child("accessModes"), ""))
	}
	rwop, other := false, false
	for _, mode := range spec.AccessModes {
		switch {
		case !persistentVolumeAccessModes.Has(mode):
			errs = append(errs, field.NotSupported(path.Child("accessModes"), mode, sets.List(persistentVolumeAccessModes)))
		case mode == corev1.ReadWriteOncePod:
			rwop = true
		default:
			other = true
		}
	}
	if rwop && other {
		errs = append(errs, field.Forbidden(path.Child("accessModes"), "may not use ReadWriteOncePod with other access modes"))
	}
	if p := spec.PersistentVolumeReclaimPolicy; len(p) > 0 && p != corev1.PersistentVolumeReclaimRetain {
		errs = append(errs, field.Forbidden(path.Child("persistentVolumeReclaimPolicy"), "may only be "+string(corev1.PersistentVolumeReclaimRetain)+" in the context of inline volumes"))
	}
	if spec.NodeAffinity != nil {
		errs = append(errs, field.Forbidden(path.Child("nodeAffinity"), inline))
	}
	// Upstream checks the sources in this order and refuses every one
	// after the first; an inline spec must have CSI, which comes last.
	sources := []struct {
		set  bool
		name string
	}{
		{spec.HostPath != nil, "hostPath"}, {spec.GCEPersistentDisk != nil, "gcePersistentDisk"},
		{spec.AWSElasticBlockStore != nil, "awsElasticBlockStore"}, {spec.Glusterfs != nil, "glusterfs"},
		{spec.Flocker != nil, "flocker"}, {spec.NFS != nil, "nfs"}, {spec.RBD != nil, "rbd"}, {spec.Quobyte != nil, "quobyte"},
		{spec.CephFS != nil, "cephFS"}, {spec.ISCSI != nil, "iscsi"}, {spec.Cinder != nil, "cinder"}, {spec.FC != nil, "fc"},
		{spec.FlexVolume != nil, "flexVolume"}, {spec.AzureFile != nil, "azureFile"}, {spec.VsphereVolume != nil, "vsphereVolume"},
		{spec.PhotonPersistentDisk != nil, "photonPersistentDisk"}, {spec.PortworxVolume != nil, "portworxVolume"},
		{spec.AzureDisk != nil, "azureDisk"}, {spec.ScaleIO != nil, "scaleIO"}, {spec.Local != nil, "local"},
		{spec.StorageOS != nil, "storageos"}, {spec.CSI != nil, "csi"},
	}
	volumes := 0
	for _, s := range sources {
		if !s.set {
			continue
		}
		// A flex volume counts but is never refused for coming second.
		if volumes > 0 && s.name != "flexVolume" {
			errs = append(errs, field.Forbidden(path.Child(s.name), "may not specify more than 1 volume type"))
			continue
		}
		volumes++
		if s.name == "csi" {
			errs = append(errs, validateCSIPersistentVolumeSource(spec.CSI, path.Child("csi"))...)
		}
	}
	if volumes == 0 {
		errs = append(errs, field.Required(path, "must specify a volume type"))
	}
	if len(spec.StorageClassName) > 0 {
		errs = append(errs, field.Forbidden(path.Child("storageClassName"), inline))
	}
	if m := spec.VolumeMode; m != nil && *m != corev1.PersistentVolumeFilesystem {
		errs = append(errs, field.Forbidden(path.Child("volumeMode"), "may not specify volumeMode other than "+string(corev1.PersistentVolumeFilesystem)+" in the context of inline volumes"))
	}
	// VolumeAttributesClass is GA.
	if name := spec.VolumeAttributesClassName; name != nil {
		if len(*name) == 0 {
			errs = append(errs, field.Required(path.Child("volumeAttributesClassName"), "an empty string is disallowed"))
		} else {
			errs = append(errs, invalidEach(path.Child("volumeAttributesClassName"), *name, validation.NameIsDNSSubdomain(*name, false))...)
		}
		if spec.CSI == nil {
			errs = append(errs, field.Required(path.Child("csi"), "has to be specified when using volumeAttributesClassName"))
		}
	}
	return errs
}

// validateCSIPersistentVolumeSource: a valid driver, a volume handle, and
// secret references with a name and a namespace.
func validateCSIPersistentVolumeSource(csi *corev1.CSIPersistentVolumeSource, path *field.Path) field.ErrorList {
	errs := validateCSIDriverName(csi.Driver, path.Child("driver"))
	if len(csi.VolumeHandle) == 0 {
		errs = append(errs, field.Required(path.Child("volumeHandle"), ""))
	}
	for _, ref := range []struct {
		ref  *corev1.SecretReference
		name string
	}{
		{csi.ControllerPublishSecretRef, "controllerPublishSecretRef"}, {csi.ControllerExpandSecretRef, "controllerExpandSecretRef"},
		{csi.NodePublishSecretRef, "nodePublishSecretRef"}, {csi.NodeExpandSecretRef, "nodeExpandSecretRef"},
	} {
		if ref.ref == nil {
			continue
		}
		p := path.Child(ref.name)
		if len(ref.ref.Name) == 0 {
			errs = append(errs, field.Required(p.Child("name"), ""))
		} else {
			errs = append(errs, invalidEach(p.Child("name"), ref.ref.Name, utilvalidation.IsDNS1123Subdomain(ref.ref.Name))...)
		}
		if len(ref.ref.Namespace) == 0 {
			errs = append(errs, field.Required(p.Child("namespace"), ""))
		} else {
			errs = append(errs, dnsLabel(p.Child("namespace"), ref.ref.Namespace)...)
		}
	}
	return errs
}
