package cacher

import (
	"context"
	"fmt"
	"path"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
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

// stateDir holds kubestore's own records, under --etcd-prefix but outside
// every resource's key space: no API group or resource name starts with
// "-".
const stateDir = "-kubestore"

func (b *Backend) stateKey(name string) string { return StateKey(b.etcd.Prefix, name) }

// StateKey is the etcd key of kubestore's own record name under prefix
// (--etcd-prefix).
func StateKey(prefix, name string) string { return path.Join(prefix, stateDir, name) }

// GetState reads a record of kubestore's own; nil when there is none.
func (b *Backend) GetState(ctx context.Context, name string) ([]byte, error) {
	resp, err := b.client.Client.Get(ctx, b.stateKey(name))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", name, err)
	}
	if len(resp.Kvs) == 0 {
		return nil, nil
	}
	return resp.Kvs[0].Value, nil
}

// PutState writes a record of kubestore's own.
func (b *Backend) PutState(ctx context.Context, name string, value []byte) error {
	if _, err := b.client.Client.Put(ctx, b.stateKey(name), string(value)); err != nil {
		return fmt.Errorf("writing %s: %w", name, err)
	}
	return nil
}

// UpdateState writes the record update makes of the current one (nil when
// there is none), unless update says to keep it; a concurrent write
// (another kubestore on the same etcd) makes it try again on the new
// record.
func (b *Backend) UpdateState(ctx context.Context, name string, update func(old []byte) ([]byte, bool)) error {
	key := b.stateKey(name)
	for {
		resp, err := b.client.Client.Get(ctx, key)
		if err != nil {
			return fmt.Errorf("reading %s: %w", name, err)
		}
		var old []byte
		var rev int64
		if len(resp.Kvs) > 0 {
			old, rev = resp.Kvs[0].Value, resp.Kvs[0].ModRevision
		}
		value, write := update(old)
		if !write {
			return nil
		}
		txn, err := b.client.Client.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", rev)).
			Then(clientv3.OpPut(key, string(value))).Commit()
		if err != nil {
			return fmt.Errorf("writing %s: %w", name, err)
		}
		if txn.Succeeded {
			return nil
		}
	}
}

// CreateState writes a record only if there is none by that name, and
// reports whether it did: an atomic claim, also between kubestores on one
// etcd.
func (b *Backend) CreateState(ctx context.Context, name string, value []byte) (bool, error) {
	key := b.stateKey(name)
	txn, err := b.client.Client.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, string(value))).Commit()
	if err != nil {
		return false, fmt.Errorf("writing %s: %w", name, err)
	}
	return txn.Succeeded, nil
}

// DeleteStateIf deletes a record only if it still holds value, and
// reports whether it did.
func (b *Backend) DeleteStateIf(ctx context.Context, name string, value []byte) (bool, error) {
	key := b.stateKey(name)
	txn, err := b.client.Client.Txn(ctx).If(clientv3.Compare(clientv3.Value(key), "=", string(value))).
		Then(clientv3.OpDelete(key)).Commit()
	if err != nil {
		return false, fmt.Errorf("deleting %s: %w", name, err)
	}
	return txn.Succeeded, nil
}

// ListState reads the records whose names start with prefix, by name.
func (b *Backend) ListState(ctx context.Context, prefix string) (map[string][]byte, error) {
	resp, err := b.client.Client.Get(ctx, b.stateKey(prefix), clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", prefix, err)
	}
	out := make(map[string][]byte, len(resp.Kvs))
	root := b.stateKey("") + "/"
	for _, kv := range resp.Kvs {
		out[strings.TrimPrefix(string(kv.Key), root)] = kv.Value
	}
	return out, nil
}

// DeleteState deletes a record and those whose names start with name/.
func (b *Backend) DeleteState(ctx context.Context, name string) error {
	if _, err := b.client.Client.Delete(ctx, b.stateKey(name)); err != nil {
		return fmt.Errorf("deleting %s: %w", name, err)
	}
	if _, err := b.client.Client.Delete(ctx, b.stateKey(name)+"/", clientv3.WithPrefix()); err != nil {
		return fmt.Errorf("deleting %s: %w", name, err)
	}
	return nil
}
