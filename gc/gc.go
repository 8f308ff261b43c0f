// Package gc is kubestore's garbage collector for ownerReferences, the
// behaviour of kube-controller-manager's (k8s.io/kubernetes
// pkg/controller/garbagecollector; https://kubernetes.io/docs/concepts/architecture/garbage-collection/):
// a dependent whose owners are all gone is deleted (background); an owner
// deleted with propagationPolicy Foreground keeps its foregroundDeletion
// finalizer until its dependents with blockOwnerDeletion are gone; one
// deleted with Orphan has its ownerReference removed from every dependent
// before its orphan finalizer is removed.
//
// It watches the metadata of every resource that can be listed, watched and
// deleted, built-in or custom: built-in ones on their watch caches (a
// Source), the others through the server's loopback client, which it also
// reads live objects and writes with. It keeps of each object only what
// collecting needs (name, uid, ownerReferences, finalizers, deletion
// timestamp). All work is derived from that stored state, so a restart
// finishes what a stop interrupted.
// Several kubestores on one etcd elect one collector with an etcd election
// (RunWithLeaderElection); every write it makes carries a uid or
// resourceVersion precondition.
//
// Its files are upstream's: gc.go the collector and its judgement
// (garbagecollector.go), graph_builder.go the monitors and what their
// events queue, graph.go the owners' index, operations.go the API calls,
// patch.go the patches of ownerReferences.
package gc

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/kubestore/kubestore/mirrored"
)

// workers process the queue in parallel, upstream's default for
// --concurrent-gc-syncs is 20; a gateway needs far fewer.
const workers = 2

// Collector is the garbage collector. Run it with Run or
// RunWithLeaderElection.
type Collector struct {
	client metadata.Interface
	// local reads a resource in-process when it can (see Source).
	local  Source
	disc   discovery.CachedDiscoveryInterface
	mapper *restmapper.DeferredDiscoveryRESTMapper
	queue  workqueue.TypedRateLimitingInterface[item]

	mu       sync.Mutex
	monitors map[schema.GroupVersionResource]*monitor
	// dependents are the objects that name each uid as an owner; refs
	// the owner uids each such object names, to keep dependents current.
	dependents map[types.UID]map[item]struct{}
	refs       map[item][]types.UID
	// resyncNow asks for discovery to be read again soon.
	resyncNow chan struct{}
	// crdChanged is when a CustomResourceDefinition last changed, in
	// unix nanoseconds.
	crdChanged atomic.Int64
}

// New builds a collector on the server's loopback client config; local
// serves the resources it can without the loopback client.
func New(cfg *rest.Config, local Source) (*Collector, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = -1, -1
	// Watching every resource reads the deprecated ones too (v1
	// Endpoints): their warnings are for users, not the collector's log.
	cfg.WarningHandler = rest.NoWarnings{}
	client, err := metadata.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	disc := memory.NewMemCacheClient(dc)
	registerMetrics()
	return &Collector{
		client: client, local: local, disc: disc, mapper: restmapper.NewDeferredDiscoveryRESTMapper(disc),
		resyncNow: make(chan struct{}, 1),
		monitors:  map[schema.GroupVersionResource]*monitor{}, dependents: map[types.UID]map[item]struct{}{}, refs: map[item][]types.UID{},
	}, nil
}

