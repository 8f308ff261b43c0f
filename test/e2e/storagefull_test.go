package e2e

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// The binary with a full etcd: writes fail at once with a Status before
// the database passes its quota, the server stays ready and serves reads
// and watches, every acknowledged create is stored and the refused one is
// not, and after deleting objects and `kubestore defrag` (which compacts
// first) writes work again without a restart. The in-process
// TestStorageFull in package server checks the same states in more
// detail.
func TestStorageFullRecovery(t *testing.T) {
	const quota = "16Mi"
	dir := shortTempDir(t)
	p := start(t, dir, "--etcd-quota-backend-bytes", quota)
	cms := p.clientset().CoreV1().ConfigMaps("default")
	ctx := t.Context()

	// The quota guard refuses before the database passes the quota, so
	// no more than 16 MiB of 256 KiB values can be acknowledged. A create
	// it refuses alone (413) while smaller ones fit halves the next ones'
	// size, down to 1 KiB, until the database is full.
	value := strings.Repeat("x", 256<<10)
	var names []string
	var full error
	for i := 0; full == nil; i++ {
		if i > 5000 {
			t.Fatalf("%d creates fit a 16 MiB quota", i)
		}
		name := fmt.Sprintf("fill-%04d", i)
		start := time.Now()
		_, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"value": value}}, metav1.CreateOptions{})
		switch {
		case err != nil && refusedForRoom(err) && len(value) > 1<<10:
			t.Logf("create %d of %d KiB refused alone: %v", len(names), len(value)>>10, err)
			value = value[:len(value)/2]
		case err != nil:
			if took := time.Since(start); took > 5*time.Second {
				t.Errorf("the failing create took %s, want < 5s", took)
			}
			full = err
		default:
			names = append(names, name)
		}
	}
	wantNoSpace(t, full, "create beyond the quota")
	t.Logf("create %d refused: the database is full", len(names))

	if !p.ready() {
		t.Error("/readyz is not ok while etcd is full")
	}
	// The test's own: the namespace also holds kube-root-ca.crt.
	list, err := cms.List(ctx, metav1.ListOptions{FieldSelector: "metadata.name!=kube-root-ca.crt"})
	if err != nil || len(list.Items) != len(names) {
		t.Fatalf("list while full: %v, %d items, want %d", err, len(list.Items), len(names))
	}
	w, err := cms.Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatalf("watch while full: %v", err)
	}
	defer w.Stop()
	events := make(chan watch.Event, 2048)
	go func() {
		for ev := range w.ResultChan() {
			events <- ev
		}
		close(events)
	}()

	for _, name := range names {
		if err := cms.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatalf("delete %s while full: %v", name, err)
		}
	}
	// The deleted values stay in etcd until a compaction, which the
	// apiserver's compactor cannot do under the NOSPACE alarm (its
	// transaction also writes compact_rev_key): defrag compacts first.
	out := mustRunKubestore(t, "defrag", "--data-dir", dir, "--etcd-quota-backend-bytes", quota)
	t.Logf("defrag: %s", strings.TrimSpace(out))
	for _, want := range []string{"compacted etcd at revision", "disarmed the NOSPACE alarm"} {
		if !strings.Contains(out, want) {
			t.Fatalf("defrag output lacks %q:\n%s", want, out)
		}
	}

	if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "after"}, Data: map[string]string{"value": value}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create after defrag: %v", err)
	}
	deleted, added := 0, false
	timeout := time.After(30 * time.Second)
	for deleted < len(names) || !added {
		select {
		case ev, ok := <-events:
			if !ok {
				t.Fatalf("the watch opened while full ended after %d deletions", deleted)
			}
			switch ev.Type {
			case watch.Deleted:
				deleted++
			case watch.Added:
				added = ev.Object.(*corev1.ConfigMap).Name == "after"
			}
		case <-timeout:
			t.Fatalf("the watch opened while full saw %d of %d deletions and the create %v in 30s", deleted, len(names), added)
		}
	}
	if err := p.stop(30 * time.Second); err != nil {
		t.Fatalf("graceful stop: %v\n%s", err, p.logs())
	}
}

// wantNoSpace checks that err is etcd's "database space exceeded" as
// kube-apiserver answers it: a 500 Status with etcd's message.
func wantNoSpace(t *testing.T, err error, what string) {
	t.Helper()
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		t.Fatalf("%s: %v (%T), want a Kubernetes Status error", what, err, err)
	}
	if s := status.Status(); s.Code != http.StatusInternalServerError || !strings.Contains(s.Message, "database space exceeded") {
		t.Fatalf("%s: code %d message %q, want 500 and etcd's database space exceeded", what, s.Code, s.Message)
	}
}

// refusedForRoom reports whether err is the quota guard's refusal of one
// write larger than the room left while smaller ones fit: 413 naming the
// quota's flag.
func refusedForRoom(err error) bool {
	return apierrors.IsRequestEntityTooLargeError(err) && strings.Contains(err.Error(), "--etcd-quota-backend-bytes")
}

// noSpaceWrites is the server's count of the writes etcd itself answered
// with "database space exceeded", by what kubestore then found stored.
func noSpaceWrites(t *testing.T, p *proc) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, line := range strings.Split(p.mustKubectl("get", "--raw", "/metrics"), "\n") {
		if rest, ok := strings.CutPrefix(line, `kubestore_etcd_nospace_writes_total{stored="`); ok {
			if label, value, ok := strings.Cut(rest, `"} `); ok {
				out[label] = value
			}
		}
	}
	return out
}

// Sixteen clients create ConfigMaps of 256 KiB at once until each is
// refused (for the room left, or the database full): the objects stored
// are exactly the ones acknowledged, and the database stays within its
// quota.
func TestStorageFullConcurrentCreates(t *testing.T) {
	const quota = 16 << 20
	dir := shortTempDir(t)
	p := start(t, dir, "--etcd-quota-backend-bytes", strconv.Itoa(quota))
	cms := p.clientset().CoreV1().ConfigMaps("default")
	value := strings.Repeat("x", 256<<10)
	var mu sync.Mutex
	acked := map[string]bool{}
	var wg sync.WaitGroup
	for c := range 16 {
		wg.Go(func() {
			for i := 0; ; i++ {
				name := fmt.Sprintf("fill-%02d-%03d", c, i)
				_, err := cms.Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"value": value}}, metav1.CreateOptions{})
				if err != nil {
					if !refusedForRoom(err) {
						wantNoSpace(t, err, "create "+name)
					}
					return
				}
				mu.Lock()
				acked[name] = true
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	list, err := cms.List(t.Context(), metav1.ListOptions{FieldSelector: "metadata.name!=kube-root-ca.crt"})
	if err != nil {
		t.Fatal(err)
	}
	stored := map[string]bool{}
	for _, cm := range list.Items {
		stored[cm.Name] = true
		if !acked[cm.Name] {
			t.Errorf("%s is stored, and its create was refused", cm.Name)
		}
	}
	for name := range acked {
		if !stored[name] {
			t.Errorf("%s was acknowledged, and is not stored", name)
		}
	}
	if len(acked)*len(value) > quota {
		t.Errorf("%d creates of %d KiB acknowledged: more than the %d MiB quota holds", len(acked), len(value)>>10, quota>>20)
	}
	t.Logf("16 clients: %d creates of 256 KiB acknowledged, all stored; etcd answered \"no space\" itself (by stored): %v",
		len(acked), noSpaceWrites(t, p))
}
