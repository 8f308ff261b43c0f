package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// On a device of at most 1 GiB (here a memory cgroup of 1 GiB, where the
// machine lets the test make one) kubestore applies the small-device
// defaults by itself: ConfigMaps and Secrets are read from etcd (their
// watch caches never start) while pods stay cached, and a ConfigMap is
// read and watched by name as the kubelet does; --watch-cache-sizes naming
// ConfigMaps caches them again.
func TestSmallDeviceDefaults(t *testing.T) {
	requireKubectl(t)
	cg := memoryCgroup(t, 1<<30)
	// sh puts itself into the cgroup, then becomes kubestore.
	wrap := []string{"sh", "-c", `echo $$ > "$1" && shift && exec "$@"`, "sh", cg}
	cached := func(p *proc, resource string) bool {
		m := p.mustKubectl("get", "--raw", "/metrics")
		series := `kubestore_watch_cache_enabled{group="",resource="` + resource + `"} `
		if !strings.Contains(m, series) {
			t.Fatalf("/metrics has no %s:\n%s", series, grepLines(m, "kubestore_watch_cache_enabled{"))
		}
		return strings.Contains(m, series+"1")
	}

	p := startWrapped(t, wrap, shortTempDir(t))
	if !cached(p, "pods") {
		t.Error("pods are not cached on a small device")
	}
	for _, r := range []string{"configmaps", "secrets"} {
		if cached(p, r) {
			t.Errorf("%s cached on a small device without --watch-cache-sizes naming them", r)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cms := p.clientset().CoreV1().ConfigMaps("default")
	cm, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "agent-config"}, Data: map[string]string{"v": "1"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := cms.Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=agent-config", ResourceVersion: cm.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	cm.Data["v"] = "2"
	if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-w.ResultChan():
		if got, ok := ev.Object.(*corev1.ConfigMap); ev.Type != watch.Modified || !ok || got.Data["v"] != "2" {
			t.Errorf("watch by name: %s %+v, want the update", ev.Type, ev.Object)
		}
	case <-ctx.Done():
		t.Fatal("no event on the watch by name")
	}
	if got, err := cms.Get(ctx, "agent-config", metav1.GetOptions{}); err != nil || got.Data["v"] != "2" {
		t.Errorf("GET by name: %v, %v", got, err)
	}

	q := startWrapped(t, wrap, shortTempDir(t), "--watch-cache-sizes=configmaps#100")
	if !cached(q, "configmaps") || cached(q, "secrets") {
		t.Error("--watch-cache-sizes=configmaps#100 on a small device: want ConfigMaps cached, Secrets still not")
	}
}

// memoryCgroup makes a memory cgroup limited to limit bytes for the test
// and returns its cgroup.procs file; the test is skipped where none can be
// made (not root, no writable cgroup v1 memory controller or v2 tree with
// it enabled).
func memoryCgroup(t *testing.T, limit int64) string {
	t.Helper()
	name := fmt.Sprintf("kubestore-e2e-%d", os.Getpid())
	try := func(parent, limitFile string) string {
		dir := filepath.Join(parent, name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			return ""
		}
		if err := os.WriteFile(filepath.Join(dir, limitFile), []byte(strconv.FormatInt(limit, 10)), 0o644); err != nil {
			os.Remove(dir)
			return ""
		}
		// Removed once the test's processes, killed by cleanups that run
		// before this one, have left it.
		t.Cleanup(func() {
			for range 50 {
				if os.Remove(dir) == nil {
					return
				}
				time.Sleep(100 * time.Millisecond)
			}
		})
		return filepath.Join(dir, "cgroup.procs")
	}
	if procs := try("/sys/fs/cgroup/memory", "memory.limit_in_bytes"); procs != "" {
		return procs
	}
	if procs := try("/sys/fs/cgroup", "memory.max"); procs != "" {
		return procs
	}
	t.Skip("no memory cgroup can be made here (needs root and a writable cgroup v1 memory controller or cgroup v2 with memory enabled)")
	return ""
}

// grepLines are the lines of text that contain s.
func grepLines(text, s string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
