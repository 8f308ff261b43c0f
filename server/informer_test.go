package server_test

import (
	"fmt"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	clientfeatures "k8s.io/client-go/features"
	clientfeaturestesting "k8s.io/client-go/features/testing"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
)

// A client-go informer syncs and then follows live changes, with WatchList
// on (client-go's default: one watch with sendInitialEvents) and off (LIST
// then WATCH). The server's request metrics tell which protocol was used.
func TestInformer(t *testing.T) {
	for _, watchList := range []bool{true, false} {
		t.Run(fmt.Sprintf("WatchListClient=%v", watchList), func(t *testing.T) {
			clientfeaturestesting.SetFeatureDuringTest(t, clientfeatures.WatchListClient, watchList)
			ts := startServer(t, testConfig(t))
			checkInformer(t, ts, watchList)
		})
	}
}

func checkInformer(t *testing.T, ts *testServer, watchList bool) {
	ctx := t.Context()
	ns := "informer"
	if _, err := ts.client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cms := ts.client.CoreV1().ConfigMaps(ns)
	for i := range 30 {
		if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%02d", i)}, Data: map[string]string{"v": "0"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	lists := func() float64 {
		return ts.metric("apiserver_request_total", map[string]string{"verb": "LIST", "resource": "configmaps"})
	}
	listsBefore := lists()

	factory := informers.NewSharedInformerFactoryWithOptions(ts.client, 0, informers.WithNamespace(ns))
	inf := factory.Core().V1().ConfigMaps().Informer()
	var mu sync.Mutex
	seen := map[string]string{} // name -> last event
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { mu.Lock(); seen[obj.(*corev1.ConfigMap).Name] = "add"; mu.Unlock() },
		UpdateFunc: func(_, obj any) { mu.Lock(); seen[obj.(*corev1.ConfigMap).Name] = "update"; mu.Unlock() },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			mu.Lock()
			seen[obj.(*corev1.ConfigMap).Name] = "delete"
			mu.Unlock()
		},
	}); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	factory.Start(stop)
	defer func() {
		close(stop)
		factory.Shutdown()
	}()
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("informer did not sync")
	}
	if n := len(inf.GetStore().List()); n != 30 {
		t.Fatalf("synced informer holds %d objects, want 30", n)
	}

	// Live changes.
	if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "live"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cms.Update(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm-00"}, Data: map[string]string{"v": "1"}}, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cms.Delete(ctx, "cm-01", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "informer sees live changes", func() (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		return seen["live"] == "add" && seen["cm-00"] == "update" && seen["cm-01"] == "delete", fmt.Errorf("seen %v", seen)
	})
	// The informer's store converges to exactly the server's state.
	want, err := cms.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var wantNames, gotNames []string
	for _, cm := range want.Items {
		wantNames = append(wantNames, cm.Name+"@"+cm.ResourceVersion)
	}
	for _, o := range inf.GetStore().List() {
		cm := o.(*corev1.ConfigMap)
		gotNames = append(gotNames, cm.Name+"@"+cm.ResourceVersion)
	}
	sort.Strings(wantNames)
	sort.Strings(gotNames)
	if !slices.Equal(gotNames, wantNames) {
		t.Errorf("informer store diverges from the server:\n got  %v\n want %v", gotNames, wantNames)
	}

	// The lists just above are the test's own: one LIST. Before them, an
	// informer with WatchList made no LIST at all.
	informerLists := lists() - listsBefore - 1
	if watchList && informerLists != 0 {
		t.Errorf("WatchList informer made %v LIST requests, want 0 (a watch with sendInitialEvents)", informerLists)
	}
	if !watchList && informerLists < 1 {
		t.Errorf("LIST+WATCH informer made no LIST request")
	}
}

