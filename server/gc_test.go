package server_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/kubestore/kubestore/config"
)

// ownedBy is an owner reference to a ConfigMap.
func ownedBy(cm *corev1.ConfigMap, block bool) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: cm.Name, UID: cm.UID, BlockOwnerDeletion: ptr.To(block)}
}

// A dependent re-adopted by a living owner while its old owner is deleted
// is never collected: the collector judges the object etcd holds, and
// deletes only the object it judged (upstream's attemptToDeleteItem and
// deleteObject). Each round deletes an owner of a hundred dependents while
// they are re-adopted, eight at a time; every dependent whose re-adoption
// was acknowledged must survive it.
func TestGarbageCollectorReadoption(t *testing.T) {
	ts := startServer(t, testConfig(t))
	ctx := t.Context()
	cms := ts.client.CoreV1().ConfigMaps("default")
	const rounds, n = 3, 100
	adopter, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "adopter"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	adopt := []byte(fmt.Sprintf(`{"metadata":{"ownerReferences":[{"apiVersion":"v1","kind":"ConfigMap","name":"adopter","uid":%q}]}}`, adopter.UID))
	lost, adopted := 0, 0
	for r := range rounds {
		old, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("old-%d", r)}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		names := make([]string, n)
		for i := range names {
			names[i] = fmt.Sprintf("dep-%d-%d", r, i)
			if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: names[i],
				OwnerReferences: []metav1.OwnerReference{ownedBy(old, false)}}}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(time.Second) // the collector's graph has them
		if err := cms.Delete(ctx, old.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		var survivors []string
		work := make(chan string)
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				for name := range work {
					if _, err := cms.Patch(ctx, name, types.MergePatchType, adopt, metav1.PatchOptions{}); err == nil {
						mu.Lock()
						survivors = append(survivors, name)
						mu.Unlock()
					}
				}
			})
		}
		for _, name := range names {
			work <- name
		}
		close(work)
		wg.Wait()
		time.Sleep(3 * time.Second)
		adopted += len(survivors)
		for _, name := range survivors {
			if _, err := cms.Get(ctx, name, metav1.GetOptions{}); apierrors.IsNotFound(err) {
				lost++
			}
		}
	}
	t.Logf("%d of %d dependents re-adopted before the collector deleted them", adopted, rounds*n)
	if lost > 0 {
		t.Errorf("%d dependents were collected after their re-adoption by a living owner was acknowledged", lost)
	}
}

// Foreground deletions whose blocking references form a cycle finish:
// the collector stops a dependent's references from blocking when one of
// its dependents waits for its own, as upstream does.
func TestGarbageCollectorBlockingCycle(t *testing.T) {
	ts := startServer(t, testConfig(t))
	ctx := t.Context()
	cms := ts.client.CoreV1().ConfigMaps("default")
	a, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "b", OwnerReferences: []metav1.OwnerReference{ownedBy(a, true)}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	a.OwnerReferences = []metav1.OwnerReference{ownedBy(b, true)}
	if _, err := cms.Update(ctx, a, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	if err := cms.Delete(ctx, "a", metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationForeground)}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "both objects of a cycle of blocking owners deleted", func() (bool, error) {
		_, errA := cms.Get(ctx, "a", metav1.GetOptions{})
		_, errB := cms.Get(ctx, "b", metav1.GetOptions{})
		return apierrors.IsNotFound(errA) && apierrors.IsNotFound(errB), fmt.Errorf("a: %v, b: %v", errA, errB)
	})
}

