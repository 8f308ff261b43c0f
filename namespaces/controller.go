// Package namespaces is kubestore's namespace controller, the work
// kube-controller-manager's namespace controller does on a cluster
// (k8s.io/kubernetes pkg/controller/namespace): it empties a terminating
// namespace and then deletes it.
//
// It reads the registry's stores (registry.Storage.NamespaceStores):
// namespaces from the watch cache, each namespace's contents listed and
// deleted through them; custom objects through a callback, not with
// upstream's namespaced resources deleter. Several kubestores on one etcd
// may run it at once: its deletes are idempotent, the namespace's own
// carries its uid as a precondition.
package namespaces

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
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/kubestore/kubestore/mirrored"
)

// Namespaces is the namespaces resource as the controller uses it:
// watched and read, and deleted with kube-apiserver's namespace delete,
// which removes a namespace only once no finalizer is left.
type Namespaces interface {
	rest.Getter
	rest.Watcher
	rest.GracefulDeleter
}

// NewController returns the controller that empties and deletes
// terminating namespaces through namespaces, finalize (the namespaces'
// finalize subresource) and contents (the store of every namespaced
// resource): registry.Storage.NamespaceStores. deleteCustom, when not nil,
// deletes the custom objects in a namespace and reports how many are left.
func NewController(namespaces Namespaces, finalize rest.Updater, contents []*genericregistry.Store,
	deleteCustom func(ctx context.Context, namespace string) (remaining int, err error)) *Controller {
	return &Controller{namespaces: namespaces, finalize: finalize, contents: contents, custom: deleteCustom}
}

// Controller empties terminating namespaces and then deletes them, the
// work kube-controller-manager's namespace controller does on a cluster.
type Controller struct {
	namespaces Namespaces
	finalize   rest.Updater
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
func (c *Controller) Run(ctx context.Context) {
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
func (c *Controller) watch(ctx context.Context) {
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

func (c *Controller) processNext(ctx context.Context) bool {
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

// deleteContent deletes what s holds in the namespace of ctx, but the
// mirror's copies of an upstream's objects: they are the upstream's to
// delete (package mirrored), and a pod's copy deleted here would be the
// kubelet's to finally delete, which the mirror forwards to the cluster.
// It returns how many objects are left, and how many of them are copies.
func deleteContent(ctx context.Context, s *genericregistry.Store) (remaining, copies int, err error) {
	list, err := s.List(ctx, &metainternalversion.ListOptions{})
	if err != nil {
		return 0, 0, fmt.Errorf("listing %s: %w", s.DefaultQualifiedResource, err)
	}
	err = meta.EachListItem(list, func(obj runtime.Object) error {
		a, err := meta.Accessor(obj)
		if err != nil {
			return err
		}
		remaining++
		if mirrored.Is(a.GetAnnotations()) {
			copies++
			return nil
		}
		uid := a.GetUID()
		_, deleted, err := s.Delete(ctx, a.GetName(), rest.ValidateAllObjectFunc, &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
		switch {
		case apierrors.IsNotFound(err) || apierrors.IsConflict(err) || err == nil && deleted:
			remaining--
		case err != nil:
			return fmt.Errorf("deleting %s %s: %w", s.DefaultQualifiedResource, a.GetName(), err)
		}
		return nil
	})
	return remaining, copies, err
}

// sync deletes the content of a terminating namespace; once none is left
// it removes the kubernetes finalizer and deletes the namespace. retry
// means content is still going away.
func (c *Controller) sync(ctx context.Context, name string) (retry bool, err error) {
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
		remaining, copies := 0, 0
		for _, s := range c.contents {
			left, mirrored, err := deleteContent(nsCtx, s)
			if err != nil {
				return false, err
			}
			remaining += left
			copies += mirrored
		}
		if c.custom != nil {
			n, err := c.custom(ctx, name)
			if err != nil {
				return false, err
			}
			remaining += n
		}
		if copies > 0 && copies == remaining {
			// Only the mirror's copies are left: the upstream deletes them.
			klog.V(2).InfoS("Namespace waits for the upstream to delete the mirrored objects it holds", "namespace", name, "mirrored", copies)
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
