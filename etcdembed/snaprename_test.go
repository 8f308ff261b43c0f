package etcdembed_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/storage/backend"
	"go.etcd.io/etcd/server/v3/storage/schema"
	"go.etcd.io/etcd/server/v3/storage/wal"
	"go.uber.org/zap"
)

// TestSnapshotRenameLostToAPowerCut puts a member's data directory in the
// state a power cut leaves when it loses etcd's rename of a received
// database snapshot over snap/db: the WAL records the snapshot, its
// <index>.snap.db is still there, and snap/db is the database from before
// it, claiming the snapshot's index (the old database's last commit wrote
// it). etcd alone keeps that database and silently lacks every write the
// snapshot held; Start puts the snapshot in place first.
func TestSnapshotRenameLostToAPowerCut(t *testing.T) {
	dir := shortTempDir(t)
	cfg := testConfig(dir)
	cfg.Etcd.SnapshotCount, cfg.Etcd.SnapshotCatchUpEntries = 10, 5
	member := filepath.Join(dir, "etcd", "member")
	snapDir, db := filepath.Join(member, "snap"), filepath.Join(member, "snap", "db")

	srv, err := startEtcd(t, cfg)
	if err != nil {
		t.Fatal(err)
	}
	c := client(t, srv)
	put(t, c, "/registry/before", "x")
	c.Close()
	srv.Close()
	old, err := os.ReadFile(db)
	if err != nil {
		t.Fatal(err)
	}

	srv, err = startEtcd(t, cfg)
	if err != nil {
		t.Fatal(err)
	}
	c = client(t, srv)
	const writes = 40
	for i := range writes {
		put(t, c, "/registry/k"+strconv.Itoa(i), "v")
	}
	c.Close()
	srv.Close()

	lg := zap.NewNop()
	walSnaps, err := wal.ValidSnapshotEntries(lg, filepath.Join(member, "wal"))
	if err != nil {
		t.Fatal(err)
	}
	if len(walSnaps) < 2 {
		t.Fatalf("no snapshot after %d writes at --etcd-snapshot-count %d", writes, cfg.Etcd.SnapshotCount)
	}
	index, term := walSnaps[len(walSnaps)-1].GetIndex(), walSnaps[len(walSnaps)-1].GetTerm()
	// The cut may also undo the creation of the snapshot's .snap file,
	// which etcd 3.7 does without.
	if err := os.Remove(filepath.Join(snapDir, fmt.Sprintf("%016x-%016x.snap", term, index))); err != nil {
		t.Fatal(err)
	}
	received := filepath.Join(snapDir, fmt.Sprintf("%016x.snap.db", index))
	if err := os.Rename(db, received); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(db, old, 0o600); err != nil {
		t.Fatal(err)
	}
	be := backend.NewDefaultBackend(lg, db)
	tx := be.BatchTx()
	tx.LockOutsideApply()
	schema.UnsafeUpdateConsistentIndex(tx, index, term)
	tx.Unlock()
	be.ForceCommit()
	if err := be.Close(); err != nil {
		t.Fatal(err)
	}

	srv = start(t, cfg)
	c = client(t, srv)
	resp, err := c.Get(t.Context(), "/registry/k", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) != writes {
		t.Errorf("after the lost rename of snapshot %d the member holds %d of the %d keys written before it", index, len(resp.Kvs), writes)
	}
	if _, err := os.Stat(received); !os.IsNotExist(err) {
		t.Errorf("%s is still there after the start (%v)", received, err)
	}
}
