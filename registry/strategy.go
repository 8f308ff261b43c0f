package registry

import (
	"context"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/apiserver/pkg/storage/names"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
)

// strategy is the create/update/delete strategy of every built-in kind,
// driven by its resourceDef: metadata validation for all, the kind's own
// rules on top.
type strategy struct {
	runtime.ObjectTyper
	names.NameGenerator
	def *resourceDef
}

var (
	_ rest.RESTCreateStrategy  = strategy{}
	_ rest.RESTUpdateStrategy  = strategy{}
	_ rest.RESTDeleteStrategy  = strategy{}
	_ rest.ResetFieldsStrategy = strategy{}
)

func newStrategy(typer runtime.ObjectTyper, d *resourceDef) strategy {
	return strategy{ObjectTyper: typer, NameGenerator: names.SimpleNameGenerator, def: d}
}

// deleteStrategy is the kind's delete strategy: with graceful deletion it
// also implements rest.RESTGracefulDeleteStrategy.
func (s strategy) deleteStrategy() rest.RESTDeleteStrategy {
	if s.def.gracefulDelete != nil {
		return gracefulStrategy{s}
	}
	return s
}

func (s strategy) NamespaceScoped() bool { return s.def.namespaced }

func (s strategy) PrepareForCreate(ctx context.Context, obj runtime.Object) {
	if s.def.status != nil && s.def.status.resetOnCreate != nil {
		s.def.status.resetOnCreate(obj)
	}
	if s.def.prepareForCreate != nil {
		s.def.prepareForCreate(ctx, obj)
	}
}

func (s strategy) PrepareForUpdate(_ context.Context, obj, old runtime.Object) {
	if s.def.status != nil {
		s.def.status.keepStatus(obj, old)
	}
	if s.def.prepareForUpdate != nil {
		s.def.prepareForUpdate(obj, old)
	}
}

func (s strategy) nameFunc() validation.ValidateNameFunc {
	if s.def.nameFunc != nil {
		return s.def.nameFunc
	}
	return validation.NameIsDNSSubdomain
}

func (s strategy) Validate(ctx context.Context, obj runtime.Object) field.ErrorList {
	m, err := meta.Accessor(obj)
	if err != nil {
		return field.ErrorList{field.InternalError(nil, err)}
	}
	errs := validation.ValidateObjectMetaAccessor(m, s.def.namespaced, s.nameFunc(), field.NewPath("metadata"))
	errs = append(errs, validateKubeFinalizers(m.GetFinalizers())...)
	if s.def.validate != nil {
		errs = append(errs, s.def.validate(obj)...)
	}
	return append(errs, s.validateRequest(ctx, obj, nil)...)
}

func (s strategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	errs := validateMetaUpdate(obj, old)
	if s.def.validate != nil && !s.def.ownUpdateValidation {
		errs = append(errs, s.def.validate(obj)...)
	}
	if s.def.validateUpdate != nil {
		errs = append(errs, s.def.validateUpdate(obj, old)...)
	}
	return append(errs, s.validateRequest(ctx, obj, old)...)
}

// validateRequest is the validation of the request's group version, for
// kinds served in more than one.
func (s strategy) validateRequest(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	if s.def.validateRequest == nil {
		return nil
	}
	info, ok := genericapirequest.RequestInfoFrom(ctx)
	if !ok {
		return nil
	}
	return s.def.validateRequest(schema.GroupVersion{Group: info.APIGroup, Version: info.APIVersion}, obj, old)
}

func validateMetaUpdate(obj, old runtime.Object) field.ErrorList {
	m, err := meta.Accessor(obj)
	if err != nil {
		return field.ErrorList{field.InternalError(nil, err)}
	}
	om, err := meta.Accessor(old)
	if err != nil {
		return field.ErrorList{field.InternalError(nil, err)}
	}
	errs := validation.ValidateObjectMetaAccessorUpdate(m, om, field.NewPath("metadata"))
	return append(errs, validateKubeFinalizers(m.GetFinalizers())...)
}

// standardFinalizers may be named without a domain.
var standardFinalizers = sets.New(string(corev1.FinalizerKubernetes), metav1.FinalizerOrphanDependents, metav1.FinalizerDeleteDependents)

