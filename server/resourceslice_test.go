package server_test

import (
	"testing"
	"time"

	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

func nodeSlice(name, node, driver string) *resourcev1.ResourceSlice {
	s := &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: resourcev1.ResourceSliceSpec{
		Driver: driver, Pool: resourcev1.ResourcePool{Name: name, ResourceSliceCount: 1},
		Devices: []resourcev1.Device{{Name: "dev-0"}},
	}}
	if node != "" {
		s.Spec.NodeName = &node
	} else {
		s.Spec.AllNodes = new(true)
	}
	return s
}

// What the kubelet's DRA manager does at start, in protobuf: list its
// node's slices by spec.nodeName and delete them, leaving other nodes'.
// spec.driver and spec.pool.name select too, and a watch on one node sees
// only that node's slices.
func TestResourceSlicesOfANode(t *testing.T) {
	ts := startServer(t, testConfig(t))
	ctx := t.Context()
	cfg := rest.CopyConfig(ts.rest)
	cfg.ContentType = runtime.ContentTypeProtobuf
	cfg.AcceptContentTypes = runtime.ContentTypeProtobuf
	slices := kubernetes.NewForConfigOrDie(cfg).ResourceV1().ResourceSlices()

	w, err := slices.Watch(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=node-a"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	for _, s := range []*resourcev1.ResourceSlice{
		nodeSlice("a-gpu", "node-a", "gpu.example.com"), nodeSlice("a-net", "node-a", "net.example.com"),
		nodeSlice("b-gpu", "node-b", "gpu.example.com"), nodeSlice("shared", "", "net.example.com"),
	} {
		created, err := slices.Create(ctx, s, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if created.Generation != 1 {
			t.Errorf("%s: generation %d, want 1", s.Name, created.Generation)
		}
	}
	for _, tc := range []struct {
		selector string
		want     int
	}{
		{"spec.nodeName=node-a", 2},
		{"spec.nodeName=node-b", 1},
		{"spec.driver=net.example.com", 2},
		{"spec.pool.name=shared", 1},
		{"spec.nodeName=node-a,spec.driver=gpu.example.com", 1},
	} {
		list, err := slices.List(ctx, metav1.ListOptions{FieldSelector: tc.selector})
		if err != nil || len(list.Items) != tc.want {
			t.Errorf("%s: %v, %d slices, want %d", tc.selector, err, len(list.Items), tc.want)
		}
	}
	if _, err := slices.List(ctx, metav1.ListOptions{FieldSelector: "spec.devices=x"}); err == nil {
		t.Error("spec.devices is selectable")
	}
	var added []string
	for len(added) < 2 {
		select {
		case ev := <-w.ResultChan():
			if ev.Type != watch.Added {
				t.Fatalf("watch event %s %v", ev.Type, ev.Object)
			}
			added = append(added, ev.Object.(*resourcev1.ResourceSlice).Name)
		case <-time.After(10 * time.Second):
			t.Fatalf("node-a's watch saw %v", added)
		}
	}
	if added[0] != "a-gpu" || added[1] != "a-net" {
		t.Errorf("node-a's watch saw %v", added)
	}

	if err := slices.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{FieldSelector: "spec.nodeName=node-a"}); err != nil {
		t.Fatal(err)
	}
	list, err := slices.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, s := range list.Items {
		left = append(left, s.Name)
	}
	if len(left) != 2 || left[0] != "b-gpu" || left[1] != "shared" {
		t.Errorf("after deleting node-a's slices: %v", left)
	}
}
