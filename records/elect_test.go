package records_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kubestore/kubestore/cacher/cachertest"
)

// A term that ends at once (fn returns, as a failing controller's would)
// is followed by a pause before the next campaign, each an etcd write.
func TestLeadPausesAfterAShortTerm(t *testing.T) {
	b := cachertest.Records(cachertest.Open(t))
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	var terms atomic.Int32
	b.Lead(ctx, "short-terms", "a", func(context.Context) { terms.Add(1) })
	// 5 s with a 2 s pause after each term: at most 3 terms (fewer on a
	// slow machine, where a campaign takes long); without it, hundreds.
	if n := terms.Load(); n < 1 || n > 3 {
		t.Errorf("%d terms in 5 s, want 1 to 3 (one per electionRetry at most)", n)
	}
}

// Two holders of different identities on one etcd: one term at a time;
// when the holder's term ends, the other leads without a pause.
func TestLeadOneHolderAtATime(t *testing.T) {
	b := cachertest.Records(cachertest.Open(t))
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var (
		mu      sync.Mutex
		holding int
		overlap bool
		terms   = make(chan string, 10)
	)
	hold := func(name string) func(context.Context) {
		return func(term context.Context) {
			mu.Lock()
			holding++
			overlap = overlap || holding > 1
			mu.Unlock()
			terms <- name
			select {
			case <-term.Done():
			case <-time.After(3 * time.Second):
			}
			mu.Lock()
			holding--
			mu.Unlock()
		}
	}
	var wg sync.WaitGroup
	for _, name := range []string{"a", "b"} {
		wg.Go(func() { b.Lead(ctx, "one-holder", name, hold(name)) })
	}
	first := <-terms
	select {
	case second := <-terms:
		if second == first {
			t.Errorf("%s led twice in a row while the other campaigned", first)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the second holder did not lead after the first term ended")
	}
	cancel()
	wg.Wait()
	if overlap {
		t.Error("two terms overlapped")
	}
}
