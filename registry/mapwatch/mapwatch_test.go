package mapwatch

import (
	"bytes"
	"runtime"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// A mapped watch stopped while its next event waits for a reader that
// left ends its loop and closes its channel.
func TestMapWatchStopsWithAnEventPending(t *testing.T) {
	in := watch.NewFake()
	w := New(in, func(ev watch.Event) watch.Event {
		ev.Object.(*corev1.Pod).Name = "mapped"
		return ev
	})
	in.Add(&corev1.Pod{})
	if ev := <-w.ResultChan(); ev.Object.(*corev1.Pod).Name != "mapped" {
		t.Fatalf("event %v not mapped", ev)
	}
	// The loop has taken this one and waits to send it.
	in.Add(&corev1.Pod{})
	w.Stop()
	deadline := time.Now().Add(10 * time.Second)
	for loops := 1; loops > 0; {
		if time.Now().After(deadline) {
			t.Fatal("the mapped watch's loop still runs 10s after its stop")
		}
		time.Sleep(10 * time.Millisecond)
		buf := make([]byte, 1<<20)
		loops = bytes.Count(buf[:runtime.Stack(buf, true)], []byte("mapwatch.(*mappedWatch).loop"))
	}
	if ev, ok := <-w.ResultChan(); ok {
		t.Errorf("the stopped watch sent %v", ev)
	}
}
