package etcdembed

import (
	"context"
	"sync"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"go.etcd.io/etcd/server/v3/etcdserver"
	"go.etcd.io/etcd/server/v3/storage"
	"go.etcd.io/etcd/server/v3/storage/backend"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
	k8smetrics "k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"

	"github.com/kubestore/kubestore/config"
)

// QuotaWatermarkPercent is the share of --etcd-quota-backend-bytes the
// database may reach, with what the open batch holds, before the
// QuotaGuard refuses writes. The rest is for what does not go through the
// guard (another client of the member), so that etcd's own check, which
// may store a request it then refuses, is not reached.
const QuotaWatermarkPercent = 98

// quotaGrowth is how much the database may grow per byte etcd charges a
// write against its quota, until the next commit says how much it did.
// Measured on etcd 3.7.3: from 1.01 (256 KiB values, 64 writes a commit) to
// 1.57 (1 KiB values, a commit each: bbolt's half-full leaves and its
// copy-on-write of the pages each commit touches) on average, but up to
// 2.9 and 4 for one write of 256 KiB alone in its commit: a bbolt leaf
// holds at least two elements, so that write rewrites a neighbour as
// large, and the pages it frees are not reused while a read transaction
// older than the commit is open (server TestStorageFull saw a 16 MiB quota
// passed by 0.15 MiB with a growth of 2).
const quotaGrowth = 4

var (
	quotaRefusals = k8smetrics.NewCounter(&k8smetrics.CounterOpts{
		Namespace:      "kubestore",
		Subsystem:      "etcd",
		Name:           "quota_watermark_refusals_total",
		Help:           "Writes refused before etcd because the database with its open batch would pass the quota's watermark.",
		StabilityLevel: k8smetrics.ALPHA,
	})
	quotaCommits = k8smetrics.NewCounter(&k8smetrics.CounterOpts{
		Namespace:      "kubestore",
		Subsystem:      "etcd",
		Name:           "quota_watermark_commits_total",
		Help:           "Backend commits forced near the quota's watermark to learn the database's real size.",
		StabilityLevel: k8smetrics.ALPHA,
	})
	registerQuotaMetrics sync.Once
)

// quotaRefusal is the QuotaGuard's refusal: etcd's own "database space
// exceeded" to every client (the apiserver answers it as kube-apiserver
// answers etcd's), known to the settler as a write that never reached etcd.
type quotaRefusal struct{}

func (*quotaRefusal) Error() string              { return rpctypes.ErrGRPCNoSpace.Error() }
func (*quotaRefusal) GRPCStatus() *status.Status { return status.Convert(rpctypes.ErrGRPCNoSpace) }

// QuotaGuard refuses the embedded member's writes before they take its
// database past QuotaWatermarkPercent of the quota. etcd itself checks a
// request against the database size as of its last backend commit, which
// kubestore spaces out to save flash (--etcd-backend-batch-interval): a
// burst of writes can overshoot the quota many times over before the first
// refusal, and the requests that cross it are stored and refused at once
// (see settler). The guard adds what the open batch holds: the cost etcd
// charges for each write it admitted since the last commit. When that sum
// (each cost taken quotaGrowth times) would pass the watermark, it waits
// for the writes in flight and commits the batch (only near the quota) to
// learn the real size, and refuses the write if that leaves no room. A refusal raises etcd's NOSPACE alarm, as etcd
// does at its quota, so the recovery is etcd's: delete, compact,
// defragment, disarm (kubestore defrag).
//
// It sees kubestore's own writes only; writes of other clients of the
// member are left to etcd's check and the settler.
type QuotaGuard struct {
	srv       *etcdserver.EtcdServer
	be        backend.Backend
	commits   func() int64
	cost      storage.Quota
	quota     int64
	watermark int64
	lg        *zap.Logger

	mu sync.Mutex
	// seen is the backend's commit count when applied was last reset and
	// size the database's size then; applied estimates what was applied
	// since, inflight what was admitted and not yet answered.
	seen     int64
	size     int64
	applied  int64
	inflight int64
	// answered is signalled when no write is in flight.
	answered sync.Cond
	refusing bool
}

