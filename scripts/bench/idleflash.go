package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// idleFlashSettle is how long after ready the idle-flash section waits
// before it measures: the first start's own writes (PKI, bootstrap
// manifests, the controllers' first objects) are not idle.
const idleFlashSettle = 10 * time.Second

// idleFlashTarget is issue 39's goal, bytes per second (1 KB/s).
const idleFlashTarget = 1000

// IdleFlashResult is the idle-flash section: what an idle kubestore on a
// fresh data dir writes to storage over -idle-flash, with no client and
// no change: the difference of write_bytes in /proc/PID/io, which counts
// what the process caused to be written to the storage layer (its data
// dir; and its log, LogBytes, which on a device goes elsewhere).
type IdleFlashResult struct {
	// Skipped says why the section did not run; nothing else is set then.
	Skipped   string  `json:"skipped,omitempty"`
	SettleSec float64 `json:"settleSec"`
	WindowSec float64 `json:"windowSec"`
	// WriteBytes is write_bytes over the window; LogBytes the growth of
	// the server's log file over it.
	WriteBytes  int64   `json:"writeBytes"`
	LogBytes    int64   `json:"logBytes"`
	BytesPerSec float64 `json:"bytesPerSec"`
	MBPerDay    float64 `json:"mbPerDay"`
}

// idleFlash measures the writes of an idle server on a fresh data dir of
// its own, -idle-flash long, idleFlashSettle after it is ready.
func (b *bench) idleFlash(ctx context.Context) error {
	r := &IdleFlashResult{}
	b.res.IdleFlash = r
	if b.o.IdleFlash <= 0 {
		r.Skipped = "-idle-flash is 0"
		b.logf("idle-flash: skipped: %s", r.Skipped)
		return nil
	}
	srv, _, err := b.startOn(ctx, filepath.Join(b.root, "idle-flash"), "idle-flash")
	if err != nil {
		return err
	}
	b.logf("idle-flash: settling %v, then measuring %v", idleFlashSettle, b.o.IdleFlash)
	if err := measureIdleFlash(ctx, srv, b.o.IdleFlash, r); err != nil {
		srv.kill()
		return err
	}
	b.logf("idle-flash: %d bytes in %.0f s: %.0f bytes/s, %.1f MB/day (log %d bytes)", r.WriteBytes, r.WindowSec, r.BytesPerSec, r.MBPerDay, r.LogBytes)
	return stopServer(srv)
}

// measureIdleFlash waits idleFlashSettle, then records what srv writes
// over window in r.
func measureIdleFlash(ctx context.Context, srv *server, window time.Duration, r *IdleFlashResult) error {
	r.SettleSec = idleFlashSettle.Seconds()
	if err := sleep(ctx, idleFlashSettle); err != nil {
		return err
	}
	before, err := writeBytes(srv.pid())
	if err != nil {
		return err
	}
	logBefore := fileSize(srv.logPath)
	start := time.Now()
	if err := sleep(ctx, window); err != nil {
		return err
	}
	after, err := writeBytes(srv.pid())
	if err != nil {
		return err
	}
	elapsed := time.Since(start)
	if exited, werr := srv.exited(); exited {
		return fmt.Errorf("idle-flash: kubestore exited while idle: %v\n%s", werr, tail(srv.logPath))
	}
	r.WindowSec = elapsed.Seconds()
	r.WriteBytes = after - before
	r.LogBytes = fileSize(srv.logPath) - logBefore
	r.BytesPerSec = float64(r.WriteBytes) / elapsed.Seconds()
	r.MBPerDay = r.BytesPerSec * 86400 / 1e6
	return nil
}

// fileSize is the size of path, 0 when it cannot be read.
func fileSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

func idleFlashRows(row func(figure, value string, t target), r *Result) {
	f := r.IdleFlash
	row(fmt.Sprintf("idle flash: fresh data dir, %.0f s from %.0f s after ready", f.WindowSec, f.SettleSec),
		fmt.Sprintf("%.0f bytes/s, %.1f MB/day (%d bytes, of which log %d)", f.BytesPerSec, f.MBPerDay, f.WriteBytes, f.LogBytes),
		target{"<= 1 KB/s", f.BytesPerSec <= idleFlashTarget})
}
