//go:build linux

package e2e

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/kubestore/kubestore/test/powercut"
)

// ext4Disk is a small ext4 file system on a loop device, mounted as the
// kernel mounts a data partition that turns read-only on an error.
type ext4Disk struct {
	t     *testing.T
	image string
	mnt   string
}

// newExt4Disk makes and mounts one of size bytes; it needs root, loop
// devices and e2fsprogs, and skips without them (fails in CI).
func newExt4Disk(t *testing.T, size int64) *ext4Disk {
	t.Helper()
	if os.Geteuid() != 0 {
		powercut.Skip(t, errors.New("mounting a loop device needs root"))
	} else if _, err := os.Stat("/dev/loop-control"); err != nil {
		powercut.Skip(t, fmt.Errorf("no loop devices: %w", err))
	} else if _, err := exec.LookPath("mkfs.ext4"); err != nil {
		powercut.Skip(t, errors.New("no mkfs.ext4 (e2fsprogs)"))
	}
	base := shortTempDir(t)
	d := &ext4Disk{t: t, image: filepath.Join(base, "disk.img"), mnt: filepath.Join(base, "m")}
	if err := os.Mkdir(d.mnt, 0o700); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(d.image)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	f.Close()
	mustRun(t, "mkfs.ext4", "-q", "-F", "-m", "0", d.image)
	d.mount()
	t.Cleanup(func() {
		if exec.Command("umount", d.mnt).Run() != nil {
			exec.Command("umount", "-l", d.mnt).Run()
		}
	})
	return d
}

func (d *ext4Disk) mount() {
	mustRun(d.t, "mount", "-o", "loop,errors=remount-ro", d.image, d.mnt)
}

// free is what an unprivileged writer may still allocate.
func (d *ext4Disk) free() int64 {
	var st syscall.Statfs_t
	if err := syscall.Statfs(d.mnt, &st); err != nil {
		d.t.Fatal(err)
	}
	return int64(st.Bavail) * int64(st.Bsize)
}

// fill takes all but leave bytes of the free space with a ballast file,
// as the logs of another program would.
func (d *ext4Disk) fill(leave int64) string {
	ballast := filepath.Join(d.mnt, "ballast")
	mustRun(d.t, "fallocate", "-l", strconv.FormatInt(d.free()-leave, 10), ballast)
	return ballast
}

// failWithError makes the kernel meet an error on the file system: with
// errors=remount-ro it stops every write to it from then on, as after a
// failing flash block.
func (d *ext4Disk) failWithError() {
	src := strings.TrimSpace(mustRun(d.t, "findmnt", "-no", "SOURCE", d.mnt))
	trigger := filepath.Join("/sys/fs/ext4", filepath.Base(src), "trigger_fs_error")
	if err := os.WriteFile(trigger, []byte("kubestore test"), 0o200); err != nil {
		d.t.Fatalf("making %s fail: %v", d.mnt, err)
	}
}

// storageFaultClients creates a few objects and opens a watch, to check
// that reads and watches live through a fault.
func storageFaultClients(t *testing.T, p *proc) (kubernetes.Interface, []string, watch.Interface) {
	t.Helper()
	cs := p.clientset()
	var names []string
	for i := range 20 {
		cm, err := cs.CoreV1().ConfigMaps("default").Create(t.Context(), &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("before-%d", i)}, Data: map[string]string{"v": strings.Repeat("x", 1000)},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, cm.Name)
	}
	w, err := cs.CoreV1().ConfigMaps("default").Watch(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	return cs, names, w
}

// refusedWrite waits until a create is refused with the guard's message
// and returns it; the process must stay up and ready, and serve reads.
func refusedWrite(t *testing.T, p *proc, cs kubernetes.Interface, names []string, want string) {
	t.Helper()
	var err error
	ok := eventually(10*time.Second, func() bool {
		_, err = cs.CoreV1().ConfigMaps("default").Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{GenerateName: "refused-"}}, metav1.CreateOptions{})
		return err != nil && !p.hasExited()
	})
	if p.hasExited() {
		t.Fatalf("kubestore exited: %v\n%s", p.err, p.logs())
	}
	if !ok {
		t.Fatal("writes were not refused within 10s")
	}
	var status apierrors.APIStatus
	if !errors.As(err, &status) || status.Status().Code != http.StatusInternalServerError || !strings.Contains(err.Error(), want) {
		t.Fatalf("refused write: %v, want a 500 Status naming %q", err, want)
	}
	t.Logf("refused: %v", err)
	if !p.ready() {
		t.Error("/readyz is not ok while writes are refused")
	}
	list, err := cs.CoreV1().ConfigMaps("default").List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list while writes are refused: %v", err)
	}
	if got := countNames(list.Items, names); got != len(names) {
		t.Fatalf("list while writes are refused: %d of the %d objects", got, len(names))
	}
	if _, err := cs.CoreV1().ConfigMaps("default").Get(t.Context(), names[0], metav1.GetOptions{}); err != nil {
		t.Fatalf("get while writes are refused: %v", err)
	}
}

