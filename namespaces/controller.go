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
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
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
// finalize subresource), status (their status, for the deletion's
// conditions) and contents (the store of every namespaced resource):
// registry.Storage.NamespaceStores. deleteCustom, when not nil, deletes
// the custom objects in a namespace and reports what is left.
func NewController(namespaces Namespaces, finalize, status rest.Updater, contents []*genericregistry.Store,
	deleteCustom func(ctx context.Context, namespace string) (Remaining, error)) *Controller {
	return &Controller{namespaces: namespaces, finalize: finalize, status: status, contents: contents, custom: deleteCustom}
}

// Controller empties terminating namespaces and then deletes them, the
// work kube-controller-manager's namespace controller does on a cluster.
type Controller struct {
	namespaces Namespaces
	finalize   rest.Updater
	status     rest.Updater
	contents   []*genericregistry.Store
	// custom, when set, deletes the namespace's custom objects and
	// reports what is left.
	custom func(ctx context.Context, namespace string) (Remaining, error)
	queue  workqueue.TypedRateLimitingInterface[string]
}

// Remaining is what is left in a terminating namespace after a pass: by
// resource ("pods." for the core group, as upstream names it), by the
// finalizers that hold it, and how many are the mirror's copies.
type Remaining struct {
	Resources  map[string]int
	Finalizers map[string]int
	Copies     int
}

// Add counts one object of resource left, with its finalizers.
func (r *Remaining) Add(resource string, finalizers []string) {
	r.init()
	r.Resources[resource]++
	for _, f := range finalizers {
		r.Finalizers[f]++
	}
}

func (r *Remaining) init() {
	if r.Resources == nil {
		r.Resources, r.Finalizers = map[string]int{}, map[string]int{}
	}
}

func (r *Remaining) merge(o Remaining) {
	r.init()
	for res, n := range o.Resources {
		r.Resources[res] += n
	}
	for f, n := range o.Finalizers {
		r.Finalizers[f] += n
	}
	r.Copies += o.Copies
}

