package registry

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/apiserver/pkg/admission"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/apiserver/pkg/storage"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
)

// systemNamespaces exist from the first start and cannot be deleted, as on
// a cluster.
var systemNamespaces = []string{metav1.NamespaceDefault, metav1.NamespaceSystem, metav1.NamespacePublic, corev1.NamespaceNodeLease}

// immortalNamespaces may not be deleted (kube-apiserver's
// NamespaceLifecycle admission).
var immortalNamespaces = sets.New(metav1.NamespaceDefault, metav1.NamespaceSystem, metav1.NamespacePublic)

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
		prepareForCreate: func(obj runtime.Object) {
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

func validateFinalizers(finalizers []corev1.FinalizerName) field.ErrorList {
	var errs field.ErrorList
	for i, f := range finalizers {
		for _, msg := range utilvalidation.IsQualifiedName(string(f)) {
			errs = append(errs, field.Invalid(field.NewPath("spec", "finalizers").Index(i), f, msg))
		}
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

// namespaceLifecycle is the admission kube-apiserver's NamespaceLifecycle
// plugin performs: no new object in a missing or terminating namespace, and
// no deletion of the system namespaces.
type namespaceLifecycle struct {
	namespaces *genericregistry.Store
}

var _ admission.ValidationInterface = (*namespaceLifecycle)(nil)

func (l *namespaceLifecycle) Handles(op admission.Operation) bool {
	return op == admission.Create || op == admission.Delete
}

func (l *namespaceLifecycle) Validate(ctx context.Context, a admission.Attributes, _ admission.ObjectInterfaces) error {
	isNamespace := a.GetResource().GroupResource() == corev1.Resource("namespaces")
	if a.GetOperation() == admission.Delete {
		if isNamespace && a.GetSubresource() == "" && immortalNamespaces.Has(a.GetName()) {
			return apierrors.NewForbidden(a.GetResource().GroupResource(), a.GetName(), fmt.Errorf("this namespace may not be deleted"))
		}
		return nil
	}
	if isNamespace || a.GetNamespace() == "" {
		return nil
	}
	ns, err := l.lookup(ctx, a.GetNamespace())
	if err != nil {
		return err
	}
	if ns.Status.Phase != corev1.NamespaceTerminating {
		return nil
	}
	err = admission.NewForbidden(a, fmt.Errorf("unable to create new content in namespace %s because it is being terminated", a.GetNamespace()))
	if se, ok := err.(*apierrors.StatusError); ok && se.ErrStatus.Details != nil {
		se.ErrStatus.Details.Causes = append(se.ErrStatus.Details.Causes, metav1.StatusCause{
			Type: corev1.NamespaceTerminatingCause, Message: fmt.Sprintf("namespace %s is being terminated", a.GetNamespace()), Field: "metadata.namespace",
		})
	}
	return err
}

// lookup reads a namespace from the watch cache and, if the cache has not
// seen it, from etcd: a namespace created just before the object must not
// be reported missing.
func (l *namespaceLifecycle) lookup(ctx context.Context, name string) (*corev1.Namespace, error) {
	ctx = genericapirequest.WithNamespace(ctx, metav1.NamespaceNone)
	obj, err := l.namespaces.Get(ctx, name, &metav1.GetOptions{ResourceVersion: "0"})
	if apierrors.IsNotFound(err) {
		obj, err = l.namespaces.Get(ctx, name, &metav1.GetOptions{})
	}
	if apierrors.IsNotFound(err) {
		// The store names the resource of the request; the missing
		// object is the namespace.
		return nil, apierrors.NewNotFound(corev1.Resource("namespaces"), name)
	}
	if err != nil {
		return nil, err
	}
	return obj.(*corev1.Namespace), nil
}

// NamespaceLifecycle is the admission of kube-apiserver's
// NamespaceLifecycle plugin: no new object in a missing or terminating
// namespace, and no deletion of the system namespaces.
func (s *Storage) NamespaceLifecycle() admission.ValidationInterface {
	return &namespaceLifecycle{namespaces: s.namespaces.store}
}

// NamespaceController returns the controller that empties and deletes
// terminating namespaces. deleteCustom, when not nil, deletes the custom
// objects in a namespace and reports how many are left.
func (s *Storage) NamespaceController(deleteCustom func(ctx context.Context, namespace string) (remaining int, err error)) *NamespaceController {
	c := &NamespaceController{namespaces: s.namespaces, finalize: s.finalize, custom: deleteCustom}
	for _, d := range s.api.defs {
		if d.namespaced {
			c.contents = append(c.contents, s.stores[d])
		}
	}
	return c
}

// NamespaceController empties terminating namespaces and then deletes them,
// the work kube-controller-manager's namespace controller does on a
// cluster.
type NamespaceController struct {
	namespaces *namespaceREST
	finalize   *genericregistry.Store
	contents   []*genericregistry.Store
	// custom, when set, deletes the namespace's custom objects and
	// reports how many are left.
	custom func(ctx context.Context, namespace string) (remaining int, err error)
	queue  workqueue.TypedRateLimitingInterface[string]
}

// contentRetry is how soon a namespace is checked again while content is
// still being deleted (pods waiting for their node agent).
const contentRetry = 2 * time.Second

// Run works until ctx is cancelled.
func (c *NamespaceController) Run(ctx context.Context) {
	c.queue = workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "namespace"})
	go func() {
		<-ctx.Done()
		c.queue.ShutDown()
	}()
	go wait.UntilWithContext(ctx, c.watch, time.Second)
	for c.processNext(ctx) {
	}
}

// watch queues every namespace that is being deleted: the ones that exist
// when the watch starts (the cache sends them first) and later ones.
func (c *NamespaceController) watch(ctx context.Context) {
	ctx = genericapirequest.WithNamespace(ctx, metav1.NamespaceNone)
	w, err := c.namespaces.Watch(ctx, &metainternalversion.ListOptions{ResourceVersion: "0"})
	if err != nil {
		klog.V(2).InfoS("Watching namespaces", "err", err)
		return
	}
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-w.ResultChan():
			if !ok {
				return
			}
			obj := ev.Object
			// The watch cache wraps objects to share their serializations.
			if co, ok := obj.(runtime.CacheableObject); ok {
				obj = co.GetObject()
			}
			if ns, isNS := obj.(*corev1.Namespace); isNS && ns.DeletionTimestamp != nil && ev.Type != watch.Deleted {
				c.queue.Add(ns.Name)
			}
		}
	}
}

