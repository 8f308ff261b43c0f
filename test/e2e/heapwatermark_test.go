package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The binary under a 64 MiB soft memory limit (GOMEMLIMIT, so no
// per-resource budget refuses first): creates of large ConfigMaps fill the
// watch cache until the live heap passes 80 % of the limit; then creates
// are refused with a Forbidden naming the heap and the limit, to client-go
// and to kubectl, while the server stays ready and serves reads and
// updates.
func TestHeapWatermark(t *testing.T) {
	requireKubectl(t)
	p := startWrapped(t, []string{"env", "GOMEMLIMIT=64MiB"}, shortTempDir(t))
	cms := p.clientset().CoreV1().ConfigMaps("default")
	ctx := t.Context()

	value := strings.Repeat("x", 900<<10)
	var refused error
	var created []string
	for i := range 80 {
		name := fmt.Sprintf("big-%02d", i)
		_, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"value": value}}, metav1.CreateOptions{})
		if err != nil {
			refused = err
			break
		}
		created = append(created, name)
	}
	if refused == nil {
		t.Fatalf("%d creates of 900 KiB under GOMEMLIMIT=64MiB, none refused", len(created))
	}
	if !apierrors.IsForbidden(refused) {
		t.Fatalf("create %d refused with %v, want Forbidden", len(created), refused)
	}
	for _, want := range []string{"live heap", "80% of its memory limit of 64 MiB (GOMEMLIMIT)", "deletes make room"} {
		if !strings.Contains(refused.Error(), want) {
			t.Errorf("refusal %q lacks %q", refused, want)
		}
	}
	t.Logf("refused after %d creates: %v", len(created), refused)

	// The watermark compares the live heap as of the last collection, so
	// a collection may let one more create in; each one that passes adds
	// to the heap, and kubectl soon meets the refusal.
	file := filepath.Join(t.TempDir(), "value")
	if err := os.WriteFile(file, []byte(value), 0o600); err != nil {
		t.Fatal(err)
	}
	var out string
	for i := range 20 {
		var err error
		if out, err = p.kubectl("create", "configmap", fmt.Sprintf("kubectl-%02d", i), "--from-file=value="+file); err != nil {
			break
		}
	}
	if !strings.Contains(out, "is forbidden") || !strings.Contains(out, "live heap") {
		t.Errorf("kubectl create above the watermark: %q, want the Forbidden", out)
	}
	if !p.ready() {
		t.Error("not ready above the watermark")
	}
	if out := p.mustKubectl("get", "configmap", created[0], "-o", "jsonpath={.metadata.name}"); out != created[0] {
		t.Errorf("kubectl get above the watermark: %q", out)
	}
	p.mustKubectl("label", "configmap", created[0], "edge=yes")
	list, err := cms.List(ctx, metav1.ListOptions{LabelSelector: "edge=yes"})
	if err != nil || len(list.Items) != 1 {
		t.Errorf("list after an update above the watermark: %v, %v", list, err)
	}
	// The refusals are counted.
	if !eventually(10*time.Second, func() bool {
		return strings.Contains(p.mustKubectl("get", "--raw", "/metrics"), `kubestore_heap_watermark_rejections_total{resource="configmaps"}`)
	}) {
		t.Fatal("no kubestore_heap_watermark_rejections_total for configmaps in /metrics")
	}
}