// What is collected and what is not, as upstream: a dependent whose owner
// never existed is; a cluster-scoped object naming a namespaced owner, an
// object whose owner is of a kind no one serves, and a mirrored object
// (its upstream's collector decides) are not. The copy is one a mirror
// made, below the API: no write through the API may claim to be one.
func TestGarbageCollectorWhatIsCollected(t *testing.T) {
	// The upstream's collector would collect it: its own is off.
	upCfg := testConfig(t)
	upCfg.Server.Controllers = append(upCfg.Server.Controllers, "-"+config.ControllerGarbageCollector)
	up := startServer(t, upCfg)
	ghost := metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "never", UID: "never-existed"}
	upNamespace(t, up, "mirrored")
	if _, err := up.client.CoreV1().ConfigMaps("mirrored").Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "mirrored",
		OwnerReferences: []metav1.OwnerReference{ghost}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cfg := edgeConfig(t, up, up.rest.Host, "edge-a")
	cfg.Mirror.Rules = append(cfg.Mirror.Rules, config.MirrorRule{Name: "mirrored", Resource: "configmaps", Namespaces: []string{"mirrored"}})
	ts := startServer(t, cfg)
	ctx := t.Context()
	cms := ts.client.CoreV1().ConfigMaps("default")
	mirroredCMs := ts.client.CoreV1().ConfigMaps("mirrored")
	eventually(t, 20*time.Second, "the upstream's ConfigMap mirrored", func() (bool, error) {
		_, err := mirroredCMs.Get(ctx, "mirrored", metav1.GetOptions{})
		return err == nil, err
	})
	owner, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owner"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, cm := range []*corev1.ConfigMap{
		{ObjectMeta: metav1.ObjectMeta{Name: "dangling", OwnerReferences: []metav1.OwnerReference{ghost}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "unknown-kind", OwnerReferences: []metav1.OwnerReference{
			{APIVersion: "example.com/v1", Kind: "Gadget", Name: "g", UID: "gadget-uid"}}}},
	} {
		if _, err := cms.Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ts.client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "owned-ns",
		OwnerReferences: []metav1.OwnerReference{ownedBy(owner, false)}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Its owner gone, a cluster-scoped dependent still stays: a namespaced
	// owner cannot be resolved from it.
	if err := cms.Delete(ctx, "owner", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "a dependent of an owner that never existed collected", func() (bool, error) {
		_, err := cms.Get(ctx, "dangling", metav1.GetOptions{})
		return apierrors.IsNotFound(err), err
	})
	time.Sleep(3 * time.Second)
	if _, err := cms.Get(ctx, "unknown-kind", metav1.GetOptions{}); err != nil {
		t.Errorf("configmap unknown-kind: %v, want it kept", err)
	}
	if _, err := mirroredCMs.Get(ctx, "mirrored", metav1.GetOptions{}); err != nil {
		t.Errorf("the mirrored configmap: %v, want it kept", err)
	}
	if _, err := ts.client.CoreV1().Namespaces().Get(ctx, "owned-ns", metav1.GetOptions{}); err != nil {
		t.Errorf("a cluster-scoped object naming a namespaced owner: %v, want it kept", err)
	}
}

// An idle collector reads no discovery: only a CustomResourceDefinition
// changes what it must watch, so it reads discovery after one changes, not
// every 30 s as upstream's (each read is a loopback request through the
// whole HTTP stack). A CRD created later is still watched: its custom
// resource, a dependent, is collected with its owner.
func TestGarbageCollectorReadsDiscoveryOnlyAfterCRDChanges(t *testing.T) {
	ts := startServer(t, testConfig(t))
	ctx := t.Context()
	reads := func() float64 { return ts.metric("kubestore_garbage_collector_discovery_reads_total", nil) }
	// Started: its first read (or the retries of it) done, 3 s quiet.
	before := reads()
	eventually(t, 30*time.Second, "the collector started", func() (bool, error) {
		time.Sleep(3 * time.Second)
		now := reads()
		quiet := now == before && now > 0
		before = now
		return quiet, nil
	})
	time.Sleep(35 * time.Second) // more than the collector's resync interval
	if got := reads() - before; got != 0 {
		t.Errorf("the collector read discovery %v times in 35 s of an idle server, want none", got)
	}

	createCRD(t, ts, devicesCRD(t))
	owner, err := ts.client.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "device-owner"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	devices := ts.dynamic.Resource(schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "devices"}).Namespace("default")
	dev := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "example.com/v1", "kind": "Device",
		"metadata": map[string]any{"name": "owned"}, "spec": map[string]any{"model": "m"}}}
	dev.SetOwnerReferences([]metav1.OwnerReference{ownedBy(owner, false)})
	if _, err := devices.Create(ctx, dev, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := ts.client.CoreV1().ConfigMaps("default").Delete(ctx, owner.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 45*time.Second, "the custom resource of a deleted owner collected", func() (bool, error) {
		_, err := devices.Get(ctx, "owned", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if reads() == before {
		t.Error("the collector did not read discovery after a CRD was created")
	}
}