func countNames(items []corev1.ConfigMap, names []string) int {
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	n := 0
	for _, cm := range items {
		if want[cm.Name] {
			n++
		}
	}
	return n
}

// acceptedWrite waits until writes work again and the open watch sees one.
func acceptedWrite(t *testing.T, cs kubernetes.Interface, w watch.Interface, name string) {
	t.Helper()
	var err error
	if !eventually(10*time.Second, func() bool {
		_, err = cs.CoreV1().ConfigMaps("default").Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		return err == nil
	}) {
		t.Fatalf("writes did not resume within 10s: %v", err)
	}
	timeout := time.After(10 * time.Second)
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatal("the watch opened before the fault ended")
			}
			if cm, isCM := ev.Object.(*corev1.ConfigMap); isCM && cm.Name == name {
				return
			}
		case <-timeout:
			t.Fatalf("the watch opened before the fault did not see %s", name)
		}
	}
}

// TestDataDirFull: when the data directory's file system is filled by
// something else, writes are refused with a Status naming the reserve
// before etcd meets ENOSPC (which would end the process), reads and
// watches go on, and writes resume by themselves once space is freed;
// nothing is lost across a restart.
func TestDataDirFull(t *testing.T) {
	d := newExt4Disk(t, 128<<20)
	dir := filepath.Join(d.mnt, "data")
	p := start(t, dir)
	cs, names, w := storageFaultClients(t, p)

	ballast := d.fill(8 << 20) // below the 16Mi reserve
	refusedWrite(t, p, cs, names, "--etcd-reserved-disk-bytes")
	if err := os.Remove(ballast); err != nil {
		t.Fatal(err)
	}
	acceptedWrite(t, cs, w, "after-space-freed")

	if err := p.stop(30 * time.Second); err != nil {
		t.Fatalf("stopping: %v\n%s", err, p.logs())
	}
	p = start(t, dir)
	list, err := p.clientset().CoreV1().ConfigMaps("default").List(t.Context(), metav1.ListOptions{})
	if err != nil || countNames(list.Items, append(names, "after-space-freed")) != len(names)+1 {
		t.Fatalf("after a restart: %v, want all %d acknowledged objects", err, len(names)+1)
	}
}

// TestDataDirReadOnly: when the kernel turns the data directory's file
// system read-only after an error, writes are refused with a Status saying
// so, reads and watches go on; once the file system is checked and
// mounted again, kubestore starts with nothing lost. Started on the
// read-only file system, it refuses with one line naming it.
func TestDataDirReadOnly(t *testing.T) {
	d := newExt4Disk(t, 128<<20)
	dir := filepath.Join(d.mnt, "data")
	// The controllers' Lease renewals would be writes in flight at the
	// instant of the error, which end the process (docs/RELIABILITY.md).
	args := []string{"--controllers", "namespace-controller"}
	p := start(t, dir, args...)
	cs, names, _ := storageFaultClients(t, p)

	d.failWithError()
	// A write in flight before the guard's next look (at most a second)
	// would end the process; wait for the look.
	if !eventually(5*time.Second, func() bool { return strings.Contains(p.logs(), "refusing writes") }) {
		t.Fatalf("the guard did not see the read-only file system within 5s\n%s", p.logs())
	}
	refusedWrite(t, p, cs, names, "read-only")

	// Recovery: stop, check the file system, mount it again, start.
	if err := p.stop(30 * time.Second); err != nil {
		t.Logf("stopping on a read-only file system: %v", err)
	}
	mustRun(t, "umount", d.mnt)
	if out, err := exec.Command("e2fsck", "-fy", d.image).CombinedOutput(); err != nil {
		// 1: errors corrected; anything above is a failure.
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() > 1 {
			t.Fatalf("e2fsck: %v\n%s", err, out)
		}
	}
	mustRun(t, "mount", "-o", "loop,ro", d.image, d.mnt)
	out, err := runKubestore(t, "--data-dir", dir, "--secure-port", "0")
	if err == nil || !strings.Contains(out, "read-only file system") {
		t.Errorf("starting on a read-only data directory: %v\n%s\nwant a failure naming the read-only file system", err, out)
	}
	if lines := strings.Split(strings.TrimSpace(out), "\n"); len(lines) > 3 {
		t.Logf("start on a read-only data directory said %d lines:\n%s", len(lines), out)
	}
	mustRun(t, "umount", d.mnt)
	d.mount()
	p = start(t, dir, args...)
	cs = p.clientset()
	list, err := cs.CoreV1().ConfigMaps("default").List(t.Context(), metav1.ListOptions{})
	if err != nil || countNames(list.Items, names) != len(names) {
		t.Fatalf("after the file system was repaired: %v, want all %d acknowledged objects", err, len(names))
	}
	if _, err := cs.CoreV1().ConfigMaps("default").Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "after-repair"}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("write after the repair: %v", err)
	}
}
