package registry

import (
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func leaseDef() *resourceDef {
	return &resourceDef{
		gvr:         coordinationv1.SchemeGroupVersion.WithResource("leases"),
		kind:        "Lease",
		singular:    "lease",
		namespaced:  true,
		keyPrefix:   "leases",
		newFunc:     func() runtime.Object { return &coordinationv1.Lease{} },
		newListFunc: func() runtime.Object { return &coordinationv1.LeaseList{} },
		validate: func(obj runtime.Object) field.ErrorList {
			s := obj.(*coordinationv1.Lease).Spec
			var errs field.ErrorList
			if d := s.LeaseDurationSeconds; d != nil && *d <= 0 {
				errs = append(errs, field.Invalid(field.NewPath("spec", "leaseDurationSeconds"), *d, "must be greater than 0"))
			}
			if t := s.LeaseTransitions; t != nil && *t < 0 {
				errs = append(errs, field.Invalid(field.NewPath("spec", "leaseTransitions"), *t, "must be greater than or equal to 0"))
			}
			return errs
		},
		allowCreateOnUpdate: true,
		columns:             []metav1.TableColumnDefinition{nameCol, col("Holder", "string", coordinationv1.LeaseSpec{}.SwaggerDoc()["holderIdentity"]), ageCol},
		row: func(obj runtime.Object) []any {
			l := obj.(*coordinationv1.Lease)
			holder := ""
			if l.Spec.HolderIdentity != nil {
				holder = *l.Spec.HolderIdentity
			}
			return []any{l.Name, holder, age(l.CreationTimestamp)}
		},
	}
}
