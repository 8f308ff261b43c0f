package cacher

import (
	"bytes"
	"context"
	"hash/maphash"
	"reflect"
	"sync"
	"unsafe"
	"weak"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/apiserver/pkg/storage"

	"github.com/kubestore/kubestore/registry/mapwatch"
)

// withSharedParts makes the objects the watch cache receives from s (its
// list and its watch's events) hold the parts that repeat across objects
// of one shape once, in parts: every managedFields entry's fieldsV1 (the
// same for every object one manager wrote the same fields of), and a
// pod's containers, init containers, volumes and tolerations (the same
// for every pod of one template). A part equal to one an object already
// in the cache holds becomes that one.
//
// At the gateway set ×5 the decoded pods were 28.5 of the watch caches'
// 32.5 MB, 28.5 KB a pod: its fieldsV1 8.5 KB and its containers 8.5 KB
// (docs/PERFORMANCE.md). Only the cache's objects share: they are read
// only by everything that reads the cache (a LIST's items, an in-process
// informer's objects, a watch event's encoding), as upstream requires of
// them, and whoever updates one deep-copies it first (CacheDelegator's
// GuaranteedUpdate). Nothing writes into a decoded object's fieldsV1 in
// place but a decode into that object, and nothing decodes into the
// cache's objects. Objects read from etcd past the cache (a GET, an
// update's read) are not shared.
func withSharedParts(s storage.Interface, parts *sharedParts) storage.Interface {
	return sharing{Interface: s, parts: parts}
}

type sharing struct {
	storage.Interface
	parts *sharedParts
}

func (s sharing) Watch(ctx context.Context, key string, opts storage.ListOptions) (watch.Interface, error) {
	w, err := s.Interface.Watch(ctx, key, opts)
	if err != nil {
		return nil, err
	}
	return mapwatch.New(w, func(ev watch.Event) watch.Event {
		s.parts.share(ev.Object)
		return ev
	}), nil
}

func (s sharing) GetList(ctx context.Context, key string, opts storage.ListOptions, listObj runtime.Object) error {
	if err := s.Interface.GetList(ctx, key, opts, listObj); err != nil {
		return err
	}
	return meta.EachListItem(listObj, func(obj runtime.Object) error {
		s.parts.share(obj)
		return nil
	})
}

// sharedParts holds, by content, a weak reference to one copy of each
// part some cached object holds: a part no object holds any more is
// collected, and its entry dropped.
type sharedParts struct {
	seed maphash.Seed

	mu      sync.Mutex
	entries map[uint64][]partEntry
	// added counts entries since the last sweep of collected ones, swept
	// the entries that sweep left.
	added, swept int
}

// partEntry is one part: the first element of its backing array, weakly,
// its length and its element type (hashes of parts of two types may
// collide; they are never compared).
type partEntry struct {
	ref weak.Pointer[byte]
	n   int
	typ reflect.Type
}

func newSharedParts() *sharedParts {
	return &sharedParts{seed: maphash.MakeSeed(), entries: map[uint64][]partEntry{}}
}

// share replaces obj's repeated parts with the copies other cached
// objects hold, in place.
func (p *sharedParts) share(obj runtime.Object) {
	if w, ok := obj.(storage.WatchEventWithRecordTime); ok {
		// The watch cache's watch wraps each event's object with the time
		// it was decoded (ListOptions.RecordTimestamps).
		obj = w.Unwrap()
	}
	if obj == nil {
		return
	}
	if a, ok := obj.(metav1.ObjectMetaAccessor); ok {
		if m, ok := a.GetObjectMeta().(*metav1.ObjectMeta); ok {
			for i := range m.ManagedFields {
				if f := m.ManagedFields[i].FieldsV1; f != nil && len(f.Raw) > 0 {
					f.Raw = sharedSlice(p, f.Raw, func(b []byte) []byte { return b })
				}
			}
		}
	}
	if pod, ok := obj.(*corev1.Pod); ok {
		pod.Spec.Containers = sharedSlice(p, pod.Spec.Containers, marshalEach((*corev1.Container).Marshal))
		pod.Spec.InitContainers = sharedSlice(p, pod.Spec.InitContainers, marshalEach((*corev1.Container).Marshal))
		pod.Spec.Volumes = sharedSlice(p, pod.Spec.Volumes, marshalEach((*corev1.Volume).Marshal))
		pod.Spec.Tolerations = sharedSlice(p, pod.Spec.Tolerations, marshalEach((*corev1.Toleration).Marshal))
	}
}

// marshalEach is the protobuf encoding of a slice's elements, one after
// the other: what a slice of them is hashed by.
func marshalEach[T any](marshal func(*T) ([]byte, error)) func([]T) []byte {
	return func(s []T) []byte {
		var out []byte
		for i := range s {
			b, err := marshal(&s[i])
			if err != nil {
				return nil
			}
			out = append(out, b...)
		}
		return out
	}
}

// sharedSlice is the slice equal to s that a cached object already holds,
// else s, which is then the one to share. encode gives the bytes s is
// hashed by (nil: not shared); two slices are the same part when their
// hashes match and their elements are deeply equal (reflect.DeepEqual:
// exactly equal values, so their encodings are too).
func sharedSlice[T any](p *sharedParts, s []T, encode func([]T) []byte) []T {
	if len(s) == 0 {
		return s
	}
	key := encode(s)
	if key == nil {
		return s
	}
	typ := reflect.TypeFor[T]()
	var h maphash.Hash
	h.SetSeed(p.seed)
	h.WriteString(typ.String())
	h.Write(key)
	sum := h.Sum64()

	p.mu.Lock()
	defer p.mu.Unlock()
	bucket := p.entries[sum]
	live := bucket[:0]
	var found []T
	for _, e := range bucket {
		first := e.ref.Value()
		if first == nil {
			continue // collected
		}
		live = append(live, e)
		if found == nil && e.typ == typ && e.n == len(s) {
			if c := unsafe.Slice((*T)(unsafe.Pointer(first)), e.n); equalParts(c, s) {
				found = c
			}
		}
	}
	if found == nil {
		live = append(live, partEntry{ref: weak.Make((*byte)(unsafe.Pointer(&s[0]))), n: len(s), typ: typ})
		p.added++
	}
	if len(live) == 0 {
		delete(p.entries, sum)
	} else {
		p.entries[sum] = live
	}
	p.sweepLocked()
	if found != nil {
		return found
	}
	return s
}

// equalParts compares two parts of one type.
func equalParts[T any](a, b []T) bool {
	if x, ok := any(a).([]byte); ok {
		return bytes.Equal(x, any(b).([]byte))
	}
	return reflect.DeepEqual(a, b)
}

// sweepLocked drops the entries of collected parts once as many entries
// were added since the last sweep as there were live after it (at least
// 1024), so the table stays within twice the parts the cache holds.
func (p *sharedParts) sweepLocked() {
	if p.added < max(1024, p.swept) {
		return
	}
	p.added, p.swept = 0, 0
	for sum, bucket := range p.entries {
		live := bucket[:0]
		for _, e := range bucket {
			if e.ref.Value() != nil {
				live = append(live, e)
			}
		}
		p.swept += len(live)
		if len(live) == 0 {
			delete(p.entries, sum)
		} else {
			p.entries[sum] = live
		}
	}
}