// Run collects until ctx is done.
func (c *Collector) Run(ctx context.Context) {
	c.mu.Lock()
	c.dependents, c.refs = map[types.UID]map[item]struct{}{}, map[item][]types.UID{}
	c.mu.Unlock()
	c.queue = workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[item](),
		workqueue.TypedRateLimitingQueueConfig[item]{Name: "kubestore_garbage_collector"})
	defer c.queue.ShutDown()
	defer c.stopMonitors()
	leader.Set(1)
	defer leader.Set(0)

	// The graph must be complete before anything is judged absent.
	for !c.syncMonitors(ctx) {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
	klog.InfoS("Garbage collector started", "resources", len(c.monitors))
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for c.processNext(ctx) {
			}
		})
	}
	// Resync a second after a CRD changed or an owner of an unknown kind
	// was met (a custom resource whose CRD is new), then at every
	// resyncResources while discovery may still change or a resync failed
	// (resyncResources).
	tick := time.NewTicker(resyncResources)
	defer tick.Stop()
	synced := true
	for done := false; !done; {
		select {
		case <-ctx.Done():
			done = true
		case <-tick.C:
			if !synced || time.Since(time.Unix(0, c.crdChanged.Load())) < 2*resyncResources {
				synced = c.syncMonitors(ctx)
			}
		case <-c.resyncNow:
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
				synced = c.syncMonitors(ctx)
			}
		}
	}
	c.queue.ShutDown()
	wg.Wait()
}

func (c *Collector) processNext(ctx context.Context) bool {
	it, quit := c.queue.Get()
	if quit {
		return false
	}
	defer c.queue.Done(it)
	if err := c.process(ctx, it); err != nil {
		errorsTotal.Inc()
		klog.V(2).InfoS("Garbage collector: will retry", "object", it, "err", err)
		c.queue.AddRateLimited(it)
		return true
	}
	c.queue.Forget(it)
	return true
}

// process is upstream's attemptToDeleteItem, processDeletingDependentsItem
// and orphanDependents for one object. It decides on the object as etcd
// has it now, not as the informer last saw it: a dependent re-adopted since
// is judged with its new owners (upstream reads the latest object too).
func (c *Collector) process(ctx context.Context, it item) error {
	cached := c.cached(it)
	if cached == nil {
		return nil
	}
	obj, err := c.resource(it).Get(ctx, it.name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return err
	case obj.UID != cached.UID:
		return nil // another object by now: its own events bring it
	}
	if mirrored.Is(obj.Annotations) {
		// The mirror owns it: its upstream's collector decides.
		return nil
	}
	if obj.DeletionTimestamp != nil {
		switch {
		case slices.Contains(obj.Finalizers, metav1.FinalizerOrphanDependents):
			return c.orphanDependents(ctx, it, obj)
		case slices.Contains(obj.Finalizers, metav1.FinalizerDeleteDependents):
			return c.deleteDependents(ctx, it, obj)
		}
		return nil
	}
	if len(obj.OwnerReferences) == 0 {
		return nil
	}
	solid, dangling, waiting, err := c.classify(ctx, obj)
	if err != nil {
		return err
	}
	switch {
	case len(solid) > 0:
		if len(dangling)+len(waiting) == 0 {
			return nil
		}
		// Some owner remains: only the references to the others go.
		_, err := c.removeReferences(ctx, it, obj, append(dangling, waiting...))
		return err
	case len(waiting) > 0 && len(c.dependentsOf(obj.UID)) > 0:
		// An owner waits for its dependents, and this one has its own:
		// they go first (upstream deletes it in the foreground too). If
		// one of those is itself waiting for its dependents, the blocking
		// references may form a cycle that would wait forever: this
		// object's references stop blocking first, as upstream does.
		if c.deletingDependent(obj.UID) {
			if err := c.unblockOwners(ctx, it, obj); err != nil {
				return err
			}
		}
		return c.delete(ctx, it, obj, metav1.DeletePropagationForeground)
	default:
		policy := metav1.DeletePropagationBackground
		switch {
		case slices.Contains(obj.Finalizers, metav1.FinalizerOrphanDependents):
			policy = metav1.DeletePropagationOrphan
		case slices.Contains(obj.Finalizers, metav1.FinalizerDeleteDependents):
			policy = metav1.DeletePropagationForeground
		}
		return c.delete(ctx, it, obj, policy)
	}
}

