package e2e

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
)

// TestMirrorTwoProcessesOneEtcd: two kubestores on one etcd (the second
// with --etcd-servers on the first's embedded etcd, as two processes on
// an etcd cluster) both mirror the same rule, with nothing between them
// but optimistic concurrency on the objects' upstream resourceVersions.
// Each upstream change is written once: a watcher on either process sees
// exactly one event per change and none for the rest, also while one of
// them is killed and started again, and a write through either reaches
// the upstream.
func TestMirrorTwoProcessesOneEtcd(t *testing.T) {
	requireKubectl(t)
	outer := t // owns the processes across the subtests
	env := newMirrorEnv(t)
	ctx := t.Context()
	const ns = "shared"
	up := env.upCS.CoreV1().ConfigMaps(ns)
	_, err := env.upCS.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	must(t, err)
	parallel(t, 30, 8, func(i int) error {
		_, err := up.Create(ctx, cm(ns, fmt.Sprintf("s-%02d", i), "0"), metav1.CreateOptions{})
		return err
	})
	rules := []mirrorRule{{Name: "shared", Resource: "configmaps", Namespaces: []string{ns}}}
	a := env.startEdge(t, t, "edge-a", rules, "")
	b := env.startEdge(t, t, "edge-b", rules, "", "--etcd-servers", "unix://"+filepath.Join(a.dataDir, "etcd", "etcd.sock"))
	want := func(t *testing.T) map[string]*unstructured.Unstructured {
		return env.upstream(t, gvrConfigMaps, ns, metav1.ListOptions{})
	}
	va, vb := a.watch(ctx, gvrConfigMaps, ns), b.watch(ctx, gvrConfigMaps, ns)
	converge(t, va, "shared", want)
	converge(t, vb, "shared", want)
	a.waitMirrorz(t, http.StatusOK, "ok")
	b.waitMirrorz(t, http.StatusOK, "ok")

	// written is what both processes wrote of the rule: creates, updates
	// and deletes.
	written := func() float64 {
		var n float64
		for _, ed := range []*edge{a, b} {
			m := ed.metrics(t)
			for _, op := range []string{"created", "updated", "deleted"} {
				v, _ := m.value(metricApplied, "rule", "shared", "op", op)
				n += v
			}
		}
		return n
	}

	// change makes n changes upstream: updates, then creates, then
	// deletes, a third each, and says which.
	round, last := 0, 29 // deletes take the seeded objects from the last
	change := func(t *testing.T, n int) map[string]watch.EventType {
		t.Helper()
		round++
		changes := map[string]watch.EventType{}
		for i := range n {
			var err error
			switch name := fmt.Sprintf("s-%02d", i); {
			case i < n/3:
				_, err = up.Update(ctx, cm(ns, name, fmt.Sprint(round)), metav1.UpdateOptions{})
				changes[name] = watch.Modified
			case i < 2*n/3:
				name = fmt.Sprintf("new-%d-%02d", round, i)
				_, err = up.Create(ctx, cm(ns, name, "0"), metav1.CreateOptions{})
				changes[name] = watch.Added
			default:
				name = fmt.Sprintf("s-%02d", last)
				last--
				err = up.Delete(ctx, name, metav1.DeleteOptions{})
				changes[name] = watch.Deleted
			}
			must(t, err)
		}
		return changes
	}

	t.Run("each-change-written-once", func(t *testing.T) {
		beforeA, beforeB := va.localRVs(), vb.localRVs()
		markA, markB := va.mark(), vb.mark()
		w0 := written()
		changes := change(t, 15)
		converge(t, va, "shared", want)
		converge(t, vb, "shared", want)
		// The last events may still be on their way to the watchers.
		time.Sleep(time.Second)
		checkChanges(t, va, markA, beforeA, changes)
		checkChanges(t, vb, markB, beforeB, changes)
		checkOrdered(t, va)
		checkOrdered(t, vb)
		if got := written() - w0; got != float64(len(changes)) {
			t.Errorf("the two processes wrote %v times for %d upstream changes, want each change written once", got, len(changes))
		}
	})

	t.Run("one-killed-and-restarted", func(t *testing.T) {
		beforeA := va.localRVs()
		markA := va.mark()
		b.p.kill()
		changes := change(t, 12)
		b.restart(outer)
		converge(t, va, "shared", want)
		converge(t, vb, "shared", want)
		time.Sleep(time.Second)
		checkChanges(t, va, markA, beforeA, changes)
		b.waitMirrorz(t, http.StatusOK, "ok")
	})

	t.Run("write-through-either", func(t *testing.T) {
		for _, ed := range []*edge{a, b} {
			markA := va.mark()
			label := "through-" + filepath.Base(ed.dataDir)
			if _, err := ed.cs.CoreV1().ConfigMaps(ns).Patch(ctx, "s-00", types.MergePatchType,
				[]byte(`{"metadata":{"labels":{"`+label+`":"yes"}}}`), metav1.PatchOptions{}); err != nil {
				t.Fatalf("patch through %s: %v", ed.dataDir, err)
			}
			got, err := up.Get(ctx, "s-00", metav1.GetOptions{})
			must(t, err)
			if got.Labels[label] != "yes" {
				t.Errorf("the upstream's s-00 has labels %v after a patch through %s", got.Labels, ed.dataDir)
			}
			converge(t, va, "shared", want)
			time.Sleep(time.Second)
			if evs := va.since(markA); len(evs) != 1 {
				t.Errorf("a write through %s: %d events on edge-a, want 1: %s", ed.dataDir, len(evs), describeEvents(evs))
			}
		}
	})

	t.Run("body-over-the-limit", func(t *testing.T) {
		// --max-request-body-bytes (3 MiB by default) holds for writes
		// the mirror forwards too: it reads their bodies itself.
		body := `{"data":{"big":"` + strings.Repeat("x", 4<<20) + `"}}`
		code, _, resp := a.request(t, http.MethodPatch, "/api/v1/namespaces/"+ns+"/configmaps/s-01", "application/merge-patch+json", body)
		if code != http.StatusRequestEntityTooLarge || strings.Contains(resp, "upstream") {
			t.Errorf("a 4 MiB patch of a mirrored object: %d %.200s, want 413 from the edge itself, not the upstream's", code, resp)
		}
	})

	t.Run("namespace-with-mirrored-objects", func(t *testing.T) {
		// The namespace controller would delete the mirrored objects
		// below the mirror: the deletion is refused instead.
		code, _, resp := a.request(t, http.MethodDelete, "/api/v1/namespaces/"+ns, "", "")
		if code != http.StatusConflict || !strings.Contains(resp, "rule shared") {
			t.Errorf("DELETE of namespace %s, which holds mirrored objects: %d %.300s, want 409 naming the rule", ns, code, resp)
		}
		if _, err := a.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "local-only"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := a.cs.CoreV1().Namespaces().Delete(ctx, "local-only", metav1.DeleteOptions{}); err != nil {
			t.Errorf("DELETE of a namespace without mirrored objects: %v", err)
		}
	})
}

