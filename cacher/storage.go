package cacher

import (
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured/unstructuredscheme"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/cbor"
	"k8s.io/apimachinery/pkg/runtime/serializer/recognizer"
	"k8s.io/apiserver/pkg/features"
	"k8s.io/apiserver/pkg/registry/generic"
	serverstorage "k8s.io/apiserver/pkg/server/storage"
	"k8s.io/apiserver/pkg/storage"
	cacherstorage "k8s.io/apiserver/pkg/storage/cacher"
	"k8s.io/apiserver/pkg/storage/etcd3"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	"k8s.io/apiserver/pkg/storage/storagebackend/factory"
	"k8s.io/apiserver/pkg/storage/value"
	"k8s.io/apiserver/pkg/storage/value/encrypt/identity"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/tools/cache"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"

	"github.com/kubestore/kubestore/config"
)

// storageMediaType is how objects are encoded in etcd: protobuf, as
// kube-apiserver stores built-in types.
const storageMediaType = runtime.ContentTypeProtobuf

// countMetricPollPeriod is how often apiserver_storage_objects is refreshed
// from etcd, as kube-apiserver's default.
const countMetricPollPeriod = time.Minute

// Resources tells the getter how each resource is stored.
type Resources struct {
	// Scheme knows every served type under its external versions and
	// runtime.APIVersionInternal.
	Scheme *runtime.Scheme
	// Serializer encodes and decodes for storage.
	Serializer runtime.StorageSerializer
	// KeyPrefixes are the etcd key prefixes under --etcd-prefix of resources
	// whose layout follows kube-apiserver's ("minions" for nodes); a
	// resource not listed is stored under "<group>/<resource>".
	KeyPrefixes map[schema.GroupResource]string
	// Transformer, when set, transforms values on their way to and from
	// etcd (encryption at rest).
	Transformer func(schema.GroupResource) value.Transformer
}

// RESTOptionsGetter is the generic.RESTOptionsGetter of every store in the
// server: it gives each resource the shared etcd client, the storage codec
// and, unless the resource's watch cache is off, the upstream cacher.
func (b *Backend) RESTOptionsGetter(r Resources) generic.RESTOptionsGetter {
	return &restOptionsGetter{backend: b, resources: r}
}

type restOptionsGetter struct {
	backend   *Backend
	resources Resources
}

func (g *restOptionsGetter) GetRESTOptions(gr schema.GroupResource, _ runtime.Object) (generic.RESTOptions, error) {
	versions := g.resources.Scheme.PrioritizedVersionsForGroup(gr.Group)
	if len(versions) == 0 {
		return generic.RESTOptions{}, fmt.Errorf("no storage version for %s: its group is not in the scheme", gr)
	}
	codec, encodeVersioner, err := serverstorage.NewStorageCodec(serverstorage.StorageCodecConfig{
		StorageMediaType:  storageMediaType,
		StorageSerializer: g.resources.Serializer,
		StorageVersion:    versions[0],
		MemoryVersion:     schema.GroupVersion{Group: gr.Group, Version: runtime.APIVersionInternal},
	})
	if err != nil {
		return generic.RESTOptions{}, fmt.Errorf("building storage codec for %s: %w", gr, err)
	}
	prefix, ok := g.resources.KeyPrefixes[gr]
	if !ok {
		prefix = gr.Group + "/" + gr.Resource
	}
	return g.backend.restOptions(gr, codec, encodeVersioner, prefix, g.resources.Transformer)
}

// CustomResourcesRESTOptionsGetter is the generic.RESTOptionsGetter of
// custom resources (apiextensions-apiserver's CRDRESTOptionsGetter): their
// objects are unstructured and stored as JSON under
// "<group>/<resource>", as kube-apiserver stores them, through the same
// per-resource watch-cache settings and budgets as built-in resources.
// transformer, when set, transforms values on their way to and from etcd.
func (b *Backend) CustomResourcesRESTOptionsGetter(transformer func(schema.GroupResource) value.Transformer) generic.RESTOptionsGetter {
	return &customResourcesGetter{backend: b, transformer: transformer}
}

type customResourcesGetter struct {
	backend     *Backend
	transformer func(schema.GroupResource) value.Transformer
}

func (g *customResourcesGetter) GetRESTOptions(gr schema.GroupResource, _ runtime.Object) (generic.RESTOptions, error) {
	// As NewCRDRESTOptionsGetter in k8s.io/apiextensions-apiserver: JSON
	// (CBOR when the CBORServingAndStorage gate is on) is written, both are
	// read. apiextensions-apiserver wraps this codec with the conversion
	// and schema of the CRD's storage version.
	ucbor := cbor.NewSerializer(unstructuredscheme.NewUnstructuredCreator(), unstructuredscheme.NewUnstructuredObjectTyper())
	var encoder runtime.Encoder = unstructured.UnstructuredJSONScheme
	if utilfeature.DefaultFeatureGate.Enabled(features.CBORServingAndStorage) {
		encoder = ucbor
	}
	codec := runtime.NewCodec(encoder, recognizer.NewDecoder(ucbor, unstructured.UnstructuredJSONScheme))
	return g.backend.restOptions(gr, codec, nil, gr.Group+"/"+gr.Resource, g.transformer)
}

