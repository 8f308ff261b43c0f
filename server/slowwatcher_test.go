package server_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
)

// A watcher that stops reading must neither hold server memory without
// bound nor slow the other watchers down. Upstream's cacher gives each
// watcher a bounded channel; when it stays full past the dispatch time
// budget the watcher is closed ("Forcing ... watcher close due to
// unresponsiveness") and apiserver_terminated_watchers_total counts it.
// Here one watch is opened on a connection with a 4 KiB receive buffer
// whose body is never read, while a few thousand updates of 16 KiB
// ConfigMaps go through and a normal watcher measures its latency.
func TestSlowWatcherIsEnded(t *testing.T) {
	const (
		namespace = "default"
		objects   = 20
		updates   = 2000
		writers   = 4
		valueSize = 16 << 10
		// Generous bounds for a loaded 2-core CI machine.
		maxP99        = 2 * time.Second
		maxHeapGrowth = 200 << 20
		maxTerminate  = 30 * time.Second
	)
	ts := startServer(t, testConfig(t))
	ctx := t.Context()
	cms := ts.client.CoreV1().ConfigMaps(namespace)

	payload := func(seq int) *corev1.ConfigMap {
		name := fmt.Sprintf("big-%02d", seq%objects)
		// Vary the content so nothing upstream can share or skip it.
		value := strings.Repeat(strconv.Itoa(seq%10), valueSize)
		return &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{"seq": strconv.Itoa(seq)}},
			Data:       map[string]string{"value": value},
		}
	}
	for i := range objects {
		if _, err := cms.Create(ctx, payload(i), metav1.CreateOptions{}); err != nil {
			t.Fatalf("create: %v", err)
		}
	}
	list, err := cms.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	startRV := list.ResourceVersion
	heapBefore := ts.liveHeap()

	// The stalled watcher: HTTP/1.1 on its own connection with a tiny
	// receive buffer, set before connect so the advertised window stays
	// small; its body is not read until the server has ended the watch.
	stalled := stalledWatch(t, ts.rest, fmt.Sprintf("/api/v1/namespaces/%s/configmaps?watch=true&resourceVersion=%s", namespace, startRV))
	defer stalled.Body.Close()

	// The normal watcher, through client-go.
	w, err := cms.Watch(ctx, metav1.ListOptions{ResourceVersion: startRV})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	var sentAt sync.Map // seq -> time the update was sent
	latencies := make([]time.Duration, 0, updates)
	received := make(chan struct{})
	go func() {
		defer close(received)
		seen := map[int]bool{}
		for ev := range w.ResultChan() {
			if ev.Type != watch.Modified {
				continue
			}
			cm := ev.Object.(*corev1.ConfigMap)
			seq, _ := strconv.Atoi(cm.Annotations["seq"])
			start, ok := sentAt.Load(seq)
			if !ok || seen[seq] {
				continue
			}
			seen[seq] = true
			latencies = append(latencies, time.Since(start.(time.Time)))
			if len(latencies) == updates {
				return
			}
		}
	}()

	// Poll the server: when was the stalled watcher terminated, and how
	// high did the heap go (without forcing a GC)?
	start := time.Now()
	var terminatedAfter atomic.Int64
	var peakHeap atomic.Int64
	pollDone := make(chan struct{})
	stopPoll := make(chan struct{})
	go func() {
		defer close(pollDone)
		for {
			if terminatedAfter.Load() == 0 && ts.metric("apiserver_terminated_watchers_total", map[string]string{"resource": "configmaps"}) > 0 {
				terminatedAfter.Store(int64(time.Since(start)))
			}
			if h := int64(ts.metric("go_memstats_heap_alloc_bytes", nil)); h > peakHeap.Load() {
				peakHeap.Store(h)
			}
			select {
			case <-stopPoll:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()

	var next atomic.Int64
	next.Store(objects - 1)
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for range writers {
		wg.Go(func() {
			for {
				seq := int(next.Add(1))
				if seq >= objects+updates {
					return
				}
				cm := payload(seq)
				sentAt.Store(seq, time.Now())
				// Several writers touch the same names: no
				// resourceVersion precondition, last write wins.
				if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
					errs <- fmt.Errorf("update %d: %w", seq, err)
					return
				}
			}
		})
	}
	wg.Wait()
	writeTime := time.Since(start)
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	select {
	case <-received:
	case <-time.After(30 * time.Second):
		t.Fatalf("normal watcher got %d of %d updates within 30s of the last write", len(latencies), updates)
	}
	eventually(t, maxTerminate, "stalled watcher terminated by the cacher", func() (bool, error) {
		return terminatedAfter.Load() > 0, nil
	})
	close(stopPoll)
	<-pollDone

	// The server ended the stalled watch: once read, its body ends after
	// what was already buffered, long before the watch timeout, and holds
	// only part of the updates.
	stalledEvents, err := drainWatch(stalled.Body, 20*time.Second)
	if err != nil {
		t.Fatalf("reading the stalled watch after its termination: %v", err)
	}
	if stalledEvents >= updates {
		t.Errorf("stalled watcher received all %d updates; it was not cut off", stalledEvents)
	}

	heapAfter := ts.liveHeap()
	slices.Sort(latencies)
	p50 := latencies[len(latencies)/2]
	p99 := latencies[len(latencies)*99/100]
	growth := heapAfter - heapBefore
	t.Logf("%d updates of %d KiB by %d writers in %s; stalled watcher terminated after %s, had received %d events",
		updates, valueSize>>10, writers, writeTime.Round(time.Millisecond), time.Duration(terminatedAfter.Load()).Round(time.Millisecond), stalledEvents)
	t.Logf("normal watcher: %d/%d events, latency p50 %s p99 %s max %s", len(latencies), updates,
		p50.Round(time.Millisecond), p99.Round(time.Millisecond), latencies[len(latencies)-1].Round(time.Millisecond))
	t.Logf("live heap (after GC) %d MiB -> %d MiB (growth %d MiB), peak heap during the run %d MiB",
		heapBefore>>20, heapAfter>>20, growth>>20, peakHeap.Load()>>20)
	if p99 > maxP99 {
		t.Errorf("normal watcher latency p99 %s, want below %s", p99, maxP99)
	}
	if growth > maxHeapGrowth {
		t.Errorf("live heap grew by %d MiB, want below %d MiB", growth>>20, maxHeapGrowth>>20)
	}
}

// liveHeap is the heap after a GC, from /metrics. The server runs in this
// process, so runtime.GC collects its garbage too.
func (ts *testServer) liveHeap() int64 {
	runtime.GC()
	return int64(ts.metric("go_memstats_heap_alloc_bytes", nil))
}

// stalledWatch opens a watch over HTTP/1.1 on a dedicated connection with a
// 4 KiB socket receive buffer and returns the response without reading its
// body.
func stalledWatch(t *testing.T, cfg *rest.Config, path string) *http.Response {
	t.Helper()
	tlsConfig, err := rest.TLSConfigFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	tlsConfig = tlsConfig.Clone()
	tlsConfig.NextProtos = []string{"http/1.1"}
	dialer := &net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096)
		})
		return errors.Join(err, serr)
	}}
	transport := &http.Transport{
		TLSClientConfig:    tlsConfig,
		ForceAttemptHTTP2:  false,
		DialContext:        dialer.DialContext,
		DisableCompression: true,
	}
	t.Cleanup(transport.CloseIdleConnections)
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, strings.TrimSuffix(cfg.Host, "/")+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "application/json")
	if cfg.BearerToken != "" {
		req.Header.Set("Authorization", "Bearer "+cfg.BearerToken)
	}
	resp, err := (&http.Client{Transport: transport}).Do(req)
	if err != nil {
		t.Fatalf("opening the stalled watch: %v", err)
	}
	if resp.StatusCode != http.StatusOK || resp.ProtoMajor != 1 {
		resp.Body.Close()
		t.Fatalf("stalled watch: %s over %s, want 200 over HTTP/1.1", resp.Status, resp.Proto)
	}
	return resp
}

// drainWatch reads a JSON watch stream to its end and counts its events;
// it fails if the stream does not end within timeout.
func drainWatch(body io.ReadCloser, timeout time.Duration) (int, error) {
	timer := time.AfterFunc(timeout, func() { body.Close() })
	defer timer.Stop()
	r := bufio.NewReaderSize(body, 1<<20)
	events := 0
	for {
		_, err := r.ReadSlice('\n')
		for err == bufio.ErrBufferFull {
			_, err = r.ReadSlice('\n')
		}
		if err == io.EOF {
			return events, nil
		}
		if err != nil {
			return events, fmt.Errorf("after %d events: %w", events, err)
		}
		events++
	}
}
