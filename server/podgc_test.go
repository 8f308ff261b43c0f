package server_test

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kubestore/kubestore/config"
	"github.com/kubestore/kubestore/server"
)

// A pod bound to a node that does not exist is marked Failed with the
// DisruptionTarget condition and deleted once the node has been missing
// for the quarantine, as kube-controller-manager's podgc does (issue 50:
// such a pod, deleted, stayed Terminating and held its namespace); one
// whose node registers within the quarantine, and one on a node that
// exists, stay. Two kubestores on one etcd collect side by side.
func TestPodGCCollectsPodsOfMissingNodes(t *testing.T) {
	server.SetPodGCTiming(300*time.Millisecond, 3*time.Second)
	t.Cleanup(func() { server.SetPodGCTiming(20*time.Second, 40*time.Second) })
	ext := startExternalEtcd(t)
	var servers []*testServer
	for range 2 {
		cfg := testConfig(t)
		cfg.Server.Controllers = []string{"*", "-" + config.ControllerRootCAPublisher}
		ext.configure(&cfg)
		servers = append(servers, startServer(t, cfg))
	}
	ctx := t.Context()
	cs := servers[0].client
	pods := cs.CoreV1().Pods("default")
	if _, err := cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "real"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	w, err := pods.Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	for name, node := range map[string]string{"kept": "real", "orphan": "ghost", "orphan-deleted": "ghost-2", "late": "late-node"} {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
		if _, err := pods.Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// Deleted, it waits for a kubelet that does not exist.
	if err := pods.Delete(ctx, "orphan-deleted", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	if _, err := servers[1].client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "late-node"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	last := map[string]*corev1.Pod{}
	deleted := map[string]bool{}
	timeout := time.After(30 * time.Second)
	for !deleted["orphan"] || !deleted["orphan-deleted"] {
		select {
		case ev := <-w.ResultChan():
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				t.Fatalf("watch: %v", ev.Object)
			}
			if ev.Type == watch.Deleted {
				deleted[p.Name] = true
			} else {
				last[p.Name] = p
			}
		case <-timeout:
			t.Fatalf("the pods of missing nodes were not collected in 30 s (deleted: %v)", deleted)
		}
	}
	for _, name := range []string{"orphan", "orphan-deleted"} {
		p := last[name]
		var cond *corev1.PodCondition
		for i := range p.Status.Conditions {
			if p.Status.Conditions[i].Type == corev1.DisruptionTarget {
				cond = &p.Status.Conditions[i]
			}
		}
		if p.Status.Phase != corev1.PodFailed || cond == nil || cond.Status != corev1.ConditionTrue || cond.Reason != "DeletionByPodGC" {
			t.Errorf("%s before its delete: phase %s, condition %+v; want Failed, DisruptionTarget True DeletionByPodGC", name, p.Status.Phase, cond)
		}
	}
	// Three quarantines on: the others are there.
	time.Sleep(9 * time.Second)
	for _, name := range []string{"kept", "late"} {
		if _, err := pods.Get(ctx, name, metav1.GetOptions{}); err != nil {
			t.Errorf("%s, on a node that exists: %v", name, err)
		}
		if deleted[name] {
			t.Errorf("%s was deleted", name)
		}
	}
	if _, err := pods.Get(ctx, "orphan", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("orphan after its delete: %v", err)
	}
}
