// Package records is kubestore's own records in etcd: the key layout, the
// operations on a record, and elections. Every record lives under
// <--etcd-prefix>/-kubestore/, outside every resource's key space (no API
// group or resource name starts with "-"), so that no list of objects
// returns one and a storage version migration skips them all.
//
//	st := records.New(client, cfg.Etcd.Prefix)
//	err := st.PutState(ctx, family.DataFormat.Name(), []byte("2"))
//	st.Lead(ctx, "garbage-collector", identity, run) // one holder among the processes on this etcd
//
// The families of records (the mirror's checkpoints, pending writes and
// queued Events, ClusterIPs, ServiceAccount keys, CA bundles and
// rotations, a site's releases, the data format, elections…) are declared
// once, each as a value, in package records/family, with the package that
// owns each and what it holds; a record's name is built from its family.
//
// Records are small and few, and written rarely: the mirror's checkpoints
// at most every few seconds, the rest on change.
package records

import (
	"context"
	"fmt"
	"path"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// dir holds kubestore's own records, under --etcd-prefix.
const dir = "-kubestore"

// key is the etcd key of record name under prefix (--etcd-prefix). A
// trailing slash of name is cleaned away.
func key(prefix, name string) string { return path.Join(prefix, dir, name) }

// Store reads and writes the records under one --etcd-prefix, on a
// client it does not own.
type Store struct {
	client *clientv3.Client
	prefix string
}

// New is the Store of the records under prefix (--etcd-prefix) on client.
func New(client *clientv3.Client, prefix string) *Store {
	return &Store{client: client, prefix: prefix}
}

func (s *Store) key(name string) string { return key(s.prefix, name) }

// GetState reads a record; nil when there is none.
func (s *Store) GetState(ctx context.Context, name string) ([]byte, error) {
	resp, err := s.client.Get(ctx, s.key(name))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", name, err)
	}
	if len(resp.Kvs) == 0 {
		return nil, nil
	}
	return resp.Kvs[0].Value, nil
}

// PutState writes a record.
func (s *Store) PutState(ctx context.Context, name string, value []byte) error {
	if _, err := s.client.Put(ctx, s.key(name), string(value)); err != nil {
		return fmt.Errorf("writing %s: %w", name, err)
	}
	return nil
}

// UpdateState writes the record update makes of the current one (nil when
// there is none), unless update says to keep it; a concurrent write
// (another kubestore on the same etcd) makes it try again on the new
// record.
func (s *Store) UpdateState(ctx context.Context, name string, update func(old []byte) ([]byte, bool)) error {
	key := s.key(name)
	for {
		resp, err := s.client.Get(ctx, key)
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
		txn, err := s.client.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", rev)).
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
func (s *Store) CreateState(ctx context.Context, name string, value []byte) (bool, error) {
	key := s.key(name)
	txn, err := s.client.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, string(value))).Commit()
	if err != nil {
		return false, fmt.Errorf("writing %s: %w", name, err)
	}
	return txn.Succeeded, nil
}

// DeleteStateIf deletes a record only if it still holds value, and
// reports whether it did.
func (s *Store) DeleteStateIf(ctx context.Context, name string, value []byte) (bool, error) {
	key := s.key(name)
	txn, err := s.client.Txn(ctx).If(clientv3.Compare(clientv3.Value(key), "=", string(value))).
		Then(clientv3.OpDelete(key)).Commit()
	if err != nil {
		return false, fmt.Errorf("deleting %s: %w", name, err)
	}
	return txn.Succeeded, nil
}

// ListState reads the records in the directory dir, those named
// dir/<anything>, by name. The store puts the "/" after dir itself (a
// trailing one given is the same directory): a directory's listing never
// reaches a sibling whose name only starts alike (mirror-pending@edge-1/
// and mirror-pending@edge-10/, clusterip/ and clusterip-range).
func (s *Store) ListState(ctx context.Context, dir string) (map[string][]byte, error) {
	return s.list(ctx, s.key(dir)+"/")
}

// ListStatePrefix reads the records whose names start with prefix, which
// is a name's beginning, not a directory: mirror-configured@ lists the
// record of every node (mirror-configured@<node>). Use ListState for a
// directory.
func (s *Store) ListStatePrefix(ctx context.Context, prefix string) (map[string][]byte, error) {
	if strings.HasSuffix(prefix, "/") {
		return s.ListState(ctx, prefix)
	}
	return s.list(ctx, s.key(prefix))
}

// list reads the records whose etcd keys start with keyPrefix.
func (s *Store) list(ctx context.Context, keyPrefix string) (map[string][]byte, error) {
	resp, err := s.client.Get(ctx, keyPrefix, clientv3.WithPrefix())
	root := s.key("") + "/"
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", strings.TrimPrefix(keyPrefix, root), err)
	}
	out := make(map[string][]byte, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		out[strings.TrimPrefix(string(kv.Key), root)] = kv.Value
	}
	return out, nil
}

// DeleteState deletes a record and those whose names start with name/.
func (s *Store) DeleteState(ctx context.Context, name string) error {
	if _, err := s.client.Delete(ctx, s.key(name)); err != nil {
		return fmt.Errorf("deleting %s: %w", name, err)
	}
	if _, err := s.client.Delete(ctx, s.key(name)+"/", clientv3.WithPrefix()); err != nil {
		return fmt.Errorf("deleting %s: %w", name, err)
	}
	return nil
}
