package cacher_test

import (
	"strconv"
	"testing"
	"time"

	etcdclient "go.etcd.io/etcd/client/v3"

	"github.com/kubestore/kubestore/cacher/cachertest"
	"github.com/kubestore/kubestore/config"
)

// The compactor compacts what was written, as upstream's does, and an idle
// store stays unwritten: once the writes stop, at most one more tick
// writes compact_rev_key (to compact what was left before it), and the
// ticks after it write nothing. A write wakes it again.
func TestCompactorWritesNothingWhileIdle(t *testing.T) {
	const interval = 100 * time.Millisecond
	b := cachertest.Open(t, func(c *config.Config) { c.Etcd.CompactionInterval = config.Duration{Duration: interval} })
	ctx, client := t.Context(), b.Client()
	compactedAt := func() (rev, compacted int64) {
		t.Helper()
		resp, err := client.Get(ctx, "compact_rev_key")
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Kvs) == 1 {
			compacted, _ = strconv.ParseInt(string(resp.Kvs[0].Value), 10, 64)
		}
		return resp.Header.Revision, compacted
	}
	write := func() int64 {
		t.Helper()
		resp, err := client.Put(ctx, b.Prefix()+"/compact-test", time.Now().String())
		if err != nil {
			t.Fatal(err)
		}
		return resp.Header.Revision
	}

	// Writes, then idle: it settles with everything but its own record
	// compacted, and writes nothing more.
	for range 5 {
		write()
	}
	settled := func() (int64, int64) {
		t.Helper()
		deadline := time.Now().Add(20 * interval)
		for {
			rev, compacted := compactedAt()
			time.Sleep(3 * interval)
			if again, _ := compactedAt(); again == rev && compacted == rev-1 {
				return rev, compacted
			}
			if time.Now().After(deadline) {
				t.Fatalf("no idle state within %v: revision %d, compacted at %d", 20*interval, rev, compacted)
			}
		}
	}
	rev, _ := settled()
	time.Sleep(10 * interval)
	if again, compacted := compactedAt(); again != rev {
		t.Errorf("idle for 10 ticks, the revision moved from %d to %d (compacted at %d): the compactor wrote", rev, again, compacted)
	}
	if _, err := client.Get(ctx, b.Prefix()+"/compact-test", etcdclient.WithRev(rev-2)); err == nil {
		t.Errorf("revision %d is readable: not compacted", rev-2)
	}

	// A write wakes it: what it leaves behind is compacted again.
	w := write()
	rev2, compacted := settled()
	if compacted < w || rev2 <= rev {
		t.Errorf("after a write at %d: revision %d, compacted at %d; want compacted past the write", w, rev2, compacted)
	}
}
