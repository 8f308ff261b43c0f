package namespaces

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/kubestore/kubestore/cacher"
	"github.com/kubestore/kubestore/cacher/cachertest"
	"github.com/kubestore/kubestore/registry"
)

// The namespace controller empties a terminating namespace, built-in
// content and custom, and deletes it once nothing is left; meanwhile its
// status says what it waits for, in the conditions kube-controller-
// manager's namespace controller writes (issue 50: a namespace stayed
// Terminating with no word of why).
func TestNamespaceController(t *testing.T) {
	api, s := newTestStorage(t)
	namespaces, finalize, status, contents := s.NamespaceStores()
	waitReady(t, namespaces)
	for _, st := range contents {
		waitReady(t, st)
	}

	clusterCtx := genericapirequest.WithNamespace(t.Context(), "")
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "doomed"}}
	api.Scheme().Default(ns)
	if _, err := namespaces.(rest.Creater).Create(clusterCtx, ns, rest.ValidateAllObjectFunc, &metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating namespace doomed: %v", err)
	}
	nsCtx := genericapirequest.WithNamespace(t.Context(), "doomed")
	cmStore := storeOf(t, contents, corev1.Resource("configmaps"))
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm", Namespace: "doomed"}}
	if _, err := cmStore.Create(nsCtx, cm, rest.ValidateAllObjectFunc, &metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// The custom content stays, held by a finalizer, until the test has
	// seen the conditions say so.
	var customCalls atomic.Int32
	var hold atomic.Bool
	hold.Store(true)
	c := NewController(namespaces, finalize, status, contents, func(_ context.Context, namespace string) (Remaining, error) {
		if namespace != "doomed" {
			t.Errorf("custom content deleted in %q", namespace)
		}
		customCalls.Add(1)
		var left Remaining
		if hold.Load() {
			left.Add("widgets.example.com", []string{"example.com/hold"})
		}
		return left, nil
	})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		c.Run(ctx)
		close(done)
	}()
	defer func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("Run did not return after its context was cancelled")
		}
	}()

	if _, _, err := namespaces.Delete(clusterCtx, "doomed", rest.ValidateAllObjectFunc, nil); err != nil {
		t.Fatal(err)
	}
	want := map[corev1.NamespaceConditionType]string{
		corev1.NamespaceDeletionDiscoveryFailure: "False ResourcesDiscovered",
		corev1.NamespaceDeletionGVParsingFailure: "False ParsedGroupVersions",
		corev1.NamespaceDeletionContentFailure:   "False ContentDeleted",
		corev1.NamespaceContentRemaining:         "True SomeResourcesRemain Some resources are remaining: widgets.example.com has 1 resource instances",
		corev1.NamespaceFinalizersRemaining:      "True SomeFinalizersRemain Some content in the namespace has finalizers remaining: example.com/hold in 1 resource instances",
	}
	var got map[corev1.NamespaceConditionType]string
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		obj, err := namespaces.Get(clusterCtx, "doomed", &metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got = map[corev1.NamespaceConditionType]string{}
		for _, c := range obj.(*corev1.Namespace).Status.Conditions {
			got[c.Type] = strings.TrimSpace(fmt.Sprintf("%s %s", c.Status, c.Reason))
			if c.Status == corev1.ConditionTrue {
				got[c.Type] += " " + c.Message
			}
			if c.LastTransitionTime.IsZero() {
				t.Errorf("condition %s has no transition time", c.Type)
			}
		}
		if reflect.DeepEqual(got, want) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the terminating namespace's conditions after 20 s:\n%v\nwant:\n%v", got, want)
		}
	}
	hold.Store(false)
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, err := namespaces.Get(clusterCtx, "doomed", &metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("namespace not deleted within 20s (last: %v)", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := cmStore.Get(nsCtx, "cm", &metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("config map of the deleted namespace: %v, want NotFound", err)
	}
	if n := customCalls.Load(); n < 2 {
		t.Errorf("custom content deleted %d times, want at least 2", n)
	}
}

// What is left is told per resource, as upstream's message says it, and
// by finalizer; a failure to delete turns ContentFailure true.
func TestDeletionConditions(t *testing.T) {
	var left Remaining
	left.Add("pods.", nil)
	left.Add("pods.", []string{"a/f"})
	left.Add("widgets.example.com", []string{"a/f", "b/g"})
	conds := deletionConditions(left, errors.New("deleting pods p: boom"))
	got := map[corev1.NamespaceConditionType]string{}
	for _, c := range conds {
		got[c.Type] = fmt.Sprintf("%s %s: %s", c.Status, c.Reason, c.Message)
	}
	want := map[corev1.NamespaceConditionType]string{
		corev1.NamespaceDeletionDiscoveryFailure: "False ResourcesDiscovered: All resources successfully discovered",
		corev1.NamespaceDeletionGVParsingFailure: "False ParsedGroupVersions: All legacy kube types successfully parsed",
		corev1.NamespaceDeletionContentFailure:   "True ContentDeletionFailed: Failed to delete all resource types, 1 remaining: deleting pods p: boom",
		corev1.NamespaceContentRemaining:         "True SomeResourcesRemain: Some resources are remaining: pods. has 2 resource instances, widgets.example.com has 1 resource instances",
		corev1.NamespaceFinalizersRemaining:      "True SomeFinalizersRemain: Some content in the namespace has finalizers remaining: a/f in 2 resource instances, b/g in 1 resource instances",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("conditions:\n%v\nwant:\n%v", got, want)
	}
}

// newTestStorage builds the registry's stores on a real embedded etcd and
// watch caches.
func newTestStorage(t *testing.T) (*registry.API, *registry.Storage) {
	t.Helper()
	backend := cachertest.Open(t)
	api, err := registry.New()
	if err != nil {
		t.Fatal(err)
	}
	s, err := api.NewStorage(backend.RESTOptionsGetter(cacher.Resources{Scheme: api.Scheme(), Serializer: api.Codecs(), KeyPrefixes: api.KeyPrefixes()}), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Destroy)
	return api, s
}

// waitReady waits until the watch cache of store is ready.
func waitReady(t *testing.T, store any) {
	t.Helper()
	r, ok := store.(rest.StorageWithReadiness)
	if !ok {
		t.Fatalf("%T has no readiness check", store)
	}
	deadline := time.Now().Add(30 * time.Second)
	for r.ReadinessCheck() != nil {
		if time.Now().After(deadline) {
			t.Fatalf("watch cache of %T not ready within 30s: %v", store, r.ReadinessCheck())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// storeOf is the store of resource among stores.
func storeOf(t *testing.T, stores []*genericregistry.Store, resource schema.GroupResource) *genericregistry.Store {
	t.Helper()
	for _, st := range stores {
		if st.DefaultQualifiedResource == resource {
			return st
		}
	}
	t.Fatalf("no store of %s", resource)
	return nil
}
