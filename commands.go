package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"os/signal"
	"runtime/debug"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"
	"k8s.io/klog/v2"

	"github.com/kubestore/kubestore/cacher"
	"github.com/kubestore/kubestore/config"
	"github.com/kubestore/kubestore/datadir"
	"github.com/kubestore/kubestore/maintenance"
	"github.com/kubestore/kubestore/mirror"
	"github.com/kubestore/kubestore/records"
	"github.com/kubestore/kubestore/server"
	"github.com/kubestore/kubestore/site"
	"github.com/kubestore/kubestore/tunnel"
)

// serve runs the server until the first signal, then stops it within
// --shutdown-timeout. The start goes from what fails cheapest to what
// costs most: the configuration, the data directory's lock, the listeners,
// etcd, the API server; each step's failure undoes the ones before it. The
// stop's order is server.Run's; after it the storage closes and the lock is
// released. Every goroutine started here is waited for.
func serve(c *cli.Context) (err error) {
	cc, err := loadConfig(c)
	if err != nil {
		return err
	}
	cfg := cc.Config()
	if err := setupLogging(cfg.Log, c.Context.Done()); err != nil {
		return err
	}
	if cfg.Mirror.Enabled() {
		if _, err := mirror.LoadUpstream(cfg.Mirror); err != nil {
			return err
		}
	}
	device, deviceFrom := config.DeviceMemory("/")
	cc = cc.OnDevice(device)
	logSmallDeviceCaches(cc)
	limit, limitFrom := setMemoryLimit(cfg.Memory, device, deviceFrom)
	lock, err := datadir.Dir(cfg.DataDir).Lock()
	if err != nil {
		return err
	}
	defer func() {
		// A server that starts itself again (main's startAgain, an exec)
		// hands its lock to the new process: a command run on the
		// directory meanwhile must not find it free.
		if errors.Is(err, server.ErrRestart) && lock.KeepAcrossExec() == nil {
			return
		}
		lock.Unlock()
	}()
	// An external etcd's data is shared with the other kubestores on it:
	// no data directory speaks for it.
	embedded := !cfg.Etcd.External()
	update := maintenance.NewUpdate(cc, server.BuildInfo().Version)
	if embedded {
		if err := update.Check(c.Context); err != nil {
			return err
		}
	}
	listeners, err := server.Listen(cfg.Server)
	if err != nil {
		return err
	}
	ctx := c.Context
	if embedded && cfg.Site.Enabled() {
		if err := site.Prepare(ctx, cfg); err != nil {
			listeners.Close()
			return err
		}
	}
	backend, err := cacher.Open(ctx, cc)
	if err != nil {
		listeners.Close()
		return err
	}
	defer backend.Close()
	if embedded {
		if err := update.Record(ctx, backend.Client(), records.New(backend.Client(), backend.Prefix())); err != nil {
			listeners.Close()
			return err
		}
	}
	backend.GuardHeap(cacher.NewHeapGuard(limit, limitFrom))
	srv, err := server.New(cc, backend, listeners)
	if err != nil {
		return err
	}

	var wg sync.WaitGroup
	defer wg.Wait()
	done := make(chan struct{})
	defer close(done)
	wg.Go(func() { reloadOnHangup(srv, done) })
	trial, endTrial := context.WithCancel(ctx)
	defer endTrial()
	// A member that meets data of a newer format than it reads stops.
	ctx, stopServing := context.WithCancelCause(ctx)
	defer stopServing(nil)
	if embedded {
		wg.Go(func() { update.ServeCommits(trial, backend.Check) })
		wg.Go(func() { update.StopOnNewerFormat(trial, stopServing) })
	}
	wg.Go(func() {
		select {
		case <-done:
			return
		case <-ctx.Done():
		case <-backend.Failed():
		}
		select {
		case <-done:
		case <-time.After(cfg.Server.ShutdownTimeout.Duration):
			klog.ErrorS(nil, "Graceful stop took longer than --"+config.FlagShutdownTimeout+"; exiting", "timeout", cfg.Server.ShutdownTimeout)
			klog.Flush()
			restartAsInit(ctx)
			os.Exit(1)
		}
	})
	if err := srv.Run(ctx); err != nil {
		return err
	}
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
		return cause
	}
	endTrial()
	backend.Close()
	klog.InfoS("kubestore stopped")
	return nil
}

