package etcdembed

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.etcd.io/etcd/server/v3/storage/wal"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"google.golang.org/grpc"

	"github.com/kubestore/kubestore/config"
	"github.com/kubestore/kubestore/datadir"
)

// memberName is the name of the single member in its own cluster.
const memberName = "kubestore"

// socketName is the etcd client socket inside <data-dir>/etcd. Only
// processes that can enter the 0700 directory can reach it.
const socketName = "etcd.sock"

// httpSocketName serves etcd's HTTP endpoints (/health, /metrics,
// /version) apart from the gRPC clients of socketName, as etcd recommends
// (etcd-io/etcd#15402; it warns at every start otherwise). As long as
// socketName, so the socket path limit Start checks holds for both.
const httpSocketName = "http.sock"

// ErrNotReady means etcd did not become ready within --etcd-start-timeout.
var ErrNotReady = errors.New("embedded etcd did not become ready")

// ErrRemoved means the member's site removed it.
var ErrRemoved = fmt.Errorf("this member was removed from its site: with --%s naming another member and --%s it joins the site again at its next start; alone, move <data-dir>/etcd away to start afresh", config.FlagJoin, config.FlagJoinToken)

// ErrStopped means the member stopped while it served, without Close.
var ErrStopped = errors.New("embedded etcd stopped")

// Server is the running embedded etcd member: a gateway's own, or one
// member of its site's cluster.
type Server struct {
	etcd         *embed.Etcd
	endpoint     string
	closeOnce    sync.Once
	stoppingOnce sync.Once
	// closing is closed when Close starts: what fails from then on is the
	// stop, not a failure.
	closing chan struct{}
	// failed is closed, and failure set, at the first fatal error of the
	// running member; watched is closed when the goroutine that watches for
	// it ends (nil until the member is ready).
	failed  chan struct{}
	failure error
	watched chan struct{}
	// snapSynced is closed when the snap directory's syncer ends (nil
	// without one).
	snapSynced <-chan struct{}
	// removed is set when etcd says the site removed this member.
	removed *atomic.Bool
	guard   *DiskGuard
	guarded <-chan struct{} // closed when the guard has stopped
	quota   *QuotaGuard
	// leader answers the writes lost with a dead leader (a site's member
	// only; nil alone), until leaderDone is closed.
	leader     *leaderLoss
	leaderDone chan struct{}
}

// SocketPath is where the embedded etcd of a data directory listens.
func SocketPath(dir datadir.Dir) string { return filepath.Join(dir.Etcd(), socketName) }

// Endpoints are the client URLs of the etcd cfg names: the external
// cluster's (--etcd-servers), else the unix socket of the embedded member of
// dir, whether it runs in this process or in another.
func Endpoints(dir datadir.Dir, cfg config.Etcd) []string {
	if cfg.External() {
		return cfg.Servers
	}
	return []string{"unix://" + SocketPath(dir)}
}

// Start starts the embedded etcd member of c's data directory and waits
// until it serves, at most --etcd-start-timeout; a site's member that joined
// as a learner is promoted first (site.go). On error nothing is left
// running.
func Start(ctx context.Context, c config.Config) (*Server, error) {
	return start(ctx, c, false)
}

