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

	// Large ConfigMaps, then each one refused alone for the room left
	// (413) while smaller ones fit halves the next ones' size, down to
	// 1 KiB, until the database is full: a few dozen creates, where small
	// ones alone would take thousands (the room left after a 700 KiB
	// refusal holds up to four times that).
	blob := filepath.Join(t.TempDir(), "blob")
	size := 700 << 10
	writeBlob := func() {
		data := make([]byte, size)
		rand.Read(data)
		if err := os.WriteFile(blob, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	writeBlob()
	full := false
	var created []string
	for i := 0; !full; i++ {
		if i > 300 {
			t.Fatal("the 8Mi quota was never reached")
		}
		name := fmt.Sprintf("fill-%d", i)
		out, err := p.kubectl("create", "configmap", name, "--from-file=blob="+blob)
		switch {
		case err != nil && strings.Contains(out, "room left") && size > 1<<10:
			size /= 2
			writeBlob()
		case err != nil && strings.Contains(out, "database space exceeded"):
			full = true
		case err != nil:
			t.Fatalf("create %s: %v\n%s", name, err, out)
		default:
			created = append(created, name)
		}
	}
	for _, name := range created {
		p.mustKubectl("delete", "configmap", name)
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
