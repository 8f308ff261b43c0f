package etcdembed

import (
	"context"
	"errors"
	"strings"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/kubestore/kubestore/datadir"
)

// The guard refuses etcd's writes, and only them, while the file system
// has less free space than the reserve.
func TestDiskGuardRefusesWritesBelowTheReserve(t *testing.T) {
	dir := datadir.Dir(t.TempDir())
	if err := datadir.SyncDir(string(dir)); err != nil {
		t.Fatal(err)
	}
	g := newDiskGuard(dir, 1<<62, zap.NewNop()) // more than any disk
	g.dir = string(dir)
	g.update()
	err := g.Err()
	if !errors.Is(err, ErrDiskRefused) || !strings.Contains(err.Error(), "--etcd-reserved-disk-bytes") {
		t.Fatalf("with a reserve beyond the disk: %v, want a refusal naming --etcd-reserved-disk-bytes", err)
	}
	calls := 0
	invoke := func(context.Context, string, any, any, *grpc.ClientConn, ...grpc.CallOption) error {
		calls++
		return nil
	}
	intercept := g.UnaryClientInterceptor()
	put := &pb.TxnRequest{Success: []*pb.RequestOp{{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{Key: []byte("k")}}}}}
	read := &pb.TxnRequest{Success: []*pb.RequestOp{{Request: &pb.RequestOp_RequestRange{RequestRange: &pb.RangeRequest{Key: []byte("k")}}}}}
	for _, tc := range []struct {
		method string
		req    any
		writes bool
	}{
		{"/etcdserverpb.KV/Range", &pb.RangeRequest{}, false},
		{"/etcdserverpb.KV/Txn", read, false},
		{"/etcdserverpb.KV/Txn", put, true},
		{"/etcdserverpb.KV/Put", &pb.PutRequest{}, true},
		{"/etcdserverpb.KV/DeleteRange", &pb.DeleteRangeRequest{}, true},
		{"/etcdserverpb.KV/Compact", &pb.CompactionRequest{}, true},
		{"/etcdserverpb.Lease/LeaseGrant", &pb.LeaseGrantRequest{}, true},
	} {
		before := calls
		err := intercept(t.Context(), tc.method, tc.req, nil, nil, invoke)
		if refused := err != nil; refused != tc.writes || (calls > before) == tc.writes {
			t.Errorf("%s %T: error %v, sent %v; want refused %v", tc.method, tc.req, err, calls > before, tc.writes)
		}
	}

	g.reserve = 0
	g.update()
	if err := g.Err(); err != nil {
		t.Fatalf("with no reserve: %v", err)
	}
	if err := intercept(t.Context(), "/etcdserverpb.KV/Txn", put, nil, nil, invoke); err != nil {
		t.Errorf("a write once space returned: %v", err)
	}
}

func TestMountReadOnlyReadsMountinfo(t *testing.T) {
	// The root of a test machine is writable, /proc is mounted without
	// "ro" on most; what matters is that the longest mount point wins.
	if mountReadOnly(t.TempDir()) {
		t.Error("the test's temporary directory is reported read-only")
	}
	if got := unescapeMount(`/mnt/a\040b`); got != "/mnt/a b" {
		t.Errorf("unescape: %q", got)
	}
}
