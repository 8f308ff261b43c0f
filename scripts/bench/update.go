package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// UpdateResult is the update section: a data dir of -configmaps ConfigMaps
// of 1 KiB updated to a release of a newer data format (-newer-bin: this
// tree built with a simulated format 2, make build-format2), committed,
// then taken back by the previous release by itself
// (--restore-on-newer-data).
type UpdateResult struct {
	// Skipped says why the section did not run; nothing else is set then.
	Skipped    string `json:"skipped,omitempty"`
	NewerBin   string `json:"newerBin"`
	ConfigMaps int    `json:"configMaps"`
	// DatabaseBytes is etcd's database file before the update.
	DatabaseBytes int64 `json:"databaseBytes"`
	// ReadyMs is a restart of the previous release; TrialReadyMs the
	// first start of the newer one, with its pre-update snapshot, and
	// TrialWriteBytes what that start wrote to disk.
	ReadyMs         float64 `json:"readyMs"`
	TrialReadyMs    float64 `json:"trialReadyMs"`
	TrialWriteBytes int64   `json:"trialWriteBytes"`
	SnapshotBytes   int64   `json:"snapshotBytes"`
	// CommitMs is kubestore update commit through the running server;
	// CommitKeys the keys its migration rewrote, CommitWriteBytes what the
	// server wrote to disk meanwhile.
	CommitMs         float64 `json:"commitMs"`
	CommitKeys       int     `json:"commitKeys"`
	CommitWriteBytes int64   `json:"commitWriteBytes"`
	// WayBackReadyMs is the previous release's start with
	// --restore-on-newer-data on the committed data, to ready.
	WayBackReadyMs float64 `json:"wayBackReadyMs"`
}

var rewrittenKeys = regexp.MustCompile(`\((\d+) keys rewritten\)`)

// update measures an update to a newer data format, its commit and the
// way back, on a data dir of its own.
func (b *bench) update(ctx context.Context) error {
	r := &UpdateResult{NewerBin: b.o.NewerBin, ConfigMaps: b.o.ConfigMaps}
	b.res.Update = r
	if _, err := os.Stat(b.o.NewerBin); err != nil {
		r.Skipped = fmt.Sprintf("no newer release at %q (make build-format2 builds it)", b.o.NewerBin)
		b.logf("update: skipped: %s", r.Skipped)
		return nil
	}
	dir := filepath.Join(b.root, "update")
	srv, _, err := b.startOn(ctx, dir, "update")
	if err != nil {
		return err
	}
	cs := clientFor(srv, true)
	if _, err := parallel(ctx, b.o.Clients, b.o.ConfigMaps, func(ctx context.Context, _, i int) error {
		cm := configMap(i)
		cm.Namespace = "default"
		_, err := cs.CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{})
		return err
	}); err != nil {
		srv.kill()
		return err
	}
	if err := stopServer(srv); err != nil {
		return err
	}
	if srv, err = b.restart(ctx, dir, b.o.Bin, &r.ReadyMs); err != nil {
		return err
	}
	if err := stopServer(srv); err != nil {
		return err
	}
	db, err := os.Stat(filepath.Join(dir, "etcd", "member", "snap", "db"))
	if err != nil {
		return err
	}
	r.DatabaseBytes = db.Size()

	// The update, on trial, then committed.
	if srv, err = b.restart(ctx, dir, b.o.NewerBin, &r.TrialReadyMs); err != nil {
		return err
	}
	if err := measureCommit(ctx, srv, dir, b.o.NewerBin, r); err != nil {
		srv.kill()
		return err
	}
	if err := stopServer(srv); err != nil {
		return err
	}
	log, err := os.ReadFile(srv.logPath)
	if err != nil {
		return err
	}
	if m := rewrittenKeys.FindSubmatch(log); m != nil {
		r.CommitKeys, _ = strconv.Atoi(string(m[1]))
	}

	// The way back by itself.
	if srv, err = b.restart(ctx, dir, b.o.Bin, &r.WayBackReadyMs, "--restore-on-newer-data"); err != nil {
		return err
	}
	b.logf("update: snapshot %s of a %s database; ready %.0f ms, %.0f ms on trial; commit of %d keys %.0f ms; way back %.0f ms",
		mib(r.SnapshotBytes), mib(r.DatabaseBytes), r.ReadyMs, r.TrialReadyMs, r.CommitKeys, r.CommitMs, r.WayBackReadyMs)
	return stopServer(srv)
}

// measureCommit records what the newer release srv wrote to start on
// trial, its pre-update snapshot, and the time and writes of kubestore
// update commit through it.
func measureCommit(ctx context.Context, srv *server, dir, newer string, r *UpdateResult) error {
	var err error
	if r.TrialWriteBytes, err = writeBytes(srv.pid()); err != nil {
		return err
	}
	snap, err := os.Stat(filepath.Join(dir, "pre-update.db"))
	if err != nil {
		return fmt.Errorf("the newer release took no pre-update snapshot: %w", err)
	}
	r.SnapshotBytes = snap.Size()
	start := time.Now()
	if out, err := exec.CommandContext(ctx, newer, "update", "commit", "--data-dir", dir).CombinedOutput(); err != nil {
		return fmt.Errorf("kubestore update commit: %v\n%s", err, out)
	}
	r.CommitMs = ms(time.Since(start))
	after, err := writeBytes(srv.pid())
	r.CommitWriteBytes = after - r.TrialWriteBytes
	return err
}

// restart starts bin on dir with extra arguments and records the time to
// ready in readyMs.
func (b *bench) restart(ctx context.Context, dir, bin string, readyMs *float64, extra ...string) (*server, error) {
	b.starts++
	logPath := filepath.Join(b.root, fmt.Sprintf("update-%d.log", b.starts))
	srv, ready, err := startServer(ctx, bin, dir, logPath, append(append([]string{}, b.o.ServeArgs...), extra...))
	if err != nil {
		return nil, err
	}
	*readyMs = ms(ready)
	b.logf("update: %s ready in %v", filepath.Base(bin), ready.Round(time.Millisecond))
	return srv, nil
}

func updateRows(row func(figure, value string, t target), r *Result) {
	u := r.Update
	row("update: etcd database of the ConfigMaps", fmt.Sprintf("%s (%d ConfigMaps of 1 KiB)", mib(u.DatabaseBytes), u.ConfigMaps), target{})
	row("update: pre-update snapshot written (one per update)", mib(u.SnapshotBytes), target{})
	row("update: exec to ready, restart of the same release", fmt.Sprintf("%.0f ms", u.ReadyMs), target{})
	row("update: exec to ready, first start of the newer release (trial)", fmt.Sprintf("%.0f ms, %s written", u.TrialReadyMs, mib(u.TrialWriteBytes)), target{})
	row("update: kubestore update commit (format 1 to 2)", fmt.Sprintf("%.0f ms, %d keys rewritten, %s written", u.CommitMs, u.CommitKeys, mib(u.CommitWriteBytes)), target{})
	row("update: way back by itself (--restore-on-newer-data), exec to ready", fmt.Sprintf("%.0f ms", u.WayBackReadyMs), target{})
}