// Total is the number of objects left.
func (r Remaining) Total() int {
	n := 0
	for _, c := range r.Resources {
		n += c
	}
	return n
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
// It adds what is left to left.
func deleteContent(ctx context.Context, s *genericregistry.Store, left *Remaining) error {
	list, err := s.List(ctx, &metainternalversion.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing %s: %w", s.DefaultQualifiedResource, err)
	}
	resource := s.DefaultQualifiedResource.Resource + "." + s.DefaultQualifiedResource.Group
	return meta.EachListItem(list, func(obj runtime.Object) error {
		a, err := meta.Accessor(obj)
		if err != nil {
			return err
		}
		if mirrored.Is(a.GetAnnotations()) {
			left.Add(resource, a.GetFinalizers())
			left.Copies++
			return nil
		}
		uid := a.GetUID()
		out, deleted, err := s.Delete(ctx, a.GetName(), rest.ValidateAllObjectFunc, &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
		switch {
		case apierrors.IsNotFound(err) || apierrors.IsConflict(err) || err == nil && deleted:
		case err != nil:
			return fmt.Errorf("deleting %s %s: %w", s.DefaultQualifiedResource, a.GetName(), err)
		default:
			// Left to its finalizers or its graceful end (a pod its
			// node's kubelet stops).
			if oa, err := meta.Accessor(out); err == nil {
				a = oa
			}
			left.Add(resource, a.GetFinalizers())
		}
		return nil
	})
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
		var left Remaining
		var failed error
		for _, s := range c.contents {
			if err := deleteContent(nsCtx, s, &left); err != nil {
				failed = err
				break
			}
		}
		if c.custom != nil && failed == nil {
			custom, err := c.custom(ctx, name)
			if err != nil {
				failed = err
			}
			left.merge(custom)
		}
		if err := c.writeConditions(clusterCtx, ns, deletionConditions(left, failed)); err != nil {
			klog.V(2).InfoS("Writing a terminating namespace's conditions", "namespace", name, "err", err)
		}
		if failed != nil {
			return false, failed
		}
		if left.Copies > 0 && left.Copies == left.Total() {
			// Only the mirror's copies are left: the upstream deletes them.
			klog.V(2).InfoS("Namespace waits for the upstream to delete the mirrored objects it holds", "namespace", name, "mirrored", left.Copies)
		}
		if remaining := left.Total(); remaining > 0 {
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

// The conditions of a terminating namespace, as kube-controller-manager's
// namespace controller writes them
// (pkg/controller/namespace/deletion/status_condition_utils.go): each of
// the five types, False with its "okay" reason unless something is wrong.
var okayConditions = []corev1.NamespaceCondition{
	{Type: corev1.NamespaceDeletionDiscoveryFailure, Reason: "ResourcesDiscovered", Message: "All resources successfully discovered"},
	{Type: corev1.NamespaceDeletionGVParsingFailure, Reason: "ParsedGroupVersions", Message: "All legacy kube types successfully parsed"},
	{Type: corev1.NamespaceDeletionContentFailure, Reason: "ContentDeleted", Message: "All content successfully deleted, may be waiting on finalization"},
	{Type: corev1.NamespaceContentRemaining, Reason: "ContentRemoved", Message: "All content successfully removed"},
	{Type: corev1.NamespaceFinalizersRemaining, Reason: "ContentHasNoFinalizers", Message: "All content-preserving finalizers finished"},
}

// deletionConditions says what a pass left and what failed.
func deletionConditions(left Remaining, failed error) []corev1.NamespaceCondition {
	conds := slices.Clone(okayConditions)
	for i := range conds {
		conds[i].Status = corev1.ConditionFalse
	}
	set := func(typ corev1.NamespaceConditionType, reason, message string) {
		for i := range conds {
			if conds[i].Type == typ {
				conds[i].Status, conds[i].Reason, conds[i].Message = corev1.ConditionTrue, reason, message
			}
		}
	}
	if failed != nil {
		set(corev1.NamespaceDeletionContentFailure, "ContentDeletionFailed", "Failed to delete all resource types, 1 remaining: "+failed.Error())
	}
	if left.Total() > 0 {
		var each []string
		for res, n := range left.Resources {
			each = append(each, fmt.Sprintf("%s has %d resource instances", res, n))
		}
		slices.Sort(each)
		set(corev1.NamespaceContentRemaining, "SomeResourcesRemain", "Some resources are remaining: "+strings.Join(each, ", "))
	}
	var byFinalizer []string
	for f, n := range left.Finalizers {
		if n > 0 {
			byFinalizer = append(byFinalizer, fmt.Sprintf("%s in %d resource instances", f, n))
		}
	}
	if len(byFinalizer) > 0 {
		slices.Sort(byFinalizer)
		set(corev1.NamespaceFinalizersRemaining, "SomeFinalizersRemain", "Some content in the namespace has finalizers remaining: "+strings.Join(byFinalizer, ", "))
	}
	return conds
}

// writeConditions writes conds into the namespace's status when they
// differ from what it says, keeping an unchanged condition's transition
// time and every condition of another type, as upstream's Update does.
func (c *Controller) writeConditions(ctx context.Context, ns *corev1.Namespace, conds []corev1.NamespaceCondition) error {
	now := metav1.Now()
	var next []corev1.NamespaceCondition
	for _, old := range ns.Status.Conditions {
		if !slices.ContainsFunc(okayConditions, func(o corev1.NamespaceCondition) bool { return o.Type == old.Type }) {
			next = append(next, old)
		}
	}
	for _, cond := range conds {
		i := slices.IndexFunc(ns.Status.Conditions, func(o corev1.NamespaceCondition) bool { return o.Type == cond.Type })
		if i >= 0 {
			if old := ns.Status.Conditions[i]; old.Status == cond.Status && old.Reason == cond.Reason && old.Message == cond.Message {
				next = append(next, old)
				continue
			}
		}
		cond.LastTransitionTime = now
		next = append(next, cond)
	}
	if equality.Semantic.DeepEqual(next, ns.Status.Conditions) {
		return nil
	}
	updated := ns.DeepCopy()
	updated.Status.Conditions = next
	_, _, err := c.status.Update(ctx, ns.Name, rest.DefaultUpdatedObjectInfo(updated), rest.ValidateAllObjectFunc,
		rest.ValidateAllObjectUpdateFunc, false, &metav1.UpdateOptions{})
	return err
}