// A node agent's watch on its pods (fieldSelector spec.nodeName=N) gets
// only that node's pods, and the watch cache serves it from its index.
func TestPodNodeNameIndex(t *testing.T) {
	ts := startServer(t, testConfig(t))
	ctx := t.Context()
	pods := ts.client.CoreV1().Pods("default")
	newPod := func(name, node string) {
		t.Helper()
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
		if _, err := pods.Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 3 {
		newPod(fmt.Sprintf("a-%d", i), "node-a")
		newPod(fmt.Sprintf("b-%d", i), "node-b")
	}
	sel := fields.OneTermEqualSelector("spec.nodeName", "node-a").String()

	indexed := func() float64 {
		return ts.metric("apiserver_cache_list_total", map[string]string{"resource": "pods", "index": "f:spec.nodeName"})
	}
	before := indexed()
	list, err := pods.List(ctx, metav1.ListOptions{FieldSelector: sel})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range list.Items {
		got = append(got, p.Name)
	}
	if !slices.Equal(got, []string{"a-0", "a-1", "a-2"}) {
		t.Errorf("list spec.nodeName=node-a: %v", got)
	}
	if d := indexed() - before; d != 1 {
		t.Errorf(`apiserver_cache_list_total{index="f:spec.nodeName"} rose by %v, want 1`, d)
	}

	w, err := pods.Watch(ctx, metav1.ListOptions{FieldSelector: sel, ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	newPod("b-3", "node-b")
	newPod("a-3", "node-a")
	if _, err := pods.Patch(ctx, "b-0", "application/merge-patch+json", []byte(`{"metadata":{"labels":{"x":"y"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := pods.Patch(ctx, "a-0", "application/merge-patch+json", []byte(`{"metadata":{"labels":{"x":"y"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	// Unscheduled-nowhere pods are deleted at once only without a node; a
	// bound pod is marked for deletion and its agent finishes it.
	if err := pods.Delete(ctx, "b-1", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	events := collect(t, w, 2, 10*time.Second)
	if !slices.Equal(events, []string{"ADDED a-3", "MODIFIED a-0"}) {
		t.Errorf("node-a watch got %v, want only node-a's pods", events)
	}
	assertQuiet(t, w, 500*time.Millisecond)

	// Other field selectors filter without an index.
	phase, err := pods.List(ctx, metav1.ListOptions{FieldSelector: "status.phase=Pending,spec.nodeName=node-b"})
	if err != nil {
		t.Fatal(err)
	}
	if len(phase.Items) != 3 { // b-0, b-2, b-3
		t.Errorf("status.phase=Pending,spec.nodeName=node-b: %d pods, want 3", len(phase.Items))
	}
	_, err = pods.List(ctx, metav1.ListOptions{FieldSelector: "spec.unknown=x"})
	if !apierrors.IsBadRequest(err) {
		t.Errorf("unsupported field selector: got %v, want 400", err)
	}
}

// A pod bound to a node is deleted gracefully: its node agent sees the
// deletion timestamp and finishes the deletion with grace period 0.
func TestPodGracefulDeletion(t *testing.T) {
	ts := startServer(t, testConfig(t))
	ctx := t.Context()
	pods := ts.client.CoreV1().Pods("default")
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "bound"}, Spec: corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
	created, err := pods.Create(ctx, p, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := pods.Watch(ctx, metav1.ListOptions{ResourceVersion: created.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if err := pods.Delete(ctx, "bound", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err := pods.Get(ctx, "bound", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("bound pod vanished at once: %v", err)
	}
	if got.DeletionTimestamp == nil || got.DeletionGracePeriodSeconds == nil || *got.DeletionGracePeriodSeconds != 30 {
		t.Fatalf("bound pod not marked for graceful deletion: %v %v", got.DeletionTimestamp, got.DeletionGracePeriodSeconds)
	}
	if err := pods.Delete(ctx, "bound", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	if _, err := pods.Get(ctx, "bound", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("after the agent's delete: %v", err)
	}
	var types []watch.EventType
	for _, e := range collect(t, w, 3, 5*time.Second) {
		types = append(types, watch.EventType(e[:len(e)-len(" bound")]))
	}
	// As upstream: marked (grace 30s), shortened to 0, then gone.
	if !slices.Equal(types, []watch.EventType{watch.Modified, watch.Modified, watch.Deleted}) {
		t.Errorf("watch saw %v, want MODIFIED (deletion timestamp), MODIFIED (grace 0), DELETED", types)
	}
}
