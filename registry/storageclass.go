package registry

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// storageClassDef is upstream's pkg/registry/storage/storageclass with the
// defaulting of pkg/apis/storage/v1 and the validation of
// pkg/apis/storage/validation.
func storageClassDef() *resourceDef {
	return &resourceDef{
		gvr:                 storagev1.SchemeGroupVersion.WithResource("storageclasses"),
		kind:                "StorageClass",
		singular:            "storageclass",
		shortNames:          []string{"sc"},
		keyPrefix:           "storageclasses",
		newFunc:             func() runtime.Object { return &storagev1.StorageClass{} },
		newListFunc:         func() runtime.Object { return &storagev1.StorageClassList{} },
		defaults:            func(obj any) { defaultStorageClass(obj.(*storagev1.StorageClass)) },
		validate:            func(obj runtime.Object) field.ErrorList { return validateStorageClass(obj.(*storagev1.StorageClass)) },
		validateUpdate:      validateStorageClassUpdate,
		returnDeletedObject: true,
		warnings: func(obj, _ runtime.Object) []string {
			return storageClassWarnings(obj.(*storagev1.StorageClass))
		},
		columns: []metav1.TableColumnDefinition{
			nameCol,
			col("Provisioner", "string", storagev1.StorageClass{}.SwaggerDoc()["provisioner"]),
			col("ReclaimPolicy", "string", storagev1.StorageClass{}.SwaggerDoc()["reclaimPolicy"]),
			col("VolumeBindingMode", "string", storagev1.StorageClass{}.SwaggerDoc()["volumeBindingMode"]),
			col("AllowVolumeExpansion", "string", storagev1.StorageClass{}.SwaggerDoc()["allowVolumeExpansion"]),
			ageCol,
		},
		row: func(obj runtime.Object) []any { return storageClassRow(obj.(*storagev1.StorageClass), "") },
		listRow: func(list runtime.Object) func(obj runtime.Object) []any {
			effective := effectiveDefaultStorageClass(list.(*storagev1.StorageClassList).Items)
			return func(obj runtime.Object) []any { return storageClassRow(obj.(*storagev1.StorageClass), effective) }
		},
	}
}

// defaultStorageClass is SetDefaults_StorageClass: classes delete their
// volumes and bind them at once unless they say otherwise.
func defaultStorageClass(sc *storagev1.StorageClass) {
	if sc.ReclaimPolicy == nil {
		sc.ReclaimPolicy = ptrTo(corev1.PersistentVolumeReclaimDelete)
	}
	if sc.VolumeBindingMode == nil {
		sc.VolumeBindingMode = ptrTo(storagev1.VolumeBindingImmediate)
	}
}

const (
	maxProvisionerParameterSize = 256 * (1 << 10) // 256 kB
	maxProvisionerParameterLen  = 512
)

var (
	storageClassReclaimPolicies = sets.New(string(corev1.PersistentVolumeReclaimDelete), string(corev1.PersistentVolumeReclaimRetain))
	volumeBindingModes          = sets.New(string(storagev1.VolumeBindingImmediate), string(storagev1.VolumeBindingWaitForFirstConsumer))
)

// validateStorageClass is ValidateStorageClass, but for the metadata the
// strategy checks.
func validateStorageClass(sc *storagev1.StorageClass) field.ErrorList {
	errs := validateProvisioner(sc.Provisioner, field.NewPath("provisioner"))
	errs = append(errs, validateProvisionerParameters(sc.Parameters, field.NewPath("parameters"))...)
	if p := sc.ReclaimPolicy; p != nil && len(*p) > 0 && !storageClassReclaimPolicies.Has(string(*p)) {
		errs = append(errs, field.NotSupported(field.NewPath("reclaimPolicy"), p, sets.List(storageClassReclaimPolicies)))
	}
	if m := sc.VolumeBindingMode; m == nil {
		errs = append(errs, field.Required(field.NewPath("volumeBindingMode"), ""))
	} else if !volumeBindingModes.Has(string(*m)) {
		errs = append(errs, field.NotSupported(field.NewPath("volumeBindingMode"), m, sets.List(volumeBindingModes)))
	}
	return append(errs, validateAllowedTopologies(sc.AllowedTopologies, field.NewPath("allowedTopologies"))...)
}

// validateStorageClassUpdate is ValidateStorageClassUpdate: what a class
// provisions, and how, is fixed at creation.
func validateStorageClassUpdate(obj, old runtime.Object) field.ErrorList {
	sc, o := obj.(*storagev1.StorageClass), old.(*storagev1.StorageClass)
	errs := validation.ValidateImmutableField(sc.Parameters, o.Parameters, field.NewPath("parameters"))
	errs = append(errs, validation.ValidateImmutableField(sc.Provisioner, o.Provisioner, field.NewPath("provisioner"))...)
	errs = append(errs, validation.ValidateImmutableField(sc.ReclaimPolicy, o.ReclaimPolicy, field.NewPath("reclaimPolicy"))...)
	return append(errs, validation.ValidateImmutableField(sc.VolumeBindingMode, o.VolumeBindingMode, field.NewPath("volumeBindingMode"))...)
}

