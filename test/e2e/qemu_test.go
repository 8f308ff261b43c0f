package e2e

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// crossTarget is a cross-compiled binary and the qemu user-mode emulator
// that runs it on this machine.
type crossTarget struct {
	arch     string // as `make cross` names it
	platform string // as `kubestore version` prints it
	env      string // the variable make release-check sets to the binary
	qemu     string // from Debian's qemu-user-static
	// quota is the default etcd quota the binary must pick on its own.
	quota string
}

var crossTargets = []crossTarget{
	{arch: "arm64", platform: "linux/arm64", env: "KUBESTORE_BIN_ARM64", qemu: "qemu-aarch64-static", quota: "2Gi"},
	{arch: "armv7", platform: "linux/arm", env: "KUBESTORE_BIN_ARMV7", qemu: "qemu-arm-static", quota: "256Mi"},
	{arch: "riscv64", platform: "linux/riscv64", env: "KUBESTORE_BIN_RISCV64", qemu: "qemu-riscv64-static", quota: "2Gi"},
}

// The arm64, armv7 and riscv64 binaries that `make cross` builds run, not
// only compile: under qemu-user-static each one serves the API on a fresh
// data dir with its built-in defaults (no flag for the architecture),
// creates, lists and watches objects, stops cleanly on SIGTERM and finds
// every object again after a restart, with resourceVersions still
// increasing, and after a snapshot save and restore. On armv7 the 32-bit
// defaults are checked too: a 256Mi etcd quota, and bbolt's map of the
// database sized by it, 512 MiB (etcd's default would ask for 10 GiB of a
// 4 GiB address space).
func TestCrossBinariesUnderQEMU(t *testing.T) {
	for _, c := range crossTargets {
		t.Run(c.arch, func(t *testing.T) {
			bin := os.Getenv(c.env)
			if bin == "" {
				t.Skipf("%s is not set; make release-check sets it to the binary `make cross` builds", c.env)
			}
			qemu, err := exec.LookPath(c.qemu)
			if err != nil {
				t.Fatalf("%s runs the %s binary: apt-get install qemu-user-static (.ci/run does)", c.qemu, c.arch)
			}
			runUnderQEMU(t, c, qemu, bin)
		})
	}
}

