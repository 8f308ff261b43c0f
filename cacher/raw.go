package cacher

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/registry/generic"
	"k8s.io/apiserver/pkg/storage"
	"k8s.io/apiserver/pkg/storage/etcd3"
	"k8s.io/apiserver/pkg/storage/value/encrypt/identity"
)

// RawStore is the plain etcd3 store of one resource on the shared client,
// with the codec, key prefix and encryption getter gives the resource, but
// no watch cache and no budget. The mirror writes through it below the
// REST layer, so that an object keeps the upstream's uid; the resource's
// watch cache sees those writes from etcd as it sees the REST layer's.
type RawStore struct {
	storage.Interface
	// Prefix is the resource's key prefix, "/pods": an object's key is
	// Prefix/namespace/name, or Prefix/name when cluster-scoped.
	Prefix string
	close  func()
}

// Key is the storage key of an object.
func (s *RawStore) Key(namespace, name string) string {
	if namespace == "" {
		return s.Prefix + "/" + name
	}
	return s.Prefix + "/" + namespace + "/" + name
}

// Close stops the store.
func (s *RawStore) Close() { s.close() }

// RawStore builds the RawStore of gr from getter's options, decoding into
// newFunc's objects.
func (b *Backend) RawStore(getter generic.RESTOptionsGetter, gr schema.GroupResource, newFunc, newListFunc func() runtime.Object) (*RawStore, error) {
	opts, err := getter.GetRESTOptions(gr, newFunc())
	if err != nil {
		return nil, err
	}
	sc := opts.StorageConfig
	transformer := sc.Transformer
	if transformer == nil {
		transformer = identity.NewEncryptCheckTransformer()
	}
	prefix := opts.ResourcePrefix
	if !strings.HasPrefix(prefix, "/") {
		prefix = "/" + prefix
	}
	versioner := storage.APIObjectVersioner{}
	store, err := etcd3.New(b.client, b.compactor, sc.Codec, newFunc, newListFunc, sc.Prefix, prefix,
		sc.GroupResource, transformer, sc.LeaseManagerConfig, etcd3.NewDefaultDecoder(sc.Codec, versioner), versioner)
	if err != nil {
		return nil, fmt.Errorf("creating etcd store for %s: %w", gr, err)
	}
	return &RawStore{Interface: store, Prefix: prefix, close: store.Close}, nil
}
