package etcdembed

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc"
	k8smetrics "k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

// settleTimeout bounds the reads that find out what became of a write
// etcd answered with "no space".
const settleTimeout = 5 * time.Second

// settleProgressInterval is how often the settling watch asks etcd
// whether it has caught up: etcd answers a progress request only once the
// watch has sent all of its history, and drops it before.
const settleProgressInterval = 20 * time.Millisecond

var noSpaceWrites = k8smetrics.NewCounterVec(&k8smetrics.CounterOpts{
	Namespace: "kubestore",
	Subsystem: "etcd",
	Name:      "nospace_writes_total",
	Help: "Writes etcd answered with \"database space exceeded\", by what kubestore then found in etcd: " +
		"stored=true (etcd applied it: acknowledged), false (not applied: refused), unknown (could not tell: refused).",
	StabilityLevel: k8smetrics.ALPHA,
}, []string{"stored"})

var registerSettleMetrics sync.Once

// settler makes a client tell the truth about the writes etcd answers with
// "no space". etcd checks its quota when it applies a request, against the
// database size of its last backend commit, and a request that crosses the
// quota there is applied and then answered ErrNoSpace
// (server/etcdserver/apply/quota.go; etcd-io/etcd#16659). The apiserver
// would report such a write as failed, and a client that retries finds it
// stored. The settler catches that answer below the client, learns from
// etcd's history whether this request's change was applied, and if so
// answers as etcd would have without the error: the write succeeded at the
// revision that holds it. A write that was not applied keeps the error.
//
// It settles what the apiserver's etcd3 store, the mirror and kubestore's
// own records write: a Put, or a Txn whose compares are all on one key and
// whose success branch is one Put of that key and whose failure branch
// only reads. Anything else keeps etcd's answer.
type settler struct {
	// seen is the highest revision in any answer this client has had. An
	// answer received before a request is sent holds a revision below the
	// one that request is applied at: it bounds the history to search.
	seen atomic.Int64
}

func newSettler() *settler {
	registerSettleMetrics.Do(func() { legacyregistry.MustRegister(noSpaceWrites) })
	return &settler{}
}

// UnaryClientInterceptor settles the requests that write.
func (s *settler) UnaryClientInterceptor() grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		below := s.seen.Load()
		err := invoker(ctx, method, req, reply, cc, opts...)
		if err == nil {
			if h, ok := reply.(interface{ GetHeader() *pb.ResponseHeader }); ok {
				s.see(h.GetHeader().GetRevision())
			}
			return err
		}
		if rpctypes.ErrorDesc(err) != rpctypes.ErrorDesc(rpctypes.ErrGRPCNoSpace) || errors.As(err, new(*quotaRefusal)) {
			return err
		}
		w, ok, counted := settleable(req)
		if !ok {
			if counted {
				noSpaceWrites.WithLabelValues("unknown").Inc()
			}
			return err
		}
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
		defer cancel()
		at, prev, found, serr := w.find(sctx, cc, below)
		switch {
		case serr != nil:
			noSpaceWrites.WithLabelValues("unknown").Inc()
			return err
		case !found:
			noSpaceWrites.WithLabelValues("false").Inc()
			return err
		}
		noSpaceWrites.WithLabelValues("true").Inc()
		s.see(at.Revision)
		w.answer(reply, at, prev)
		return nil
	}
}

func (s *settler) see(rev int64) {
	for {
		old := s.seen.Load()
		if rev <= old || s.seen.CompareAndSwap(old, rev) {
			return
		}
	}
}

// write is the one conditional Put of a request.
type write struct {
	put  *pb.PutRequest
	cmps []*pb.Compare
}

// settleable is the write of req when the settler can settle it; counted
// is false for what does not store keys (a lease grant).
func settleable(req any) (w write, ok, counted bool) {
	switch r := req.(type) {
	case *pb.PutRequest:
		return write{put: r}, !r.IgnoreValue, true
	case *pb.TxnRequest:
		if len(r.Success) != 1 {
			return write{}, false, true
		}
		put := r.Success[0].GetRequestPut()
		if put == nil || put.IgnoreValue {
			return write{}, false, true
		}
		for _, op := range r.Failure {
			if op.GetRequestRange() == nil {
				return write{}, false, true
			}
		}
		for _, c := range r.Compare {
			if !bytes.Equal(c.Key, put.Key) || len(c.RangeEnd) != 0 {
				return write{}, false, true
			}
		}
		return write{put: put, cmps: r.Compare}, true, true
	}
	return write{}, false, false
}

// find looks for the write in the key's history after revision below: the
// first Put of its value made while its compares held. It returns the
// header of the revision that applied it and the key as it was before, or
// found false when etcd holds no such change up to now.
func (w write) find(ctx context.Context, cc *grpc.ClientConn, below int64) (at *pb.ResponseHeader, prev *mvccpb.KeyValue, found bool, err error) {
	kv := pb.NewKVClient(cc)
	now, err := kv.Range(ctx, &pb.RangeRequest{Key: w.put.Key})
	if err != nil {
		return nil, nil, false, err
	}
	// A compare on the key's mod revision names the revision the key must
	// still have had when the write applied.
	for _, c := range w.cmps {
		if c.Target == pb.Compare_MOD && c.Result == pb.Compare_EQUAL {
			below = max(below, c.GetModRevision())
		}
	}
	if below >= now.Header.Revision {
		return nil, nil, false, nil
	}
	for range 2 {
		var compacted int64
		at, prev, found, compacted, err = w.search(ctx, cc, kv, below, now.Header)
		if compacted == 0 {
			return at, prev, found, err
		}
		// What was compacted is older than the write: the compactor
		// compacts at a revision it read minutes before, and the write was
		// applied milliseconds ago. Search from the oldest revision kept.
		below = compacted
	}
	return nil, nil, false, rpctypes.ErrCompacted
}