func runUnderQEMU(t *testing.T, c crossTarget, qemu, bin string) {
	run := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(qemu, append([]string{bin}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", c.arch, strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	if out := run("version"); !strings.Contains(out, c.platform) {
		t.Fatalf("%s binary's version does not name %s:\n%s", c.arch, c.platform, out)
	}
	if out := run("config", "defaults"); !strings.Contains(out, "quotaBackendBytes: "+c.quota+"\n") {
		t.Fatalf("%s default etcd quota is not %s:\n%s", c.arch, c.quota, out)
	}

	dir := shortTempDir(t)
	started := time.Now()
	p := startBinary(t, bin, []string{qemu}, dir)
	t.Logf("%s: ready under qemu in %s", c.arch, time.Since(started).Round(time.Millisecond))
	cms := p.clientset().CoreV1().ConfigMaps("default")
	ctx := t.Context()

	const n = 20
	for i := range n {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%02d", i)}, Data: map[string]string{"i": strconv.Itoa(i)}}
		if _, err := cms.Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create %s: %v", cm.Name, err)
		}
	}
	// The test's own: the namespace also holds kube-root-ca.crt.
	list, err := cms.List(ctx, metav1.ListOptions{FieldSelector: "metadata.name!=kube-root-ca.crt"})
	if err != nil || len(list.Items) != n {
		t.Fatalf("list: %v, %d items, want %d", err, len(list.Items), n)
	}
	w, err := cms.Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatalf("watch from %s: %v", list.ResourceVersion, err)
	}
	updated := list.Items[3].DeepCopy()
	updated.Data["i"] = "updated"
	if _, err := cms.Update(ctx, updated, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("update: %v", err)
	}
	if err := cms.Delete(ctx, list.Items[4].Name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete: %v", err)
	}
	for _, want := range []struct {
		typ  watch.EventType
		name string
	}{{watch.Modified, updated.Name}, {watch.Deleted, list.Items[4].Name}} {
		select {
		case ev, ok := <-w.ResultChan():
			cm, isCM := ev.Object.(*corev1.ConfigMap)
			if !ok || ev.Type != want.typ || !isCM || cm.Name != want.name {
				t.Fatalf("watch event: %v %v, want %s %s", ev.Type, ev.Object, want.typ, want.name)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("no %s event for %s within 30s", want.typ, want.name)
		}
	}
	w.Stop()
	last, err := cms.Get(ctx, updated.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}

	if c.arch == "armv7" {
		// etcd asks bbolt for quota × 1.1; bbolt rounds a map below 1 GiB
		// up to a power of two (bbolt's DB.mmapSize).
		limit := int64(1)
		for limit < int64(256<<20)+int64(256<<20)/10 {
			limit *= 2
		}
		if size := dbMapping(t, p.cmd.Process.Pid); size == 0 || size > limit {
			t.Errorf("armv7: bbolt maps %d bytes of the database, want 0 < size <= %d (quota × 1.1, rounded up to a power of two)", size, limit)
		} else {
			t.Logf("armv7: bbolt maps %d MiB of the database", size>>20)
		}
	}

	if err := p.stop(60 * time.Second); err != nil {
		t.Fatalf("%s: graceful stop: %v\n%s", c.arch, err, p.logs())
	}
	p = startBinary(t, bin, []string{qemu}, dir)
	cms = p.clientset().CoreV1().ConfigMaps("default")
	after, err := cms.List(ctx, metav1.ListOptions{FieldSelector: "metadata.name!=kube-root-ca.crt"})
	if err != nil {
		t.Fatalf("list after restart: %v", err)
	}
	got := map[string]string{}
	for _, cm := range after.Items {
		got[cm.Name] = cm.Data["i"]
	}
	for i, cm := range list.Items {
		want := strconv.Itoa(i)
		switch i {
		case 3:
			want = "updated"
		case 4:
			if _, ok := got[cm.Name]; ok {
				t.Errorf("%s: deleted %s is back after a restart", c.arch, cm.Name)
			}
			continue
		}
		if got[cm.Name] != want {
			t.Errorf("%s: after a restart %s holds %q, want %q", c.arch, cm.Name, got[cm.Name], want)
		}
	}
	created, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "after-restart"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create after restart: %v", err)
	}
	if rvAfter, rvBefore := mustRV(t, created.ResourceVersion), mustRV(t, last.ResourceVersion); rvAfter <= rvBefore {
		t.Errorf("%s: resourceVersion %d after a restart is not above %d from before", c.arch, rvAfter, rvBefore)
	}

	// The operator's commands work on the architecture too: a snapshot of
	// the running server restored into a fresh data dir (etcdutl's restore
	// opens the database itself, with the map the quota sets on 32-bit).
	snap := t.TempDir() + "/snapshot.db"
	run("snapshot", "save", "--data-dir", dir, snap)
	if err := p.stop(60 * time.Second); err != nil {
		t.Fatalf("%s: graceful stop: %v\n%s", c.arch, err, p.logs())
	}
	restored := shortTempDir(t)
	run("snapshot", "restore", snap, "--data-dir", restored)
	p = startBinary(t, bin, []string{qemu}, restored)
	cms = p.clientset().CoreV1().ConfigMaps("default")
	fromSnapshot, err := cms.List(ctx, metav1.ListOptions{FieldSelector: "metadata.name!=kube-root-ca.crt"})
	if err != nil || len(fromSnapshot.Items) != len(after.Items)+1 {
		t.Fatalf("%s: list after restore: %v, %d items, want %d", c.arch, err, len(fromSnapshot.Items), len(after.Items)+1)
	}
	if rv := mustRV(t, fromSnapshot.ResourceVersion); rv <= mustRV(t, created.ResourceVersion) {
		t.Errorf("%s: resourceVersion %d after a restore is not above %d from before", c.arch, rv, mustRV(t, created.ResourceVersion))
	}
}

// dbMapping is the size of the largest mapping of etcd's bbolt file in a
// process (qemu maps the guest's file mappings one to one).
func dbMapping(t *testing.T, pid int) int64 {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var largest int64
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 || !strings.HasSuffix(fields[5], "/member/snap/db") {
			continue
		}
		from, to, ok := strings.Cut(fields[0], "-")
		if !ok {
			continue
		}
		a, err1 := strconv.ParseUint(from, 16, 64)
		b, err2 := strconv.ParseUint(to, 16, 64)
		if err1 == nil && err2 == nil && int64(b-a) > largest {
			largest = int64(b - a)
		}
	}
	return largest
}
