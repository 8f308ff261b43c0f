package e2e

import (
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A snapshot saved from a running server and one saved from the stopped
// data directory both restore into fresh data directories that serve every
// object, with resourceVersions above any the old server handed out.
func TestSnapshotSaveRestore(t *testing.T) {
	requireKubectl(t)
	dir := shortTempDir(t)
	files := t.TempDir()
	online, offline := filepath.Join(files, "online.db"), filepath.Join(files, "offline.db")

	p := start(t, dir)
	for i := range 5 {
		p.mustKubectl("create", "configmap", fmt.Sprintf("cm-%d", i), fmt.Sprintf("--from-literal=i=%d", i))
	}
	out := mustRunKubestore(t, "snapshot", "save", "--data-dir", dir, online)
	t.Logf("online: %s", out)
	p.mustKubectl("create", "configmap", "after")
	lastRV := p.rv("get", "configmap", "after")
	stopGracefully(t, p)
	out = mustRunKubestore(t, "snapshot", "save", "--data-dir", dir, offline)
	t.Logf("offline: %s", out)
	if leftovers, _ := filepath.Glob(filepath.Join(files, ".*part*")); len(leftovers) > 0 {
		t.Errorf("temporary files left: %v", leftovers)
	}

	// The snapshot of the stopped directory holds the write made after the
	// online one.
	for _, tc := range []struct {
		file      string
		wantAfter bool
	}{{online, false}, {offline, true}} {
		restored := shortTempDir(t)
		mustRunKubestore(t, "snapshot", "restore", "--data-dir", restored, tc.file)
		if out, err := runKubestore(t, "snapshot", "restore", "--data-dir", restored, tc.file); err == nil || !strings.Contains(out, "already holds etcd data") {
			t.Errorf("restore into a non-empty data dir: %v\n%s", err, out)
		}
		r := start(t, restored)
		names := r.mustKubectl("get", "configmaps", "-o", "name")
		for i := range 5 {
			if !strings.Contains(names, fmt.Sprintf("configmap/cm-%d\n", i)) {
				t.Errorf("%s: cm-%d not restored:\n%s", tc.file, i, names)
			}
		}
		if got := strings.Contains(names, "configmap/after\n"); got != tc.wantAfter {
			t.Errorf("%s: configmap after the snapshot present=%v, want %v", tc.file, got, tc.wantAfter)
		}
		r.mustKubectl("create", "configmap", "new")
		if rv := r.rv("get", "configmap", "new"); rv <= lastRV {
			t.Errorf("%s: resourceVersion went back: a new write got %d, the old server had reached %d", tc.file, rv, lastRV)
		}
		stopGracefully(t, r)
	}

	if out, err := runKubestore(t, "snapshot", "save", "--data-dir", shortTempDir(t), filepath.Join(files, "x.db")); err == nil || !strings.Contains(out, "no etcd data") {
		t.Errorf("snapshot of an empty data dir: %v\n%s", err, out)
	}
	if out, err := runKubestore(t, "snapshot", "save", "--data-dir", dir); err == nil || !strings.Contains(out, "FILE") {
		t.Errorf("snapshot save without FILE: %v\n%s", err, out)
	}
}

// Defrag on a running server reclaims the space of deleted objects and,
// once the database is below the quota again, disarms etcd's NOSPACE alarm
// so that writes work without a restart.
func TestDefragOnline(t *testing.T) {
	requireKubectl(t)
	dir := shortTempDir(t)
	p := start(t, dir, "--etcd-quota-backend-bytes", "8Mi", "--etcd-compaction-interval", "1s")

	blob := filepath.Join(t.TempDir(), "blob")
	data := make([]byte, 700<<10)
	rand.Read(data)
	if err := os.WriteFile(blob, data, 0o600); err != nil {
		t.Fatal(err)
	}
	full := false
	created := 0
	for i := range 40 {
		out, err := p.kubectl("create", "configmap", fmt.Sprintf("big-%d", i), "--from-file=blob="+blob)
		if err != nil {
			if !strings.Contains(out, "database space exceeded") {
				t.Fatalf("create big-%d: %v\n%s", i, err, out)
			}
			full = true
			break
		}
		created++
	}
	if !full {
		t.Fatal("the 8Mi quota was never reached")
	}
	for i := range created {
		p.mustKubectl("delete", "configmap", fmt.Sprintf("big-%d", i))
	}
	// The alarm stays armed until a defrag: writes still fail.
	if out, err := p.kubectl("create", "configmap", "small"); err == nil || !strings.Contains(out, "database space exceeded") {
		t.Fatalf("write with the NOSPACE alarm armed: %v\n%s", err, out)
	}
	// Wait until the compactor has dropped the deleted revisions, then
	// defragment.
	var out string
	deadline := time.Now().Add(60 * time.Second)
	for {
		out = mustRunKubestore(t, "defrag", "--data-dir", dir, "--etcd-quota-backend-bytes", "8Mi")
		t.Logf("defrag: %s", out)
		if strings.Contains(out, "disarmed the NOSPACE alarm") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("defrag did not disarm the alarm:\n%s", out)
		}
		time.Sleep(2 * time.Second)
	}
	if !strings.Contains(out, "database size") {
		t.Errorf("defrag output lacks the sizes:\n%s", out)
	}
	p.mustKubectl("create", "configmap", "small")
	stopGracefully(t, p)
}
