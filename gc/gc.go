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
package gc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/kubestore/kubestore/mirrored"
)

// resyncResources is how often the set of watched resources is compared
// with discovery (a CRD added or removed), upstream's ResourceResyncTime,
// while it may have changed: for 2×resyncResources after a
// CustomResourceDefinition changed (the discovery controller publishes a
// CRD's resource a moment after the CRD's own change), and until a resync
// has succeeded. kubestore serves no aggregated APIs, so nothing else
// changes what discovery lists; upstream's collector reads discovery every
// 30 s whatever happens, and on an idle device each read was a loopback
// request through the whole HTTP stack (docs/PERFORMANCE.md).
const resyncResources = 30 * time.Second

// crdResource is the resource whose changes change discovery.
var crdResource = schema.GroupResource{Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions"}

// workers process the queue in parallel, upstream's default for
// --concurrent-gc-syncs is 20; a gateway needs far fewer.
const workers = 2

// ignored resources are never collected, as upstream's defaults: Events
// are many, short-lived and expire by TTL.
var ignored = map[schema.GroupResource]bool{
	{Group: "", Resource: "events"}:              true,
	{Group: "events.k8s.io", Resource: "events"}: true,
}

// item names one object.
type item struct {
	gvr             schema.GroupVersionResource
	namespace, name string
}

func (i item) String() string {
	return fmt.Sprintf("%s %s/%s", i.gvr.GroupResource(), i.namespace, i.name)
}

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

type monitor struct {
	informer cache.SharedIndexInformer
	stop     context.CancelFunc
}

// Source lists and watches a resource in-process, as metadata when
// metadata is set; ok is false for one it does not serve, which the
// collector then watches through the loopback client
// (registry.Storage.ListerWatcher).
type Source func(gvr schema.GroupVersionResource, fieldSelector fields.Selector, metadata bool) (lw cache.ListerWatcher, ok bool)

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

// syncMonitors watches every deletable resource discovery lists and stops
// watching those that are gone; it reports whether all watched ones have
// synced.
func (c *Collector) syncMonitors(ctx context.Context) bool {
	discoveryReads.Inc()
	c.disc.Invalidate()
	c.mapper.Reset()
	lists, err := discovery.ServerPreferredResources(c.disc)
	if err != nil && len(lists) == 0 {
		klog.ErrorS(err, "Garbage collector: discovering resources")
		return false
	}
	lists = discovery.FilteredBy(discovery.SupportsAllVerbs{Verbs: []string{"delete", "list", "watch"}}, lists)
	want, err := discovery.GroupVersionResources(lists)
	if err != nil {
		klog.ErrorS(err, "Garbage collector: parsing discovery")
		return false
	}
	c.mu.Lock()
	var gone []*monitor
	for gvr, m := range c.monitors {
		if _, ok := want[gvr]; !ok {
			gone = append(gone, m)
			delete(c.monitors, gvr)
		}
	}
	var synced []cache.InformerSynced
	added := false
	for gvr := range want {
		if ignored[gvr.GroupResource()] {
			continue
		}
		m, ok := c.monitors[gvr]
		if !ok {
			m = c.monitor(ctx, gvr)
			c.monitors[gvr] = m
			added = true
		}
		synced = append(synced, m.informer.HasSynced)
	}
	resources.Set(float64(len(c.monitors)))
	c.mu.Unlock()
	// Stopped without the lock: their handlers take it.
	for _, m := range gone {
		m.stop()
	}
	waitCtx, cancel := context.WithTimeout(ctx, resyncResources)
	defer cancel()
	if !cache.WaitForCacheSync(waitCtx.Done(), synced...) {
		return false
	}
	if added && c.queue != nil {
		// Owners of a kind that was unknown (a custom resource whose CRD
		// came later) can be judged now: judge every dependent again.
		c.mu.Lock()
		for it := range c.refs {
			c.queue.Add(it)
		}
		c.mu.Unlock()
	}
	return true
}

// monitor starts a metadata informer on gvr that keeps only what
// collecting needs of each object.
func (c *Collector) monitor(ctx context.Context, gvr schema.GroupVersionResource) *monitor {
	var inf cache.SharedIndexInformer
	if lw, ok := c.local(gvr, nil, true); ok {
		inf = cache.NewSharedIndexInformer(lw, &metav1.PartialObjectMetadata{}, 0, cache.Indexers{})
	} else {
		inf = metadatainformer.NewFilteredMetadataInformer(c.client, gvr, metav1.NamespaceAll, 0, cache.Indexers{}, nil).Informer()
	}
	if err := inf.SetTransform(strip); err != nil {
		klog.ErrorS(err, "Garbage collector: informer transform", "resource", gvr)
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.changed(gvr, nil, obj) },
		UpdateFunc: func(old, obj any) { c.changed(gvr, old, obj) },
		DeleteFunc: func(obj any) { c.deleted(gvr, obj) },
	}); err != nil {
		klog.ErrorS(err, "Garbage collector: informer handler", "resource", gvr)
	}
	if gvr.GroupResource() == crdResource {
		if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(any) { c.discoveryChanged() },
			UpdateFunc: func(any, any) { c.discoveryChanged() },
			DeleteFunc: func(any) { c.discoveryChanged() },
		}); err != nil {
			klog.ErrorS(err, "Garbage collector: informer handler", "resource", gvr)
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		inf.RunWithContext(ctx)
	}()
	// stop returns once the informer has stopped.
	return &monitor{informer: inf, stop: func() { cancel(); <-done }}
}

