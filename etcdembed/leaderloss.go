package etcdembed

import (
	"context"
	"errors"
	"sync"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"go.etcd.io/etcd/server/v3/etcdserver"
	"go.etcd.io/etcd/server/v3/etcdserver/txn"
	"google.golang.org/grpc"
)

// leaderLossRetry is the pause between the reads that wait for a new
// leader's commit, when one fails at once.
const leaderLossRetry = 100 * time.Millisecond

// errLeaderLost is the cause of a write's end by the leaderLoss guard.
var errLeaderLost = errors.New("the leader the write was forwarded to is gone")

// leaderLoss answers the writes a site's member forwarded to a leader that
// died. A follower forwards a proposal to its leader (raft's MsgProp), and
// if the leader dies before it replicates it, the proposal is lost: etcd
// answers only at its request timeout, 5 s plus twice the election
// timeout (7 s with the defaults; etcdserver's
// processInternalRaftRequestOnce). A writer that waits for its answer (a
// kubelet, kubectl, a controller) was held that long after a kill -9 of
// the leader, though the site had a new one after 1-2 s (issue 48).
//
// A new leader commits the entries of earlier terms it holds with the
// first entry of its own term, before it answers a linearizable read. So
// once the member knows a new leader and a linearizable read has
// returned, a write that began before the change and is still unanswered
// was lost with the old leader, or was forwarded to the new one in the
// moment of the change. For the latter the guard waits a heartbeat
// interval and reads again: the new leader has committed such a write by
// then on any network whose round trip is below the heartbeat (etcd's
// tuning guide asks that much of it). A write still unanswered then is
// ended with etcd's own answer at its timeout, "request timed out,
// possibly due to previous leader failure": like any timeout it leaves
// the write's outcome unknown to the client, whose retry settles it (a
// create is then answered AlreadyExists, an update Conflict), but it
// comes seconds sooner.
type leaderLoss struct {
	srv *etcdserver.EtcdServer
	mu  sync.Mutex
	// settled is cancelled once a leader change after its creation is
	// settled as above.
	settled context.Context
	settle  context.CancelFunc
}

func newLeaderLoss(srv *etcdserver.EtcdServer) *leaderLoss {
	l := &leaderLoss{srv: srv}
	l.settled, l.settle = context.WithCancel(context.Background())
	return l
}

// run settles each leader change until closing is closed.
func (l *leaderLoss) run(closing <-chan struct{}) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-closing
		cancel()
	}()
	changed := l.srv.LeaderChangedNotify()
	for {
		select {
		case <-ctx.Done():
			return
		case <-changed:
		}
		// The next change is taken before this one is settled: etcd's
		// notifier hands out a new channel at each change.
		changed = l.srv.LeaderChangedNotify()
		l.mu.Lock()
		settle := l.settle
		l.settled, l.settle = context.WithCancel(context.Background())
		l.mu.Unlock()
		if !l.read(ctx) || !sleepCtx(ctx, time.Duration(l.srv.Cfg.TickMs)*time.Millisecond) || !l.read(ctx) {
			return // the member stops: its clients end what is in flight
		}
		settle()
	}
}

// read waits for a linearizable read of the member, tried again until it
// returns or ctx ends; it reports whether it returned.
func (l *leaderLoss) read(ctx context.Context) bool {
	for {
		rctx, cancel := context.WithTimeout(ctx, l.srv.RequestTimeout())
		err := l.srv.LinearizableReadNotify(rctx)
		cancel()
		if err == nil {
			return true
		}
		if !sleepCtx(ctx, leaderLossRetry) {
			return false
		}
	}
}

// sleepCtx waits for d and reports whether ctx is still live.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}

// UnaryClientInterceptor ends a write still unanswered once a leader
// change after its start is settled.
func (l *leaderLoss) UnaryClientInterceptor() grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if !proposes(req) {
			return invoker(ctx, method, req, reply, cc, opts...)
		}
		l.mu.Lock()
		settled := l.settled
		l.mu.Unlock()
		ctx, cancel := context.WithCancelCause(ctx)
		defer cancel(nil)
		stop := context.AfterFunc(settled, func() { cancel(errLeaderLost) })
		defer stop()
		err := invoker(ctx, method, req, reply, cc, opts...)
		if err != nil && errors.Is(context.Cause(ctx), errLeaderLost) {
			return rpctypes.ErrGRPCTimeoutDueToLeaderFail
		}
		return err
	}
}

// proposes reports whether req is a raft proposal, answered once the
// leader committed it, rather than a read.
func proposes(req any) bool {
	switch r := req.(type) {
	case *pb.PutRequest, *pb.DeleteRangeRequest, *pb.LeaseGrantRequest, *pb.LeaseRevokeRequest:
		return true
	case *pb.TxnRequest:
		return !txn.IsTxnReadonly(r)
	}
	return false
}
