package records

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Record is one record, for the protocols that need its revisions (an
// update's commit request answered in place, a CA rotation prepared and
// then taken, a turn that expires).
type Record struct {
	client    *clientv3.Client
	name, key string
}

// Record is the record name.
func (s *Store) Record(name string) Record {
	return Record{client: s.client, name: name, key: s.key(name)}
}

// Get reads the record: its value and the revision of its last change;
// nil and 0 when there is none.
func (r Record) Get(ctx context.Context) ([]byte, int64, error) {
	resp, err := r.client.Get(ctx, r.key)
	if err != nil {
		return nil, 0, fmt.Errorf("reading %s: %w", r.name, err)
	}
	if len(resp.Kvs) == 0 {
		return nil, 0, nil
	}
	return resp.Kvs[0].Value, resp.Kvs[0].ModRevision, nil
}

// Current reads the record, nil when there is none, with the store's
// revision at the read: a Watch from that revision + 1 misses no change
// made after the read.
func (r Record) Current(ctx context.Context) ([]byte, int64, error) {
	resp, err := r.client.Get(ctx, r.key)
	if err != nil {
		return nil, 0, fmt.Errorf("reading %s: %w", r.name, err)
	}
	if len(resp.Kvs) == 0 {
		return nil, resp.Header.Revision, nil
	}
	return resp.Kvs[0].Value, resp.Header.Revision, nil
}

// Put writes the record and returns the revision of the write.
func (r Record) Put(ctx context.Context, value []byte) (int64, error) {
	resp, err := r.client.Put(ctx, r.key, string(value))
	if err != nil {
		return 0, fmt.Errorf("writing %s: %w", r.name, err)
	}
	return resp.Header.Revision, nil
}

// Create writes the record only if there is none. It returns whether it
// did, and the record then: value's revision, or the value and revision
// of the one already there.
func (r Record) Create(ctx context.Context, value []byte) (created bool, current []byte, rev int64, err error) {
	txn, err := r.client.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(r.key), "=", 0)).
		Then(clientv3.OpPut(r.key, string(value))).Else(clientv3.OpGet(r.key)).Commit()
	if err != nil {
		return false, nil, 0, fmt.Errorf("writing %s: %w", r.name, err)
	}
	if txn.Succeeded {
		return true, value, txn.Header.Revision, nil
	}
	kvs := txn.Responses[0].GetResponseRange().Kvs
	if len(kvs) == 0 { // deleted between the compare and the read: cannot be, one transaction
		return false, nil, 0, fmt.Errorf("writing %s: it exists and does not", r.name)
	}
	return false, kvs[0].Value, kvs[0].ModRevision, nil
}

// PutAt writes the record only if its last change is still at rev, and
// reports whether it did.
func (r Record) PutAt(ctx context.Context, value []byte, rev int64) (bool, error) {
	txn, err := r.client.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(r.key), "=", rev)).
		Then(clientv3.OpPut(r.key, string(value))).Commit()
	if err != nil {
		return false, fmt.Errorf("writing %s: %w", r.name, err)
	}
	return txn.Succeeded, nil
}

// DeleteAt deletes the record only if its last change is still at rev,
// and reports whether it did.
func (r Record) DeleteAt(ctx context.Context, rev int64) (bool, error) {
	txn, err := r.client.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(r.key), "=", rev)).
		Then(clientv3.OpDelete(r.key)).Commit()
	if err != nil {
		return false, fmt.Errorf("deleting %s: %w", r.name, err)
	}
	return txn.Succeeded, nil
}

// Delete deletes the record and returns the revision of the delete.
func (r Record) Delete(ctx context.Context) (int64, error) {
	resp, err := r.client.Delete(ctx, r.key)
	if err != nil {
		return 0, fmt.Errorf("deleting %s: %w", r.name, err)
	}
	return resp.Header.Revision, nil
}

// DeleteIf deletes the record only if it holds value, and reports whether
// it did.
func (r Record) DeleteIf(ctx context.Context, value []byte) (bool, error) {
	txn, err := r.client.Txn(ctx).If(clientv3.Compare(clientv3.Value(r.key), "=", string(value))).
		Then(clientv3.OpDelete(r.key)).Commit()
	if err != nil {
		return false, fmt.Errorf("deleting %s: %w", r.name, err)
	}
	return txn.Succeeded, nil
}

// Claim writes the record, holder as its value, only if there is none,
// with a lease of ttl seconds: a claim its holder gives back with
// DeleteIf, or that ends by itself if the holder never comes back. It
// reports whether it did.
func (r Record) Claim(ctx context.Context, holder string, ttl int64) (bool, error) {
	lease, err := r.client.Grant(ctx, ttl)
	if err != nil {
		return false, fmt.Errorf("claiming %s: %w", r.name, err)
	}
	txn, err := r.client.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(r.key), "=", 0)).
		Then(clientv3.OpPut(r.key, holder, clientv3.WithLease(lease.ID))).Commit()
	if err != nil || !txn.Succeeded {
		_, _ = r.client.Revoke(context.WithoutCancel(ctx), lease.ID)
	}
	if err != nil {
		return false, fmt.Errorf("claiming %s: %w", r.name, err)
	}
	return txn.Succeeded, nil
}

// Watch streams the record's changes after revision from (0: from now),
// as etcd's watch does; ctx ends it (clientv3.WithRequireLeader(ctx)
// ends it when the member loses its leader).
func (r Record) Watch(ctx context.Context, from int64) clientv3.WatchChan {
	if from == 0 {
		return r.client.Watch(ctx, r.key)
	}
	return r.client.Watch(ctx, r.key, clientv3.WithRev(from))
}

// Prefix is the key prefix of every record under prefix (--etcd-prefix):
// what a storage version migration leaves alone.
func Prefix(prefix string) string { return key(prefix, "") + "/" }
