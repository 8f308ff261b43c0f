package registry

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/watch"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/apiserver/pkg/storage"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
)

func namespaceDef() *resourceDef {
	return &resourceDef{
		gvr:         corev1.SchemeGroupVersion.WithResource("namespaces"),
		kind:        "Namespace",
		singular:    "namespace",
		shortNames:  []string{"ns"},
		keyPrefix:   "namespaces",
		newFunc:     func() runtime.Object { return &corev1.Namespace{} },
		newListFunc: func() runtime.Object { return &corev1.NamespaceList{} },
		nameFunc:    apivalidation.ValidateNamespaceName,
		defaults:    func(obj any) { labelNamespace(obj.(*corev1.Namespace)) },
		fields: func(obj runtime.Object) fields.Set {
			return fields.Set{"status.phase": string(obj.(*corev1.Namespace).Status.Phase)}
		},
		fieldLabels: []string{"status.phase"},
		// A new namespace carries the finalizer of its content: deleting it
		// first deletes what it contains.
		prepareForCreate: func(_ context.Context, obj runtime.Object) {
			ns := obj.(*corev1.Namespace)
			if !slices.Contains(ns.Spec.Finalizers, corev1.FinalizerKubernetes) {
				ns.Spec.Finalizers = append(ns.Spec.Finalizers, corev1.FinalizerKubernetes)
			}
			labelNamespace(ns)
		},
		// spec.finalizers change only through the finalize subresource.
		prepareForUpdate: func(obj, old runtime.Object) {
			ns := obj.(*corev1.Namespace)
			ns.Spec.Finalizers = old.(*corev1.Namespace).Spec.Finalizers
			labelNamespace(ns)
		},
		validate: func(obj runtime.Object) field.ErrorList {
			return validateFinalizers(obj.(*corev1.Namespace).Spec.Finalizers)
		},
		returnDeletedObject: true,
		status: &statusDef{
			keepStatus: func(obj, old runtime.Object) { obj.(*corev1.Namespace).Status = old.(*corev1.Namespace).Status },
			keepSpec:   func(obj, old runtime.Object) { obj.(*corev1.Namespace).Spec = old.(*corev1.Namespace).Spec },
			resetOnCreate: func(obj runtime.Object) {
				obj.(*corev1.Namespace).Status = corev1.NamespaceStatus{Phase: corev1.NamespaceActive}
			},
		},
		columns: []metav1.TableColumnDefinition{nameCol, col("Status", "string", "The status of the namespace"), ageCol},
		row: func(obj runtime.Object) []any {
			ns := obj.(*corev1.Namespace)
			return []any{ns.Name, string(ns.Status.Phase), age(ns.CreationTimestamp)}
		},
	}
}

// labelNamespace sets kubernetes.io/metadata.name, which selectors rely on.
func labelNamespace(ns *corev1.Namespace) {
	if ns.Name == "" {
		return
	}
	if ns.Labels == nil {
		ns.Labels = map[string]string{}
	}
	ns.Labels[corev1.LabelMetadataName] = ns.Name
}

// validateFinalizers: spec.finalizers are qualified names, and standard
// ones when they have no domain, as metadata.finalizers.
func validateFinalizers(finalizers []corev1.FinalizerName) field.ErrorList {
	var errs field.ErrorList
	for i, f := range finalizers {
		path := field.NewPath("spec", "finalizers").Index(i)
		errs = append(errs, apivalidation.ValidateFinalizerName(string(f), path)...)
		errs = append(errs, validateKubeFinalizerName(path, string(f))...)
	}
	return errs
}

// namespaceREST is the namespaces resource: the generic store, with the
// delete of kube-apiserver's namespace storage (the first delete only marks
// the namespace Terminating; the namespace controller removes it once
// empty). There is no deletecollection, as upstream.
type namespaceREST struct {
	store *genericregistry.Store
	def   *resourceDef
}

var (
	_ rest.Getter               = (*namespaceREST)(nil)
	_ rest.Lister               = (*namespaceREST)(nil)
	_ rest.Watcher              = (*namespaceREST)(nil)
	_ rest.Creater              = (*namespaceREST)(nil)
	_ rest.Updater              = (*namespaceREST)(nil)
	_ rest.GracefulDeleter      = (*namespaceREST)(nil)
	_ rest.ShortNamesProvider   = (*namespaceREST)(nil)
	_ rest.StorageWithReadiness = (*namespaceREST)(nil)
)

func (r *namespaceREST) ReadinessCheck() error   { return r.store.ReadinessCheck() }
func (r *namespaceREST) New() runtime.Object     { return r.store.New() }
func (r *namespaceREST) NewList() runtime.Object { return r.store.NewList() }
func (r *namespaceREST) Destroy()                { r.store.Destroy() }
func (r *namespaceREST) NamespaceScoped() bool   { return false }
func (r *namespaceREST) GetSingularName() string { return r.store.GetSingularName() }
func (r *namespaceREST) ShortNames() []string    { return r.def.shortNames }
func (r *namespaceREST) GetResetFields() map[fieldpath.APIVersion]*fieldpath.Set {
	return r.store.GetResetFields()
}

func (r *namespaceREST) Get(ctx context.Context, name string, options *metav1.GetOptions) (runtime.Object, error) {
	return r.store.Get(ctx, name, options)
}

func (r *namespaceREST) List(ctx context.Context, options *metainternalversion.ListOptions) (runtime.Object, error) {
	return r.store.List(ctx, options)
}

func (r *namespaceREST) Watch(ctx context.Context, options *metainternalversion.ListOptions) (watch.Interface, error) {
	return r.store.Watch(ctx, options)
}

func (r *namespaceREST) ConvertToTable(ctx context.Context, object runtime.Object, tableOptions runtime.Object) (*metav1.Table, error) {
	return r.store.ConvertToTable(ctx, object, tableOptions)
}

