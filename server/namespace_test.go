package server_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestSystemNamespacesExistFromFirstStart(t *testing.T) {
	ts := startServer(t, testConfig(t))
	list, err := ts.client.CoreV1().Namespaces().List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, ns := range list.Items {
		names = append(names, ns.Name)
		if ns.Status.Phase != corev1.NamespaceActive {
			t.Errorf("namespace %s phase %q, want Active", ns.Name, ns.Status.Phase)
		}
	}
	for _, want := range []string{"default", "kube-system", "kube-public", "kube-node-lease"} {
		if !slices.Contains(names, want) {
			t.Errorf("namespace %s missing; have %v", want, names)
		}
	}
}

func TestCreateInMissingNamespaceIsRefused(t *testing.T) {
	ts := startServer(t, testConfig(t))
	_, err := ts.client.CoreV1().ConfigMaps("nope").Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a"}}, metav1.CreateOptions{})
	if !apierrors.IsNotFound(err) {
		t.Fatalf("create in missing namespace: got %v, want NotFound", err)
	}
	if d := apierrors.ReasonForError(err); d != metav1.StatusReasonNotFound {
		t.Errorf("reason %q", d)
	}
	var se apierrors.APIStatus
	if ok := errors.As(err, &se); !ok || se.Status().Details == nil || se.Status().Details.Kind != "namespaces" || se.Status().Details.Name != "nope" {
		t.Errorf("status does not name the namespace: %+v", err)
	}
}

func TestImmortalNamespacesCannotBeDeleted(t *testing.T) {
	ts := startServer(t, testConfig(t))
	for _, ns := range []string{"default", "kube-system", "kube-public"} {
		err := ts.client.CoreV1().Namespaces().Delete(t.Context(), ns, metav1.DeleteOptions{})
		if !apierrors.IsForbidden(err) {
			t.Errorf("delete %s: got %v, want Forbidden", ns, err)
		}
	}
}

func TestDeletingNamespaceDeletesContent(t *testing.T) {
	ts := startServer(t, testConfig(t))
	ctx := t.Context()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "doomed"}}
	if _, err := ts.client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a", "b", "c"} {
		if _, err := ts.client.CoreV1().ConfigMaps("doomed").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
	if _, err := ts.client.CoreV1().Pods("doomed").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := ts.client.CoreV1().Namespaces().Delete(ctx, "doomed", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	got, err := ts.client.CoreV1().Namespaces().Get(ctx, "doomed", metav1.GetOptions{})
	if err == nil && got.Status.Phase == corev1.NamespaceTerminating {
		// A create in a terminating namespace is refused, as upstream.
		_, err := ts.client.CoreV1().ConfigMaps("doomed").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "late"}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsForbidden(err) && !apierrors.IsNotFound(err) {
			t.Errorf("create in terminating namespace: got %v, want Forbidden", err)
		}
	}

	eventually(t, 30*time.Second, "namespace deleted", func() (bool, error) {
		_, err := ts.client.CoreV1().Namespaces().Get(ctx, "doomed", metav1.GetOptions{})
		return apierrors.IsNotFound(err), err
	})
	cms, err := ts.client.CoreV1().ConfigMaps("doomed").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(cms.Items) != 0 {
		t.Errorf("%d configmaps left in deleted namespace", len(cms.Items))
	}
	pods, err := ts.client.CoreV1().Pods("doomed").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != 0 {
		t.Errorf("%d pods left in deleted namespace", len(pods.Items))
	}
}