// search replays the key's history from revision from+1 up to now's: it
// watches the key from there and keeps its state, starting from the key as
// it was at from. compacted is etcd's compacted revision when from is older.
func (w write) search(ctx context.Context, cc *grpc.ClientConn, kv pb.KVClient, from int64, now *pb.ResponseHeader) (at *pb.ResponseHeader, prev *mvccpb.KeyValue, found bool, compacted int64, err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := pb.NewWatchClient(cc).Watch(ctx)
	if err != nil {
		return nil, nil, false, 0, err
	}
	sent := make(chan error, 1)
	go func() { sent <- askProgress(ctx, stream, w.put.Key, from+1) }()
	var state *mvccpb.KeyValue
	read := false
	for {
		resp, err := stream.Recv()
		if err != nil {
			cancel()
			if serr := <-sent; serr != nil {
				err = serr
			}
			return nil, nil, false, 0, err
		}
		if resp.CompactRevision != 0 {
			return nil, nil, false, resp.CompactRevision, nil
		}
		if resp.Canceled {
			return nil, nil, false, 0, errors.New(resp.CancelReason)
		}
		if !read {
			// Once etcd accepted the watch, the key is readable at from.
			if state, err = keyAt(ctx, kv, w.put.Key, from); err != nil {
				return nil, nil, false, 0, err
			}
			read = true
		}
		for _, ev := range resp.Events {
			if ev.Kv.ModRevision > now.Revision {
				return nil, nil, false, 0, nil
			}
			if ev.Type == mvccpb.PUT && bytes.Equal(ev.Kv.Value, w.put.Value) && holds(w.cmps, state) {
				h := &pb.ResponseHeader{ClusterId: now.ClusterId, MemberId: now.MemberId, RaftTerm: now.RaftTerm, Revision: ev.Kv.ModRevision}
				return h, state, true, 0, nil
			}
			state = ev.Kv
			if ev.Type == mvccpb.DELETE {
				state = nil
			}
		}
		progress := len(resp.Events) == 0 && !resp.Created
		if progress && resp.Header.GetRevision() >= now.Revision {
			return nil, nil, false, 0, nil
		}
	}
}

// keyAt is the key at revision rev; nil when it did not exist.
func keyAt(ctx context.Context, kv pb.KVClient, key []byte, rev int64) (*mvccpb.KeyValue, error) {
	if rev == 0 {
		return nil, nil
	}
	resp, err := kv.Range(ctx, &pb.RangeRequest{Key: key, Revision: rev})
	if err != nil || len(resp.Kvs) == 0 {
		return nil, err
	}
	return resp.Kvs[0], nil
}

// askProgress opens a watch of key from revision from on stream, then asks
// for its progress until the context ends. etcd answers once the watch has
// sent every event up to its current revision.
func askProgress(ctx context.Context, stream pb.Watch_WatchClient, key []byte, from int64) error {
	create := &pb.WatchRequest{RequestUnion: &pb.WatchRequest_CreateRequest{
		CreateRequest: &pb.WatchCreateRequest{Key: key, StartRevision: from}}}
	if err := stream.Send(create); err != nil {
		return err
	}
	progress := &pb.WatchRequest{RequestUnion: &pb.WatchRequest_ProgressRequest{ProgressRequest: &pb.WatchProgressRequest{}}}
	t := time.NewTicker(settleProgressInterval)
	defer t.Stop()
	for {
		if err := stream.Send(progress); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// holds evaluates compares as etcd does (server/etcdserver/txn): a missing
// key has zero revisions, version and lease, and fails every value compare.
func holds(cmps []*pb.Compare, kv *mvccpb.KeyValue) bool {
	for _, c := range cmps {
		if !compareHolds(c, kv) {
			return false
		}
	}
	return true
}

func compareHolds(c *pb.Compare, kv *mvccpb.KeyValue) bool {
	if kv == nil {
		if c.Target == pb.Compare_VALUE {
			return false
		}
		kv = &mvccpb.KeyValue{}
	}
	var r int
	switch c.Target {
	case pb.Compare_VALUE:
		r = bytes.Compare(kv.Value, c.GetValue())
	case pb.Compare_CREATE:
		r = cmp.Compare(kv.CreateRevision, c.GetCreateRevision())
	case pb.Compare_MOD:
		r = cmp.Compare(kv.ModRevision, c.GetModRevision())
	case pb.Compare_VERSION:
		r = cmp.Compare(kv.Version, c.GetVersion())
	case pb.Compare_LEASE:
		r = cmp.Compare(kv.Lease, c.GetLease())
	}
	switch c.Result {
	case pb.Compare_EQUAL:
		return r == 0
	case pb.Compare_NOT_EQUAL:
		return r != 0
	case pb.Compare_GREATER:
		return r > 0
	case pb.Compare_LESS:
		return r < 0
	}
	return false
}

// answer fills reply as etcd answers the write when it succeeds at header's
// revision, the key having been prev before.
func (w write) answer(reply any, h *pb.ResponseHeader, prev *mvccpb.KeyValue) {
	put := &pb.PutResponse{Header: h}
	if w.put.PrevKv {
		put.PrevKv = prev
	}
	switch r := reply.(type) {
	case *pb.PutResponse:
		r.Header, r.PrevKv = put.Header, put.PrevKv
	case *pb.TxnResponse:
		r.Header = h
		r.Succeeded = true
		r.Responses = []*pb.ResponseOp{{Response: &pb.ResponseOp_ResponsePut{ResponsePut: put}}}
	}
}
