package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/kubestore/kubestore/cacher"
	"github.com/kubestore/kubestore/config"
	"github.com/kubestore/kubestore/memory"
)

// lifecycleConfig turns on everything New can start: custom resources,
// the unix socket and the manifests applier.
func lifecycleConfig(t *testing.T) config.Completed {
	t.Helper()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	cfg.DataDir = dir
	cfg.Server.SecurePort = 0
	cfg.Server.ShutdownTimeout = config.Duration{Duration: 8 * time.Second}
	cfg.Server.UnixSocket = filepath.Join(dir, "api.sock")
	cfg.Server.ManifestsDir = filepath.Join(dir, "manifests")
	if err := os.Mkdir(cfg.Server.ManifestsDir, 0o700); err != nil {
		t.Fatal(err)
	}
	cc, err := cfg.Complete()
	if err != nil {
		t.Fatal(err)
	}
	return cc
}

// openLifecycleBackend is the storage of lifecycleConfig, closed when the
// test ends.
func openLifecycleBackend(t *testing.T) (config.Completed, *cacher.Backend) {
	t.Helper()
	cc := lifecycleConfig(t)
	backend, err := cacher.Open(t.Context(), cc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(backend.Close)
	return cc, backend
}

// build opens the listeners and builds a server on storage.
func build(t *testing.T, cc config.Completed, storage Storage) *Server {
	t.Helper()
	ln, err := Listen(cc.Config().Server)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(cc, storage, ln, memory.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	return srv
}

// goroutines are the stacks of every goroutine, keyed by where each was
// created (the "created by" line, without the creating goroutine's number).
func goroutines() map[string][]string {
	buf := make([]byte, 1<<20)
	for runtime.Stack(buf, true) == len(buf) {
		buf = make([]byte, 2*len(buf))
	}
	n := runtime.Stack(buf, true)
	out := map[string][]string{}
	for _, g := range strings.Split(string(buf[:n]), "\n\n") {
		if strings.Contains(g, "testing.tRunner(") || idleWorkqueue(g) || etcdWatchStream(g) {
			continue
		}
		key := "(no creator)"
		if _, after, ok := strings.Cut(g, "\ncreated by "); ok {
			key, _, _ = strings.Cut(after, " in goroutine")
		}
		out[key] = append(out[key], g)
	}
	return out
}

// idleWorkqueue reports whether g is one of the two goroutines of a
// client-go workqueue (its delay loop and its metrics loop). The
// controllers of the generic and the apiextensions servers create their
// queues when the server is built and shut them down only when the
// server runs and stops: a server built and never run keeps 2 idle
// goroutines per queue (9 queues), and nothing else. kube-apiserver ends
// the process on a failed start, and so does kubestore (or, as PID 1,
// replaces it): only a test, building servers in one process, sees them.
func idleWorkqueue(g string) bool {
	return strings.Contains(g, "workqueue.(*delayingType[...]).waitingLoop") ||
		strings.Contains(g, "workqueue.(*Typed[...]).updateUnfinishedWorkLoop")
}

// etcdWatchStream reports whether g belongs to a gRPC watch stream of the
// etcd client or its other end in the embedded server. A watch cancelled
// while etcd is still creating it can keep its stream open a while after
// the watch cache that asked for it stopped (the stream is etcd client's,
// shared by its watches); the watch cache's own goroutines are still
// counted.
func etcdWatchStream(g string) bool {
	for _, creator := range []string{"created by go.etcd.io/etcd/client/v3.", "created by go.etcd.io/etcd/server/v3/etcdserver/api/v3rpc.",
		"created by google.golang.org/grpc.", "created by context.(*cancelCtx).propagateCancel"} {
		if strings.Contains(g, creator) {
			return true
		}
	}
	return false
}

// settle waits until the goroutines created at each place are no more
// than in before, and fails showing those that outlive it after 20 s.
func settle(t *testing.T, what string, before map[string][]string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		var extra []string
		for key, gs := range goroutines() {
			if len(gs) > len(before[key]) {
				extra = append(extra, fmt.Sprintf("%d more created by %s, e.g.:\n%s", len(gs)-len(before[key]), key, gs[0]))
			}
		}
		if len(extra) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s, goroutines still run:\n%s", what, strings.Join(extra, "\n\n"))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// runUntilReady runs srv until /readyz of its own handler is ok, then
// stops it, and returns Run's result.
func runUntilReady(t *testing.T, srv *Server, stop func(cancel context.CancelFunc)) error {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	deadline := time.Now().Add(60 * time.Second)
	for srv.generic.Handler.NonGoRestfulMux == nil || !ready(srv) {
		select {
		case err := <-done:
			return err
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("not ready within 60s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	stop(cancel)
	select {
	case err := <-done:
		return err
	case <-time.After(60 * time.Second):
		t.Fatal("Run did not return within 60s of the stop")
		return nil
	}
}

func ready(srv *Server) bool {
	w := httptest.NewRecorder()
	srv.generic.Handler.ServeHTTP(w, httptest.NewRequest("GET", "/readyz", nil))
	return w.Code == 200
}

// warmUp starts and stops a whole server once: what upstream starts once
// per process (metrics, the feature gates' listeners) is then running, and
// the goroutines it returns are the floor the test's servers must leave.
func warmUp(t *testing.T, cc config.Completed, backend Storage) map[string][]string {
	t.Helper()
	srv := build(t, cc, backend)
	if err := runUntilReady(t, srv, func(cancel context.CancelFunc) { cancel() }); err != nil {
		t.Fatalf("Run: %v", err)
	}
	time.Sleep(time.Second)
	return goroutines()
}

// Every step of New that fails leaves nothing running: its goroutines
// (watch caches, informers, the custom-resources server) are gone, its
// listeners closed (the port can be bound again, the socket file is
// removed), and the storage can serve the next server.
func TestNewFailsCleanlyAtEachStep(t *testing.T) {
	cc, backend := openLifecycleBackend(t)
	before := warmUp(t, cc, backend)

	steps := []string{"feature-gates", "pki", "access", "storage", "custom-resources", "mirror", "generic-server", "install", "hooks"}
	seen := map[string]bool{}
	failAt = func(step string) error {
		seen[step] = true
		return nil
	}
	if err := runUntilReady(t, build(t, cc, backend), func(cancel context.CancelFunc) { cancel() }); err != nil {
		t.Fatalf("Run: %v", err)
	}
	failAt = nil
	for _, s := range steps {
		if !seen[s] {
			t.Fatalf("New has no step %q: the list here is out of date", s)
		}
	}

	for _, s := range steps {
		t.Run(s, func(t *testing.T) {
			injected := fmt.Errorf("injected failure after %s", s)
			failAt = func(step string) error {
				if step == s {
					return injected
				}
				return nil
			}
			defer func() { failAt = nil }()
			ln, err := Listen(cc.Config().Server)
			if err != nil {
				t.Fatal(err)
			}
			port := ln.tcp.Addr().(*net.TCPAddr).Port
			if _, err := New(cc, backend, ln, memory.Limits{}); !errors.Is(err, injected) {
				t.Fatalf("New = %v, want the injected failure", err)
			}
			settle(t, "after the failure", before)
			l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", fmt.Sprint(port)))
			if err != nil {
				t.Errorf("the port is still held: %v", err)
			} else {
				l.Close()
			}
			if _, err := os.Stat(cc.Config().Server.UnixSocket); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the unix socket file is left: %v", err)
			}
			if err := backend.Check(t.Context()); err != nil {
				t.Errorf("the storage does not answer: %v", err)
			}
		})
	}
}

// failingStorage is the real backend whose embedded etcd is made to fail:
// what a dying member reports, its failure, is set by the test.
type failingStorage struct {
	*cacher.Backend
	failed  chan struct{}
	failure error
}

func (f *failingStorage) Failed() <-chan struct{} { return f.failed }
func (f *failingStorage) Failure() error {
	select {
	case <-f.failed:
		return f.failure
	default:
		return nil
	}
}

// A storage failure while serving ends Run with that failure after the
// whole stop: every goroutine the server started is gone.
func TestRunEndsOnStorageFailure(t *testing.T) {
	cc, backend := openLifecycleBackend(t)
	before := warmUp(t, cc, backend)
	storage := &failingStorage{Backend: backend, failed: make(chan struct{}), failure: errors.New("embedded etcd failed: injected")}
	srv := build(t, cc, storage)
	err := runUntilReady(t, srv, func(context.CancelFunc) { close(storage.failed) })
	if err == nil || err.Error() != storage.failure.Error() {
		t.Fatalf("Run = %v, want the storage's failure", err)
	}
	settle(t, "after Run", before)
}
