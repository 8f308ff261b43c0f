package server_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubestore/kubestore/mirrored"
)

// The downstream flow in-process, on the harness of the uplink's tests
// (mirror_offline_test.go): the streams copy the upstream's objects with
// their uids, follow its changes, and after an outage resume where they
// stopped, so that what changed meanwhile (updates, deletes, creates)
// reaches the edge. Objects of a rule selected by the node's pods (a
// ConfigMap) are mirrored only while a pod of the node references them.
func TestMirrorStreamsFollowTheUpstream(t *testing.T) {
	t.Parallel()
	p := startMirrorPair(t, "edge-a", false)
	const ns = "down"
	upNamespace(t, p.up, ns)
	services := func(ts *testServer) (map[string]string, error) {
		list, err := ts.client.CoreV1().Services(ns).List(t.Context(), metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		out := map[string]string{}
		for _, s := range list.Items {
			out[s.Name] = fmt.Sprint(s.UID, " ", s.Labels["v"])
		}
		return out, nil
	}
	sameServices := func(what string) {
		t.Helper()
		seen(t, what, services, p, func(u, e map[string]string) bool { return fmt.Sprint(u) == fmt.Sprint(e) })
	}
	create := func(name string) {
		t.Helper()
		svc := webService(ns)
		svc.Name = name
		if _, err := p.up.client.CoreV1().Services(ns).Create(t.Context(), svc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	label := func(name, v string) {
		t.Helper()
		if _, err := p.up.client.CoreV1().Services(ns).Patch(t.Context(), name, "application/merge-patch+json", fmt.Appendf(nil, `{"metadata":{"labels":{"v":%q}}}`, v), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	create("a")
	create("b")
	sameServices("the edge's first copies")
	a, err := p.edge.client.CoreV1().Services(ns).Get(t.Context(), "a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	upA, err := p.up.client.CoreV1().Services(ns).Get(t.Context(), "a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if a.Annotations[mirrored.AnnotationRule] != "services" || a.Annotations[mirrored.AnnotationUpstreamResourceVersion] != upA.ResourceVersion {
		t.Errorf("the edge's copy is annotated %v, want rule services at upstream resourceVersion %s", a.Annotations, upA.ResourceVersion)
	}
	label("a", "1")
	sameServices("a live change")

	// While the link is down the upstream changes; back, the streams
	// resume and bring every change.
	p.outage(t, "refused")
	label("a", "2")
	if err := p.up.client.CoreV1().Services(ns).Delete(t.Context(), "b", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	create("c")
	if got, err := services(p.edge); err != nil || len(got) != 2 {
		t.Errorf("the edge during the outage: %v (%v), want a and b as they were", got, err)
	}
	p.link.Restore()
	p.waitMirrorz(t, http.StatusOK)
	sameServices("the changes made during the outage")

	// A ConfigMap is mirrored while a pod of the node references it.
	for _, name := range []string{"used", "unused"} {
		if _, err := p.up.client.CoreV1().ConfigMaps(ns).Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "p"}, Spec: corev1.PodSpec{NodeName: p.node,
		Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10",
			EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "used"}}}}}}}}
	if _, err := p.up.client.CoreV1().Pods(ns).Create(t.Context(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	configMap := func(name string) func() (bool, error) {
		return func() (bool, error) {
			_, err := p.edge.client.CoreV1().ConfigMaps(ns).Get(t.Context(), name, metav1.GetOptions{})
			return err == nil, err
		}
	}
	eventually(t, 10*time.Second, "the referenced ConfigMap at the edge", configMap("used"))
	if _, err := p.edge.client.CoreV1().ConfigMaps(ns).Get(t.Context(), "unused", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the ConfigMap no pod references, at the edge: %v, want 404", err)
	}
	if err := p.up.client.CoreV1().Pods(ns).Delete(t.Context(), "p", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 15*time.Second, "the ConfigMap no pod references any more gone from the edge", func() (bool, error) {
		ok, err := configMap("used")()
		return !ok && apierrors.IsNotFound(err), err
	})
}