// validateKubeFinalizers is the check kube-apiserver adds to the generic
// metadata validation of every built-in kind (ValidateObjectMeta in
// pkg/apis/core/validation): a finalizer without a domain is a standard
// one.
func validateKubeFinalizers(finalizers []string) field.ErrorList {
	var errs field.ErrorList
	for i, f := range finalizers {
		errs = append(errs, validateKubeFinalizerName(field.NewPath("metadata", "finalizers").Index(i), f)...)
	}
	return errs
}

func validateKubeFinalizerName(path *field.Path, name string) field.ErrorList {
	if !strings.Contains(name, "/") && !standardFinalizers.Has(name) {
		return field.ErrorList{field.Invalid(path, name, "name is neither a standard finalizer name nor is it fully qualified")}
	}
	return nil
}

func (s strategy) WarningsOnCreate(_ context.Context, obj runtime.Object) []string {
	if s.def.warnings == nil {
		return nil
	}
	return s.def.warnings(obj, nil)
}

func (s strategy) WarningsOnUpdate(_ context.Context, obj, old runtime.Object) []string {
	if s.def.warnings == nil {
		return nil
	}
	return s.def.warnings(obj, old)
}

func (strategy) Canonicalize(runtime.Object)                     {}
func (s strategy) AllowCreateOnUpdate(context.Context) bool      { return s.def.allowCreateOnUpdate }
func (s strategy) AllowUnconditionalUpdate(context.Context) bool { return !s.def.conditionalUpdate }

// GetResetFields: with a status subresource, a write to the main resource
// does not own status fields in server-side apply; a kind may name others.
func (s strategy) GetResetFields() map[fieldpath.APIVersion]*fieldpath.Set {
	switch {
	case s.def.resetFields != nil:
		return resetFields(s.def, s.def.resetFields...)
	case s.def.status == nil:
		return nil
	}
	return resetFields(s.def, fieldpath.MakePathOrDie("status"))
}

func resetFields(d *resourceDef, paths ...fieldpath.Path) map[fieldpath.APIVersion]*fieldpath.Set {
	return map[fieldpath.APIVersion]*fieldpath.Set{
		fieldpath.APIVersion(d.gvr.GroupVersion().String()): fieldpath.NewSet(paths...),
	}
}

// gracefulStrategy lets a kind delay deletion until an agent confirms it
// (pods: the node agent deletes with grace period 0).
type gracefulStrategy struct{ strategy }

var _ rest.RESTGracefulDeleteStrategy = gracefulStrategy{}

func (s gracefulStrategy) CheckGracefulDelete(ctx context.Context, obj runtime.Object, options *metav1.DeleteOptions) bool {
	return s.def.gracefulDelete(ctx, obj, options)
}

// statusStrategy is the update strategy of "<resource>/status": only status
// changes, spec stays as stored. With part set it is that of another
// subresource that updates one part of the object ("approval").
type statusStrategy struct {
	strategy
	part *statusDef
}

// sub is the definition of the subresource: part, or the kind's status.
func (s statusStrategy) sub() *statusDef {
	if s.part != nil {
		return s.part
	}
	return s.def.status
}

func (s statusStrategy) PrepareForUpdate(_ context.Context, obj, old runtime.Object) {
	sub := s.sub()
	sub.keepSpec(obj, old)
	if sub.keepMetadata {
		m, err := meta.Accessor(obj)
		om, oldErr := meta.Accessor(old)
		if err == nil && oldErr == nil {
			metav1.ResetObjectMetaForStatus(m, om)
		}
	}
	if sub.prepare != nil {
		sub.prepare(obj, old)
	}
}

// WarningsOnUpdate: a status update warns of nothing, as upstream's
// status strategies do not.
func (statusStrategy) WarningsOnUpdate(context.Context, runtime.Object, runtime.Object) []string {
	return nil
}

func (s statusStrategy) ValidateUpdate(_ context.Context, obj, old runtime.Object) field.ErrorList {
	errs := validateMetaUpdate(obj, old)
	if v := s.sub().validate; v != nil {
		errs = append(errs, v(obj, old)...)
	}
	return errs
}

func (s statusStrategy) GetResetFields() map[fieldpath.APIVersion]*fieldpath.Set {
	switch sub := s.sub(); {
	case sub.resetFields != nil:
		return resetFields(s.def, sub.resetFields...)
	case sub.keepMetadata:
		return resetFields(s.def, fieldpath.MakePathOrDie("metadata"), fieldpath.MakePathOrDie("spec"))
	}
	return resetFields(s.def, fieldpath.MakePathOrDie("spec"))
}
