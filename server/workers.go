package server

import (
	"context"
	"sync"
)

// workers are the goroutines kubestore runs beside the generic server's
// own (controllers, the unix socket, renewals): all of them get one
// context, cancelled by stop, which then waits for every one to return.
type workers struct {
	ctx    context.Context
	cancel context.CancelFunc
	mu     sync.Mutex
	// stopped refuses starts after stop: a post-start hook can still run
	// while an early stop waits.
	stopped bool
	wg      sync.WaitGroup
}

func newWorkers() *workers {
	ctx, cancel := context.WithCancel(context.Background())
	return &workers{ctx: ctx, cancel: cancel}
}

// start runs fn in a goroutine until stop, unless stop has begun.
func (w *workers) start(fn func(ctx context.Context)) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped {
		return
	}
	w.wg.Go(func() { fn(w.ctx) })
}

// stop cancels every worker and waits until all have returned. It may be
// called more than once.
func (w *workers) stop() {
	w.mu.Lock()
	w.stopped = true
	w.mu.Unlock()
	w.cancel()
	w.wg.Wait()
}
