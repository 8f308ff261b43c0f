package registry

import (
	"context"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/registry/generic"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/registry/rest"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/apiserver/pkg/storage"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
)

// storeOptions wires the cacher index: the trigger function lets a watch on
// one value be woken only by its events, the indexer serves lists.
func (d *resourceDef) storeOptions(getter generic.RESTOptionsGetter) *generic.StoreOptions {
	opts := &generic.StoreOptions{RESTOptions: getter, AttrFunc: d.getAttrs}
	if ix := d.index; ix != nil {
		opts.TriggerFunc = storage.IndexerFuncs{ix.field: ix.value}
		opts.Indexers = &cache.Indexers{
			storage.FieldIndex(ix.field): func(obj any) ([]string, error) {
				o, ok := obj.(runtime.Object)
				if !ok {
					return nil, fmt.Errorf("indexing %s: unexpected %T", ix.field, obj)
				}
				return []string{ix.value(o)}, nil
			},
		}
	}
	return opts
}

// newStore builds the upstream generic registry store of the resource on
// the storage getter's etcd store and cacher.
func (d *resourceDef) newStore(typer runtime.ObjectTyper, getter generic.RESTOptionsGetter) (*genericregistry.Store, error) {
	st := newStrategy(typer, d)
	store := &genericregistry.Store{
		NewFunc:                   d.newFunc,
		NewListFunc:               d.newListFunc,
		DefaultQualifiedResource:  d.gvr.GroupResource(),
		SingularQualifiedResource: schema.GroupResource{Group: d.gvr.Group, Resource: d.singular},
		PredicateFunc:             d.predicate,
		CreateStrategy:            st,
		UpdateStrategy:            st,
		DeleteStrategy:            st.deleteStrategy(),
		ResetFieldsStrategy:       st,
		ReturnDeletedObject:       d.returnDeletedObject,
		TableConvertor:            d.tableConvertor(),
	}
	if d.ttl > 0 {
		ttl := uint64(d.ttl.Seconds())
		store.TTLFunc = func(runtime.Object, uint64, bool) (uint64, error) { return ttl, nil }
	}
	if err := store.CompleteWithOptions(d.storeOptions(getter)); err != nil {
		return nil, fmt.Errorf("building storage of %s: %w", d.gvr.GroupResource(), err)
	}
	return store, nil
}

// Storage is every resource's store, before and after installation.
type Storage struct {
	api *API
	// extra are core resources served by other packages
	// ("serviceaccounts/token").
	extra       map[string]rest.Storage
	stores      map[*resourceDef]*genericregistry.Store
	namespaces  *namespaceREST
	finalize    *genericregistry.Store
	nsStatus    *genericregistry.Store
	destroyOnce sync.Once
	// readWatched reads a watch event's object for ListerWatcher.
	readWatched func(runtime.Object) runtime.Object
}

// NewStorage builds the store of every kind on getter's storage; ips,
// when not nil, allocates Services' cluster IPs. On error it destroys what
// it built.
func (a *API) NewStorage(getter generic.RESTOptionsGetter, ips *ClusterIPs) (_ *Storage, err error) {
	s := &Storage{api: a, stores: map[*resourceDef]*genericregistry.Store{}}
	defer func() {
		if err != nil {
			s.Destroy()
		}
	}()
	for _, d := range a.defs {
		store, err := d.newStore(a.scheme, getter)
		if err != nil {
			return nil, err
		}
		s.stores[d] = store
		if d.kind == "Service" && ips != nil {
			ips.hooks(store)
		}
		if d.kind == "Namespace" {
			store.ShouldDeleteDuringUpdate = shouldDeleteNamespaceDuringUpdate
			s.namespaces = &namespaceREST{store: store, def: d}
			s.finalize = subresourceStore(store, finalizeStrategy{newStrategy(a.scheme, d)})
			s.nsStatus = subresourceStore(store, statusStrategy{strategy: newStrategy(a.scheme, d)})
		}
	}
	return s, nil
}

