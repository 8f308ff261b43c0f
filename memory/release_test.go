package memory

import (
	"runtime"
	"testing"
)

// TestQuietSince: a heap is trimmed only when nothing collected it and
// it grows too slowly to hold the threshold again within 16 s.
func TestQuietSince(t *testing.T) {
	const mib = 1 << 20
	before := heap{live: 80 * mib, cycles: 7, allocs: 1000 * mib}
	for _, c := range []struct {
		name  string
		now   heap
		quiet bool
	}{
		{"idle", heap{live: 80 * mib, cycles: 7, allocs: 1001 * mib}, true},
		{"a collection since", heap{live: 80 * mib, cycles: 8, allocs: 1001 * mib}, false},
		// The threshold of 80 MiB live is 20 MiB: 1.25 MiB/s, 6.25 MiB in 5 s.
		{"allocating below the rate", heap{live: 80 * mib, cycles: 7, allocs: 1006 * mib}, true},
		{"allocating at the rate", heap{live: 80 * mib, cycles: 7, allocs: 1007 * mib}, false},
		// A small heap's threshold is 8 MiB: 0.5 MiB/s.
		{"small heap allocating", heap{live: 10 * mib, cycles: 7, allocs: 1003 * mib}, false},
	} {
		if got := c.now.quietSince(before); got != c.quiet {
			t.Errorf("%s: quiet %v, want %v", c.name, got, c.quiet)
		}
	}
}

// TestReadHeap: the runtime has every metric the trim reads.
func TestReadHeap(t *testing.T) {
	runtime.GC() // the live heap is known from the first collection
	h := readHeap()
	if h.live == 0 || h.held < h.live || h.allocs == 0 {
		t.Fatalf("heap metrics %+v: a live heap, held at least that, and allocations expected", h)
	}
}
