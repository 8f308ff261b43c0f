package e2e

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// The binary with a full etcd: writes fail at once with a Status, the
// server stays ready and serves reads and watches, and after deleting
// objects and `kubestore defrag` (which compacts first) writes work again
// without a restart. The in-process TestStorageFull in package server
// checks the same states in more detail.
func TestStorageFullRecovery(t *testing.T) {
	const quota = "16Mi"
	dir := shortTempDir(t)
	p := start(t, dir, "--etcd-quota-backend-bytes", quota)
	cms := p.clientset().CoreV1().ConfigMaps("default")
	ctx := t.Context()

	// etcd checks its quota against the database size as of the last
	// bbolt commit (every --etcd-backend-batch-interval, 5s by default),
	// so the first refusal can come well past the quota.
	value := strings.Repeat("x", 256<<10)
	var names []string
	var full error
	for i := range 1024 {
		name := fmt.Sprintf("fill-%03d", i)
		start := time.Now()
		_, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"value": value}}, metav1.CreateOptions{})
		if err != nil {
			if took := time.Since(start); took > 5*time.Second {
				t.Errorf("the failing create took %s, want < 5s", took)
			}
			full = err
			break
		}
		names = append(names, name)
	}
	var status apierrors.APIStatus
	if !errors.As(full, &status) {
		t.Fatalf("create beyond the quota: %v (%T), want a Kubernetes Status error", full, full)
	}
	s := status.Status()
	t.Logf("create %d of 256 KiB refused: code %d reason %q message %q", len(names), s.Code, s.Reason, s.Message)
	if s.Code != http.StatusInternalServerError || !strings.Contains(s.Message, "database space exceeded") {
		t.Fatalf("create beyond the quota: code %d message %q, want 500 and etcd's database space exceeded", s.Code, s.Message)
	}

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