func newQuotaGuard(srv *etcdserver.EtcdServer, cfg config.Etcd, lg *zap.Logger) *QuotaGuard {
	registerQuotaMetrics.Do(func() { legacyregistry.MustRegister(quotaRefusals, quotaCommits) })
	be := srv.Backend()
	g := &QuotaGuard{
		srv: srv, be: be, quota: int64(cfg.QuotaBackendBytes), lg: lg,
		cost: storage.NewBackendQuota(lg, int64(cfg.QuotaBackendBytes), be, "kubestore-watermark"),
	}
	g.watermark = g.quota / 100 * QuotaWatermarkPercent
	g.answered.L = &g.mu
	if c, ok := be.(interface{ Commits() int64 }); ok {
		g.commits = c.Commits
	} else {
		// Without a commit count every check near the watermark commits.
		g.commits = func() int64 { return 0 }
	}
	return g
}

// UnaryClientInterceptor refuses the requests that would pass the
// watermark and counts the others until etcd answers them.
func (g *QuotaGuard) UnaryClientInterceptor() grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		cost := g.costOf(req)
		if cost == 0 {
			return invoker(ctx, method, req, reply, cc, opts...)
		}
		if refused, first := g.admit(cost); refused {
			if first {
				g.raiseAlarm(ctx)
			}
			return &quotaRefusal{}
		}
		defer g.done(cost)
		return invoker(ctx, method, req, reply, cc, opts...)
	}
}

// costOf is what etcd charges req against its quota; 0 for what does not
// add to the database.
func (g *QuotaGuard) costOf(req any) int64 {
	switch req.(type) {
	case *pb.PutRequest, *pb.TxnRequest, *pb.LeaseGrantRequest:
		return int64(g.cost.Cost(req))
	}
	return 0
}

// sync forgets what was applied before the backend's last commit: the
// database size counts it now. The count and the size are read under the
// batch's lock: a commit counts itself before it records the new size
// (etcd's batchTx.commit, then backend.begin), and a count read between
// the two would forget writes the size read does not hold yet (under CPU
// load the database passed the quota by two 256 KiB writes that way).
// Called with mu held.
func (g *QuotaGuard) sync() {
	tx := g.be.BatchTx()
	tx.LockOutsideApply()
	c, size := g.commits(), g.be.Size()
	tx.Unlock()
	g.size = size
	if c != g.seen {
		g.seen, g.applied = c, 0
	}
}

// fits reports whether a write of cost leaves the estimate of the database
// at or below the watermark. Called with mu held.
func (g *QuotaGuard) fits(cost int64) bool {
	return g.size+quotaGrowth*(g.applied+g.inflight+cost) <= g.watermark
}

// admit counts a write of cost in flight, or refuses it; first is true
// for the first refusal after an admitted write. Where the estimate leaves
// no room, it waits for the writes in flight to be answered and commits
// what they applied, so that it refuses only on the database's real size.
func (g *QuotaGuard) admit(cost int64) (refused, first bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for {
		g.sync()
		switch {
		case g.fits(cost):
			g.refusing = false
			g.inflight += cost
			return false, false
		case g.inflight > 0:
			g.answered.Wait()
			continue
		case g.applied > 0:
			g.be.ForceCommit()
			quotaCommits.Inc()
			g.sync()
			g.applied = 0
			continue
		}
		quotaRefusals.Inc()
		first = !g.refusing
		if first {
			g.refusing = true
			g.lg.Warn("refusing writes: the database is at its quota's watermark",
				zap.Int64("db-size-bytes", g.size), zap.Int64("write-bytes", cost),
				zap.Int64("watermark-bytes", g.watermark), zap.Int64("quota-bytes", g.quota))
		}
		return true, first
	}
}

// done moves a write's cost from in flight to applied. A write etcd
// refused is counted as applied too: it may have been (see settler), and
// the next commit tells.
func (g *QuotaGuard) done(cost int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.inflight -= cost
	g.sync()
	g.applied += cost
	if g.inflight == 0 {
		g.answered.Broadcast()
	}
}

// raiseAlarm arms etcd's NOSPACE alarm for the member, as etcd does when a
// request passes its quota: from then on etcd refuses every write that
// adds data until the alarm is disarmed.
func (g *QuotaGuard) raiseAlarm(ctx context.Context) {
	for _, a := range g.srv.Alarms() {
		if a.Alarm == pb.AlarmType_NOSPACE {
			return
		}
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
	defer cancel()
	_, err := g.srv.Alarm(ctx, &pb.AlarmRequest{Action: pb.AlarmRequest_ACTIVATE, MemberID: uint64(g.srv.MemberID()), Alarm: pb.AlarmType_NOSPACE})
	if err != nil {
		g.lg.Warn("raising the NOSPACE alarm", zap.Error(err))
	}
}