// AddCoreSubresource serves st as resource ("serviceaccounts/token") in
// the core group; call it before Install.
func (s *Storage) AddCoreSubresource(resource string, st rest.Storage) {
	if s.extra == nil {
		s.extra = map[string]rest.Storage{}
	}
	s.extra[resource] = st
}

// Destroy stops every store's watch cache and closes its etcd store, also
// after Install: a start that fails once the stores are installed but
// before the generic server runs must not leave the caches running. Call
// it when the generic server will not run; once it has run, the server's
// own Destroy has done this. It is idempotent.
//
// After Install the generic server destroys the same stores when it stops
// (InstallAPIGroups registers APIGroupInfo.destroyStorage, which
// GenericAPIServer.Destroy calls, and RunWithContext defers that), so
// both may run. That is harmless: genericregistry.Store.Destroy only calls
// the store's DestroyFunc, which upstream requires to be safe to call
// more than once; cacher's decorator makes it a sync.OnceFunc (and the
// upstream Cacher.Stop and the Store's count-metric wrapper guard
// themselves too), so each watch cache and etcd store is stopped once,
// by whichever call comes first. Subresources share the main store and
// destroy nothing themselves.
func (s *Storage) Destroy() {
	s.destroyOnce.Do(func() {
		for _, st := range s.stores {
			st.Destroy()
		}
	})
}

// Install registers every resource, its subresources and the API groups.
func (s *Storage) Install(gs *genericapiserver.GenericAPIServer) error {
	scheme, codecs := s.api.scheme, s.api.codecs
	groups := map[string]*genericapiserver.APIGroupInfo{}
	var order []string
	// resources is the storage map of one group version.
	resources := func(gv schema.GroupVersion) map[string]rest.Storage {
		info, ok := groups[gv.Group]
		if !ok {
			g := genericapiserver.NewDefaultAPIGroupInfo(gv.Group, scheme, runtime.NewParameterCodec(scheme), codecs)
			info = &g
			groups[gv.Group] = info
			order = append(order, gv.Group)
		}
		m := info.VersionedResourcesStorageMap[gv.Version]
		if m == nil {
			m = map[string]rest.Storage{}
			info.VersionedResourcesStorageMap[gv.Version] = m
		}
		return m
	}
	for _, d := range s.api.defs {
		m := resources(d.gvr.GroupVersion())
		store := s.stores[d]
		for _, as := range d.alsoServedAs {
			resources(as.gv)[d.gvr.Resource] = &resourceREST{Store: store, def: d}
		}
		switch {
		case d.kind == "Namespace":
			m[d.gvr.Resource] = s.namespaces
			m[d.gvr.Resource+"/finalize"] = &subresourceREST{store: s.finalize}
		default:
			m[d.gvr.Resource] = &resourceREST{Store: store, def: d}
		}
		if d.status != nil {
			m[d.gvr.Resource+"/status"] = &subresourceREST{store: subresourceStore(store, statusStrategy{strategy: newStrategy(scheme, d)})}
		}
		for name, part := range d.subresources {
			m[d.gvr.Resource+"/"+name] = &subresourceREST{store: subresourceStore(store, statusStrategy{strategy: newStrategy(scheme, d), part: part})}
		}
	}
	for name, st := range s.extra {
		resources(corev1.SchemeGroupVersion)[name] = st
	}
	if err := gs.InstallLegacyAPIGroup(genericapiserver.DefaultLegacyAPIPrefix, groups[""]); err != nil {
		return fmt.Errorf("installing the core API: %w", err)
	}
	var infos []*genericapiserver.APIGroupInfo
	for _, g := range order {
		if g != "" {
			infos = append(infos, groups[g])
		}
	}
	if err := gs.InstallAPIGroups(infos...); err != nil {
		return fmt.Errorf("installing API groups: %w", err)
	}
	forgetStaticOpenAPISpecs(append(infos, groups[""])...)
	return nil
}

