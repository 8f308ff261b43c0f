package etcdembed

import (
	"context"
	"testing"
	"time"
)

// A write the guard makes wait for the writes in flight ends with its
// request's context (issue 50: the wait ignored it, and a request past
// its deadline held its handler until every other write was answered).
func TestQuotaGuardWaitEndsWithTheRequest(t *testing.T) {
	cfg := internalConfig(t, 16<<20)
	srv, err := Start(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	g := srv.quota
	// A write in flight that takes most of the room, never answered.
	g.mu.Lock()
	g.sync()
	room := g.room()
	g.mu.Unlock()
	if d, _, err := g.admit(t.Context(), room-smallestWrite); d != admitted || err != nil {
		t.Fatalf("the first write: %v %v, want it admitted", d, err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	began := time.Now()
	done := make(chan error, 1)
	go func() {
		_, _, err := g.admit(ctx, 2*smallestWrite)
		done <- err
	}()
	select {
	case err := <-done:
		if err != context.DeadlineExceeded {
			t.Errorf("a write waiting for room past its deadline: %v, want %v", err, context.DeadlineExceeded)
		}
		t.Logf("the waiting write ended %s after it began (deadline 200 ms)", time.Since(began).Round(time.Millisecond))
	case <-time.After(10 * time.Second):
		t.Fatal("a write waiting for room did not end with its context in 10 s")
	}
	g.done(room - smallestWrite)
}