// discoveryChanged notes that a CustomResourceDefinition changed: discovery
// is read again in a second, and at every resyncResources for a while.
func (c *Collector) discoveryChanged() {
	c.crdChanged.Store(time.Now().UnixNano())
	select {
	case c.resyncNow <- struct{}{}:
	default:
	}
}

func (c *Collector) stopMonitors() {
	c.mu.Lock()
	monitors := c.monitors
	c.monitors = map[schema.GroupVersionResource]*monitor{}
	c.mu.Unlock()
	for _, m := range monitors {
		m.stop()
	}
}

// strip keeps of an object's metadata only what collecting needs, and
// whether the mirror owns it.
func strip(obj any) (any, error) {
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return obj, nil
	}
	out := &metav1.PartialObjectMetadata{TypeMeta: m.TypeMeta, ObjectMeta: metav1.ObjectMeta{
		Name: m.Name, Namespace: m.Namespace, UID: m.UID, ResourceVersion: m.ResourceVersion,
		OwnerReferences: m.OwnerReferences, Finalizers: m.Finalizers, DeletionTimestamp: m.DeletionTimestamp,
	}}
	if rule, ok := m.Annotations[mirrored.AnnotationRule]; ok {
		out.Annotations = map[string]string{mirrored.AnnotationRule: rule}
	}
	return out, nil
}

func metaOf(obj any) *metav1.PartialObjectMetadata {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	m, _ := obj.(*metav1.PartialObjectMetadata)
	return m
}

// changed indexes an object's owners and queues what it may affect: the
// object when its owners changed, it and its dependents when its deletion
// began.
func (c *Collector) changed(gvr schema.GroupVersionResource, oldObj, obj any) {
	m := metaOf(obj)
	if m == nil {
		return
	}
	it := item{gvr: gvr, namespace: m.Namespace, name: m.Name}
	old := metaOf(oldObj)
	c.index(it, m.OwnerReferences)
	refsChanged := old == nil || !slices.EqualFunc(old.OwnerReferences, m.OwnerReferences, func(a, b metav1.OwnerReference) bool { return a.UID == b.UID })
	if len(m.OwnerReferences) > 0 && refsChanged {
		c.queue.Add(it)
	}
	if m.DeletionTimestamp != nil && (old == nil || old.DeletionTimestamp == nil || !slices.Equal(old.Finalizers, m.Finalizers)) {
		c.queue.Add(it)
		c.addDependents(m.UID)
	}
}

// deleted queues the object's dependents (their owner is gone) and owners
// (one waiting for its dependents may now finish).
func (c *Collector) deleted(gvr schema.GroupVersionResource, obj any) {
	m := metaOf(obj)
	if m == nil {
		return
	}
	c.index(item{gvr: gvr, namespace: m.Namespace, name: m.Name}, nil)
	c.addDependents(m.UID)
	for _, ref := range m.OwnerReferences {
		if owner, namespaced, err := c.resolve(ref); err == nil {
			it := item{gvr: owner, name: ref.Name}
			if namespaced {
				it.namespace = m.Namespace
			}
			c.queue.Add(it)
		}
	}
}

func (c *Collector) index(it item, refs []metav1.OwnerReference) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, uid := range c.refs[it] {
		delete(c.dependents[uid], it)
		if len(c.dependents[uid]) == 0 {
			delete(c.dependents, uid)
		}
	}
	delete(c.refs, it)
	for _, r := range refs {
		if c.dependents[r.UID] == nil {
			c.dependents[r.UID] = map[item]struct{}{}
		}
		c.dependents[r.UID][it] = struct{}{}
		c.refs[it] = append(c.refs[it], r.UID)
	}
	tracked.Set(float64(len(c.refs)))
}

func (c *Collector) dependentsOf(uid types.UID) []item {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]item, 0, len(c.dependents[uid]))
	for it := range c.dependents[uid] {
		out = append(out, it)
	}
	return out
}

func (c *Collector) addDependents(uid types.UID) {
	for _, it := range c.dependentsOf(uid) {
		c.queue.Add(it)
	}
}

// cached is the object as the informer last saw it, or nil.
func (c *Collector) cached(it item) *metav1.PartialObjectMetadata {
	c.mu.Lock()
	m := c.monitors[it.gvr]
	c.mu.Unlock()
	if m == nil {
		return nil
	}
	key := it.name
	if it.namespace != "" {
		key = it.namespace + "/" + it.name
	}
	obj, ok, err := m.informer.GetStore().GetByKey(key)
	if err != nil || !ok {
		return nil
	}
	return metaOf(obj)
}

