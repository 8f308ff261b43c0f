package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// family creates a parent ConfigMap and n children it owns (controller,
// blockOwnerDeletion, as controllers set them) in namespace ns.
func family(t *testing.T, c kubernetes.Interface, ns, parent string, n int) *corev1.ConfigMap {
	t.Helper()
	ctx := t.Context()
	p, err := c.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: parent}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	owner := []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: p.Name, UID: p.UID, Controller: ptr(true), BlockOwnerDeletion: ptr(true)}}
	_, err = parallelDo(t, 8, n, func(i int) error {
		_, err := c.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-child-%03d", parent, i), OwnerReferences: owner}}, metav1.CreateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// parallelDo runs fn(0..n-1) on w workers and returns the first error.
func parallelDo(t *testing.T, w, n int, fn func(i int) error) (time.Duration, error) {
	t.Helper()
	start := time.Now()
	errs := make(chan error, n)
	next := make(chan int)
	for range w {
		go func() {
			for i := range next {
				errs <- fn(i)
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	var first error
	for range n {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return time.Since(start), first
}

// childrenOf lists the ConfigMaps whose name starts with parent's.
func childrenOf(t *testing.T, c kubernetes.Interface, ns, parent string) []corev1.ConfigMap {
	t.Helper()
	l, err := c.CoreV1().ConfigMaps(ns).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []corev1.ConfigMap
	for _, cm := range l.Items {
		if strings.HasPrefix(cm.Name, parent+"-child-") {
			out = append(out, cm)
		}
	}
	return out
}

// kubectl delete --cascade=background|foreground|orphan as on a cluster:
// the garbage collector deletes the dependents (the foreground parent
// staying, with its foregroundDeletion finalizer, until a blocking child
// is gone), or orphans them.
func TestGarbageCollectorCascades(t *testing.T) {
	requireKubectl(t)
	p := start(t, filepath.Join(shortTempDir(t), "data"))
	c := p.clientset()
	ctx := t.Context()

	t.Run("background", func(t *testing.T) {
		family(t, c, "default", "bg", 20)
		p.mustKubectl("delete", "configmap", "bg", "--cascade=background")
		if !eventually(30*time.Second, func() bool { return len(childrenOf(t, c, "default", "bg")) == 0 }) {
			t.Fatalf("%d children left after a background delete", len(childrenOf(t, c, "default", "bg")))
		}
	})

	t.Run("foreground", func(t *testing.T) {
		family(t, c, "default", "fg", 5)
		// A finalizer of someone else's holds one child: the parent waits.
		held := "fg-child-000"
		if _, err := c.CoreV1().ConfigMaps("default").Patch(ctx, held, types.MergePatchType, []byte(`{"metadata":{"finalizers":["kubestore.io/hold"]}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		p.mustKubectl("delete", "configmap", "fg", "--cascade=foreground", "--wait=false")
		if !eventually(30*time.Second, func() bool { return len(childrenOf(t, c, "default", "fg")) == 1 }) {
			t.Fatalf("children left: %d, want only the held one", len(childrenOf(t, c, "default", "fg")))
		}
		parent, err := c.CoreV1().ConfigMaps("default").Get(ctx, "fg", metav1.GetOptions{})
		if err != nil || parent.DeletionTimestamp == nil || !strings.Contains(strings.Join(parent.Finalizers, ","), metav1.FinalizerDeleteDependents) {
			t.Fatalf("parent while a blocking child remains: %v %+v", err, parent.ObjectMeta)
		}
		if _, err := c.CoreV1().ConfigMaps("default").Patch(ctx, held, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		if !eventually(30*time.Second, func() bool {
			_, err := c.CoreV1().ConfigMaps("default").Get(ctx, "fg", metav1.GetOptions{})
			return apierrors.IsNotFound(err)
		}) {
			t.Fatal("the parent stays after its last child went")
		}
	})

	t.Run("orphan", func(t *testing.T) {
		family(t, c, "default", "or", 5)
		p.mustKubectl("delete", "configmap", "or", "--cascade=orphan")
		if !eventually(30*time.Second, func() bool {
			kids := childrenOf(t, c, "default", "or")
			for _, k := range kids {
				if len(k.OwnerReferences) > 0 {
					return false
				}
			}
			return len(kids) == 5
		}) {
			t.Fatalf("children after an orphaning delete: %+v", childrenOf(t, c, "default", "or"))
		}
	})

	t.Run("custom-resource-owner", func(t *testing.T) {
		crd := filepath.Join(t.TempDir(), "crd.yaml")
		if err := os.WriteFile(crd, []byte(`apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gadgets.gc.kubestore.io
spec:
  group: gc.kubestore.io
  names: {kind: Gadget, plural: gadgets, singular: gadget}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
`), 0o600); err != nil {
			t.Fatal(err)
		}
		p.mustKubectl("apply", "-f", crd)
		p.mustKubectl("wait", "--for=condition=Established", "crd/gadgets.gc.kubestore.io")
		if !eventually(30*time.Second, func() bool {
			out, err := p.kubectl("apply", "-f", writeTemp(t, "apiVersion: gc.kubestore.io/v1\nkind: Gadget\nmetadata:\n  name: g1\n  namespace: default\n"))
			return err == nil && strings.Contains(out, "g1")
		}) {
			t.Fatal("the custom resource cannot be created")
		}
		uid := p.mustKubectl("get", "gadget", "g1", "-o", "jsonpath={.metadata.uid}")
		for i := range 3 {
			if _, err := c.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("gadget-child-%d", i),
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "gc.kubestore.io/v1", Kind: "Gadget", Name: "g1", UID: types.UID(uid)}}}}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		p.mustKubectl("delete", "gadget", "g1")
		if !eventually(60*time.Second, func() bool { return len(childrenOf(t, c, "default", "gadget")) == 0 }) {
			t.Fatalf("%d ConfigMaps of a deleted custom resource left", len(childrenOf(t, c, "default", "gadget")))
		}
	})
}

// A kill -9 in the middle of a cascade: the restarted server finishes it,
// since the work is derived from what is stored (dependents whose owner
// is gone), not from a queue held in memory.
func TestGarbageCollectorFinishesAfterKill(t *testing.T) {
	// Parallel: it mostly waits for the restart and the cascade (make
	// test runs the waiting suites side by side).
	t.Parallel()
	dir := filepath.Join(shortTempDir(t), "data")
	p := start(t, dir)
	c := p.clientset()
	family(t, c, "default", "big", 200)
	if err := c.CoreV1().ConfigMaps("default").Delete(t.Context(), "big", metav1.DeleteOptions{PropagationPolicy: ptr(metav1.DeletePropagationBackground)}); err != nil {
		t.Fatal(err)
	}
	p.kill()
	p = start(t, dir)
	c = p.clientset()
	left := len(childrenOf(t, c, "default", "big"))
	t.Logf("%d of 200 children left at the restart", left)
	if !eventually(60*time.Second, func() bool { return len(childrenOf(t, c, "default", "big")) == 0 }) {
		t.Fatalf("%d children left after the restart", len(childrenOf(t, c, "default", "big")))
	}
}

// Two kubestores with collectors on one etcd: one wins the collector's
// etcd election and collects; killed, the other takes over and collects.
func TestGarbageCollectorLeaderElection(t *testing.T) {
	// Parallel: it mostly waits for the collector's election and its
	// takeover (make test runs the waiting suites side by side).
	t.Parallel()
	dir := shortTempDir(t)
	// The etcd host runs no collector, so that killing a collector keeps
	// the etcd.
	host := start(t, filepath.Join(dir, "host"), "--controllers=*,-garbage-collector-controller")
	etcd := "unix://" + filepath.Join(host.dataDir, "etcd", "etcd.sock")
	a := start(t, filepath.Join(dir, "a"), "--etcd-servers", etcd)
	b := start(t, filepath.Join(dir, "b"), "--etcd-servers", etcd)
	c := host.clientset()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()

	// collecting is p's kubestore_garbage_collector_leader: 1 while it
	// holds the election and collects.
	collecting := func(p *proc) bool {
		raw, err := p.clientset().CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
		return err == nil && strings.Contains(string(raw), "\nkubestore_garbage_collector_leader 1")
	}
	leads := func(p *proc) bool { return strings.Contains(p.logs(), "Garbage collector leads") }
	if !eventually(30*time.Second, func() bool { return collecting(a) || collecting(b) }) {
		t.Fatal("no collector won the election")
	}
	if leads(a) && leads(b) || collecting(a) && collecting(b) {
		t.Fatal("both processes lead")
	}
	leader, other := a, b
	if collecting(b) {
		leader, other = b, a
	}
	if !leads(leader) {
		t.Errorf("the collecting process did not log that it leads")
	}
	family(t, c, "default", "one", 5)
	c.CoreV1().ConfigMaps("default").Delete(ctx, "one", metav1.DeleteOptions{})
	if !eventually(30*time.Second, func() bool { return len(childrenOf(t, c, "default", "one")) == 0 }) {
		t.Fatal("the leader did not collect")
	}
	// Holding the election writes nothing: no Lease object stands for it.
	if _, err := c.CoordinationV1().Leases("kube-system").Get(ctx, "kubestore-garbage-collector", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the collector's old Lease: %v, want NotFound", err)
	}

	leader.kill()
	family(t, c, "default", "two", 5)
	c.CoreV1().ConfigMaps("default").Delete(ctx, "two", metav1.DeleteOptions{})
	// The killed leader's etcd lease expires (10 s) before the other leads.
	if !eventually(60*time.Second, func() bool { return len(childrenOf(t, c, "default", "two")) == 0 }) {
		t.Fatal("after the leader was killed, nobody collected")
	}
	if !leads(other) || !collecting(other) {
		t.Errorf("the surviving process did not take the election over")
	}
}

func writeTemp(t *testing.T, data string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "obj.yaml")
	if err := os.WriteFile(f, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}