// restOptions are the options of one resource stored with codec under
// prefix (below --etcd-prefix).
func (b *Backend) restOptions(gr schema.GroupResource, codec runtime.Codec, encodeVersioner runtime.GroupVersioner, prefix string,
	transformer func(schema.GroupResource) value.Transformer) (generic.RESTOptions, error) {
	rc := b.cfg.CacheFor(gr)
	budget := b.cfg.BudgetFor(gr)

	sc := storagebackend.NewDefaultConfig(b.etcd.Prefix, codec)
	sc.EncodeVersioner = encodeVersioner
	sc.Transport.ServerList = b.Endpoints()
	sc.CompactionInterval = b.etcd.CompactionInterval.Duration
	sc.EventsHistoryWindow = rc.HistoryWindow
	if transformer != nil {
		sc.Transformer = transformer(gr)
	}

	klog.V(3).InfoS("Storage", "resource", gr, "watchCache", rc.Enabled, "historyWindow", rc.HistoryWindow, "key", sc.Prefix+"/"+prefix,
		"maxObjects", budget.Objects, "maxBytes", budget.Bytes)
	recordWatchCache(gr, rc.Enabled)
	return generic.RESTOptions{
		StorageConfig: sc.ForResource(gr),
		Decorator:     b.decorator(rc.Enabled, budget),
		// Orphan and foreground deletion add finalizers that only the
		// garbage collector removes: honoured only while it runs.
		EnableGarbageCollection: b.cfg.ControllerEnabled(config.ControllerGarbageCollector),
		DeleteCollectionWorkers: 1,
		ResourcePrefix:          prefix,
		CountMetricPollPeriod:   countMetricPollPeriod,
	}, nil
}

var (
	watchCacheEnabled = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Namespace: "kubestore", Name: "watch_cache_enabled",
		Help:           "1 for each resource served from its watch cache, 0 for each read straight from etcd (--watch-cache-sizes, and a small device's defaults).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"group", "resource"})
	registerWatchCacheEnabled sync.Once
)

// recordWatchCache sets kubestore_watch_cache_enabled for one resource.
func recordWatchCache(gr schema.GroupResource, enabled bool) {
	registerWatchCacheEnabled.Do(func() { legacyregistry.MustRegister(watchCacheEnabled) })
	v := 0.0
	if enabled {
		v = 1
	}
	watchCacheEnabled.WithLabelValues(gr.Group, gr.Resource).Set(v)
}

// decorator builds the storage.Interface of one resource: the upstream
// etcd3 store on the shared client and, when cached, the upstream cacher and
// its delegator in front of it (the StorageWithCacher path of
// k8s.io/apiserver/pkg/registry/generic/registry/storage_factory.go), then
// the resource's budget around both.
func (b *Backend) decorator(cached bool, budget config.Budget) generic.StorageDecorator {
	return func(
		sc *storagebackend.ConfigForResource,
		resourcePrefix string,
		keyFunc func(obj runtime.Object) (string, error),
		newFunc func() runtime.Object,
		newListFunc func() runtime.Object,
		getAttrsFunc storage.AttrFunc,
		triggerFuncs storage.IndexerFuncs,
		indexers *cache.Indexers,
	) (storage.Interface, factory.DestroyFunc, error) {
		transformer := sc.Transformer
		if transformer == nil {
			transformer = identity.NewEncryptCheckTransformer()
		}
		versioner := storage.APIObjectVersioner{}
		store, err := etcd3.New(b.client, b.compactor, sc.Codec, newFunc, newListFunc, sc.Prefix, resourcePrefix,
			sc.GroupResource, transformer, sc.LeaseManagerConfig, etcd3.NewDefaultDecoder(sc.Codec, versioner), versioner)
		if err != nil {
			return nil, nil, fmt.Errorf("creating etcd store for %s: %w", sc.GroupResource, err)
		}
		// A create passes the heap watermark first, then the resource's budget;
		// every other write the budget alone.
		// An object too large for etcd gets 413 (withSizeLimit).
		guard := func(s storage.Interface) (storage.Interface, func()) {
			s, stopBudget := withBudget(s, sc.GroupResource, budget, resourcePrefix, keyFunc)
			return withSizeLimit(withHeapGuard(s, sc.GroupResource, b.heap), sc.GroupResource, b.requestLimit()), stopBudget
		}
		if !cached {
			s, stopBudget := guard(store)
			return s, sync.OnceFunc(func() {
				stopBudget()
				store.Close()
			}), nil
		}
		var source storage.Interface = store
		if b.embedded != nil {
			source = withLeaderWait(store, b.embedded.HasLeader)
		}
		source = withSharedParts(source, b.parts)
		c, err := cacherstorage.NewCacherFromConfig(cacherstorage.Config{
			Storage:             source,
			Versioner:           versioner,
			GroupResource:       sc.GroupResource,
			EventsHistoryWindow: sc.EventsHistoryWindow,
			ResourcePrefix:      resourcePrefix,
			KeyFunc:             keyFunc,
			NewFunc:             newFunc,
			NewListFunc:         newListFunc,
			GetAttrsFunc:        getAttrsFunc,
			IndexerFuncs:        triggerFuncs,
			Indexers:            indexers,
			Codec:               sc.Codec,
		})
		if err != nil {
			store.Close()
			return nil, nil, fmt.Errorf("creating watch cache for %s: %w", sc.GroupResource, err)
		}
		delegator := cacherstorage.NewCacheDelegator(c, store)
		s, stopBudget := guard(delegator)
		return s, sync.OnceFunc(func() {
			stopBudget()
			delegator.Stop()
			c.Stop()
			store.Close()
		}), nil
	}
}
