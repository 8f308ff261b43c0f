//go:build linux

package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// TestSiteMemberDiskFault: one gateway of a site of three has its data dir
// on a file system that fails (the kernel remounts it read-only, as after
// a failing flash block) under writes through the other two. They keep
// acknowledging writes, and lose none; the failed gateway, its file system
// repaired and its etcd data wiped, rejoins with every write made
// meanwhile (issue 26).
func TestSiteMemberDiskFault(t *testing.T) {
	releaseOnly(t)
	d := newExt4Disk(t, 128<<20)
	a, b, c := newGateway(t, "gw-a"), newGateway(t, "gw-b"), newGateway(t, "gw-c")
	c.dir = filepath.Join(d.mnt, "data")
	token := foundSite(t, a, b, c)

	w := startSiteWriters(t, a, b)
	time.Sleep(2 * time.Second)
	w.mu.Lock()
	w.mark = time.Now()
	w.mu.Unlock()
	d.failWithError()
	time.Sleep(8 * time.Second)
	acked := w.stop()
	for _, g := range []*siteGateway{a, b} {
		if w.firstAfter[g.name].IsZero() {
			t.Fatalf("no write through %s succeeded after gw-c's file system failed", g.name)
		}
		if m := missing(t, g, acked); len(m) > 0 {
			t.Fatalf("%d acknowledged writes missing on %s: %v", len(m), g.name, m[:min(5, len(m))])
		}
	}
	t.Logf("%d writes acknowledged through gw-a and gw-b; gw-c exited: %v", len(acked), c.p.hasExited())

	// A file system that failed may have lost what etcd had synced and
	// acknowledged to the leader (etcd then refuses the member: "Was the
	// raft log corrupted, truncated, or lost?"), so the repaired gateway
	// is provisioned again: its etcd data is wiped, and it rejoins under
	// its name and address and catches up.
	c.p.kill()
	mustRun(t, "umount", d.mnt)
	if out, err := exec.Command("e2fsck", "-fy", d.image).CombinedOutput(); err != nil {
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() > 1 {
			t.Fatalf("e2fsck: %v\n%s", err, out)
		}
	}
	d.mount()
	if err := os.RemoveAll(filepath.Join(c.dir, "etcd")); err != nil {
		t.Fatal(err)
	}
	c.start(t, a.url(), token)
	if m := missing(t, c, acked); len(m) > 0 {
		t.Fatalf("%d acknowledged writes missing on the repaired gw-c: %v", len(m), m[:min(5, len(m))])
	}
	if !eventually(30*time.Second, func() bool { return voters(a.memberList(t), "gw-a", "gw-b", "gw-c") }) {
		t.Fatalf("the site is not whole again:\n%s", a.memberList(t))
	}
}