// start is Start; forceNew starts a site's member as the only member of
// its cluster, keeping its data (etcd's --force-new-cluster; ResetSite).
func start(ctx context.Context, c config.Config, forceNew bool) (*Server, error) {
	dir, cfg := datadir.Dir(c.DataDir), c.Etcd
	sock := SocketPath(dir)
	if len(sock) > config.MaxUnixSocketPath {
		return nil, fmt.Errorf("invalid --%s %q: the etcd socket path %s is longer than %d bytes; choose a shorter data directory",
			config.FlagDataDir, string(dir), sock, config.MaxUnixSocketPath)
	}
	if err := os.MkdirAll(dir.Etcd(), 0o700); err != nil {
		return nil, fmt.Errorf("creating etcd directory: %w", err)
	}
	ec, err := embedConfig(c)
	if err != nil {
		return nil, err
	}
	ec.ForceNewCluster = forceNew
	lg, err := Logger(c.Log)
	if err != nil {
		return nil, err
	}
	closing, removed := make(chan struct{}), new(atomic.Bool)
	filter := logFilter{closing: closing, removed: removed, campaigning: new(atomic.Bool)}
	if c.Site.Enabled() {
		filter.onRemoved = func() {
			// Recorded for the next start: it rejoins the site, a
			// founder too (site.Prepare).
			if err := datadir.WriteFileAtomic(dir.EtcdRemoved(), []byte("removed\n")); err != nil {
				lg.Error("recording that the site removed this member", zap.Error(err))
			}
		}
		filter.logLost = func(msg string) {
			// Recorded before raft's panic ends the process: the next
			// start rejoins the site wiped (site.Prepare).
			if err := datadir.WriteFileAtomic(dir.RaftLogLost(), []byte(msg+"\n")); err != nil {
				lg.Error("recording that the raft log lost acknowledged entries", zap.Error(err))
			}
		}
	}
	ec.ZapLoggerBuilder = embed.NewZapLoggerBuilder(lg.WithOptions(zap.WrapCore(filter.wrap)))
	if err := finishSnapshotRename(dir, lg); err != nil {
		return nil, err
	}
	// Only a first start is elected at once (campaignAlone says why); a
	// restart keeps raft's own timing.
	fresh := !dir.HasEtcdData()
	e, err := embed.StartEtcd(ec)
	if err != nil {
		return nil, fmt.Errorf("starting embedded etcd: %w", err)
	}
	s := &Server{etcd: e, endpoint: "unix://" + sock, closing: closing, failed: make(chan struct{}), removed: removed}
	if fresh && !c.Site.Enabled() {
		go campaignAlone(e.Server, filter.campaigning, closing)
	}

	timer := time.NewTimer(cfg.StartTimeout.Duration)
	defer timer.Stop()
	select {
	case <-e.Server.ReadyNotify():
		s.watched = make(chan struct{})
		go s.watch()
		if err := syncMemberDirs(dir); err != nil {
			s.Close()
			return nil, err
		}
		if s.snapSynced, err = syncSnapDir(dir, lg, closing); err != nil {
			s.Close()
			return nil, err
		}
		s.guard = newDiskGuard(dir, int64(cfg.ReservedDiskBytes), lg)
		s.guarded = s.guard.run(closing)
		s.quota = newQuotaGuard(e.Server, cfg, lg)
		if c.Site.Enabled() {
			s.leader, s.leaderDone = newLeaderLoss(e.Server), make(chan struct{})
			go func() {
				defer close(s.leaderDone)
				s.leader.run(closing)
			}()
			if err := s.settleInSite(ctx, c, timer.C, lg); err != nil {
				s.Close()
				return nil, err
			}
		}
		return s, nil
	case err := <-e.Err():
		s.Close()
		if removed.Load() {
			return nil, ErrRemoved
		}
		return nil, fmt.Errorf("starting embedded etcd: %w", err)
	case <-timer.C:
		s.Close()
		return nil, fmt.Errorf("%w within --%s %s", ErrNotReady, config.FlagEtcdStartTimeout, cfg.StartTimeout)
	case <-ctx.Done():
		s.Close()
		return nil, ctx.Err()
	}
}

// syncMemberDirs fsyncs the directories of the embedded member, from the
// data directory's parent down to the member's wal and snap directories.
// etcd syncs a directory only where it renames a WAL segment, so on a
// first start the member directory, the database file and the snap
// directory are new names that a power cut could drop with everything
// acknowledged since (test/e2e TestPowerCut found it). Start runs it once
// etcd is ready, before the first request; from then on syncSnapDir keeps
// snap/ synced.
func syncMemberDirs(dir datadir.Dir) error {
	member := filepath.Join(dir.Etcd(), "member")
	for _, d := range []string{filepath.Dir(filepath.Clean(string(dir))), string(dir), dir.Etcd(), member,
		filepath.Join(member, "wal"), filepath.Join(member, "snap")} {
		if err := datadir.SyncDir(d); err != nil {
			return err
		}
	}
	return nil
}

// embedConfig translates kubestore's etcd settings into etcd's: client unix
// sockets, the small-memory tuning from config and, alone, no TCP listener
// at all (a single member needs no peer listener); a site's member listens
// for its peers with mutual TLS (siteConfig). Its identity (name, peer URLs,
// initial cluster and token) is also what Restore writes.
func embedConfig(c config.Config) (*embed.Config, error) {
	dir, cfg := datadir.Dir(c.DataDir), c.Etcd
	ec := embed.NewConfig()
	ec.Name = memberName
	ec.Dir = dir.Etcd()
	client := url.URL{Scheme: "unix", Path: SocketPath(dir)}
	ec.ListenClientUrls = []url.URL{client}
	ec.AdvertiseClientUrls = []url.URL{client}
	ec.ListenClientHttpUrls = []url.URL{{Scheme: "unix", Path: filepath.Join(dir.Etcd(), httpSocketName)}}
	ec.ListenPeerUrls = nil
	// The default peer URL and cluster token stay: a single member never
	// dials them, but they are part of its identity.
	ec.InitialCluster = ec.InitialClusterFromName(memberName)

	ec.SnapshotCount = cfg.SnapshotCount
	ec.SnapshotCatchUpEntries = cfg.SnapshotCatchUpEntries
	// etcd maps bbolt's database at quota × 1.1 when the quota is not its
	// default (server/storage/backend.go), which the 32-bit default never
	// is: the map follows the quota without touching etcd's globals.
	ec.QuotaBackendBytes = int64(cfg.QuotaBackendBytes)
	ec.BackendBatchInterval = cfg.BackendBatchInterval.Duration
	ec.BackendBatchLimit = cfg.BackendBatchLimit
	ec.MaxRequestBytes = uint(cfg.MaxRequestBytes)
	// etcd has the WAL segment size as a package setting, not a member's;
	// one process runs one member, and a restore writes that member's WAL,
	// so setting it here, where both go through, is enough.
	wal.SegmentSizeBytes = int64(cfg.WALSegmentBytes)
	ec.WatchProgressNotifyInterval = cfg.WatchProgressNotifyInterval.Duration
	// The HTTP/JSON gateway is for curl users; kubestore's clients speak gRPC.
	ec.EnableGRPCGateway = false
	// No auth token provider: kubestore never enables etcd authentication
	// (the socket's directory is the access control), and the default
	// "simple" one warns at every start that its tokens are unsigned.
	ec.AuthToken = ""
	if c.Site.Enabled() {
		if err := siteConfig(ec, c); err != nil {
			return nil, err
		}
	}
	return ec, nil
}

