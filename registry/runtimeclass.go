package registry

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	"k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// runtimeClassDef is upstream's pkg/registry/node/runtimeclass with the
// validation of pkg/apis/node/validation (node.k8s.io/v1 has no
// defaulting): which container runtime handler runs a pod, the overhead
// it adds and where such pods may be scheduled.
func runtimeClassDef() *resourceDef {
	return &resourceDef{
		gvr:                 nodev1.SchemeGroupVersion.WithResource("runtimeclasses"),
		kind:                "RuntimeClass",
		singular:            "runtimeclass",
		keyPrefix:           "runtimeclasses",
		newFunc:             func() runtime.Object { return &nodev1.RuntimeClass{} },
		newListFunc:         func() runtime.Object { return &nodev1.RuntimeClassList{} },
		validate:            func(obj runtime.Object) field.ErrorList { return validateRuntimeClass(obj.(*nodev1.RuntimeClass)) },
		validateUpdate:      validateRuntimeClassUpdate,
		allowCreateOnUpdate: true,
		conditionalUpdate:   true,
		warnings: func(obj, _ runtime.Object) []string {
			return runtimeClassWarnings(obj.(*nodev1.RuntimeClass))
		},
		columns: []metav1.TableColumnDefinition{
			nameCol,
			// Upstream describes the handler with ObjectMeta's (empty)
			// documentation of "handler".
			col("Handler", "string", metav1.ObjectMeta{}.SwaggerDoc()["handler"]),
			ageCol,
		},
		row: func(obj runtime.Object) []any {
			rc := obj.(*nodev1.RuntimeClass)
			return []any{rc.Name, rc.Handler, age(rc.CreationTimestamp)}
		},
	}
}

// validateRuntimeClass is ValidateRuntimeClass but for the metadata the
// strategy checks: a handler that is a DNS label, an overhead that is a
// valid container resource limit (upstream reports it under
// "overhead.limits"), a valid node selector and tolerations, no two of
// them the same.
func validateRuntimeClass(rc *nodev1.RuntimeClass) field.ErrorList {
	var errs field.ErrorList
	if rc.Handler == "" {
		errs = append(errs, field.Required(field.NewPath("handler"), ""))
	} else {
		errs = append(errs, dnsLabel(field.NewPath("handler"), rc.Handler)...)
	}
	if rc.Overhead != nil {
		errs = append(errs, validateContainerResourceRequirements(&corev1.ResourceRequirements{Limits: rc.Overhead.PodFixed}, field.NewPath("overhead"))...)
	}
	if s := rc.Scheduling; s != nil {
		path := field.NewPath("scheduling")
		if s.NodeSelector != nil {
			errs = append(errs, metav1validation.ValidateLabels(s.NodeSelector, path.Child("nodeSelector"))...)
		}
		errs = append(errs, validateTolerations(s.Tolerations, path.Child("tolerations"))...)
		// Unique by their list keys: tolerationSeconds aside.
		seen := map[corev1.Toleration]bool{}
		for i, t := range s.Tolerations {
			key := corev1.Toleration{Key: t.Key, Operator: t.Operator, Value: t.Value, Effect: t.Effect}
			if seen[key] {
				errs = append(errs, field.Duplicate(path.Child("tolerations").Index(i), t))
			}
			seen[key] = true
		}
	}
	return errs
}

// validateRuntimeClassUpdate is ValidateRuntimeClassUpdate but for the
// metadata: the handler is fixed.
func validateRuntimeClassUpdate(obj, old runtime.Object) field.ErrorList {
	return validation.ValidateImmutableField(obj.(*nodev1.RuntimeClass).Handler, old.(*nodev1.RuntimeClass).Handler, field.NewPath("handler"))
}

// runtimeClassWarnings is GetWarningsForRuntimeClass: deprecated node
// labels in the node selector.
func runtimeClassWarnings(rc *nodev1.RuntimeClass) []string {
	if rc.Scheduling == nil {
		return nil
	}
	var warnings []string
	for key := range rc.Scheduling.NodeSelector {
		if msg, ok := deprecatedNodeLabels[key]; ok {
			warnings = append(warnings, fmt.Sprintf("%s: %s", field.NewPath("scheduling", "nodeSelector"), msg))
		}
	}
	return warnings
}
