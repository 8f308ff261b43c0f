package main

import (
	"context"
	"fmt"
	"os"
	"syscall"
	"time"

	"k8s.io/klog/v2"
)

// initRestartDelay is how long kubestore, as PID 1, waits after a failure
// before it starts again: long enough not to spin on a cause that lasts
// (a port in use, a broken disk), short enough to be back soon after one
// that passes.
const initRestartDelay = 5 * time.Second

// restartAsInit starts kubestore again in place of this process when it
// runs as PID 1 and is about to exit on an error (a failed start, a fatal
// error of the embedded etcd): PID 1 exiting makes the kernel panic, and
// there is no init to restart it. The new process replays etcd's WAL
// exactly as a restart by a supervisor would; it keeps PID 1, its
// arguments and environment. When a stop was asked for (the first signal,
// before or during the wait) it returns and the caller exits, as it does
// off PID 1.
func restartAsInit(ctx context.Context) {
	if os.Getpid() != 1 || ctx.Err() != nil {
		return
	}
	fmt.Fprintf(os.Stderr, "kubestore: running as PID 1: starting again in %s\n", initRestartDelay)
	select {
	case <-ctx.Done():
		return
	case <-time.After(initRestartDelay):
	}
	// Every descriptor kubestore opens is close-on-exec (Go's default), so
	// the data dir's lock and etcd's files are released by the exec.
	err := syscall.Exec("/proc/self/exe", os.Args, os.Environ())
	fmt.Fprintln(os.Stderr, "kubestore: starting again:", err)
}

// startAgain starts kubestore again in place of this process, which
// stopped to read again what its embedded etcd reads only at its start
// (server.ErrRestart): same PID, arguments and environment, so a
// supervisor, PID 1 mode or a test sees one process go on.
func startAgain() {
	klog.Flush()
	err := syscall.Exec("/proc/self/exe", os.Args, os.Environ())
	fmt.Fprintln(os.Stderr, "kubestore: starting again:", err)
}
