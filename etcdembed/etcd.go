package etcdembed

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/kubestore/kubestore/config"
	"github.com/kubestore/kubestore/datadir"
)

// memberName is the name of the single member in its own cluster.
const memberName = "kubestore"

// MemberName is the name of the embedded etcd's single member.
const MemberName = memberName

// socketName is the etcd client socket inside <data-dir>/etcd. Only
// processes that can enter the 0700 directory can reach it.
const socketName = "etcd.sock"

// maxSocketPath is the longest path a unix socket address can hold on Linux
// (sun_path is 108 bytes including the terminating NUL).
const maxSocketPath = 107

// ErrNotReady means etcd did not become ready within --etcd-start-timeout.
var ErrNotReady = errors.New("embedded etcd did not become ready")

// Server is a running single-member embedded etcd.
type Server struct {
	etcd      *embed.Etcd
	endpoint  string
	closeOnce sync.Once
}

// SocketPath is where the embedded etcd of a data directory listens.
func SocketPath(dir datadir.Dir) string { return filepath.Join(dir.Etcd(), socketName) }

// Start starts the embedded etcd of cfg.DataDir and waits until it serves,
// at most cfg.Etcd.StartTimeout. On error nothing is left running.
func Start(ctx context.Context, cfg config.Config) (*Server, error) {
	dir := datadir.Dir(cfg.DataDir)
	sock := SocketPath(dir)
	if len(sock) > maxSocketPath {
		return nil, fmt.Errorf("invalid --%s %q: the etcd socket path %s is longer than %d bytes; choose a shorter data directory",
			config.FlagDataDir, cfg.DataDir, sock, maxSocketPath)
	}
	if err := os.MkdirAll(dir.Etcd(), 0o700); err != nil {
		return nil, fmt.Errorf("creating etcd directory: %w", err)
	}
	ec, err := embedConfig(cfg, sock)
	if err != nil {
		return nil, err
	}
	e, err := embed.StartEtcd(ec)
	if err != nil {
		return nil, fmt.Errorf("starting embedded etcd: %w", err)
	}
	s := &Server{etcd: e, endpoint: "unix://" + sock}

	timer := time.NewTimer(cfg.Etcd.StartTimeout.Duration)
	defer timer.Stop()
	select {
	case <-e.Server.ReadyNotify():
		return s, nil
	case err := <-e.Err():
		s.Close()
		return nil, fmt.Errorf("starting embedded etcd: %w", err)
	case <-timer.C:
		s.Close()
		return nil, fmt.Errorf("%w within --%s %s", ErrNotReady, config.FlagEtcdStartTimeout, cfg.Etcd.StartTimeout)
	case <-ctx.Done():
		s.Close()
		return nil, ctx.Err()
	}
}

// embedConfig translates kubestore's etcd settings into etcd's: one member,
// a client unix socket, no TCP listener at all (a single member needs no
// peer listener) and the small-memory tuning from config.
func embedConfig(cfg config.Config, sock string) (*embed.Config, error) {
	ec := embed.NewConfig()
	ec.Name = memberName
	ec.Dir = datadir.Dir(cfg.DataDir).Etcd()
	client := url.URL{Scheme: "unix", Path: sock}
	ec.ListenClientUrls = []url.URL{client}
	ec.AdvertiseClientUrls = []url.URL{client}
	ec.ListenPeerUrls = nil
	ec.InitialCluster = ec.InitialClusterFromName(memberName)

	ec.SnapshotCount = cfg.Etcd.SnapshotCount
	ec.SnapshotCatchUpEntries = cfg.Etcd.SnapshotCatchUpEntries
	ec.QuotaBackendBytes = int64(cfg.Etcd.QuotaBackendBytes)
	LimitMmap(cfg.Etcd.QuotaBackendBytes)
	ec.BackendBatchInterval = cfg.Etcd.BackendBatchInterval.Duration
	ec.BackendBatchLimit = cfg.Etcd.BackendBatchLimit
	ec.MaxRequestBytes = uint(cfg.Etcd.MaxRequestBytes)
	ec.WatchProgressNotifyInterval = cfg.Etcd.WatchProgressNotifyInterval.Duration
	// The HTTP/JSON gateway is for curl users; kubestore's clients speak gRPC.
	ec.EnableGRPCGateway = false

	lg, err := Logger(cfg.Log)
	if err != nil {
		return nil, err
	}
	ec.ZapLoggerBuilder = embed.NewZapLoggerBuilder(lg)
	return ec, nil
}

// Logger is the zap logger for etcd's server and client: stderr, in the
// configured format, quiet (warnings) unless -v is 4 or more.
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
	lg, err := zc.Build()
	if err != nil {
		return nil, fmt.Errorf("building etcd logger: %w", err)
	}
	return lg.Named("etcd"), nil
}

// Endpoints are the client URLs of the server.
func (s *Server) Endpoints() []string { return []string{s.endpoint} }

// Err reports a fatal error of the running server.
func (s *Server) Err() <-chan error { return s.etcd.Err() }

// Close stops the server: client connections close, raft stops, the WAL and
// the backend are synced and closed. It is idempotent.
func (s *Server) Close() {
	s.closeOnce.Do(func() {
		s.etcd.Close()
		<-s.etcd.Server.StopNotify()
	})
}
