package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
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
	"github.com/kubestore/kubestore/memory"
	"github.com/kubestore/kubestore/mirror"
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
	limits := memory.NewLimits(cfg.Memory, "/")
	cc = cc.OnDevice(limits.SmallDevice())
	logSmallDeviceCaches(cc)
	limits.SetRuntime()
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
		if err := update.Record(ctx, backend.Client(), backend.Records()); err != nil {
			listeners.Close()
			return err
		}
	}
	backend.GuardHeap(cacher.NewHeapGuard(limits))
	srv, err := server.New(cc, backend, listeners, limits)
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
