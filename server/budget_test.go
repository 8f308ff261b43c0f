package server_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// TestObjectBudget: concurrent creates beyond --max-objects are refused
// with 403 naming the resource and its budget, exactly the budget's worth
// is stored, the server keeps serving, and a delete makes room again.
func TestObjectBudget(t *testing.T) {
	cfg := testConfig(t)
	cfg.Memory.MaxObjects = []string{"configmaps#5"}
	ts := startServer(t, cfg)
	ctx := context.Background()
	cms := ts.client.CoreV1().ConfigMaps("default")

	var (
		mu        sync.Mutex
		created   []string
		forbidden []error
		wg        sync.WaitGroup
	)
	for i := range 12 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm-" + string(rune('a'+i))}, Data: map[string]string{"k": "v"}}
			_, err := cms.Create(ctx, cm, metav1.CreateOptions{})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				created = append(created, cm.Name)
			case apierrors.IsForbidden(err):
				forbidden = append(forbidden, err)
			default:
				t.Errorf("create %s: %v, want success or 403", cm.Name, err)
			}
		}()
	}
	wg.Wait()
	if len(created) != 5 || len(forbidden) != 7 {
		t.Fatalf("%d created, %d forbidden; want 5 and 7 (%v)", len(created), len(forbidden), forbidden)
	}
	for _, err := range forbidden {
		status := err.(apierrors.APIStatus).Status()
		if status.Code != 403 || status.Reason != metav1.StatusReasonForbidden {
			t.Errorf("status %d %s, want 403 Forbidden", status.Code, status.Reason)
		}
		if !strings.Contains(status.Message, "--max-objects=configmaps#5") || !strings.Contains(status.Message, "5 objects") {
			t.Errorf("message %q does not name the resource and its budget", status.Message)
		}
	}
	list, err := cms.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 5 {
		t.Fatalf("listed %d configmaps, want the 5 created", len(list.Items))
	}
	// Other resources are not limited.
	if _, err := ts.client.CoreV1().Secrets("default").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s"}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating a secret: %v", err)
	}
	if got := ts.metric("kubestore_resource_budget_rejections_total", map[string]string{"resource": "configmaps", "budget": "objects"}); got != 7 {
		t.Errorf("kubestore_resource_budget_rejections_total = %v, want 7", got)
	}
	if got := ts.metric("kubestore_resource_budget_limit", map[string]string{"resource": "configmaps", "budget": "objects"}); got != 5 {
		t.Errorf("kubestore_resource_budget_limit = %v, want 5", got)
	}
	eventually(t, 5*time.Second, "usage gauge shows 5 objects", func() (bool, error) {
		return ts.metric("kubestore_resource_budget_usage", map[string]string{"resource": "configmaps", "budget": "objects"}) == 5, nil
	})

	if err := cms.Delete(ctx, created[0], metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "a create succeeds after a delete", func() (bool, error) {
		_, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "after-delete"}}, metav1.CreateOptions{})
		return err == nil, err
	})
	if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "one-too-many"}}, metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("create beyond the budget again: %v, want 403", err)
	}
	// A create of an existing name still says AlreadyExists.
	if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "after-delete"}}, metav1.CreateOptions{}); !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create of an existing name at the budget: %v, want AlreadyExists", err)
	}
}

// TestByteBudget: on an uncached resource (the budget's usage then comes
// from an etcd watch), creates and growing updates beyond --max-bytes are
// refused, shrinking updates and deletes pass, stored data is intact.
func TestByteBudget(t *testing.T) {
	cfg := testConfig(t)
	cfg.Cache.Sizes = []string{"secrets#0"}
	cfg.Memory.MaxBytes = []string{"secrets#4Ki"}
	ts := startServer(t, cfg)
	ctx := context.Background()
	secrets := ts.client.CoreV1().Secrets("default")
	blob := func(n int) map[string][]byte { return map[string][]byte{"blob": []byte(strings.Repeat("x", n))} }

	if _, err := secrets.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Data: blob(2000)}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("first secret: %v", err)
	}
	_, err := secrets.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "b"}, Data: blob(2500)}, metav1.CreateOptions{})
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "--max-bytes=secrets#4Ki") {
		t.Fatalf("second secret over the byte budget: %v, want 403 naming --max-bytes=secrets#4Ki", err)
	}
	if _, err := secrets.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "small"}, Data: blob(100)}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("a small secret within the budget: %v", err)
	}

	grow := []byte(`{"data":{"blob":"` + strings.Repeat("eHh4", 1400) + `"}}`)
	if _, err := secrets.Patch(ctx, "a", types.MergePatchType, grow, metav1.PatchOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("growing update over the budget: %v, want 403", err)
	}
	got, err := secrets.Get(ctx, "a", metav1.GetOptions{})
	if err != nil || len(got.Data["blob"]) != 2000 {
		t.Fatalf("after a refused update the secret holds %d bytes (%v), want the 2000 stored", len(got.Data["blob"]), err)
	}
	if _, err := secrets.Patch(ctx, "a", types.MergePatchType, []byte(`{"data":{"blob":"eA=="}}`), metav1.PatchOptions{}); err != nil {
		t.Fatalf("shrinking update: %v", err)
	}
	eventually(t, 5*time.Second, "room after the shrink", func() (bool, error) {
		_, err := secrets.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "b"}, Data: blob(2500)}, metav1.CreateOptions{})
		return err == nil, err
	})
	if got := ts.metric("kubestore_resource_budget_rejections_total", map[string]string{"resource": "secrets", "budget": "bytes"}); got < 2 {
		t.Errorf("kubestore_resource_budget_rejections_total{budget=bytes} = %v, want at least 2", got)
	}
}
