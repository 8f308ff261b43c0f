package gc

import (
	"context"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

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

// ignored resources are never collected, as upstream's defaults: Events
// are many, short-lived and expire by TTL.
var ignored = map[schema.GroupResource]bool{
	{Group: "", Resource: "events"}:              true,
	{Group: "events.k8s.io", Resource: "events"}: true,
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
