package registry

import (
	"strings"

	networkingv1 "k8s.io/api/networking/v1"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	netutils "k8s.io/utils/net"
)

// serviceCIDRDef is networking.k8s.io/v1 ServiceCIDR, as
// pkg/registry/networking/servicecidr serves it: the status a client
// sends is dropped on create and kept on update of the main resource
// (ServiceCIDRStatusFieldWiping, on by default since 1.36); the status
// subresource changes status only.
func serviceCIDRDef() *resourceDef {
	return &resourceDef{
		gvr:         networkingv1.SchemeGroupVersion.WithResource("servicecidrs"),
		kind:        "ServiceCIDR",
		singular:    "servicecidr",
		keyPrefix:   "servicecidrs",
		newFunc:     func() runtime.Object { return &networkingv1.ServiceCIDR{} },
		newListFunc: func() runtime.Object { return &networkingv1.ServiceCIDRList{} },
		validate: func(obj runtime.Object) field.ErrorList {
			return validateServiceCIDRSpec(obj.(*networkingv1.ServiceCIDR).Spec.CIDRs, field.NewPath("spec", "cidrs"))
		},
		validateUpdate: func(obj, old runtime.Object) field.ErrorList {
			return validateServiceCIDRUpdate(obj.(*networkingv1.ServiceCIDR).Spec.CIDRs, old.(*networkingv1.ServiceCIDR).Spec.CIDRs)
		},
		ownUpdateValidation: true,
		status: &statusDef{
			keepStatus: func(obj, old runtime.Object) {
				obj.(*networkingv1.ServiceCIDR).Status = old.(*networkingv1.ServiceCIDR).Status
			},
			resetOnCreate: func(obj runtime.Object) { obj.(*networkingv1.ServiceCIDR).Status = networkingv1.ServiceCIDRStatus{} },
			keepSpec: func(obj, old runtime.Object) {
				c, o := obj.(*networkingv1.ServiceCIDR), old.(*networkingv1.ServiceCIDR)
				c.Spec = o.Spec
				metav1.ResetObjectMetaForStatus(&c.ObjectMeta, &o.ObjectMeta)
			},
		},
		columns: []metav1.TableColumnDefinition{
			nameCol,
			col("CIDRs", "string", networkingv1.ServiceCIDRSpec{}.SwaggerDoc()["cidrs"]),
			ageCol,
		},
		row: func(obj runtime.Object) []any {
			c := obj.(*networkingv1.ServiceCIDR)
			return []any{c.Name, strings.Join(c.Spec.CIDRs, ","), age(c.CreationTimestamp)}
		},
	}
}

// validateServiceCIDRSpec is upstream's validateServiceCIDRSpec
// (pkg/apis/networking/validation): one or two CIDRs in canonical form,
// of different families.
func validateServiceCIDRSpec(cidrs []string, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(cidrs) == 0 {
		return append(errs, field.Required(path, "at least one CIDR required"))
	}
	if len(cidrs) > 2 {
		return append(errs, field.Invalid(path, &networkingv1.ServiceCIDRSpec{CIDRs: cidrs}, "may only hold up to 2 values"))
	}
	for i, cidr := range cidrs {
		errs = append(errs, utilvalidation.IsValidCIDR(path.Index(i), cidr)...)
	}
	if len(cidrs) == 2 {
		f0, f1 := netutils.IPFamilyOfCIDRString(cidrs[0]), netutils.IPFamilyOfCIDRString(cidrs[1])
		if f0 == f1 && f0 != netutils.IPFamilyUnknown {
			errs = append(errs, field.Invalid(path, cidrs, "may specify no more than one IP for each IP family, i.e 192.168.0.0/24 and 2001:db8::/64"))
		}
	}
	return errs
}

// validateServiceCIDRUpdate is the spec part of upstream's
// ValidateServiceCIDRUpdate: the CIDRs are immutable, except that a
// single-stack ServiceCIDR may gain a CIDR of the other family
// (issues.k8s.io/131261).
func validateServiceCIDRUpdate(cidrs, old []string) field.ErrorList {
	var errs field.ErrorList
	path := field.NewPath("spec").Child("cidrs")
	switch {
	case len(old) == len(cidrs):
		for i, ip := range old {
			if ip != cidrs[i] {
				errs = append(errs, field.Invalid(path.Index(i), cidrs[i], apimachineryvalidation.FieldImmutableErrorMsg))
			}
		}
	case len(old) == 1 && len(cidrs) == 2:
		if cidrs[0] != old[0] {
			errs = append(errs, field.Invalid(path.Index(0), cidrs[0], apimachineryvalidation.FieldImmutableErrorMsg))
		}
		errs = append(errs, validateServiceCIDRSpec(cidrs, path)...)
	default:
		errs = append(errs, field.Invalid(path, cidrs, apimachineryvalidation.FieldImmutableErrorMsg))
	}
	return errs
}
