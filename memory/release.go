// Package memory owns kubestore's memory, for devices where every MiB
// counts. It reads what bounds it once at the start (Limits: the device's
// memory, the memory cgroup that limits the process, the Go memory limit
// given or derived from them, and the watermarks), which main hands to
// the Go runtime (Limits.SetRuntime), the heap guard (cacher.HeapGuard
// refuses creates near the limit) and the server. It gives back what a
// long-running kubestore holds and no longer uses: the garbage and the
// binary's pages of the start, then the heap a burst of writes or LISTs
// left behind (Release); and near the memory limit, what is rebuilt on
// demand (Pressure). Measured in docs/PERFORMANCE.md.
package memory

import (
	"context"
	"runtime/debug"
	"runtime/metrics"
	"time"

	"k8s.io/klog/v2"
)

// startupSettleTime is how long after the start the start-up garbage and
// pages are released: the post-start hooks and the first clients' lists are
// done by then.
const startupSettleTime = 10 * time.Second

// trimInterval is how often the heap is checked for memory it holds but
// no longer uses: a burst's slack is returned 5–10 s after it ended.
const trimInterval = 5 * time.Second

// Release returns what only the start needed, then keeps returning
// what a burst left behind. 10 s after the start it frees the garbage of
// building the API (debug.FreeOSMemory) and the pages of the binary and
// of the database that the start touched (releaseStartupPages). Then,
// every trimInterval, it frees the heap again when it holds much more
// than after the last trim, while it is quiet (heap.quietSince): the Go runtime
// lets the heap grow to twice the live heap between collections and returns
// the rest to the system only slowly, so after a burst of writes or LISTs
// an idle device would otherwise stay near the burst's peak. Measured in
// docs/PERFORMANCE.md.
func Release(ctx context.Context) {
	select {
	case <-ctx.Done():
		return
	case <-time.After(startupSettleTime):
	}
	debug.FreeOSMemory()
	released, err := releaseStartupPages()
	if err != nil {
		klog.ErrorS(err, "Releasing start-up pages")
	} else {
		klog.V(2).InfoS("Released start-up memory", "readOnlyFileMappings", released)
	}
	// What the heap holds right after a trim: the live objects and the
	// fragmentation of their spans, which no collection gives back.
	last := readHeap()
	floor := last.held
	tick := time.NewTicker(trimInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		now := readHeap()
		// The heap shrank (objects deleted, the cache's history moved
		// on) and the runtime returned it: measure growth from there.
		floor = min(floor, now.held)
		quiet := now.quietSince(last)
		last = now
		if !quiet || now.held <= floor+trimThreshold(now.live) {
			continue
		}
		debug.FreeOSMemory()
		last = readHeap()
		floor = last.held
		klog.V(3).InfoS("Returned unused heap memory", "liveBytes", now.live, "heldBytes", now.held, "nowHeldBytes", floor)
	}
}

// trimThreshold is how much more than after the last trim the heap may
// hold before it is trimmed again: a quarter of the live heap, at least
// 8 MiB.
func trimThreshold(live uint64) uint64 { return max(live/4, 8<<20) }

// heap is what the runtime's metrics say of the heap at one moment.
type heap struct {
	// live is the live heap as of the last collection; held what the
	// heap holds from the system (objects, live and dead not yet swept,
	// unused span space, and free pages not yet returned).
	live, held uint64
	// cycles counts the collections so far, allocs the bytes allocated.
	cycles, allocs uint64
}

// quietSince reports whether the heap was quiet since an earlier look:
// no collection, and less allocated than a sixteenth of the trim's
// threshold a second (at that rate the heap needs more than 16 s to
// hold the threshold again, and a trim is not undone at once). Only a
// quiet heap is trimmed: under load the runtime collects on its own,
// and forcing more took the idle CPU of a server with 10,000 ConfigMaps
// from 1.5 to 4.2 % at GOGC=50.
func (h heap) quietSince(earlier heap) bool {
	return h.cycles == earlier.cycles && h.allocs-earlier.allocs < trimThreshold(h.live)/16*uint64(trimInterval/time.Second)
}

var heapMetrics = []metrics.Sample{
	{Name: "/gc/cycles/total:gc-cycles"},
	{Name: "/gc/heap/allocs:bytes"},
	{Name: "/gc/heap/live:bytes"},
	{Name: "/memory/classes/heap/objects:bytes"},
	{Name: "/memory/classes/heap/unused:bytes"},
	{Name: "/memory/classes/heap/free:bytes"},
}

// readHeap reads the heap's metrics.
func readHeap() heap {
	metrics.Read(heapMetrics)
	var h heap
	for i, m := range heapMetrics {
		if m.Value.Kind() != metrics.KindUint64 {
			continue
		}
		switch i {
		case 0:
			h.cycles = m.Value.Uint64()
		case 1:
			h.allocs = m.Value.Uint64()
		case 2:
			h.live = m.Value.Uint64()
		default:
			h.held += m.Value.Uint64()
		}
	}
	return h
}