func (c *NamespaceController) processNext(ctx context.Context) bool {
	name, quit := c.queue.Get()
	if quit {
		return false
	}
	defer c.queue.Done(name)
	retry, err := c.sync(ctx, name)
	switch {
	case err != nil:
		klog.ErrorS(err, "Deleting namespace", "namespace", name)
		c.queue.AddRateLimited(name)
	case retry:
		c.queue.Forget(name)
		c.queue.AddAfter(name, contentRetry)
	default:
		c.queue.Forget(name)
	}
	return true
}

// sync deletes the content of a terminating namespace; once none is left
// it removes the kubernetes finalizer and deletes the namespace. retry
// means content is still going away.
func (c *NamespaceController) sync(ctx context.Context, name string) (retry bool, err error) {
	clusterCtx := genericapirequest.WithNamespace(ctx, metav1.NamespaceNone)
	obj, err := c.namespaces.Get(clusterCtx, name, &metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	ns := obj.(*corev1.Namespace)
	if ns.DeletionTimestamp == nil {
		return false, nil
	}
	if slices.Contains(ns.Spec.Finalizers, corev1.FinalizerKubernetes) {
		nsCtx := genericapirequest.WithNamespace(ctx, name)
		remaining := 0
		for _, s := range c.contents {
			if _, err := s.DeleteCollection(nsCtx, rest.ValidateAllObjectFunc, &metav1.DeleteOptions{}, &metainternalversion.ListOptions{}); err != nil {
				return false, fmt.Errorf("deleting %s: %w", s.DefaultQualifiedResource, err)
			}
			list, err := s.List(nsCtx, &metainternalversion.ListOptions{})
			if err != nil {
				return false, fmt.Errorf("listing %s: %w", s.DefaultQualifiedResource, err)
			}
			remaining += meta.LenList(list)
		}
		if c.custom != nil {
			n, err := c.custom(ctx, name)
			if err != nil {
				return false, err
			}
			remaining += n
		}
		if remaining > 0 {
			klog.V(2).InfoS("Namespace content still being deleted", "namespace", name, "remaining", remaining)
			return true, nil
		}
		finalized := ns.DeepCopy()
		finalized.Spec.Finalizers = slices.DeleteFunc(finalized.Spec.Finalizers, func(f corev1.FinalizerName) bool { return f == corev1.FinalizerKubernetes })
		obj, _, err = c.finalize.Update(clusterCtx, name, rest.DefaultUpdatedObjectInfo(finalized), rest.ValidateAllObjectFunc,
			rest.ValidateAllObjectUpdateFunc, false, &metav1.UpdateOptions{})
		if err != nil {
			return false, fmt.Errorf("finalizing: %w", err)
		}
		ns = obj.(*corev1.Namespace)
	}
	if len(ns.Spec.Finalizers) > 0 {
		// Other finalizers belong to other controllers.
		return false, nil
	}
	_, _, err = c.namespaces.Delete(clusterCtx, name, rest.ValidateAllObjectFunc, &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &ns.UID}})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	return false, err
}

// EnsureSystemNamespaces creates the namespaces every cluster has, retrying
// for up to a minute while the store is not ready.
func (s *Storage) EnsureSystemNamespaces(ctx context.Context) error {
	scheme, namespaces := s.api.scheme, s.namespaces
	ctx = genericapirequest.WithNamespace(ctx, metav1.NamespaceNone)
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		for _, name := range systemNamespaces {
			ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
			scheme.Default(ns)
			_, err := namespaces.Create(ctx, ns, rest.ValidateAllObjectFunc, &metav1.CreateOptions{})
			if err != nil && !apierrors.IsAlreadyExists(err) {
				klog.V(2).InfoS("Creating system namespace", "namespace", name, "err", err)
				return false, nil
			}
		}
		return true, nil
	})
}
