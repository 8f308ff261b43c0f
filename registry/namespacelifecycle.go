package registry

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilcache "k8s.io/apimachinery/pkg/util/cache"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/apiserver/pkg/admission"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
)

// systemNamespaces exist from the first start and cannot be deleted, as on
// a cluster.
var systemNamespaces = []string{metav1.NamespaceDefault, metav1.NamespaceSystem, metav1.NamespacePublic, corev1.NamespaceNodeLease}

// immortalNamespaces may not be deleted (kube-apiserver's
// NamespaceLifecycle admission).
var immortalNamespaces = sets.New(metav1.NamespaceDefault, metav1.NamespaceSystem, metav1.NamespacePublic)

// namespaceLifecycle is the admission kube-apiserver's NamespaceLifecycle
// plugin performs: no new object in a missing or terminating namespace, and
// no deletion of the system namespaces.
type namespaceLifecycle struct {
	namespaces *genericregistry.Store
	// deleted holds namespaces whose deletion was admitted lately: the
	// watch cache may still show them Active, so they are read from etcd.
	deleted *utilcache.LRUExpireCache
}

// Upstream's: how long after a namespace's deletion reads of it bypass
// the cache, and how many such namespaces are remembered.
const (
	forceLiveLookupTTL  = 30 * time.Second
	forceLiveLookupSize = 100
)

var _ admission.ValidationInterface = (*namespaceLifecycle)(nil)

func (l *namespaceLifecycle) Handles(op admission.Operation) bool {
	return op == admission.Create || op == admission.Delete
}

func (l *namespaceLifecycle) Validate(ctx context.Context, a admission.Attributes, _ admission.ObjectInterfaces) error {
	isNamespace := a.GetResource().GroupResource() == corev1.Resource("namespaces")
	if a.GetOperation() == admission.Delete {
		if isNamespace && a.GetSubresource() == "" {
			if immortalNamespaces.Has(a.GetName()) {
				return apierrors.NewForbidden(a.GetResource().GroupResource(), a.GetName(), fmt.Errorf("this namespace may not be deleted"))
			}
			l.deleted.Add(a.GetName(), true, forceLiveLookupTTL)
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
// seen it or may not have seen its deletion yet, from etcd: a namespace
// created just before the object must not be reported missing, nor one
// being deleted active.
func (l *namespaceLifecycle) lookup(ctx context.Context, name string) (*corev1.Namespace, error) {
	ctx = genericapirequest.WithNamespace(ctx, metav1.NamespaceNone)
	obj, err := l.namespaces.Get(ctx, name, &metav1.GetOptions{ResourceVersion: "0"})
	_, deleted := l.deleted.Get(name)
	if apierrors.IsNotFound(err) || (err == nil && deleted && obj.(*corev1.Namespace).Status.Phase == corev1.NamespaceActive) {
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
	return &namespaceLifecycle{namespaces: s.namespaces.store, deleted: utilcache.NewLRUExpireCache(forceLiveLookupSize)}
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

// Run works until ctx is cancelled, and returns once every goroutine it
// started has ended.
func (c *NamespaceController) Run(ctx context.Context) {
	c.queue = workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "namespace"})
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() {
		<-ctx.Done()
		c.queue.ShutDown()
	})
	wg.Go(func() { wait.UntilWithContext(ctx, c.watch, time.Second) })
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
