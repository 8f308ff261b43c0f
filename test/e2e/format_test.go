package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The data directory records its data format and the kubestore that last
// started on it. A kubestore that finds a newer format than it reads (an
// older release booted back onto a newer one's data) starts nothing, not
// even etcd, and says in one line what to do; the way back it names, a
// snapshot restored into the directory, then serves the data again.
func TestDataFormatRecordAndWayBack(t *testing.T) {
	requireKubectl(t)
	dir := shortTempDir(t)
	files := t.TempDir()
	snap := filepath.Join(files, "pre-update.db")
	record := filepath.Join(dir, "format")

	p := start(t, dir)
	p.mustKubectl("create", "configmap", "kept", "--from-literal=a=b")
	stopGracefully(t, p)
	version := strings.TrimPrefix(strings.SplitN(mustRunKubestore(t, "version"), "\n", 2)[0], "kubestore ")
	var r struct {
		Format       int    `json:"format"`
		WrittenBy    string `json:"writtenBy"`
		OldestReader string `json:"oldestReader"`
	}
	b, err := os.ReadFile(record)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &r); err != nil || r.Format != 1 || r.WrittenBy != version || r.OldestReader == "" {
		t.Fatalf("%s after a start = %s (%v); want format 1 written by %s", record, b, err, version)
	}
	mustRunKubestore(t, "snapshot", "save", "--data-dir", dir, snap)

	// A newer release's record, as its trial boot leaves it.
	newer := `{"format":2,"writtenBy":"9.0.0","oldestReader":"9.0.0","snapshot":"` + snap + `"}`
	if err := os.WriteFile(record, []byte(newer), 0o600); err != nil {
		t.Fatal(err)
	}
	etcdBefore := treeState(t, filepath.Join(dir, "etcd"))
	for _, args := range [][]string{
		{"serve", "--data-dir", dir, "--secure-port", "0"},
		{"defrag", "--data-dir", dir},
		{"snapshot", "save", "--data-dir", dir, filepath.Join(files, "x.db")},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		out, err := exec.CommandContext(ctx, binary(t), args...).CombinedOutput()
		timedOut := ctx.Err() != nil
		cancel()
		if err == nil || timedOut {
			t.Fatalf("kubestore %s on a newer data format: %v (timed out: %v)\n%s", args[0], err, timedOut, out)
		}
		line := strings.TrimSpace(string(out))
		for _, want := range []string{"data format 2", "written by kubestore 9.0.0", "kubestore " + version + " reads formats up to 1",
			"kubestore snapshot restore --data-dir " + dir + " " + snap} {
			if !strings.Contains(line, want) {
				t.Errorf("kubestore %s: %q lacks %q", args[0], line, want)
			}
		}
		if strings.Count(line, "\n") > 0 {
			t.Errorf("kubestore %s: more than one line:\n%s", args[0], line)
		}
	}
	if got, _ := os.ReadFile(record); string(got) != newer {
		t.Errorf("the refusals changed the record: %s", got)
	}
	if after := treeState(t, filepath.Join(dir, "etcd")); after != etcdBefore {
		t.Errorf("the refusals changed etcd's files:\nbefore %s\nafter  %s", etcdBefore, after)
	}

	// The way back the line names.
	if err := os.Rename(filepath.Join(dir, "etcd"), filepath.Join(files, "etcd.newer")); err != nil {
		t.Fatal(err)
	}
	mustRunKubestore(t, "snapshot", "restore", "--data-dir", dir, snap)
	q := start(t, dir)
	if out := q.mustKubectl("get", "configmap", "kept", "-o", "jsonpath={.data.a}"); out != "b" {
		t.Errorf("configmap kept after the way back: %q", out)
	}
	if b, _ := os.ReadFile(record); !strings.Contains(string(b), `"format":1`) || strings.Contains(string(b), "snapshot") {
		t.Errorf("%s after the restore: %s; want format 1 and the snapshot spent", record, b)
	}
}

