package registry

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/client-go/tools/cache"

	"github.com/kubestore/kubestore/registry/mapwatch"
)

// ListerWatcher is how kubestore's in-process controllers read a built-in
// resource: its store's list and watch, served by the watch cache as a
// client's are (resourceVersion semantics, bookmarks, WatchList), without
// the loopback client's TLS, HTTP, serialization and decoding, and without
// a decoded copy of their own: what the informer keeps shares its strings,
// maps and slices with the watch cache's objects, which it must therefore
// never modify (client-go's informer contract already says so).
//
// Informers on it list and then watch, never WatchList: a list from the
// cache holds the cache's objects copied shallowly (the cacher's GetList),
// where WatchList's initial events are deep copies
// (cacher's getMutableObject). A watched change is the cacher's deep copy,
// or an object it shares between watchers (a runtime.CacheableObject),
// deep-copied here (GetObject) unless metadata is set. With metadata,
// every object is a *metav1.PartialObjectMetadata read through its
// accessors, as a metadata informer's.
// fieldSelector, when not nil, selects what is listed and watched, as
// client-go's NewListWatchFromClient's. ok is false for a resource
// kubestore's registry does not serve (a custom resource): the caller
// reads it through the loopback client.
func (s *Storage) ListerWatcher(gvr schema.GroupVersionResource, fieldSelector fields.Selector, metadata bool) (lw cache.ListerWatcher, ok bool) {
	var store *genericregistry.Store
	for d, st := range s.stores {
		if d.gvr == gvr {
			store = st
		}
	}
	if store == nil {
		return nil, false
	}
	ctxFor := func(ctx context.Context) context.Context {
		return genericapirequest.WithNamespace(ctx, metav1.NamespaceAll)
	}
	internalListOptions := func(options metav1.ListOptions) (*metainternalversion.ListOptions, error) {
		if fieldSelector != nil {
			options.FieldSelector = fieldSelector.String()
		}
		in := &metainternalversion.ListOptions{}
		if err := metainternalversion.Convert_v1_ListOptions_To_internalversion_ListOptions(&options, in, nil); err != nil {
			return nil, fmt.Errorf("list options: %w", err)
		}
		return in, nil
	}
	return listWatch{&cache.ListWatch{
		// The cache serves the whole list at once: no pages.
		DisableChunking: true,
		ListWithContextFunc: func(ctx context.Context, options metav1.ListOptions) (runtime.Object, error) {
			in, err := internalListOptions(options)
			if err != nil {
				return nil, err
			}
			list, err := store.List(ctxFor(ctx), in)
			if err != nil || !metadata {
				return list, err
			}
			return metadataList(list)
		},
		WatchFuncWithContext: func(ctx context.Context, options metav1.ListOptions) (watch.Interface, error) {
			in, err := internalListOptions(options)
			if err != nil {
				return nil, err
			}
			w, err := store.Watch(ctxFor(ctx), in)
			if err != nil {
				return nil, err
			}
			return mapwatch.New(w, func(ev watch.Event) watch.Event {
				switch {
				case ev.Type == watch.Error:
				case metadata:
					ev.Object = metadataOf(ev.Object, ev.Type == watch.Bookmark)
				default:
					ev.Object = s.watchedObject(ev.Object)
				}
				return ev
			}), nil
		},
	}}, true
}

// ReadWatchedObjectsWith sets how ListerWatcher's typed watches read a
// watch event's object: read gets what the watch cache sent and returns
// the object an informer holds (cacher.SharedObject: the cache's own,
// read only, as its lists' objects are). Without it they hold what the
// cacher's wrapper's GetObject returns, a deep copy.
func (s *Storage) ReadWatchedObjectsWith(read func(runtime.Object) runtime.Object) {
	s.readWatched = read
}

// watchedObject is the object an informer holds for obj, a watch event's.
func (s *Storage) watchedObject(obj runtime.Object) runtime.Object {
	if s.readWatched != nil {
		return s.readWatched(obj)
	}
	if co, ok := obj.(runtime.CacheableObject); ok {
		return co.GetObject()
	}
	return obj
}

// listWatch is a ListWatch that informers use without WatchList.
type listWatch struct{ *cache.ListWatch }

// IsWatchListSemanticsUnSupported tells client-go's reflector to list and
// then watch (k8s.io/client-go/util/watchlist).
func (listWatch) IsWatchListSemanticsUnSupported() bool { return true }

// metadataList is list's items as a PartialObjectMetadataList.
func metadataList(list runtime.Object) (runtime.Object, error) {
	lm, err := meta.ListAccessor(list)
	if err != nil {
		return nil, err
	}
	out := &metav1.PartialObjectMetadataList{ListMeta: metav1.ListMeta{
		ResourceVersion: lm.GetResourceVersion(), Continue: lm.GetContinue(), RemainingItemCount: lm.GetRemainingItemCount(),
	}}
	err = meta.EachListItem(list, func(obj runtime.Object) error {
		out.Items = append(out.Items, *metadataOf(obj, false))
		return nil
	})
	return out, err
}

// metadataOf is obj's metadata, read through its accessors (a watch
// cache's shared object is not copied). A bookmark has only its
// resourceVersion and annotations (WatchList's initial-events-end).
func metadataOf(obj runtime.Object, bookmark bool) *metav1.PartialObjectMetadata {
	m, err := meta.Accessor(obj)
	if err != nil {
		return &metav1.PartialObjectMetadata{}
	}
	if bookmark {
		return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{ResourceVersion: m.GetResourceVersion(), Annotations: m.GetAnnotations()}}
	}
	return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{
		Name: m.GetName(), GenerateName: m.GetGenerateName(), Namespace: m.GetNamespace(), UID: m.GetUID(),
		ResourceVersion: m.GetResourceVersion(), Generation: m.GetGeneration(), CreationTimestamp: m.GetCreationTimestamp(),
		DeletionTimestamp: m.GetDeletionTimestamp(), DeletionGracePeriodSeconds: m.GetDeletionGracePeriodSeconds(),
		Labels: m.GetLabels(), Annotations: m.GetAnnotations(), OwnerReferences: m.GetOwnerReferences(),
		Finalizers: m.GetFinalizers(), ManagedFields: m.GetManagedFields(),
	}}
}