// forgetStaticOpenAPISpecs drops the OpenAPI schemas the install left in
// each group: the generic server builds them to make the group's
// server-side apply type converter, and nothing of it reads them again,
// but it keeps each group's APIGroupInfo for the server's life (the
// destroy function InstallAPIGroups registers is a method of it), so its
// StaticOpenAPISpec stayed live: 3 MB of schemas, core/v1's most of it
// (heap profile of the gateway set, docs/PERFORMANCE.md).
func forgetStaticOpenAPISpecs(infos ...*genericapiserver.APIGroupInfo) {
	for _, info := range infos {
		info.StaticOpenAPISpec = nil
	}
}

// subresourceStrategy is the update strategy of a subresource: it owns
// the fields the subresource changes, for server-side apply too.
type subresourceStrategy interface {
	rest.RESTUpdateStrategy
	rest.ResetFieldsStrategy
}

// subresourceStore is a copy of the main store that updates through st,
// sharing the main store's storage.
func subresourceStore(main *genericregistry.Store, st subresourceStrategy) *genericregistry.Store {
	s := *main
	s.UpdateStrategy = st
	s.ResetFieldsStrategy = st
	// A subresource keeps the main object's spec: no allocation.
	s.BeginCreate, s.BeginUpdate, s.AfterDelete = nil, nil, nil
	return &s
}

// resourceREST is the storage of one resource: the upstream store plus the short
// names and categories kubectl reads from discovery.
type resourceREST struct {
	*genericregistry.Store
	def *resourceDef
}

var (
	_ rest.ShortNamesProvider = (*resourceREST)(nil)
	_ rest.CategoriesProvider = (*resourceREST)(nil)
)

func (r *resourceREST) ShortNames() []string { return r.def.shortNames }

func (r *resourceREST) Create(ctx context.Context, obj runtime.Object, createValidation rest.ValidateObjectFunc, options *metav1.CreateOptions) (runtime.Object, error) {
	if err := checkCreate(obj); err != nil {
		return nil, err
	}
	return r.Store.Create(ctx, obj, createValidation, options)
}

func (r *resourceREST) Update(ctx context.Context, name string, objInfo rest.UpdatedObjectInfo, createValidation rest.ValidateObjectFunc,
	updateValidation rest.ValidateObjectUpdateFunc, forceAllowCreate bool, options *metav1.UpdateOptions) (runtime.Object, bool, error) {
	return r.Store.Update(ctx, name, checkedUpdate{objInfo}, createValidation, updateValidation, forceAllowCreate, options)
}
func (r *resourceREST) Categories() []string { return r.def.categories }

// subresourceREST serves a subresource ("status", "finalize") with a store
// whose update strategy touches only that part of the object.
type subresourceREST struct {
	store *genericregistry.Store
}

var (
	_ rest.Patcher              = (*subresourceREST)(nil)
	_ rest.ResetFieldsStrategy  = (*subresourceREST)(nil)
	_ rest.TableConvertor       = (*subresourceREST)(nil)
	_ rest.SingularNameProvider = (*subresourceREST)(nil)
)

func (r *subresourceREST) New() runtime.Object { return r.store.New() }

// Destroy does nothing: the main resource's store owns the storage.
func (r *subresourceREST) Destroy() {}

func (r *subresourceREST) Get(ctx context.Context, name string, options *metav1.GetOptions) (runtime.Object, error) {
	return r.store.Get(ctx, name, options)
}

// Update never creates: a subresource of a missing object is NotFound.
func (r *subresourceREST) Update(ctx context.Context, name string, objInfo rest.UpdatedObjectInfo, createValidation rest.ValidateObjectFunc,
	updateValidation rest.ValidateObjectUpdateFunc, _ bool, options *metav1.UpdateOptions) (runtime.Object, bool, error) {
	return r.store.Update(ctx, name, checkedUpdate{objInfo}, createValidation, updateValidation, false, options)
}

func (r *subresourceREST) GetResetFields() map[fieldpath.APIVersion]*fieldpath.Set {
	return r.store.GetResetFields()
}

func (r *subresourceREST) ConvertToTable(ctx context.Context, object runtime.Object, tableOptions runtime.Object) (*metav1.Table, error) {
	return r.store.ConvertToTable(ctx, object, tableOptions)
}

func (r *subresourceREST) GetSingularName() string { return r.store.GetSingularName() }
