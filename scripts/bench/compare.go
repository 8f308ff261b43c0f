package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// CompareResult is the compare section: the server's CPU per create,
// update and LIST of -bin beside -compare-bin's (a build of an earlier
// commit: make bench-compare BASE=<rev>), measured in rounds that
// alternate which binary goes first, each on a fresh data dir. One store
// section's figures move by 10–25 % from run to run of one binary on a
// 2-core machine (docs/PERFORMANCE.md), so "no slower than 1.1×" can only
// be told from several rounds side by side.
type CompareResult struct {
	// Skipped says why the section did not run; nothing else is set then.
	Skipped    string `json:"skipped,omitempty"`
	BaseBin    string `json:"baseBin"`
	Rounds     int    `json:"rounds"`
	ConfigMaps int    `json:"configMaps"`
	// UpdatePasses is how many times each round updates every ConfigMap.
	UpdatePasses int         `json:"updatePasses"`
	Ops          []CompareOp `json:"ops"`
}

// CompareOp is one operation's server CPU per request, in ms: one figure
// per round (per update pass for updates) for each binary.
type CompareOp struct {
	Op     string    `json:"op"`
	BaseMs []float64 `json:"baseMs"`
	BinMs  []float64 `json:"binMs"`
}

// Ratio is -bin's mean over -compare-bin's.
func (c CompareOp) Ratio() float64 { return mean(c.BinMs) / mean(c.BaseMs) }

func mean(xs []float64) float64 {
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

const compareUpdatePasses = 3

// compare runs -compare-rounds rounds of the store section's creates,
// updates and LISTs (cached, then uncached after a restart with the
// ConfigMaps' cache off) on -bin and -compare-bin.
func (b *bench) compare(ctx context.Context) error {
	r := &CompareResult{BaseBin: b.o.CompareBin, Rounds: b.o.CompareRounds, ConfigMaps: b.o.ConfigMaps, UpdatePasses: compareUpdatePasses}
	b.res.Compare = r
	if b.o.CompareBin == "" {
		r.Skipped = "no -compare-bin (make bench-compare BASE=<rev> builds one)"
		b.logf("compare: skipped: %s", r.Skipped)
		return nil
	}
	if _, err := os.Stat(b.o.CompareBin); err != nil {
		return fmt.Errorf("invalid -compare-bin %q: %w", b.o.CompareBin, err)
	}
	ops := map[string]*CompareOp{}
	var order []string
	for round := range r.Rounds {
		// base first in even rounds, -bin first in odd ones.
		for i := range 2 {
			base := (i+round)%2 == 0
			bin := b.o.Bin
			if base {
				bin = b.o.CompareBin
			}
			figures, err := b.compareOnce(ctx, bin, fmt.Sprintf("compare-%d-%t", round, base))
			if err != nil {
				return fmt.Errorf("compare: %s, round %d: %w", bin, round+1, err)
			}
			for _, f := range figures {
				c := ops[f.op]
				if c == nil {
					c = &CompareOp{Op: f.op}
					ops[f.op] = c
					order = append(order, f.op)
				}
				if base {
					c.BaseMs = append(c.BaseMs, f.ms)
				} else {
					c.BinMs = append(c.BinMs, f.ms)
				}
			}
		}
	}
	for _, op := range order {
		c := *ops[op]
		r.Ops = append(r.Ops, c)
		b.logf("compare: %s: server CPU %.3f ms against %.3f: %.3f×", op, mean(c.BinMs), mean(c.BaseMs), c.Ratio())
	}
	return nil
}

type opFigure struct {
	op string
	ms float64
}

// compareOnce measures one binary on a fresh data dir: the creates, the
// update passes, the cached LISTs, then the uncached ones after a restart.
func (b *bench) compareOnce(ctx context.Context, bin, name string) ([]opFigure, error) {
	o := b.o
	o.Bin = bin
	sb := &bench{o: o, res: &Result{}, root: b.root, dataDir: filepath.Join(b.root, name), starts: b.starts}
	defer func() {
		b.starts = sb.starts
		if sb.srv != nil {
			sb.srv.kill()
		}
	}()
	if _, err := sb.start(ctx); err != nil {
		return nil, err
	}
	// What a start leaves running (the release of its pages, the first
	// controllers' syncs) is not the creates' cost.
	if err := sleep(ctx, 5*time.Second); err != nil {
		return nil, err
	}
	cs := sb.clients(o.Clients)
	if err := createBenchNamespace(ctx, cs[0]); err != nil {
		return nil, err
	}
	if err := sb.createConfigMaps(ctx, cs); err != nil {
		return nil, err
	}
	out := []opFigure{{"create", sb.res.CreateCPUMs}}
	for pass := 1; pass <= compareUpdatePasses; pass++ {
		if err := sb.updates(ctx, pass); err != nil {
			return nil, err
		}
		out = append(out, opFigure{"update", sb.res.UpdateCPUMs})
	}
	mode, err := sb.configMapsCache(ctx)
	if err != nil {
		return nil, err
	}
	if err := sb.lists(ctx, mode); err != nil {
		return nil, err
	}
	if err := sb.stop(); err != nil {
		return nil, err
	}
	if _, err := sb.start(ctx, "--watch-cache-sizes=configmaps#0"); err != nil {
		return nil, err
	}
	if err := sb.lists(ctx, "uncached"); err != nil {
		return nil, err
	}
	if err := sb.stop(); err != nil {
		return nil, err
	}
	for _, l := range sb.res.Lists {
		gz := ""
		if l.Gzip {
			gz = " gzip"
		}
		out = append(out, opFigure{fmt.Sprintf("LIST %s %s %s%s", l.Cache, l.Format, l.Variant, gz), l.ServerCPUMs})
	}
	return out, os.RemoveAll(sb.dataDir)
}

// compareRows are the figures of the compare section: each operation's
// mean server CPU for -bin against -compare-bin, and their ratio (issue
// 39: nothing slower than 1.1×).
func compareRows(row func(figure, value string, t target), r *Result) {
	for _, c := range r.Compare.Ops {
		ratio := c.Ratio()
		row("compare: server CPU per "+c.Op, fmt.Sprintf("%.3f ms against %.3f (%d and %d figures): %.3f×",
			mean(c.BinMs), mean(c.BaseMs), len(c.BinMs), len(c.BaseMs), ratio), target{"<= 1.1×", ratio <= 1.1})
	}
}
