package etcdembed_test

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kubestore/kubestore/datadir"
	"github.com/kubestore/kubestore/etcdembed"
)

func saveSnapshot(t *testing.T, c *clientv3.Client, file string) {
	t.Helper()
	r, err := c.Snapshot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	f, err := os.Create(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := io.Copy(f, r); err != nil {
		t.Fatal(err)
	}
}

// TestRestore: a member restored from a snapshot has the identity of the
// one Start ran (same name, member ID and peer URLs), holds its keys, and
// its revision is raised by the bump and compacted.
func TestRestore(t *testing.T) {
	cfg := testConfig(shortTempDir(t))
	srv := start(t, cfg)
	c := client(t, srv)
	for i := range 5 {
		put(t, c, "/registry/k"+strconv.Itoa(i), "v"+strconv.Itoa(i))
	}
	before, err := c.MemberList(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	last, err := c.Get(t.Context(), "/registry/k4")
	if err != nil {
		t.Fatal(err)
	}
	snap := filepath.Join(t.TempDir(), "snapshot.db")
	saveSnapshot(t, c, snap)
	c.Close()
	srv.Close()

	const bump = 1000
	restored := testConfig(shortTempDir(t))
	dir := datadir.Dir(restored.DataDir)
	if err := etcdembed.Restore(restored, snap, bump); err != nil {
		t.Fatalf("Restore: %v", err)
	}
	if fi, err := os.Stat(dir.Etcd()); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("<data-dir>/etcd after Restore: %v, %v; want mode 0700", fi, err)
	}

	srv = start(t, restored)
	c = client(t, srv)
	after, err := c.MemberList(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(after.Members) != 1 || len(before.Members) != 1 {
		t.Fatalf("members before %v, after %v; want one each", before.Members, after.Members)
	}
	b, a := before.Members[0], after.Members[0]
	if a.Name != b.Name || a.ID != b.ID || strings.Join(a.PeerURLs, ",") != strings.Join(b.PeerURLs, ",") {
		t.Errorf("restored member %s %x %v, want the started one's %s %x %v", a.Name, a.ID, a.PeerURLs, b.Name, b.ID, b.PeerURLs)
	}
	for i := range 5 {
		if got, want := get(t, c, "/registry/k"+strconv.Itoa(i)), "v"+strconv.Itoa(i); got != want {
			t.Errorf("after restore k%d = %q, want %q", i, got, want)
		}
	}
	resp, err := c.Put(t.Context(), "/registry/after", "x")
	if err != nil {
		t.Fatal(err)
	}
	if rev, min := resp.Header.Revision, last.Header.Revision+bump; rev <= min {
		t.Errorf("revision after restore %d, want above %d (+%d)", rev, min, bump)
	}
	if _, err := c.Get(t.Context(), "/registry/k0", clientv3.WithRev(last.Header.Revision)); !errors.Is(err, rpctypes.ErrCompacted) {
		t.Errorf("read at the snapshot's revision %d: %v, want %v", last.Header.Revision, err, rpctypes.ErrCompacted)
	}
}

// A restore never writes into, or removes, a member that is already there.
func TestRestoreRefusesExistingData(t *testing.T) {
	cfg := testConfig(shortTempDir(t))
	srv := start(t, cfg)
	c := client(t, srv)
	put(t, c, "/registry/keep", "1")
	snap := filepath.Join(t.TempDir(), "snapshot.db")
	saveSnapshot(t, c, snap)
	c.Close()
	srv.Close()

	err := etcdembed.Restore(cfg, snap, 0)
	if err == nil || !strings.Contains(err.Error(), "--data-dir") {
		t.Fatalf("Restore onto a member: %v, want an error naming --data-dir", err)
	}
	srv = start(t, cfg)
	if got := get(t, client(t, srv), "/registry/keep"); got != "1" {
		t.Errorf("the existing member's key = %q after a refused restore, want 1", got)
	}
}
