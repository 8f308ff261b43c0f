// Package mapwatch passes a watch's events on through a function, and
// ends with the watch's stop even when no one reads it any more.
package mapwatch

import (
	"sync"

	"k8s.io/apimachinery/pkg/watch"
)

// New passes w's events on through fn. Unlike watch.Filter's, its loop
// ends when it is stopped while an event waits for a reader that left (a
// reflector stops its watch and returns; the watch cache's does too):
// watch.Filter's goroutine would wait on that send for ever.
func New(w watch.Interface, fn func(watch.Event) watch.Event) watch.Interface {
	m := &mappedWatch{in: w, out: make(chan watch.Event), stop: make(chan struct{})}
	go m.loop(fn)
	return m
}

type mappedWatch struct {
	in       watch.Interface
	out      chan watch.Event
	stop     chan struct{}
	stopOnce sync.Once
}

func (w *mappedWatch) ResultChan() <-chan watch.Event { return w.out }

func (w *mappedWatch) Stop() {
	w.stopOnce.Do(func() { close(w.stop) })
	w.in.Stop()
}

func (w *mappedWatch) loop(fn func(watch.Event) watch.Event) {
	defer close(w.out)
	for {
		select {
		case ev, ok := <-w.in.ResultChan():
			if !ok {
				return
			}
			select {
			case w.out <- fn(ev):
			case <-w.stop:
				return
			}
		case <-w.stop:
			return
		}
	}
}
