package cacher

import (
	"reflect"

	"k8s.io/apimachinery/pkg/runtime"
)

// cachingObjectType names the wrapper the upstream cacher puts around
// every added or modified object it dispatches to its watchers
// (k8s.io/apiserver/pkg/storage/cacher/caching_object.go), so that each
// encoding is computed once for all of them.
var cachingObjectType = struct{ pkg, name, field string }{
	"k8s.io/apiserver/pkg/storage/cacher", "cachingObject", "object",
}

// SharedObject is the object a watch event of a watch cache carries, for
// an in-process reader that only reads it: the watch cache's own object,
// not a copy. obj is returned as it is unless it is the cacher's
// wrapper.
//
// The wrapper's GetObject returns a deep copy (runtime.CacheableObject's
// contract: the caller may mutate it). An informer that keeps every
// object it is sent, as the Node authorizer's do, would then hold a
// second decoded copy of every pod changed since it listed, while the
// objects its list returned are the cache's own: at the gateway set ×5
// the copies were 18 MB of a live heap of 81 (docs/PERFORMANCE.md). The
// wrapped object is the watch cache's own until a setter of the wrapper
// copies it (upstream does so only to set a deleted object's
// resourceVersion, before the event is dispatched), and nothing changes
// it after the event is sent, so a reader that receives the event may
// hold it as long as it never writes to it, as the objects of a LIST from
// the cache are held.
//
// The wrapper's field is read by reflection: upstream exports no
// accessor that does not copy. registry's TestListerWatcher fails if the
// pinned k8s.io/apiserver changes the wrapper; at run time a wrapper of
// another shape gets its copy, as before. The server gives it to the
// registry's in-process informers (registry.Storage.ReadWatchedObjectsWith).
func SharedObject(obj runtime.Object) runtime.Object {
	co, ok := obj.(runtime.CacheableObject)
	if !ok {
		return obj
	}
	if inner, ok := wrapped(co); ok {
		return inner
	}
	return co.GetObject()
}

// wrapped is the object upstream's cachingObject holds, if co is one.
func wrapped(co runtime.CacheableObject) (runtime.Object, bool) {
	v := reflect.ValueOf(co)
	if v.Kind() != reflect.Pointer || v.IsNil() {
		return nil, false
	}
	s := v.Elem()
	t := s.Type()
	if t.Kind() != reflect.Struct || t.PkgPath() != cachingObjectType.pkg || t.Name() != cachingObjectType.name {
		return nil, false
	}
	f := s.FieldByName(cachingObjectType.field)
	if !f.IsValid() || f.Kind() != reflect.Interface || f.IsNil() {
		return nil, false
	}
	inner := f.Elem()
	if inner.Kind() != reflect.Pointer || inner.IsNil() {
		return nil, false
	}
	// The field is unexported, so its value cannot be taken with
	// Interface; a pointer to the same object can.
	out, ok := reflect.NewAt(inner.Type().Elem(), inner.UnsafePointer()).Interface().(runtime.Object)
	return out, ok
}