// validateProvisioner: a qualified name, case aside.
func validateProvisioner(provisioner string, path *field.Path) field.ErrorList {
	if len(provisioner) == 0 {
		return field.ErrorList{field.Required(path, provisioner)}
	}
	return qualifiedName(path, strings.ToLower(provisioner))
}

// validateProvisionerParameters: at most 512 parameters of 256 kB in all,
// none with an empty key.
func validateProvisionerParameters(params map[string]string, path *field.Path) field.ErrorList {
	if len(params) > maxProvisionerParameterLen {
		return field.ErrorList{field.TooLong(path, "", maxProvisionerParameterLen)}
	}
	var errs field.ErrorList
	var size int64
	for k, v := range params {
		if len(k) < 1 {
			errs = append(errs, field.Invalid(path, k, "field can not be empty."))
		}
		size += int64(len(k)) + int64(len(v))
	}
	if size > maxProvisionerParameterSize {
		errs = append(errs, field.TooLong(path, "", maxProvisionerParameterSize))
	}
	return errs
}

// validateAllowedTopologies: valid terms, no two the same. As upstream,
// the terms are compared with as many empty ones as there are terms, so
// a term without expressions is a duplicate.
func validateAllowedTopologies(terms []corev1.TopologySelectorTerm, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := make([]map[string]sets.Set[string], len(terms))
	for i, term := range terms {
		exprs, termErrs := validateTopologySelectorTerm(term, path.Index(i))
		errs = append(errs, termErrs...)
		for _, s := range seen {
			if apiequality.Semantic.DeepEqual(exprs, s) {
				errs = append(errs, field.Duplicate(path.Index(i).Child("matchLabelExpressions"), ""))
			}
		}
		seen = append(seen, exprs)
	}
	return errs
}

// storageClassWarnings is GetWarningsForStorageClass: deprecated node
// labels in the allowed topologies.
func storageClassWarnings(sc *storagev1.StorageClass) []string {
	var warnings []string
	for i, term := range sc.AllowedTopologies {
		for j, expr := range term.MatchLabelExpressions {
			if msg, ok := deprecatedNodeLabels[expr.Key]; ok {
				warnings = append(warnings, fmt.Sprintf("%s: %s", field.NewPath("allowedTopologies").Index(i).Child("matchLabelExpressions").Index(j).Child("key"), msg))
			}
		}
	}
	return warnings
}

const (
	isDefaultStorageClassAnnotation     = "storageclass.kubernetes.io/is-default-class"
	betaIsDefaultStorageClassAnnotation = "storageclass.beta.kubernetes.io/is-default-class"
)

// effectiveDefaultStorageClass is the name of the class a claim without
// one gets: of those annotated as default, the newest, then the first by
// name (getEffectiveDefaultStorageClass in upstream's printers).
func effectiveDefaultStorageClass(items []storagev1.StorageClass) string {
	var effective *storagev1.StorageClass
	for i := range items {
		sc := &items[i]
		if sc.Annotations[isDefaultStorageClassAnnotation] != "true" && sc.Annotations[betaIsDefaultStorageClassAnnotation] != "true" {
			continue
		}
		switch {
		case effective == nil, sc.CreationTimestamp.After(effective.CreationTimestamp.Time):
			effective = sc
		case sc.CreationTimestamp.Equal(&effective.CreationTimestamp) && sc.Name < effective.Name:
			effective = sc
		}
	}
	if effective == nil {
		return ""
	}
	return effective.Name
}

// storageClassRow is printStorageClassInternal: unset policies print as
// their defaults; the effective default of a list is marked.
func storageClassRow(sc *storagev1.StorageClass, effectiveDefault string) []any {
	name := sc.Name
	if effectiveDefault != "" && sc.Name == effectiveDefault {
		name += " (default)"
	}
	reclaimPolicy := string(corev1.PersistentVolumeReclaimDelete)
	if sc.ReclaimPolicy != nil {
		reclaimPolicy = string(*sc.ReclaimPolicy)
	}
	bindingMode := string(storagev1.VolumeBindingImmediate)
	if sc.VolumeBindingMode != nil {
		bindingMode = string(*sc.VolumeBindingMode)
	}
	expansion := false
	if sc.AllowVolumeExpansion != nil {
		expansion = *sc.AllowVolumeExpansion
	}
	return []any{name, sc.Provisioner, reclaimPolicy, bindingMode, expansion, age(sc.CreationTimestamp)}
}