// treeState is every file under dir with its size and modification time.
func treeState(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.Walk(dir, func(path string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if info.Mode().IsRegular() {
			fmt.Fprintf(&b, "%s %d %s; ", path, info.Size(), info.ModTime())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// newerKubestore is this checkout built as release 99.0.0, newer than any
// build of the tree, with a newer data format (2) than any release has yet
// (datadir.simulatedFormat): an update's new firmware, whose data an older
// release can read only until the update is committed. make build-format2
// builds the same.
var newerKubestore = &goBinary{pkg: ".", name: "kubestore-99", ldflags: "-X github.com/kubestore/kubestore/server.version=99.0.0 -X github.com/kubestore/kubestore/datadir.simulatedFormat=2@99.0.0"}

// newerBinary is newerKubestore: KUBESTORE_NEWER_BIN (make test sets it),
// or one built from this checkout.
func newerBinary(t *testing.T) string {
	t.Helper()
	if b := os.Getenv("KUBESTORE_NEWER_BIN"); b != "" {
		return b
	}
	return newerKubestore.get(t)
}

// An update (a newer release starting on the data dir) first saves the
// data as the previous release left it, once: a restart of the new
// release does not take it again, the previous release still starts on
// the data (the same format: an A/B fallback), and the snapshot restores
// the data as it was before the update.
func TestUpdateKeepsPreUpdateSnapshot(t *testing.T) {
	requireKubectl(t)
	dir := shortTempDir(t)
	files := t.TempDir()
	snapshot := filepath.Join(dir, "pre-update.db")
	version := strings.TrimPrefix(strings.SplitN(mustRunKubestore(t, "version"), "\n", 2)[0], "kubestore ")
	var r formatRecord
	readRecord := func() {
		t.Helper()
		r = readFormatRecord(t, dir)
	}
	p := start(t, dir)
	p.mustKubectl("create", "configmap", "before")
	stopGracefully(t, p)
	readRecord()
	if r.WrittenBy != version || r.Update != nil || r.Snapshot != "" {
		t.Fatalf("record after a first start: %+v", r)
	}
	if _, err := os.Stat(snapshot); !os.IsNotExist(err) {
		t.Fatalf("a first start took a pre-update snapshot: %v", err)
	}

	newer := startBinary(t, newerBinary(t), nil, dir)
	newer.mustKubectl("create", "configmap", "after-update")
	stopGracefully(t, newer)
	readRecord()
	if r.WrittenBy != "99.0.0" || r.Snapshot != snapshot || r.Update == nil || r.Update.From != version || r.Update.To != "99.0.0" {
		t.Fatalf("record after the update: %+v (update %+v)", r, r.Update)
	}
	st, err := os.Stat(snapshot)
	if err != nil {
		t.Fatal(err)
	}
	newer = startBinary(t, newerBinary(t), nil, dir)
	stopGracefully(t, newer)
	if again, err := os.Stat(snapshot); err != nil || !again.ModTime().Equal(st.ModTime()) {
		t.Errorf("a restart of the new release took the snapshot again (%v)", err)
	}

	// The fallback: the previous release on the same format.
	back := start(t, dir)
	if names := back.mustKubectl("get", "configmaps", "-o", "name"); !strings.Contains(names, "configmap/before") || !strings.Contains(names, "configmap/after-update") {
		t.Errorf("the previous release after the update serves:\n%s", names)
	}
	stopGracefully(t, back)
	readRecord()
	if r.WrittenBy != version || r.Snapshot != snapshot {
		t.Errorf("record after the fallback: %+v; want written by %s, the snapshot kept", r, version)
	}

	// The snapshot is the data as the previous release left it.
	if err := os.Rename(filepath.Join(dir, "etcd"), filepath.Join(files, "etcd.after")); err != nil {
		t.Fatal(err)
	}
	mustRunKubestore(t, "snapshot", "restore", "--data-dir", dir, snapshot)
	restored := start(t, dir)
	names := restored.mustKubectl("get", "configmaps", "-o", "name")
	if !strings.Contains(names, "configmap/before") || strings.Contains(names, "configmap/after-update") {
		t.Errorf("the pre-update snapshot restored:\n%s\nwant configmap/before and not configmap/after-update", names)
	}
}