// Logger is the zap logger for etcd's server and client: stderr, in the
// configured format, quiet (warnings) unless -v is 4 or more, a line
// repeated within a second written once (repeatFilter).
func Logger(cfg config.Log) (*zap.Logger, error) {
	level := zapcore.WarnLevel
	if cfg.Verbosity >= 4 {
		level = zapcore.InfoLevel
	}
	zc := zap.NewProductionConfig()
	zc.Level = zap.NewAtomicLevelAt(level)
	zc.OutputPaths = []string{"stderr"}
	zc.ErrorOutputPaths = []string{"stderr"}
	zc.Sampling = nil
	zc.DisableStacktrace = true
	zc.EncoderConfig.EncodeTime = zapcore.ISO8601TimeEncoder
	if cfg.Format != config.LogFormatJSON {
		zc.Encoding = "console"
	}
	lg, err := zc.Build(zap.WrapCore(newRepeatFilter(time.Now).wrap))
	if err != nil {
		return nil, fmt.Errorf("building etcd logger: %w", err)
	}
	return lg.Named(loggerName), nil
}

// Endpoints are the client URLs of the server.
func (s *Server) Endpoints() []string { return []string{s.endpoint} }

// WriteGuards goes on every client that writes through the server: the
// DiskGuard and the QuotaGuard, and on a site's member the leaderLoss
// guard.
func (s *Server) WriteGuards() grpc.DialOption {
	guards := []grpc.UnaryClientInterceptor{s.guard.UnaryClientInterceptor(), s.quota.UnaryClientInterceptor()}
	if s.leader != nil {
		guards = append(guards, s.leader.UnaryClientInterceptor())
	}
	return grpc.WithChainUnaryInterceptor(guards...)
}

// watch waits for the first fatal error of the running member: one that
// embed reports (a client listener that stops serving) or the etcd server
// stopping by itself (raft or storage giving up). etcd's own fatal log
// lines end the process before either.
func (s *Server) watch() {
	defer close(s.watched)
	var err error
	select {
	case <-s.closing:
		return
	case e, ok := <-s.etcd.Err():
		if !ok {
			return // closed by Close
		}
		err = e
	case <-s.etcd.Server.StopNotify():
		err = ErrStopped
	}
	select {
	case <-s.closing:
		return // the failure is the stop's own
	default:
	}
	if s.removed.Load() {
		err = ErrRemoved
	}
	s.failure = fmt.Errorf("embedded etcd failed: %w", err)
	close(s.failed)
}

// Failed is closed when the running member fails; Failure then says why.
// Unlike embed's error channel it is not drained by reading, so every
// health probe and the process's run loop see the same failure.
func (s *Server) Failed() <-chan struct{} { return s.failed }

// Failure is the member's fatal error once Failed is closed, else nil.
func (s *Server) Failure() error {
	select {
	case <-s.failed:
		return s.failure
	default:
		return nil
	}
}

// Stopping says the stop has begun, before the clients of the member close:
// what fails from then on is the stop's own. Close says it too.
func (s *Server) Stopping() { s.stoppingOnce.Do(func() { close(s.closing) }) }

// Close stops the server: client connections close, raft stops, the WAL and
// the backend are synced and closed. It is idempotent.
func (s *Server) Close() {
	s.closeOnce.Do(func() {
		s.Stopping()
		s.etcd.Close()
		<-s.etcd.Server.StopNotify()
		if s.watched != nil {
			<-s.watched
		}
		if s.snapSynced != nil {
			<-s.snapSynced
		}
		if s.guarded != nil {
			<-s.guarded
		}
		if s.leaderDone != nil {
			<-s.leaderDone
		}
	})
}

// DBPath is the embedded member's database file (etcd's snap/db) in dir.
func DBPath(dir datadir.Dir) string { return filepath.Join(dir.Etcd(), "member", "snap", "db") }
