package server

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
// no longer uses.
const trimInterval = 15 * time.Second

// releaseMemory returns what only the start needed, then keeps returning
// what a burst left behind. 10 s after the start it frees the garbage of
// building the API (debug.FreeOSMemory) and the binary's start-up pages
// (releaseStartupPages). Then, every trimInterval, it frees the heap again
// when it holds much more than the live objects (heapSlack): the Go runtime
// lets the heap grow to twice the live heap between collections and returns
// the rest to the system only slowly, so after a burst of writes or LISTs
// an idle device would otherwise stay near the burst's peak. Measured in
// docs/PERFORMANCE.md.
func releaseMemory(ctx context.Context) {
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
		klog.V(2).InfoS("Released start-up memory", "binaryMappings", released)
	}
	// What the heap holds right after a trim: the live objects and the
	// fragmentation of their spans, which no collection gives back.
	_, floor := heapSlack()
	tick := time.NewTicker(trimInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		live, held := heapSlack()
		// The heap shrank (objects deleted, the cache's history moved
		// on) and the runtime returned it: measure growth from there.
		floor = min(floor, held)
		if held <= floor+trimThreshold(live) {
			continue
		}
		debug.FreeOSMemory()
		_, floor = heapSlack()
		klog.V(3).InfoS("Returned unused heap memory", "liveBytes", live, "heldBytes", held, "nowHeldBytes", floor)
	}
}

// trimThreshold is how much more than after the last trim the heap may
// hold before it is trimmed again: a quarter of the live heap, at least
// 8 MiB. Under a steady load the heap grows by up to the live heap between
// collections (GOGC=100), so a busy server is trimmed at most once per
// trimInterval: one extra collection every 15 s.
func trimThreshold(live uint64) uint64 { return max(live/4, 8<<20) }

var heapMetrics = []metrics.Sample{
	{Name: "/gc/heap/live:bytes"},
	{Name: "/memory/classes/heap/objects:bytes"},
	{Name: "/memory/classes/heap/unused:bytes"},
	{Name: "/memory/classes/heap/free:bytes"},
}

// heapSlack reports the live heap as of the last collection and what the
// heap holds from the system: objects (live and dead not yet swept),
// unused span space, and free pages not yet returned.
func heapSlack() (live, held uint64) {
	metrics.Read(heapMetrics)
	for i, m := range heapMetrics {
		if m.Value.Kind() != metrics.KindUint64 {
			continue
		}
		if i == 0 {
			live = m.Value.Uint64()
		} else {
			held += m.Value.Uint64()
		}
	}
	return live, held
}