// TestMirrorUpstreamWithoutWatchList: an upstream that refuses WatchList
// (older, or its WatchList gate off) is mirrored by LIST and WATCH, once
// the mirror has seen that a plain list works.
func TestMirrorUpstreamWithoutWatchList(t *testing.T) {
	dir := shortTempDir(t)
	up := start(t, filepath.Join(dir, "up"), "--feature-gates", "WatchList=false")
	upCS := up.clientset()
	ctx := t.Context()
	for i := range 3 {
		_, err := upCS.CoreV1().ConfigMaps("default").Create(ctx, cm("default", fmt.Sprintf("c-%d", i), "0"), metav1.CreateOptions{})
		must(t, err)
	}
	kc := filepath.Join(dir, "upstream.kubeconfig")
	writeEdgeKubeconfig(t, up.kubeconfig, strings.TrimPrefix(up.server(), "https://"), "", kc)
	cfg := filepath.Join(dir, "edge.yaml")
	must(t, os.WriteFile(cfg, []byte("mirror: {rules: [{name: cms, resource: configmaps, namespaces: [default]}]}\n"), 0o600))
	ed := start(t, filepath.Join(dir, "edge"), flagUpstreamKubeconfig, kc, flagNodeName, edgeNode, "--config", cfg)
	edCS := ed.clientset()
	has := func(name string) bool {
		_, err := edCS.CoreV1().ConfigMaps("default").Get(ctx, name, metav1.GetOptions{})
		return err == nil
	}
	if !eventually(30*time.Second, func() bool { return has("c-0") && has("c-1") && has("c-2") }) {
		t.Fatalf("the edge did not mirror the upstream's ConfigMaps\n%s", ed.logs())
	}
	_, err := upCS.CoreV1().ConfigMaps("default").Create(ctx, cm("default", "later", "0"), metav1.CreateOptions{})
	must(t, err)
	if !eventually(30*time.Second, func() bool { return has("later") }) {
		t.Errorf("a ConfigMap created upstream after the list did not reach the edge (the watch)")
	}
	if !strings.Contains(ed.logs(), "does not serve WatchList; listing instead") {
		t.Errorf("the edge's log does not say it lists instead of WatchList:\n%s", ed.logs())
	}
}
