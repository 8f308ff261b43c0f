package site

import (
	"context"
	"sync/atomic"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"

	"github.com/kubestore/kubestore/access"
	"github.com/kubestore/kubestore/cacher/cachertest"
	"github.com/kubestore/kubestore/config"
	"github.com/kubestore/kubestore/datadir"
)

// The member's own health check asks its server who leads, never etcd's
// Status RPC: etcd 3.7 panics on a Status that races the member's removal
// (etcd-io/etcd#21966), and a removed member then died with a panic
// instead of saying it was removed (TestSiteFounderRemovedRejoins, once).
func TestHealthAsksNoStatusRPC(t *testing.T) {
	var dir datadir.Dir
	b := cachertest.Open(t, func(c *config.Config) { dir = datadir.Dir(c.DataDir) })
	if _, err := access.LoadPKI(dir, []string{"127.0.0.1"}); err != nil {
		t.Fatal(err)
	}
	var statuses atomic.Int32
	count := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if method == "/etcdserverpb.Maintenance/Status" {
			statuses.Add(1)
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	cfg := clientv3.Config{Endpoints: b.Endpoints(), DialOptions: []grpc.DialOption{grpc.WithUnaryInterceptor(count)}}
	c, err := clientv3.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// The interceptor sees a Status when one is sent.
	if StatusLeader(c)(t.Context()) == 0 || statuses.Load() != 1 {
		t.Fatalf("an operator's StatusLeader: %d Status RPCs, want 1 naming a leader", statuses.Load())
	}
	statuses.Store(0)
	h := NewHealth(dir, c, b.Leader)
	h.update(t.Context())
	if n := statuses.Load(); n != 0 {
		t.Errorf("the member's health check sent %d Status RPCs to its own etcd, want 0", n)
	}
	if err := h.Check(nil); err != nil {
		t.Errorf("a member with a leader: %v", err)
	}
}
