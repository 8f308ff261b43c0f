package cacher

import (
	"context"
	"fmt"
	"path"
	"sync"
	"time"

	etcdclient "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/kubernetes"
	"google.golang.org/grpc"
	"k8s.io/apiserver/pkg/storage/etcd3"
	"k8s.io/klog/v2"

	"github.com/kubestore/kubestore/config"
	"github.com/kubestore/kubestore/etcdembed"
	"github.com/kubestore/kubestore/records"
)

// healthTimeout bounds one /healthz or /readyz probe of etcd.
const healthTimeout = 2 * time.Second

// compactor is what etcd3.StartCompactorPerEndpoint returns.
type compactor interface {
	etcd3.Compactor
	Stop()
}

// Backend is the etcd behind every resource: the embedded server (or an
// external cluster), one client shared by all resources' stores and
// cachers, and one compactor.
type Backend struct {
	cfg       config.Completed
	etcd      config.Etcd
	embedded  *etcdembed.Server
	client    *kubernetes.Client
	compactor compactor
	closeOnce sync.Once
	// heap, when set, refuses creates above the memory limit's watermark.
	heap *HeapGuard
	// parts are what the watch caches' objects share (withSharedParts).
	parts *sharedParts
	// records are kubestore's own records on this etcd.
	records *records.Store
}

// GuardHeap makes every store built after it refuse creates while the
// live heap is above g's watermark; nil guards nothing.
func (b *Backend) GuardHeap(g *HeapGuard) { b.heap = g }

// Open starts the embedded etcd, or connects to --etcd-servers, and waits
// until etcd answers a read, at most --etcd-start-timeout. On error nothing
// is left running.
func Open(ctx context.Context, cc config.Completed) (_ *Backend, err error) {
	cfg := cc.Config()
	b := &Backend{cfg: cc, etcd: cfg.Etcd, parts: newSharedParts()}
	defer func() {
		if err != nil {
			b.Close()
		}
	}()

	endpoints := cfg.Etcd.Servers
	var dialOpts []grpc.DialOption
	if !cfg.Etcd.External() {
		if b.embedded, err = etcdembed.Start(ctx, cfg); err != nil {
			return nil, err
		}
		endpoints = b.embedded.Endpoints()
		// Writes stay off a full or read-only data directory, and below
		// the quota.
		dialOpts = append(dialOpts, b.embedded.WriteGuards())
	}
	if b.client, err = etcdembed.Dial(endpoints, cfg.Etcd, cfg.Log, dialOpts...); err != nil {
		return nil, err
	}
	if err := b.waitReady(ctx); err != nil {
		return nil, err
	}
	// With an interval of 0 the compactor does not compact but still
	// follows the compacted revision, which list-from-cache-snapshot needs.
	b.compactor = startCompactor(b.client.Client, cfg.Etcd.CompactionInterval.Duration)
	b.records = records.New(b.client.Client, b.etcd.Prefix)
	return b, nil
}

// waitReady retries a read until etcd answers.
func (b *Backend) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, b.etcd.StartTimeout.Duration)
	defer cancel()
	for {
		err := b.Check(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("etcd %v not ready within --%s %s: %w", b.client.Endpoints(), config.FlagEtcdStartTimeout, b.etcd.StartTimeout, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Check is a linearizable read through raft: it succeeds only when etcd
// has a leader and applies requests. It backs the etcd entries of /healthz
// and /readyz.
func (b *Backend) Check(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, healthTimeout)
	defer cancel()
	if err := b.Failure(); err != nil {
		return err
	}
	_, err := b.client.Client.Get(ctx, path.Join(b.etcd.Prefix, "health"))
	return err
}

// Failed is closed when the embedded etcd fails while serving; Failure then
// says why. It is never closed with an external cluster, whose members come
// and go without ending kubestore: the health checks report them.
func (b *Backend) Failed() <-chan struct{} {
	if b.embedded == nil {
		return nil
	}
	return b.embedded.Failed()
}

// Failure is the embedded etcd's fatal error once Failed is closed, else nil.
func (b *Backend) Failure() error {
	if b.embedded == nil {
		return nil
	}
	return b.embedded.Failure()
}

// Leader is the ID of the leader the embedded member knows, 0 for none
// (or with an external etcd): the server's own view, with no RPC
// (site.StatusLeader says why).
func (b *Backend) Leader() uint64 {
	if b.embedded == nil {
		return 0
	}
	return b.embedded.Leader()
}

// Endpoints are the etcd client URLs in use.
func (b *Backend) Endpoints() []string { return b.client.Endpoints() }

// Client is the shared etcd client: kubestore's own records (package
// records), a site's joins and health, operator tooling and tests use it.
func (b *Backend) Client() *etcdclient.Client { return b.client.Client }

// Records is the store of kubestore's own records on this etcd, one for
// the server, its update and its controllers.
func (b *Backend) Records() *records.Store { return b.records }

// Prefix is --etcd-prefix, under which every key of this store lives
// (kubestore's own records too: package records).
func (b *Backend) Prefix() string { return b.etcd.Prefix }

// Close stops the compactor, closes the client and then the embedded etcd,
// in that order, after every store built on it was destroyed. It is
// idempotent.
func (b *Backend) Close() {
	b.closeOnce.Do(func() {
		if b.compactor != nil {
			b.compactor.Stop()
		}
		if b.embedded != nil {
			b.embedded.Stopping()
		}
		if b.client != nil {
			if err := b.client.Close(); err != nil {
				klog.V(2).InfoS("Closing etcd client", "err", err)
			}
		}
		if b.embedded != nil {
			b.embedded.Close()
		}
	})
}