// resolve maps an owner reference to its resource.
func (c *Collector) resolve(ref metav1.OwnerReference) (schema.GroupVersionResource, bool, error) {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return schema.GroupVersionResource{}, false, err
	}
	mapping, err := c.mapper.RESTMapping(gv.WithKind(ref.Kind).GroupKind(), gv.Version)
	if err != nil {
		return schema.GroupVersionResource{}, false, err
	}
	return mapping.Resource, mapping.Scope.Name() == meta.RESTScopeNameNamespace, nil
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

// unblockOwners sets blockOwnerDeletion false on every owner reference of
// obj (upstream's unblockOwnerReferences).
func (c *Collector) unblockOwners(ctx context.Context, it item, obj *metav1.PartialObjectMetadata) error {
	refs := slices.Clone(obj.OwnerReferences)
	changed := false
	for i := range refs {
		if refs[i].BlockOwnerDeletion != nil && *refs[i].BlockOwnerDeletion {
			refs[i].BlockOwnerDeletion = ptr.To(false)
			changed = true
		}
	}
	if !changed {
		return nil
	}
	if err := c.patchMeta(ctx, it, obj, map[string]any{"ownerReferences": refs}); err != nil {
		return fmt.Errorf("unblocking the owner references of %s: %w", it, err)
	}
	klog.V(2).InfoS("Garbage collector: owner references no longer block, to break a cycle of foreground deletions", "object", it)
	return nil
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

func (c *Collector) resource(it item) metadata.ResourceInterface {
	if it.namespace == "" {
		return c.client.Resource(it.gvr)
	}
	return c.client.Resource(it.gvr).Namespace(it.namespace)
}

// delete deletes one object, only as it was judged: its uid and
// resourceVersion. A conflict with a change that left its owner references
// as they were deletes it anyway (a busy object is not starved); one that
// changed them is judged again (upstream's deleteObject).
func (c *Collector) delete(ctx context.Context, it item, obj *metav1.PartialObjectMetadata, policy metav1.DeletionPropagation) error {
	uid, rv := obj.UID, obj.ResourceVersion
	for {
		pre := &metav1.Preconditions{UID: &uid}
		if rv != "" {
			pre.ResourceVersion = &rv
		}
		err := c.resource(it).Delete(ctx, it.name, metav1.DeleteOptions{Preconditions: pre, PropagationPolicy: &policy})
		switch {
		case err == nil:
			deletes.WithLabelValues(string(policy)).Inc()
			klog.V(2).InfoS("Garbage collector deleted an object whose owners are gone", "object", it, "propagation", policy)
			return nil
		case apierrors.IsNotFound(err):
			return nil
		case apierrors.IsConflict(err) && rv != "":
			live, lerr := c.resource(it).Get(ctx, it.name, metav1.GetOptions{})
			switch {
			case apierrors.IsNotFound(lerr):
				return nil
			case lerr != nil:
				return lerr
			case live.UID == uid && reflect.DeepEqual(live.OwnerReferences, obj.OwnerReferences):
				rv = ""
				continue
			}
			return fmt.Errorf("%s changed while it was judged: %w", it, errJudgeAgain)
		case apierrors.IsConflict(err):
			return nil // another object by now
		}
		return fmt.Errorf("deleting %s: %w", it, err)
	}
}

// errJudgeAgain makes the queue judge an object again.
var errJudgeAgain = errors.New("to be judged again")

// removeReferences removes the references to uids from an object, by a
// merge patch that holds its resourceVersion: a concurrent change makes it
// fail and the object is judged again.
func (c *Collector) removeReferences(ctx context.Context, it item, obj *metav1.PartialObjectMetadata, uids []types.UID) (bool, error) {
	keep := make([]metav1.OwnerReference, 0, len(obj.OwnerReferences))
	for _, ref := range obj.OwnerReferences {
		if !slices.Contains(uids, ref.UID) {
			keep = append(keep, ref)
		}
	}
	if len(keep) == len(obj.OwnerReferences) {
		return false, nil
	}
	if err := c.patchMeta(ctx, it, obj, map[string]any{"ownerReferences": keep}); err != nil {
		return false, fmt.Errorf("removing owner references from %s: %w", it, err)
	}
	referencesRemoved.Add(float64(len(obj.OwnerReferences) - len(keep)))
	return true, nil
}

func (c *Collector) removeFinalizer(ctx context.Context, it item, obj *metav1.PartialObjectMetadata, finalizer string) error {
	keep := slices.DeleteFunc(slices.Clone(obj.Finalizers), func(f string) bool { return f == finalizer })
	if err := c.patchMeta(ctx, it, obj, map[string]any{"finalizers": keep}); err != nil {
		return fmt.Errorf("removing finalizer %s from %s: %w", finalizer, it, err)
	}
	finalizersRemoved.WithLabelValues(finalizer).Inc()
	return nil
}

func (c *Collector) patchMeta(ctx context.Context, it item, obj *metav1.PartialObjectMetadata, fields map[string]any) error {
	fields["uid"] = obj.UID
	fields["resourceVersion"] = obj.ResourceVersion
	patch, err := json.Marshal(map[string]any{"metadata": fields})
	if err != nil {
		return err
	}
	_, err = c.resource(it).Patch(ctx, it.name, types.MergePatchType, patch, metav1.PatchOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
