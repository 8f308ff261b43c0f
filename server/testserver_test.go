package server_test

import (
	"context"
	"io"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubestore/kubestore/cacher"
	"github.com/kubestore/kubestore/config"
	"github.com/kubestore/kubestore/memory"
	"github.com/kubestore/kubestore/server"
	"github.com/kubestore/kubestore/test/ports"
)

// testServer is the whole stack, in-process: embedded etcd (or an external
// one) in a temp dir, the cachers, the API server on a free loopback port.
type testServer struct {
	t       *testing.T
	cfg     config.Config
	backend *cacher.Backend
	server  *server.Server
	rest    *rest.Config
	client  kubernetes.Interface
	dynamic dynamic.Interface
	stop    func()
}

// testConfig is the default configuration on a temp data dir and port 0.
func testConfig(t *testing.T) config.Config {
	t.Helper()
	cfg := config.Default()
	// t.TempDir paths can exceed the 107 bytes a unix socket path may have.
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cfg.DataDir = dir
	cfg.Server.SecurePort = 0
	cfg.Server.ShutdownTimeout = config.Duration{Duration: 10 * time.Second}
	// The tests count the ConfigMaps they create: no kube-root-ca.crt in
	// every namespace (test/e2e runs the publisher). They bind pods to
	// nodes no kubelet registers: no pod garbage collector, which would
	// delete them after 40 s (TestPodGCCollectsPodsOfMissingNodes runs it).
	cfg.Server.Controllers = []string{"*", "-" + config.ControllerRootCAPublisher, "-" + config.ControllerPodGC}
	return cfg
}

// complete completes cfg, as the commands do before they build anything.
func complete(t *testing.T, cfg config.Config) config.Completed {
	t.Helper()
	cc, err := cfg.Complete()
	if err != nil {
		t.Fatalf("completing the configuration: %v", err)
	}
	return cc
}

// startServer starts the stack with cfg and waits until /readyz is ok. It
// is stopped at the end of the test.
func startServer(t *testing.T, cfg config.Config) *testServer {
	t.Helper()
	cc := complete(t, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	backend, err := cacher.Open(ctx, cc)
	if err != nil {
		cancel()
		t.Fatalf("opening storage: %v", err)
	}
	srv, err := newServer(cc, backend)
	if err != nil {
		cancel()
		backend.Close()
		t.Fatalf("building server: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()

	ts := &testServer{t: t, cfg: cfg, backend: backend, server: srv}
	stopped := false
	ts.stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("server stopped with: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Errorf("server did not stop within 30s")
		}
		backend.Close()
	}
	t.Cleanup(ts.stop)

	ts.rest, err = clientcmd.BuildConfigFromFlags("", srv.Kubeconfig())
	if err != nil {
		t.Fatalf("reading kubeconfig: %v", err)
	}
	ts.rest.QPS, ts.rest.Burst = -1, -1
	ts.client = kubernetes.NewForConfigOrDie(ts.rest)
	ts.dynamic = dynamic.NewForConfigOrDie(ts.rest)
	ts.waitReady(done)
	return ts
}

// get is the admin's GET of path, a non-resource URL such as
// /mirrorz?verbose or /metrics: its status code and body.
func (ts *testServer) get(path string) (int, string, error) {
	hc, err := rest.HTTPClientFor(ts.rest)
	if err != nil {
		return 0, "", err
	}
	res, err := hc.Get(ts.rest.Host + path)
	if err != nil {
		return 0, "", err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	return res.StatusCode, string(body), err
}

func (ts *testServer) waitReady(done <-chan error) {
	ts.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case err := <-done:
			ts.t.Fatalf("server stopped before ready: %v", err)
		default:
		}
		var status int
		ts.client.CoreV1().RESTClient().Get().AbsPath("/readyz").Do(context.Background()).StatusCode(&status)
		if status == http.StatusOK {
			return
		}
		if time.Now().After(deadline) {
			ts.t.Fatalf("server not ready within 60s (last /readyz status %d)", status)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// eventually polls cond until it holds or the timeout expires.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var lastErr error
	for time.Now().Before(deadline) {
		ok, err := cond()
		if ok {
			return
		}
		lastErr = err
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s: not true within %s (last error: %v)", what, timeout, lastErr)
}

// openBackend opens the storage of cfg for a test that builds the server
// itself; it is closed at the end of the test.
func openBackend(t *testing.T, cfg config.Config) *cacher.Backend {
	t.Helper()
	backend, err := cacher.Open(t.Context(), complete(t, cfg))
	if err != nil {
		t.Fatalf("opening storage: %v", err)
	}
	t.Cleanup(backend.Close)
	return backend
}

// newServer opens the listeners of cc and builds the server on them, as
// kubestore serve does.
func newServer(cc config.Completed, backend *cacher.Backend) (*server.Server, error) {
	ln, err := server.Listen(cc.Config().Server)
	if err != nil {
		return nil, err
	}
	return server.New(cc, backend, ln, memory.Limits{})
}

// freePort is a loopback TCP port nothing listens on now, for a listener a
// test hands its number to (an etcd's, a site's peer port).
func freePort(t *testing.T) int {
	t.Helper()
	return ports.Free(t, 1)[0]
}
