package registry

import (
	"testing"
	"time"

	openapinamer "k8s.io/apiserver/pkg/endpoints/openapi"
	genericapiserver "k8s.io/apiserver/pkg/server"
	restclient "k8s.io/client-go/rest"
	"k8s.io/component-base/compatibility"

	"github.com/kubestore/kubestore/cacher"
	"github.com/kubestore/kubestore/cacher/cachertest"
	"github.com/kubestore/kubestore/server/openapi"
)

// openTestBackend starts a real embedded etcd on a temp dir.
func openTestBackend(t *testing.T) *cacher.Backend {
	t.Helper()
	return cachertest.Open(t)
}

// newTestStorage builds every store on a real embedded etcd and watch
// caches, and waits until each cache is ready.
func newTestStorage(t *testing.T) (*API, *Storage) {
	t.Helper()
	backend := openTestBackend(t)
	api, err := New()
	if err != nil {
		t.Fatal(err)
	}
	s, err := api.NewStorage(backend.RESTOptionsGetter(cacher.Resources{Scheme: api.Scheme(), Serializer: api.Codecs(), KeyPrefixes: api.KeyPrefixes()}), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Destroy)
	deadline := time.Now().Add(30 * time.Second)
	for d, st := range s.stores {
		for st.ReadinessCheck() != nil {
			if time.Now().After(deadline) {
				t.Fatalf("watch cache of %s not ready within 30s: %v", d.gvr.Resource, st.ReadinessCheck())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return api, s
}

// TestDestroyAfterInstall is the start that fails after the stores are
// installed and before the generic server runs: Destroy must still stop
// every watch cache, and the generic server destroying the same stores
// afterwards must be harmless.
func TestDestroyAfterInstall(t *testing.T) {
	api, s := newTestStorage(t)
	c := genericapiserver.NewConfig(api.Codecs())
	c.EffectiveVersion = compatibility.NewEffectiveVersionFromString("1.37.2", "", "")
	// Nothing is served: the addresses are never dialled.
	c.ExternalAddress = "127.0.0.1:6443"
	c.LoopbackClientConfig = &restclient.Config{Host: "https://127.0.0.1:6443"}
	c.OpenAPIV3Config = genericapiserver.DefaultOpenAPIV3Config(openapi.GetOpenAPIDefinitions, openapinamer.NewDefinitionNamer(api.Scheme()))
	gs, err := c.Complete(nil).New("registry-test", genericapiserver.NewEmptyDelegate())
	if err != nil {
		t.Fatalf("building generic server: %v", err)
	}
	if err := s.Install(gs); err != nil {
		t.Fatalf("Install: %v", err)
	}

	s.Destroy()
	for d, st := range s.stores {
		if st.ReadinessCheck() == nil {
			t.Errorf("%s: watch cache still ready after Destroy", d.gvr.Resource)
		}
	}

	done := make(chan struct{})
	go func() {
		s.Destroy()
		gs.Destroy()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("destroying the stores a second time did not return")
	}
}
