// Command kubestore serves the Kubernetes API from an embedded etcd through
// the upstream watch cache, as one process for edge devices.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/urfave/cli/v2"
	"k8s.io/klog/v2"

	"github.com/kubestore/kubestore/config"
	"github.com/kubestore/kubestore/server"
)

func main() {
	reapOrphans()
	ctx, stop := signalContext()
	defer stop()
	err := newApp().RunContext(ctx, os.Args)
	restart, err := afterRun(err, ctx.Err() != nil)
	if restart {
		startAgain()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "kubestore:", err)
		restartAsInit(ctx)
		os.Exit(1)
	}
}

// afterRun says what main does once the command returned err, signalled
// saying whether a SIGTERM or SIGINT came: start again (a restart the
// server asked for, server.ErrRestart, with no signal since), then exit
// with the error it returns if that fails (nil: a clean stop). A signal
// during the stop for a restart makes it the stop the signal asked for,
// done: exit 0, not "kubestore: starting again" with status 1 (found by
// TestMirrorModel seed 10: a site update's SIGTERM during a CA
// rotation's restart).
func afterRun(err error, signalled bool) (restart bool, exit error) {
	switch {
	case errors.Is(err, server.ErrRestart) && signalled, errors.Is(err, context.Canceled):
		return false, nil
	case errors.Is(err, server.ErrRestart):
		return true, err
	}
	return false, err
}

// signalContext is cancelled by the first SIGTERM or SIGINT, which starts a
// graceful stop; a second one exits at once.
func signalContext() (context.Context, func()) {
	ctx, cancel := context.WithCancel(context.Background())
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		s := <-sigs
		// Through klog, so that the lines follow --log-format.
		klog.InfoS("Stopping gracefully; send the signal again to exit at once", "signal", s.String())
		cancel()
		s = <-sigs
		klog.InfoS("Exiting at once", "signal", s.String())
		klog.Flush()
		os.Exit(1)
	}()
	return ctx, func() { signal.Stop(sigs); cancel() }
}

func newApp() *cli.App {
	return &cli.App{
		Name:                 "kubestore",
		Usage:                "a Kubernetes API store for edge devices: embedded etcd, the upstream watch cache, the Kubernetes REST API",
		HideVersion:          true,
		EnableBashCompletion: false,
		Flags:                config.Flags(),
		Action:               serve,
		OnUsageError:         usageError,
		Commands: append([]*cli.Command{
			{Name: "serve", Usage: "serve the Kubernetes API (the default command)", Flags: config.Flags(), Action: serve, OnUsageError: usageError},
			{Name: "version", Usage: "print the versions of kubestore, Go, etcd and the Kubernetes API", Action: printVersion, OnUsageError: usageError},
			{Name: "kubeconfig", Usage: "print the admin kubeconfig of a data directory", Flags: config.Flags(), Action: printKubeconfig, OnUsageError: usageError},
			tunnelEndpointCommand(),
		}, operatorCommands()...),
	}
}

// usageError reports a flag that does not parse in one line, without the
// help text.
func usageError(_ *cli.Context, err error, _ bool) error {
	return fmt.Errorf("%w (see kubestore --help)", err)
}

// noArgs rejects positional arguments, which no command takes.
func noArgs(c *cli.Context) error {
	if c.Args().Present() {
		return fmt.Errorf("unexpected argument %q (flags start with --)", c.Args().First())
	}
	return nil
}

// loadConfig reads and completes the configuration of a command.
func loadConfig(c *cli.Context) (config.Completed, error) {
	if err := noArgs(c); err != nil {
		return config.Completed{}, err
	}
	return loadConfigArgs(c)
}

// loadConfigArgs reads and completes the configuration of a command that
// takes positional arguments.
func loadConfigArgs(c *cli.Context) (config.Completed, error) {
	cfg, err := config.Load(c)
	if err != nil {
		return config.Completed{}, err
	}
	return cfg.Complete()
}