// deletingDependent reports whether a dependent of uid is being deleted in
// the foreground, waiting for its own dependents.
func (c *Collector) deletingDependent(uid types.UID) bool {
	for _, dep := range c.dependentsOf(uid) {
		if m := c.cached(dep); m != nil && m.DeletionTimestamp != nil && slices.Contains(m.Finalizers, metav1.FinalizerDeleteDependents) {
			return true
		}
	}
	return false
}

// classify sorts an object's owner references, as upstream: solid owners
// exist and are not waiting for their dependents, dangling ones are absent
// (no object of that name, or one with another uid: verified by a read
// from etcd before anything is deleted), waiting ones are being deleted in
// the foreground.
func (c *Collector) classify(ctx context.Context, obj *metav1.PartialObjectMetadata) (solid, dangling, waiting []types.UID, err error) {
	for _, ref := range obj.OwnerReferences {
		gvr, namespaced, err := c.resolve(ref)
		if err != nil {
			if meta.IsNoMatchError(err) {
				// An owner of a kind this server does not serve (a mirrored
				// pod's ReplicaSet): it cannot be judged absent. Discovery
				// is read again in case its kind is new.
				select {
				case c.resyncNow <- struct{}{}:
				default:
				}
				solid = append(solid, ref.UID)
				continue
			}
			return nil, nil, nil, err
		}
		if namespaced && obj.Namespace == "" {
			// A cluster-scoped dependent cannot have a namespaced owner:
			// unresolvable, never collected (upstream since 1.20).
			solid = append(solid, ref.UID)
			continue
		}
		owner := item{gvr: gvr, name: ref.Name}
		if namespaced {
			owner.namespace = obj.Namespace
		}
		m := c.cached(owner)
		if m == nil || m.UID != ref.UID {
			var getter metadata.ResourceInterface = c.client.Resource(gvr)
			if namespaced {
				getter = c.client.Resource(gvr).Namespace(owner.namespace)
			}
			live, err := getter.Get(ctx, ref.Name, metav1.GetOptions{})
			switch {
			case apierrors.IsNotFound(err):
				m = nil
			case err != nil:
				return nil, nil, nil, err
			default:
				m = live
			}
		}
		switch {
		case m == nil || m.UID != ref.UID:
			dangling = append(dangling, ref.UID)
		case m.DeletionTimestamp != nil && slices.Contains(m.Finalizers, metav1.FinalizerDeleteDependents):
			waiting = append(waiting, ref.UID)
		default:
			solid = append(solid, ref.UID)
		}
	}
	return solid, dangling, waiting, nil
}

// deleteDependents handles an owner deleted in the foreground: its
// dependents are deleted, and once none with blockOwnerDeletion remains
// its foregroundDeletion finalizer goes.
func (c *Collector) deleteDependents(ctx context.Context, it item, owner *metav1.PartialObjectMetadata) error {
	blocking := 0
	for _, dep := range c.dependentsOf(owner.UID) {
		m := c.cached(dep)
		if m == nil {
			continue
		}
		for _, ref := range m.OwnerReferences {
			if ref.UID == owner.UID && ref.BlockOwnerDeletion != nil && *ref.BlockOwnerDeletion {
				blocking++
			}
		}
		if m.DeletionTimestamp == nil {
			c.queue.Add(dep)
		}
	}
	if blocking > 0 {
		return nil
	}
	return c.removeFinalizer(ctx, it, owner, metav1.FinalizerDeleteDependents)
}

// orphanDependents handles an owner deleted with the orphan policy: every
// dependent loses its reference, then the owner its orphan finalizer.
func (c *Collector) orphanDependents(ctx context.Context, it item, owner *metav1.PartialObjectMetadata) error {
	var errs []error
	for _, dep := range c.dependentsOf(owner.UID) {
		m := c.cached(dep)
		if m == nil {
			continue
		}
		removed, err := c.removeReferences(ctx, dep, m, []types.UID{owner.UID})
		if err != nil {
			errs = append(errs, err)
		}
		if removed {
			orphaned.Inc()
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return c.removeFinalizer(ctx, it, owner, metav1.FinalizerOrphanDependents)
}
