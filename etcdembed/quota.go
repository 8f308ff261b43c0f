package etcdembed

import (
	"context"
	"fmt"
	"sync"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"go.etcd.io/etcd/server/v3/etcdserver"
	"go.etcd.io/etcd/server/v3/storage"
	"go.etcd.io/etcd/server/v3/storage/backend"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
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
// 2.9 and 4 for one write of 256 KiB alone in its commit: the pages it
// frees are not reused while a read transaction older than the commit is
// open (server TestStorageFull saw a 16 MiB quota passed by 0.15 MiB with a
// growth of 2). What a write rewrites of the values before it is counted
// apart (leafRewrite): it is not proportional to the write's own cost.
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
// for the writes in flight (or the request's end) and commits the batch
// (only near the quota) to learn the real size, and refuses the write if
// that leaves no room. When a small write would still fit, it refuses
// that one write (RoomError), and nothing else changes. When none would,
// the database is full: the refusal raises etcd's NOSPACE alarm, as etcd
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
	// leaf holds the costs of the last leafNeighbours writes admitted
	// (see leafRewrite), next the slot of the next one.
	leaf [leafNeighbours]int64
	next int
	// answered is closed, and made again, when no write is left in
	// flight.
	answered chan struct{}
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
	g.answered = make(chan struct{})
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
		switch d, left, err := g.admit(ctx, cost); {
		case err != nil:
			return err
		case d == full:
			g.raiseAlarm(ctx)
			return &quotaRefusal{}
		case d == refusedFull:
			return &quotaRefusal{}
		case d == noRoom:
			return &RoomError{Write: cost, Left: left}
		}
		defer g.done(cost)
		return invoker(ctx, method, req, reply, cc, opts...)
	}
}

// RoomError refuses one write larger than the room left below the quota's
// watermark while smaller writes still fit: the database is not full, so
// no alarm stops every other write (the API answers it 413, naming the
// room; package cacher).
type RoomError struct {
	// Write is what etcd would charge the write, Left the largest write
	// that would fit now (both in bytes).
	Write, Left int64
}

func (e *RoomError) Error() string {
	return fmt.Sprintf("kubestore: a write of %d bytes does not fit below the etcd quota's watermark, which leaves room for writes of up to %d bytes", e.Write, e.Left)
}

// GRPCStatus keeps the error whole through etcd's client, which turns
// the statuses it knows into its own errors.
func (e *RoomError) GRPCStatus() *status.Status {
	return status.New(codes.ResourceExhausted, e.Error())
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
	return g.size+g.leafRewrite()+quotaGrowth*(g.applied+g.inflight+cost) <= g.watermark
}

// leafNeighbours is how many values a write can rewrite beside its own:
// etcd's keys are revisions, so every put lands in the last leaf of its
// key bucket, and bbolt rewrites that whole leaf on commit (copy on
// write) while splitting no leaf of up to 2×MinKeysPerPage = 4 values
// (bbolt's node.splitTwo). With large values the leaf holds few of them:
// a 128 KiB write after 256 KiB ones grew the database by seven times its
// cost, past the quota the guard keeps it under.
const leafNeighbours = 3

// leafRewrite is what the next write may rewrite of the writes before it.
// Called with mu held.
func (g *QuotaGuard) leafRewrite() int64 {
	var sum int64
	for _, c := range g.leaf {
		sum += c
	}
	return sum
}

// room is the largest write that fits now. Called with mu held.
func (g *QuotaGuard) room() int64 {
	return (g.watermark-g.size-g.leafRewrite())/quotaGrowth - g.applied - g.inflight
}

// smallestWrite is the cost of a small write (a Lease renewal, a status
// condition): while one still fits, the database is not full.
const smallestWrite = 4 << 10

// decision is admit's.
type decision int

const (
	admitted decision = iota
	// noRoom refuses this write only: smaller ones fit.
	noRoom
	// full is the first refusal of any write after an admitted one: the
	// NOSPACE alarm goes up; refusedFull the next ones.
	full
	refusedFull
)

// admit counts a write of cost in flight, or refuses it. Where the
// estimate leaves no room, it waits for the writes in flight to be
// answered (or ctx to end) and commits what they applied, so that it
// refuses only on the database's real size: the one write when a small
// write would still fit (left is then the largest that would), every
// write when none would.
func (g *QuotaGuard) admit(ctx context.Context, cost int64) (d decision, left int64, err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for {
		g.sync()
		switch {
		case g.fits(cost):
			g.refusing = false
			g.inflight += cost
			g.leaf[g.next] = cost
			g.next = (g.next + 1) % leafNeighbours
			return admitted, 0, nil
		case g.inflight > 0:
			answered := g.answered
			g.mu.Unlock()
			select {
			case <-answered:
			case <-ctx.Done():
				g.mu.Lock()
				return admitted, 0, ctx.Err()
			}
			g.mu.Lock()
			continue
		case g.applied > 0:
			g.be.ForceCommit()
			quotaCommits.Inc()
			g.sync()
			g.applied = 0
			continue
		}
		quotaRefusals.Inc()
		if cost > smallestWrite && g.fits(smallestWrite) {
			return noRoom, g.room(), nil
		}
		if g.refusing {
			return refusedFull, 0, nil
		}
		g.refusing = true
		g.lg.Warn("refusing writes: the database is at its quota's watermark",
			zap.Int64("db-size-bytes", g.size), zap.Int64("write-bytes", cost),
			zap.Int64("watermark-bytes", g.watermark), zap.Int64("quota-bytes", g.quota))
		return full, 0, nil
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
		close(g.answered)
		g.answered = make(chan struct{})
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
