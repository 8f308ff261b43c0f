package memory

import (
	"context"
	"fmt"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"time"

	"k8s.io/klog/v2"
)

// The memory-pressure mode (issue 39): near the memory limit, drop what is
// rebuilt when next needed, so that the heap guard (cacher.HeapGuard,
// which refuses creates above HeapGuardPercent of the Go memory limit)
// and the cgroup's OOM killer meet only the data itself. What is dropped
// and what it buys is measured in docs/PERFORMANCE.md. Its watermarks
// are in limits.go.
const (
	// pressureInterval is how often the pressure is read: the live heap
	// from the runtime, the working set from two small cgroup files.
	pressureInterval = time.Second
	// pressureCooldown is the least time between two reliefs: a dropped
	// part rebuilt by the next request is not dropped again at once.
	pressureCooldown = time.Minute
)

// Pressure watches the process's memory and, under pressure, drops what
// its owners registered as droppable, then returns the freed heap to the
// system.
type Pressure struct {
	limits Limits

	mu    sync.Mutex
	drops []dropper
}

type dropper struct {
	name string
	drop func() bool
}

// NewPressure watches the live heap against the Go memory limit of l and
// the working set of the memory cgroup that limits the process.
func NewPressure(l Limits) *Pressure { return &Pressure{limits: l} }

// Droppable registers drop, which frees name (a part rebuilt on its next
// use) and reports whether it held anything.
func (p *Pressure) Droppable(name string, drop func() bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.drops = append(p.drops, dropper{name, drop})
}

// Run relieves the pressure each time it begins, and again after
// pressureCooldown while it lasts if a dropped part was rebuilt since: a
// pressure that only the data makes is not relieved over and over.
func (p *Pressure) Run(ctx context.Context) {
	tick := time.NewTicker(pressureInterval)
	defer tick.Stop()
	began, last := true, time.Time{}
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		why := p.under()
		if why == "" {
			began = true
			continue
		}
		if time.Since(last) < pressureCooldown {
			continue
		}
		if dropped := p.Relieve(why, began); began || len(dropped) > 0 {
			began, last = false, time.Now()
		}
	}
}

// under says why the process is under pressure; "" when it is not.
func (p *Pressure) under() string {
	if w := p.limits.pressureHeapWatermark(); w > 0 {
		if live := LiveHeap(); live > w {
			return fmt.Sprintf("live heap %d MiB, above %d%% of the memory limit of %d MiB", live>>20, pressureHeapPercent, p.limits.Limit>>20)
		}
	}
	if cg := p.limits.cgroup; cg != nil {
		ws, err := cg.WorkingSet()
		if err == nil && ws > cg.Limit()/100*pressureCgroupPercent {
			return fmt.Sprintf("working set %d MiB, above %d%% of the limit of %d MiB (%s)", ws>>20, pressureCgroupPercent, cg.Limit()>>20, cg.LimitFile())
		}
	}
	return ""
}

var (
	liveMu     sync.Mutex
	liveSample = []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
)

// LiveHeap is the heap the last garbage collection found live.
func LiveHeap() uint64 {
	liveMu.Lock()
	defer liveMu.Unlock()
	metrics.Read(liveSample)
	if liveSample[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return liveSample[0].Value.Uint64()
}

// Relieve drops every registered part and returns what that freed to the
// system when anything was dropped or always is set; it returns the
// names of the parts dropped.
func (p *Pressure) Relieve(why string, always bool) []string {
	p.mu.Lock()
	drops := p.drops
	p.mu.Unlock()
	var dropped []string
	for _, d := range drops {
		if d.drop() {
			dropped = append(dropped, d.name)
		}
	}
	if len(dropped) == 0 && !always {
		return nil
	}
	before := LiveHeap()
	debug.FreeOSMemory()
	klog.InfoS("Under memory pressure: dropped what is rebuilt on demand and returned the free heap", "why", why,
		"dropped", dropped, "liveHeapBefore", before, "liveHeapAfter", LiveHeap())
	return dropped
}