func (r *namespaceREST) Create(ctx context.Context, obj runtime.Object, createValidation rest.ValidateObjectFunc, options *metav1.CreateOptions) (runtime.Object, error) {
	if err := checkCreate(obj); err != nil {
		return nil, err
	}
	return r.store.Create(ctx, obj, createValidation, options)
}

func (r *namespaceREST) Update(ctx context.Context, name string, objInfo rest.UpdatedObjectInfo, createValidation rest.ValidateObjectFunc,
	updateValidation rest.ValidateObjectUpdateFunc, forceAllowCreate bool, options *metav1.UpdateOptions) (runtime.Object, bool, error) {
	return r.store.Update(ctx, name, checkedUpdate{objInfo}, createValidation, updateValidation, forceAllowCreate, options)
}

// Delete starts namespace termination on the first request: it sets the
// deletion timestamp and the Terminating phase and returns the namespace.
// Once the namespace controller has emptied it and removed the kubernetes
// finalizer, the namespace is deleted for real.
func (r *namespaceREST) Delete(ctx context.Context, name string, deleteValidation rest.ValidateObjectFunc, options *metav1.DeleteOptions) (runtime.Object, bool, error) {
	obj, err := r.store.Get(ctx, name, &metav1.GetOptions{})
	if err != nil {
		return nil, false, err
	}
	ns := obj.(*corev1.Namespace)
	if options == nil {
		options = metav1.NewDeleteOptions(0)
	}
	if options.Preconditions == nil {
		options.Preconditions = &metav1.Preconditions{}
	}
	if options.Preconditions.UID == nil {
		options.Preconditions.UID = &ns.UID
	} else if *options.Preconditions.UID != ns.UID {
		return nil, false, apierrors.NewConflict(corev1.Resource("namespaces"), name,
			fmt.Errorf("precondition failed: UID in precondition: %v, UID in object meta: %v", *options.Preconditions.UID, ns.UID))
	}
	if rv := options.Preconditions.ResourceVersion; rv != nil && *rv != ns.ResourceVersion {
		return nil, false, apierrors.NewConflict(corev1.Resource("namespaces"), name,
			fmt.Errorf("precondition failed: ResourceVersion in precondition: %v, ResourceVersion in object meta: %v", *rv, ns.ResourceVersion))
	}

	if ns.DeletionTimestamp.IsZero() {
		if err := deleteValidation(ctx, ns); err != nil {
			return nil, false, err
		}
		key, err := r.store.KeyFunc(ctx, name)
		if err != nil {
			return nil, false, err
		}
		out := r.store.NewFunc()
		preconditions := storage.Preconditions{UID: options.Preconditions.UID, ResourceVersion: options.Preconditions.ResourceVersion}
		dryRun := len(options.DryRun) > 0
		err = r.store.Storage.GuaranteedUpdate(ctx, key, out, false, &preconditions,
			storage.SimpleUpdate(func(existing runtime.Object) (runtime.Object, error) {
				ns := existing.(*corev1.Namespace)
				if ns.DeletionTimestamp.IsZero() {
					now := metav1.Now()
					ns.DeletionTimestamp = &now
				}
				ns.Status.Phase = corev1.NamespaceTerminating
				return ns, nil
			}), dryRun, nil)
		if err != nil {
			return nil, false, storageError(err, name)
		}
		return out, false, nil
	}
	if len(ns.Spec.Finalizers) != 0 {
		return nil, false, apierrors.NewConflict(corev1.Resource("namespaces"), name,
			fmt.Errorf("the system is ensuring all content is removed from this namespace; upon completion, this namespace will automatically be purged by the system"))
	}
	return r.store.Delete(ctx, name, deleteValidation, options)
}

func storageError(err error, name string) error {
	if storage.IsNotFound(err) {
		return apierrors.NewNotFound(corev1.Resource("namespaces"), name)
	}
	if storage.IsConflict(err) || storage.IsInvalidObj(err) {
		return apierrors.NewConflict(corev1.Resource("namespaces"), name, err)
	}
	if _, ok := err.(apierrors.APIStatus); ok {
		return err
	}
	return apierrors.NewInternalError(err)
}

// shouldDeleteNamespaceDuringUpdate is upstream's
// (pkg/registry/core/namespace/storage): an update of a terminating
// namespace deletes it only once spec.finalizers is empty too, not as
// soon as metadata.finalizers is; without it, a write of a terminating
// namespace's status (its deletion's conditions) deleted it with its
// content still there.
func shouldDeleteNamespaceDuringUpdate(ctx context.Context, key string, obj, existing runtime.Object) bool {
	ns, ok := obj.(*corev1.Namespace)
	return ok && ns.DeletionTimestamp != nil && len(ns.Spec.Finalizers) == 0 && genericregistry.ShouldDeleteDuringUpdate(ctx, key, obj, existing)
}

// finalizeStrategy is the update strategy of namespaces/finalize: only
// spec.finalizers change.
type finalizeStrategy struct{ strategy }

func (finalizeStrategy) PrepareForUpdate(_ context.Context, obj, old runtime.Object) {
	ns, o := obj.(*corev1.Namespace), old.(*corev1.Namespace)
	finalizers := ns.Spec.Finalizers
	*ns = *o.DeepCopy()
	ns.Spec.Finalizers = finalizers
}

func (finalizeStrategy) ValidateUpdate(_ context.Context, obj, old runtime.Object) field.ErrorList {
	return append(validateMetaUpdate(obj, old), validateFinalizers(obj.(*corev1.Namespace).Spec.Finalizers)...)
}

func (finalizeStrategy) GetResetFields() map[fieldpath.APIVersion]*fieldpath.Set { return nil }
