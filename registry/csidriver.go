package registry

import (
	"strings"
	"time"

	storagev1 "k8s.io/api/storage/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// csiDriverDef is upstream's pkg/registry/storage/csidriver with the
// defaulting of pkg/apis/storage/v1 and the validation of
// pkg/apis/storage/validation, its feature gates at their 1.37 defaults:
// SELinuxMountReadWriteOncePod, MutableCSINodeAllocatableCount and
// CSIServiceAccountTokenSecrets are GA, VolumeLimitScaling is beta and
// on, so no field is dropped and seLinuxMount and
// preventPodSchedulingIfMissing are defaulted and required.
func csiDriverDef() *resourceDef {
	return &resourceDef{
		gvr:         storagev1.SchemeGroupVersion.WithResource("csidrivers"),
		kind:        "CSIDriver",
		singular:    "csidriver",
		keyPrefix:   "csidrivers",
		newFunc:     func() runtime.Object { return &storagev1.CSIDriver{} },
		newListFunc: func() runtime.Object { return &storagev1.CSIDriverList{} },
		defaults:    func(obj any) { defaultCSIDriver(obj.(*storagev1.CSIDriver)) },
		validate: func(obj runtime.Object) field.ErrorList {
			return validateCSIDriverSpec(&obj.(*storagev1.CSIDriver).Spec, field.NewPath("spec"))
		},
		validateUpdate: validateCSIDriverUpdate,
		// Any change of the spec is a new generation.
		prepareForUpdate: func(obj, old runtime.Object) {
			d, o := obj.(*storagev1.CSIDriver), old.(*storagev1.CSIDriver)
			if !apiequality.Semantic.DeepEqual(o.Spec, d.Spec) {
				d.Generation = o.Generation + 1
			}
		},
		warnings:            csiDriverWarnings,
		conditionalUpdate:   true,
		returnDeletedObject: true,
		columns: []metav1.TableColumnDefinition{
			nameCol,
			col("AttachRequired", "boolean", storagev1.CSIDriverSpec{}.SwaggerDoc()["attachRequired"]),
			col("PodInfoOnMount", "boolean", storagev1.CSIDriverSpec{}.SwaggerDoc()["podInfoOnMount"]),
			col("StorageCapacity", "boolean", storagev1.CSIDriverSpec{}.SwaggerDoc()["storageCapacity"]),
			col("TokenRequests", "string", storagev1.CSIDriverSpec{}.SwaggerDoc()["tokenRequests"]),
			col("RequiresRepublish", "boolean", storagev1.CSIDriverSpec{}.SwaggerDoc()["requiresRepublish"]),
			col("Modes", "string", storagev1.CSIDriverSpec{}.SwaggerDoc()["volumeLifecycleModes"]),
			ageCol,
		},
		row: func(obj runtime.Object) []any { return csiDriverRow(obj.(*storagev1.CSIDriver)) },
	}
}

// defaultCSIDriver is SetDefaults_CSIDriver.
func defaultCSIDriver(d *storagev1.CSIDriver) {
	s := &d.Spec
	if s.AttachRequired == nil {
		s.AttachRequired = ptrTo(true)
	}
	if s.PodInfoOnMount == nil {
		s.PodInfoOnMount = ptrTo(false)
	}
	if s.StorageCapacity == nil {
		s.StorageCapacity = ptrTo(false)
	}
	if s.FSGroupPolicy == nil {
		s.FSGroupPolicy = ptrTo(storagev1.ReadWriteOnceWithFSTypeFSGroupPolicy)
	}
	if len(s.VolumeLifecycleModes) == 0 {
		s.VolumeLifecycleModes = append(s.VolumeLifecycleModes, storagev1.VolumeLifecyclePersistent)
	}
	if s.RequiresRepublish == nil {
		s.RequiresRepublish = ptrTo(false)
	}
	if s.SELinuxMount == nil {
		s.SELinuxMount = ptrTo(false)
	}
	if s.PreventPodSchedulingIfMissing == nil {
		s.PreventPodSchedulingIfMissing = ptrTo(false)
	}
}

var fsGroupPolicies = sets.New(string(storagev1.ReadWriteOnceWithFSTypeFSGroupPolicy), string(storagev1.FileFSGroupPolicy), string(storagev1.NoneFSGroupPolicy))

// validateCSIDriverSpec is upstream's validateCSIDriverSpec; its paths
// are upstream's, "attachedRequired" too.
func validateCSIDriverSpec(s *storagev1.CSIDriverSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	required := func(v *bool, name string) {
		if v == nil {
			errs = append(errs, field.Required(path.Child(name), ""))
		}
	}
	required(s.AttachRequired, "attachedRequired")
	required(s.PodInfoOnMount, "podInfoOnMount")
	required(s.StorageCapacity, "storageCapacity")
	if p := s.FSGroupPolicy; p != nil && !fsGroupPolicies.Has(string(*p)) {
		errs = append(errs, field.NotSupported(path.Child("fsGroupPolicy"), p, sets.List(fsGroupPolicies)))
	}
	errs = append(errs, validateTokenRequests(s.TokenRequests, path.Child("tokenRequests"))...)
	for _, mode := range s.VolumeLifecycleModes {
		if mode != storagev1.VolumeLifecyclePersistent && mode != storagev1.VolumeLifecycleEphemeral {
			errs = append(errs, field.NotSupported(path.Child("volumeLifecycleModes"), mode,
				[]string{string(storagev1.VolumeLifecyclePersistent), string(storagev1.VolumeLifecycleEphemeral)}))
		}
	}
	required(s.SELinuxMount, "seLinuxMount")
	if p := s.NodeAllocatableUpdatePeriodSeconds; p != nil && *p < 10 {
		errs = append(errs, field.Invalid(path.Child("nodeAllocatableUpdatePeriodSeconds"), *p, "must be greater than or equal to 10 seconds"))
	}
	if s.ServiceAccountTokenInSecrets != nil && len(s.TokenRequests) == 0 {
		errs = append(errs, field.Invalid(path.Child("serviceAccountTokenInSecrets"), s.ServiceAccountTokenInSecrets,
			"serviceAccountTokenInSecrets is set but no tokenRequests are specified"))
	}
	required(s.PreventPodSchedulingIfMissing, "preventPodSchedulingIfMissing")
	return errs
}

// validateTokenRequests: one request per audience (one may have none),
// each token valid for 10 minutes to 2^32 seconds.
func validateTokenRequests(requests []storagev1.TokenRequest, path *field.Path) field.ErrorList {
	const minExpiration = 10 * time.Minute
	var errs field.ErrorList
	audiences := sets.New[string]()
	for i, r := range requests {
		p := path.Index(i)
		if audiences.Has(r.Audience) {
			errs = append(errs, field.Duplicate(p.Child("audience"), r.Audience))
			continue
		}
		audiences.Insert(r.Audience)
		if r.ExpirationSeconds == nil {
			continue
		}
		if *r.ExpirationSeconds < int64(minExpiration.Seconds()) {
			errs = append(errs, field.Invalid(p.Child("expirationSeconds"), *r.ExpirationSeconds, "may not specify a duration less than 10 minutes"))
		}
		if *r.ExpirationSeconds > 1<<32 {
			errs = append(errs, field.Invalid(p.Child("expirationSeconds"), *r.ExpirationSeconds, "may not specify a duration larger than 2^32 seconds"))
		}
	}
	return errs
}

// validateCSIDriverUpdate is the rest of ValidateCSIDriverUpdate: whether
// the driver attaches and its lifecycle modes are fixed.
func validateCSIDriverUpdate(obj, old runtime.Object) field.ErrorList {
	d, o := obj.(*storagev1.CSIDriver), old.(*storagev1.CSIDriver)
	errs := validation.ValidateImmutableField(d.Spec.AttachRequired, o.Spec.AttachRequired, field.NewPath("spec", "attachedRequired"))
	return append(errs, validation.ValidateImmutableField(d.Spec.VolumeLifecycleModes, o.Spec.VolumeLifecycleModes, field.NewPath("spec", "volumeLifecycleModes"))...)
}

const warningServiceAccountTokenInSecretsRecommended = "spec.serviceAccountTokenInSecrets is unset; if supported by this CSI driver, set to true to prevent possible logging of tokens in volume attributes"

// csiDriverWarnings: a driver that gets tokens is told to take them from
// secrets, on create and when its token requests change.
func csiDriverWarnings(obj, old runtime.Object) []string {
	d := obj.(*storagev1.CSIDriver)
	if len(d.Spec.TokenRequests) == 0 || d.Spec.ServiceAccountTokenInSecrets != nil {
		return nil
	}
	if old != nil && apiequality.Semantic.DeepEqual(old.(*storagev1.CSIDriver).Spec.TokenRequests, d.Spec.TokenRequests) {
		return nil
	}
	return []string{warningServiceAccountTokenInSecretsRecommended}
}

// csiDriverRow is printCSIDriver.
func csiDriverRow(d *storagev1.CSIDriver) []any {
	attachRequired, podInfoOnMount, storageCapacity, requiresRepublish := true, false, false, false
	if d.Spec.AttachRequired != nil {
		attachRequired = *d.Spec.AttachRequired
	}
	if d.Spec.PodInfoOnMount != nil {
		podInfoOnMount = *d.Spec.PodInfoOnMount
	}
	if d.Spec.StorageCapacity != nil {
		storageCapacity = *d.Spec.StorageCapacity
	}
	if d.Spec.RequiresRepublish != nil {
		requiresRepublish = *d.Spec.RequiresRepublish
	}
	tokenRequests := "<unset>"
	if d.Spec.TokenRequests != nil {
		audiences := []string{}
		for _, t := range d.Spec.TokenRequests {
			audiences = append(audiences, t.Audience)
		}
		tokenRequests = strings.Join(audiences, ",")
	}
	modes := make([]string, 0, len(d.Spec.VolumeLifecycleModes))
	for _, m := range d.Spec.VolumeLifecycleModes {
		modes = append(modes, string(m))
	}
	return []any{d.Name, attachRequired, podInfoOnMount, storageCapacity, tokenRequests, requiresRepublish,
		orNone(strings.Join(modes, ",")), age(d.CreationTimestamp)}
}
