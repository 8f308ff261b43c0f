package server_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// An object too large for etcd (issue 50: a pod or custom object of
// 1.5-3 MiB, under the apiserver's 3 MiB body limit) gets 413 Request
// Entity Too Large naming the store's limit, on create and on an update
// that grows it, never etcd's or gRPC's text in a 500; the server serves
// on. kube-apiserver answers 500 here (docs/REGISTRY-DIFFERENCES.md).
func TestObjectTooLargeForEtcd(t *testing.T) {
	ts := startServer(t, testConfig(t))
	ctx := t.Context()
	pods := ts.client.CoreV1().Pods("default")
	big := func(name string, size int) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "c", Image: "busybox", Args: []string{strings.Repeat("x", size)}}}}}
	}
	want := func(what string, err error) {
		t.Helper()
		switch {
		case !apierrors.IsRequestEntityTooLargeError(err):
			t.Errorf("%s: %v (%T), want 413 Request Entity Too Large", what, err, err)
		case !strings.Contains(err.Error(), "--etcd-max-request-bytes") || !strings.Contains(err.Error(), "1536Ki"):
			t.Errorf("%s: %q does not name the limit", what, err)
		}
	}
	// Over etcd's --max-request-bytes (1.5 MiB), and over the gRPC
	// client's largest message (2 MiB).
	for name, size := range map[string]int{"pod-1-6mib": 1600 << 10, "pod-2-5mib": 2500 << 10} {
		_, err := pods.Create(ctx, big(name, size), metav1.CreateOptions{})
		want("a create of "+name, err)
	}
	small, err := pods.Create(ctx, big("grows", 10), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	small.Spec.Containers[0].Image = strings.Repeat("i", 1600<<10)
	_, err = pods.Update(ctx, small, metav1.UpdateOptions{})
	want("an update that grows a pod", err)
	if _, err := pods.List(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("the server after the refusals: %v", err)
	}
}
