package main

import (
	"os"
	"os/signal"
	"syscall"
)

// reapOrphans makes kubestore a proper init when it runs as PID 1 (a bare
// appliance, a container without an init): every orphaned process in the
// PID namespace becomes its child, and each one that exits is reaped so
// that no zombie fills the process table. kubestore itself starts no
// children, so waiting for any child takes nobody's exit status away.
func reapOrphans() {
	if os.Getpid() != 1 {
		return
	}
	sigchld := make(chan os.Signal, 1)
	signal.Notify(sigchld, syscall.SIGCHLD)
	go func() {
		for {
			// Children that exited before the handler was installed
			// (e.g. started by a shell that then exec'd kubestore) are
			// reaped on the first pass.
			reap()
			<-sigchld
		}
	}()
}

// reap waits for every exited child without blocking. Signals coalesce,
// so one SIGCHLD may stand for many exits.
func reap() {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if err == syscall.EINTR {
			continue
		}
		if pid <= 0 || err != nil {
			return
		}
	}
}
