package namespaces

import (
	"context"
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
// content and custom, and deletes it once nothing is left.
func TestNamespaceController(t *testing.T) {
	api, s := newTestStorage(t)
	namespaces, finalize, contents := s.NamespaceStores()
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

	// The custom content takes two rounds to go.
	var customCalls atomic.Int32
	c := NewController(namespaces, finalize, contents, func(_ context.Context, namespace string) (int, error) {
		if namespace != "doomed" {
			t.Errorf("custom content deleted in %q", namespace)
		}
		if customCalls.Add(1) == 1 {
			return 1, nil
		}
		return 0, nil
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