// reloadOnHangup rereads the token and policy files on each SIGHUP until
// done is closed; a file that does not load is logged and the previous one
// stays in force, so a typo cannot lock every agent out.
func reloadOnHangup(srv *server.Server, done <-chan struct{}) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	for {
		select {
		case <-done:
			return
		case <-hup:
			if err := srv.Reload(); err != nil {
				klog.ErrorS(err, "SIGHUP: keeping the previous token and policy files")
			} else {
				klog.InfoS("SIGHUP: reloaded the token and policy files")
			}
		}
	}
}

// setMemoryLimit sets the Go runtime's soft memory limit and returns it
// with where it comes from: --memory-limit; else GOMEMLIMIT, which the
// runtime has already applied; else derived from device, the device's
// memory as config.DeviceMemory reads it (derivedMemoryLimit), so that a
// device is tuned without a flag.
// The limit also sets the heap watermark above which creates are refused
// (cacher.HeapGuard). Only --memory-limit gives resources their default
// byte budgets. On a small device (config.SmallDevice), unless GOGC is
// set, the collector runs at GOGC=50: the heap grows by half the live heap
// between collections instead of all of it.
func setMemoryLimit(m config.Memory, device int64, from string) (int64, string) {
	if _, set := os.LookupEnv("GOGC"); !set && config.IsSmallDevice(device) {
		debug.SetGCPercent(smallDeviceGOGC)
		klog.V(2).InfoS("Garbage collector tuned for a small device", "GOGC", smallDeviceGOGC, "device", config.ByteSize(device), "from", from)
	}
	if m.Limit > 0 {
		debug.SetMemoryLimit(int64(m.Limit))
		klog.InfoS("Memory limit", "limit", m.Limit, "defaultByteBudget", m.Limit/config.DefaultBudgetFraction)
		return int64(m.Limit), fmt.Sprintf("--%s=%s", config.FlagMemoryLimit, m.Limit)
	}
	if limit := debug.SetMemoryLimit(-1); limit != math.MaxInt64 {
		return limit, "GOMEMLIMIT"
	}
	if device == 0 {
		return 0, ""
	}
	limit, how := derivedMemoryLimit(device, from)
	debug.SetMemoryLimit(limit)
	klog.V(2).InfoS("Memory limit derived from the device", "limit", config.ByteSize(limit), "device", config.ByteSize(device), "from", from)
	return limit, fmt.Sprintf("%s, from %s; set --%s to change it", how, from, config.FlagMemoryLimit)
}

// cgroupHeadroom is what a cgroup's limit keeps, at least, beyond the
// heap: the binary's pages the server touches (its code and data, file
// pages the cgroup counts, ~20-40 MiB) and the page cache of the data it
// reads.
const cgroupHeadroom = 32 << 20

// derivedMemoryLimit is the soft memory limit for a device of device bytes
// found at from, and how it was derived, at least config.MinMemoryLimit.
// A machine's MemTotal is shared with the agents beside kubestore: half of
// it. A cgroup's limit is what was given to kubestore alone: all of it but
// the headroom of its pages and cache, a quarter and at least
// cgroupHeadroom, never less than half. In a 96 MiB cgroup half (48 MiB)
// refused the gateway set x1 at its live heap of 38 MiB; 64 MiB serves it
// with the cgroup's peak at 80 MiB (docs/PERFORMANCE.md, issue 39).
func derivedMemoryLimit(device int64, from string) (int64, string) {
	size := config.ByteSize(device)
	if from == config.MemTotalSource {
		if limit := device / 2; limit >= config.MinMemoryLimit {
			return limit, fmt.Sprintf("half of the device's %s", size)
		}
	} else {
		headroom := max(device/4, cgroupHeadroom)
		if limit := max(device-headroom, device/2); limit >= config.MinMemoryLimit {
			return limit, fmt.Sprintf("the cgroup's %s less %s for the binary's pages and the page cache", size, config.ByteSize(device-limit))
		}
	}
	return config.MinMemoryLimit, fmt.Sprintf("the smallest limit, for a device of %s", size)
}

// logSmallDeviceCaches says which resources a small device reads from
// etcd by default (config.SmallDeviceUncached).
func logSmallDeviceCaches(cc config.Completed) {
	if !cc.SmallDevice() {
		return
	}
	var uncached []string
	for _, gr := range config.SmallDeviceUncached {
		if !cc.CacheFor(gr).Enabled {
			uncached = append(uncached, gr.String())
		}
	}
	klog.V(2).InfoS("Watch caches off for a small device; --"+config.FlagWatchCacheSizes+" naming a resource overrides it", "resources", uncached)
}

// smallDeviceGOGC is the collector's setting on a small device
// (docs/PERFORMANCE.md measures both).
const smallDeviceGOGC = 50

// setupLogging sends klog to stderr at the configured verbosity, as text or
// as JSON lines, without the noise of a normal start and stop (logging.go);
// stopping is closed when a graceful stop begins.
func setupLogging(cfg config.Log, stopping <-chan struct{}) error {
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	if err := fs.Set("v", strconv.Itoa(cfg.Verbosity)); err != nil {
		return err
	}
	logger, opts := klogBackend(cfg, os.Stderr, stopping)
	klog.SetLoggerWithOptions(logger, opts...)
	return nil
}

func printVersion(c *cli.Context) error {
	if err := noArgs(c); err != nil {
		return err
	}
	b := server.BuildInfo()
	fmt.Fprintf(c.App.Writer, "kubestore %s\ngit commit: %s\ngo: %s %s\netcd: %s\nkubernetes API: %s\ndata format: %d\n",
		b.Version, b.GitCommit, b.GoVersion, b.Platform, b.Etcd, b.Kubernetes, datadir.Format)
	return nil
}

func printKubeconfig(c *cli.Context) error {
	cc, err := loadConfig(c)
	if err != nil {
		return err
	}
	cfg := cc.Config()
	data, err := os.ReadFile(datadir.Dir(cfg.DataDir).Kubeconfig())
	if err != nil {
		return fmt.Errorf("reading the admin kubeconfig (has kubestore run on --%s %s?): %w", config.FlagDataDir, cfg.DataDir, err)
	}
	_, err = c.App.Writer.Write(data)
	return err
}

// tunnelEndpointCommand runs the cloud's end of the gateways' tunnels beside
// the cluster's kube-apiserver (package tunnel; docs/node/tunnel.md).
func tunnelEndpointCommand() *cli.Command {
	return &cli.Command{
		Name:         "tunnel-endpoint",
		Usage:        "beside the cluster's kube-apiserver: take the gateways' tunnels and carry kube-apiserver's connections to their kubelets (its egress selector's HTTP CONNECT on --connect-socket)",
		OnUsageError: usageError,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: tunnel.FlagKubeconfig, Usage: "kubeconfig of the cluster (read Nodes, create TokenReviews and SubjectAccessReviews); empty is the in-cluster configuration"},
			&cli.StringFlag{Name: tunnel.FlagBindAddress, Value: "0.0.0.0", Usage: "IP address the gateways' tunnels are taken on"},
			&cli.IntFlag{Name: tunnel.FlagSecurePort, Value: 8132, Usage: "port the gateways' tunnels are taken on (TLS)"},
			&cli.StringFlag{Name: tunnel.FlagTLSCertFile, Usage: "the endpoint's serving certificate (PEM)", Required: true},
			&cli.StringFlag{Name: tunnel.FlagTLSPrivateKeyFile, Usage: "the key of --tls-cert-file (PEM)", Required: true},
			&cli.StringFlag{Name: tunnel.FlagClientCAFile, Usage: "the cluster's client CA: gateways may authenticate with their node's client certificate; empty takes bearer tokens only"},
			&cli.StringFlag{Name: tunnel.FlagConnectSocket, Value: "/etc/kubernetes/kubestore-tunnel/connect.sock", Usage: "unix socket kube-apiserver's egress selector (egress cluster, HTTPConnect, transport uds) dials"},
			&cli.IntFlag{Name: config.FlagVerbosity, Usage: "log verbosity"},
		},
		Action: func(c *cli.Context) error {
			if err := noArgs(c); err != nil {
				return err
			}
			if err := setupLogging(config.Log{Verbosity: c.Int(config.FlagVerbosity), Format: config.LogFormatText}, nil); err != nil {
				return err
			}
			ctx, stop := signalContext()
			defer stop()
			return tunnel.ServeEndpoint(ctx, tunnel.EndpointOptions{
				Kubeconfig: c.String(tunnel.FlagKubeconfig), BindAddress: c.String(tunnel.FlagBindAddress), SecurePort: c.Int(tunnel.FlagSecurePort),
				TLSCertFile: c.String(tunnel.FlagTLSCertFile), TLSPrivateKeyFile: c.String(tunnel.FlagTLSPrivateKeyFile),
				ClientCAFile: c.String(tunnel.FlagClientCAFile), ConnectSocket: c.String(tunnel.FlagConnectSocket),
			})
		},
	}
}
