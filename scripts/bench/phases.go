package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8sjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

const (
	contentJSON     = "application/json"
	contentProtobuf = "application/vnd.kubernetes.protobuf"
	// flushWait covers kubestore's default --etcd-backend-batch-interval
	// (5s), so that the last bbolt commit of a measurement is counted.
	flushWait = 6 * time.Second
)

// clients returns n clientsets, each with its own connection.
func (b *bench) clients(n int) []*kubernetes.Clientset { return b.clientsOf(b.srv, n) }

// load creates the namespace, the nodes, the ConfigMaps (timed: creates/s)
// and the pods with a running status.
func (b *bench) load(ctx context.Context) error {
	cs := b.clients(b.o.Clients)
	if err := createBenchNamespace(ctx, cs[0]); err != nil {
		return err
	}
	if _, err := parallel(ctx, b.o.Clients, b.o.Nodes, func(ctx context.Context, w, i int) error {
		_, err := cs[w].CoreV1().Nodes().Create(ctx, node(i), metav1.CreateOptions{})
		return err
	}); err != nil {
		return fmt.Errorf("creating nodes: %w", err)
	}

	if err := b.createConfigMaps(ctx, cs); err != nil {
		return err
	}

	b.pods = make([]*corev1.Pod, b.o.Pods)
	d, err := parallel(ctx, b.o.Clients, b.o.Pods, func(ctx context.Context, w, i int) error {
		p, err := cs[w].CoreV1().Pods(benchNamespace).Create(ctx, pod(i, b.o.Nodes), metav1.CreateOptions{})
		if err != nil {
			return err
		}
		p.Status = runningStatus(p, i)
		p, err = cs[w].CoreV1().Pods(benchNamespace).UpdateStatus(ctx, p, metav1.UpdateOptions{})
		b.pods[i] = p
		return err
	})
	if err != nil {
		return fmt.Errorf("creating pods: %w", err)
	}
	b.logf("%d pods on %d nodes created and set running in %v", b.o.Pods, b.o.Nodes, d.Round(time.Millisecond))
	return nil
}

// createConfigMaps creates the -configmaps ConfigMaps from the concurrent
// clients (creates/s, the server's CPU per create).
func (b *bench) createConfigMaps(ctx context.Context, cs []*kubernetes.Clientset) error {
	b.cms = make([]*corev1.ConfigMap, b.o.ConfigMaps)
	cpu := b.serverCPU()
	d, err := parallel(ctx, b.o.Clients, b.o.ConfigMaps, func(ctx context.Context, w, i int) error {
		cm, err := cs[w].CoreV1().ConfigMaps(benchNamespace).Create(ctx, configMap(i), metav1.CreateOptions{})
		b.cms[i] = cm
		return err
	})
	if err != nil {
		return fmt.Errorf("creating configmaps: %w", err)
	}
	b.res.CreatesPerSec = float64(b.o.ConfigMaps) / d.Seconds()
	b.res.CreateCPUMs = ms(b.serverCPU()-cpu) / float64(b.o.ConfigMaps)
	b.logf("%d configmaps created in %v: %.0f/s, server CPU %.2f ms each", b.o.ConfigMaps, d.Round(time.Millisecond), b.res.CreatesPerSec, b.res.CreateCPUMs)
	return nil
}

// updates rewrites every ConfigMap's payload once from the concurrent
// clients (updates/s), with the payload of the given round: each round
// changes every object (a round written before would be a no-op update,
// which the API server answers without writing).
func (b *bench) updates(ctx context.Context, round int) error {
	cs := b.clients(b.o.Clients)
	cpu := b.serverCPU()
	d, err := parallel(ctx, b.o.Clients, len(b.cms), func(ctx context.Context, w, i int) error {
		cm := b.cms[i].DeepCopy()
		cm.Data["payload"] = payload(i, round)
		cm, err := cs[w].CoreV1().ConfigMaps(benchNamespace).Update(ctx, cm, metav1.UpdateOptions{})
		if err == nil {
			b.cms[i] = cm
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("updating configmaps: %w", err)
	}
	b.res.UpdatesPerSec = float64(len(b.cms)) / d.Seconds()
	b.res.UpdateCPUMs = ms(b.serverCPU()-cpu) / float64(len(b.cms))
	b.logf("%d configmaps updated in %v: %.0f/s, server CPU %.2f ms each", len(b.cms), d.Round(time.Millisecond), b.res.UpdatesPerSec, b.res.UpdateCPUMs)
	return nil
}

// ListResult is one LIST variant: ListRuns timed runs after one warm-up.
type ListResult struct {
	Cache    string  `json:"cache"`  // cached or uncached
	Format   string  `json:"format"` // json or protobuf
	Variant  string  `json:"variant"`
	Gzip     bool    `json:"gzip"`
	Items    int     `json:"items"`
	Pages    int     `json:"pages"`
	Bytes    int     `json:"bytes"`
	MedianMs float64 `json:"medianMs"`
	P99Ms    float64 `json:"p99Ms"`
	// ServerCPUMs is the server's CPU time per LIST.
	ServerCPUMs float64 `json:"serverCPUMs"`
}

type listVariant struct {
	format, variant string
	gzip            bool
}

var listVariants = []listVariant{
	{"json", "rv=0", false},
	{"json", "rv=\"\"", false},
	{"json", "limit=500", false},
	{"protobuf", "rv=0", false},
	{"protobuf", "rv=\"\"", false},
	{"protobuf", "limit=500", false},
	// What a client that accepts gzip (client-go's default) costs the
	// server: compression of responses over 128 KiB.
	{"json", "rv=0", true},
}

// lists times full LISTs of the ConfigMaps namespace. Each response is read
// to its last byte; the clock stops before anything is decoded.
func (b *bench) lists(ctx context.Context, cacheMode string) error {
	cfg := rest.CopyConfig(b.srv.cfg)
	cfg.DisableCompression = true
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return err
	}
	defer hc.CloseIdleConnections()
	base := b.srv.url + "/api/v1/namespaces/" + benchNamespace + "/configmaps"
	for _, v := range listVariants {
		accept := contentJSON
		if v.format == "protobuf" {
			accept = contentProtobuf
		}
		r := ListResult{Cache: cacheMode, Format: v.format, Variant: v.variant, Gzip: v.gzip}
		var times []time.Duration
		var cpu time.Duration
		for run := range b.o.ListRuns + 1 {
			if run == 1 {
				cpu = b.serverCPU()
			}
			d, items, pages, size, err := listOnce(ctx, hc, base, accept, v)
			if err != nil {
				return fmt.Errorf("LIST %s %s %s: %w", cacheMode, v.format, v.variant, err)
			}
			if run == 0 {
				// Warm-up; it also checks the answer.
				if want := b.o.ConfigMaps + b.others(ctx); !v.gzip && items != want {
					return fmt.Errorf("LIST %s %s %s returned %d configmaps, want %d", cacheMode, v.format, v.variant, items, want)
				}
				r.Items, r.Pages, r.Bytes = items, pages, size
				continue
			}
			times = append(times, d)
		}
		r.MedianMs, r.P99Ms = ms(percentile(times, 50)), ms(percentile(times, 99))
		r.ServerCPUMs = ms(b.serverCPU()-cpu) / float64(b.o.ListRuns)
		b.res.Lists = append(b.res.Lists, r)
		b.logf("LIST %s %s %s gzip=%v: median %.1f ms, p99 %.1f ms, server CPU %.1f ms, %d bytes", cacheMode, v.format, v.variant, v.gzip, r.MedianMs, r.P99Ms, r.ServerCPUMs, r.Bytes)
	}
	return nil
}

// listOnce performs one LIST (all pages of it) and returns the time spent
// waiting for and reading responses, the items, pages and bytes.
func listOnce(ctx context.Context, hc *http.Client, base, accept string, v listVariant) (time.Duration, int, int, int, error) {
	var total time.Duration
	var items, pages, size int
	cont := ""
	var buf bytes.Buffer
	for {
		url := base
		switch {
		case v.variant == "rv=0":
			url += "?resourceVersion=0"
		case v.variant == "limit=500":
			url += "?limit=500"
			if cont != "" {
				url += "&continue=" + cont
			}
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return 0, 0, 0, 0, err
		}
		req.Header.Set("Accept", accept)
		if v.gzip {
			req.Header.Set("Accept-Encoding", "gzip")
		}
		buf.Reset()
		start := time.Now()
		resp, err := hc.Do(req)
		if err != nil {
			return 0, 0, 0, 0, err
		}
		_, err = io.Copy(&buf, resp.Body)
		resp.Body.Close()
		total += time.Since(start)
		if err != nil {
			return 0, 0, 0, 0, err
		}
		if resp.StatusCode != http.StatusOK {
			return 0, 0, 0, 0, fmt.Errorf("HTTP %d: %.300s", resp.StatusCode, buf.String())
		}
		pages++
		size += buf.Len()
		if v.gzip {
			return total, 0, pages, size, nil
		}
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(buf.Bytes(), nil, &corev1.ConfigMapList{})
		if err != nil {
			return 0, 0, 0, 0, fmt.Errorf("decoding: %w", err)
		}
		list := obj.(*corev1.ConfigMapList)
		items += len(list.Items)
		cont = list.Continue
		if cont == "" {
			return total, items, pages, size, nil
		}
	}
}

// Encode is the in-process time to encode the list the server returned,
// with apimachinery's serializers: the lower bound of a LIST.
type Encode struct {
	Format   string  `json:"format"`
	Bytes    int     `json:"bytes"`
	MedianMs float64 `json:"medianMs"`
	P99Ms    float64 `json:"p99Ms"`
}

func (b *bench) encode(ctx context.Context) error {
	cs := b.client(false)
	raw, err := cs.CoreV1().RESTClient().Get().Namespace(benchNamespace).Resource("configmaps").Param("resourceVersion", "0").DoRaw(ctx)
	if err != nil {
		return fmt.Errorf("getting the list to encode: %w", err)
	}
	obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(raw, nil, &corev1.ConfigMapList{})
	if err != nil {
		return fmt.Errorf("decoding the list to encode: %w", err)
	}
	list := obj.(*corev1.ConfigMapList)
	list.APIVersion, list.Kind = "v1", "ConfigMapList"
	encoders := []struct {
		format string
		enc    runtime.Encoder
	}{
		{"json", k8sjson.NewSerializerWithOptions(k8sjson.DefaultMetaFactory, scheme.Scheme, scheme.Scheme, k8sjson.SerializerOptions{})},
		{"protobuf", protobuf.NewSerializer(scheme.Scheme, scheme.Scheme)},
	}
	for _, e := range encoders {
		var buf bytes.Buffer
		var times []time.Duration
		for run := range b.o.ListRuns + 1 {
			buf.Reset()
			start := time.Now()
			if err := e.enc.Encode(list, &buf); err != nil {
				return fmt.Errorf("encoding as %s: %w", e.format, err)
			}
			if run > 0 {
				times = append(times, time.Since(start))
			}
		}
		r := Encode{Format: e.format, Bytes: buf.Len(), MedianMs: ms(percentile(times, 50)), P99Ms: ms(percentile(times, 99))}
		b.res.Encode = append(b.res.Encode, r)
		b.logf("encode %d configmaps as %s in-process: median %.1f ms, %d bytes", len(list.Items), e.format, r.MedianMs, r.Bytes)
	}
	return nil
}

// WatchResult is the watch fan-out: every pod updated once while Watchers
// watch all pods and as many watch the pods of one node.
type WatchResult struct {
	PodWatchers  int     `json:"podWatchers"`
	NodeWatchers int     `json:"nodeWatchers"`
	Updates      int     `json:"updates"`
	Rate         float64 `json:"rate"` // 0: as fast as the clients go
	UpdateSec    float64 `json:"updateSec"`
	Expected     int     `json:"expected"`
	Delivered    int     `json:"delivered"`
	P50Ms        float64 `json:"p50Ms"`
	P99Ms        float64 `json:"p99Ms"`
	MaxMs        float64 `json:"maxMs"`
	// CPU time of the server and of this program (the watchers' decoding)
	// from the first update to the last event: they share the machine.
	ServerCPUSec float64 `json:"serverCPUSec"`
	BenchCPUSec  float64 `json:"benchCPUSec"`
}

type watcher struct {
	w         watch.Interface
	expected  int
	latencies []time.Duration
	done      chan struct{}
}

// watchFanOut updates every pod once while the watchers watch, as fast as
// the clients go (rate 0) or at rate updates/s from one client.
func (b *bench) watchFanOut(ctx context.Context, rate float64) (WatchResult, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	r := WatchResult{PodWatchers: b.o.Watchers, NodeWatchers: b.o.Watchers, Updates: len(b.pods), Rate: rate}
	cs := b.clients(b.o.Clients)
	rv, err := cs[0].CoreV1().Pods(benchNamespace).List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		return r, err
	}
	perNode := make(map[string]int)
	for i := range b.pods {
		perNode[b.pods[i].Spec.NodeName]++
	}
	var watchers []*watcher
	defer func() {
		for _, w := range watchers {
			w.w.Stop()
		}
	}()
	for i := range 2 * b.o.Watchers {
		opts := metav1.ListOptions{ResourceVersion: rv.ResourceVersion}
		expected := len(b.pods)
		if i >= b.o.Watchers {
			n := nodeName((i - b.o.Watchers) % b.o.Nodes)
			opts.FieldSelector = "spec.nodeName=" + n
			expected = perNode[n]
		}
		wi, err := b.client(true).CoreV1().Pods(benchNamespace).Watch(ctx, opts)
		if err != nil {
			return r, fmt.Errorf("starting watch %d: %w", i, err)
		}
		w := &watcher{w: wi, expected: expected, done: make(chan struct{})}
		watchers = append(watchers, w)
		go w.consume()
	}
	b.logf("%d watchers on pods and %d per-node watchers started", b.o.Watchers, b.o.Watchers)

	update := func(ctx context.Context, w, i int) error {
		p := b.pods[i].DeepCopy()
		p.Annotations[sentAnnotation] = strconv.FormatInt(time.Now().UnixNano(), 10)
		p, err := cs[w].CoreV1().Pods(benchNamespace).Update(ctx, p, metav1.UpdateOptions{})
		if err == nil {
			b.pods[i] = p
		}
		return err
	}
	var d time.Duration
	cpu, ownCPU := b.serverCPU(), benchCPU()
	if rate > 0 {
		d, err = paced(ctx, b.o.Clients, len(b.pods), rate, update)
	} else {
		d, err = parallel(ctx, b.o.Clients, len(b.pods), update)
	}
	if err != nil {
		return r, fmt.Errorf("updating pods: %w", err)
	}
	r.UpdateSec = d.Seconds()
	deadline := time.After(60 * time.Second)
	for _, w := range watchers {
		r.Expected += w.expected
		select {
		case <-w.done:
		case <-deadline:
		case <-ctx.Done():
			return r, ctx.Err()
		}
	}
	r.ServerCPUSec, r.BenchCPUSec = (b.serverCPU() - cpu).Seconds(), (benchCPU() - ownCPU).Seconds()
	cancel()
	var all []time.Duration
	for _, w := range watchers {
		w.w.Stop()
		<-w.done
		r.Delivered += len(w.latencies)
		all = append(all, w.latencies...)
	}
	watchers = nil
	r.P50Ms, r.P99Ms, r.MaxMs = ms(percentile(all, 50)), ms(percentile(all, 99)), ms(percentile(all, 100))
	b.logf("watch (rate %v): %d of %d events delivered, latency p50 %.1f ms, p99 %.1f ms, max %.1f ms; CPU server %.1f s, bench %.1f s", rate, r.Delivered, r.Expected, r.P50Ms, r.P99Ms, r.MaxMs, r.ServerCPUSec, r.BenchCPUSec)
	if r.Delivered != r.Expected {
		return r, fmt.Errorf("watch fan-out delivered %d of %d events", r.Delivered, r.Expected)
	}
	return r, nil
}

// consume records the delivery latency of each pod update until it has
// seen every update it expects or the watch ends.
func (w *watcher) consume() {
	defer close(w.done)
	for ev := range w.w.ResultChan() {
		now := time.Now()
		if ev.Type != watch.Modified {
			continue
		}
		p, ok := ev.Object.(*corev1.Pod)
		if !ok {
			continue
		}
		sent, err := strconv.ParseInt(p.Annotations[sentAnnotation], 10, 64)
		if err != nil {
			continue
		}
		w.latencies = append(w.latencies, now.Sub(time.Unix(0, sent)))
		if len(w.latencies) == w.expected {
			return
		}
	}
}

// WriteResult is what the process wrote to disk for a steady stream of
// ConfigMap updates.
type WriteResult struct {
	Updates        int     `json:"updates"`
	TargetRate     float64 `json:"targetRate"`
	AchievedRate   float64 `json:"achievedRate"`
	WriteBytes     int64   `json:"writeBytes"`
	BytesPerUpdate float64 `json:"bytesPerUpdate"`
}

// flashWrites measures the disk bytes per 1 KiB ConfigMap update at
// -write-rate and at -slow-write-rate: at the slow rate each bbolt batch
// (5 s) holds fewer updates to share its commit.
func (b *bench) flashWrites(ctx context.Context) error {
	round := 2
	update := func(ctx context.Context, c *kubernetes.Clientset, i int) error {
		k := i % len(b.cms)
		cm := b.cms[k].DeepCopy()
		cm.Data["payload"] = payload(k, round+i/len(b.cms))
		cm, err := c.CoreV1().ConfigMaps(benchNamespace).Update(ctx, cm, metav1.UpdateOptions{})
		if err != nil {
			return fmt.Errorf("updating configmap: %w", err)
		}
		b.cms[k] = cm
		return nil
	}
	var err error
	if b.res.Writes, err = b.pacedWrites(ctx, b.srv, b.o.WriteUpdates, b.o.WriteRate, update); err != nil {
		return err
	}
	round += b.o.WriteUpdates/len(b.cms) + 1
	b.res.SlowWrites, err = b.pacedWrites(ctx, b.srv, b.o.SlowWriteUpdates, b.o.SlowWriteRate, update)
	return err
}

// pacedWrites measures the disk bytes the server writes per update while
// update(i) runs for i in [0,n) at rate per second. Each index is written
// once, so callers that write each object once per round never race.
func (b *bench) pacedWrites(ctx context.Context, srv *server, n int, rate float64, update func(ctx context.Context, c *kubernetes.Clientset, i int) error) (WriteResult, error) {
	pid := srv.pid()
	// Let the previous phase's batch reach the disk first.
	if err := sleep(ctx, flushWait); err != nil {
		return WriteResult{}, err
	}
	before, err := writeBytes(pid)
	if err != nil {
		return WriteResult{}, err
	}
	// A few clients, so that one slow answer does not lower the rate.
	const writers = 4
	cs := b.clientsOf(srv, writers)
	elapsed, err := paced(ctx, writers, n, rate, func(ctx context.Context, w, i int) error {
		return update(ctx, cs[w], i)
	})
	if err != nil {
		return WriteResult{}, err
	}
	if err := sleep(ctx, flushWait); err != nil {
		return WriteResult{}, err
	}
	after, err := writeBytes(pid)
	if err != nil {
		return WriteResult{}, err
	}
	r := WriteResult{Updates: n, TargetRate: rate, AchievedRate: float64(n) / elapsed.Seconds(), WriteBytes: after - before}
	r.BytesPerUpdate = float64(r.WriteBytes) / float64(r.Updates)
	b.logf("flash: %d updates at %.1f/s wrote %d bytes: %.0f bytes/update", r.Updates, r.AchievedRate, r.WriteBytes, r.BytesPerUpdate)
	return r, nil
}

// InformerResult is a cold client-go informer on the ConfigMaps.
type InformerResult struct {
	Objects   int     `json:"objects"`
	SyncMs    float64 `json:"syncMs"`
	WatchList bool    `json:"watchList"` // synced by a watch with sendInitialEvents, no LIST
	Lists     int     `json:"lists"`
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func (b *bench) informer(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cfg := rest.CopyConfig(b.srv.cfg)
	cfg.ContentType = contentProtobuf
	cfg.AcceptContentTypes = contentProtobuf + "," + contentJSON
	var lists, watchLists atomic.Int32
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
			q := r.URL.Query()
			switch {
			case q.Get("watch") == "true" && q.Get("sendInitialEvents") == "true":
				watchLists.Add(1)
			case q.Get("watch") != "true":
				lists.Add(1)
			}
			return rt.RoundTrip(r)
		})
	})
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	start := time.Now()
	f := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(benchNamespace))
	inf := f.Core().V1().ConfigMaps().Informer()
	f.Start(ctx.Done())
	synced := cache.WaitForCacheSync(ctx.Done(), inf.HasSynced)
	d := time.Since(start)
	if !synced {
		return fmt.Errorf("informer did not sync")
	}
	r := InformerResult{Objects: len(inf.GetStore().ListKeys()), SyncMs: ms(d), WatchList: watchLists.Load() > 0 && lists.Load() == 0, Lists: int(lists.Load())}
	want := len(b.cms) + b.others(ctx)
	cancel()
	f.Shutdown()
	b.res.Informer = r
	b.logf("informer: %d configmaps synced in %.0f ms (WatchList %v)", r.Objects, r.SyncMs, r.WatchList)
	if r.Objects != want {
		return fmt.Errorf("informer synced %d configmaps, want %d", r.Objects, want)
	}
	return nil
}

// percentile is the nearest-rank percentile p of ds.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(float64(len(s))*p/100+0.999999) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// others counts the ConfigMaps of the bench's namespace that the bench did
// not write: kube-root-ca.crt, which the root CA publisher adds.
func (b *bench) others(ctx context.Context) int {
	if _, err := b.client(true).CoreV1().ConfigMaps(benchNamespace).Get(ctx, "kube-root-ca.crt", metav1.GetOptions{}); err == nil {
		return 1
	}
	return 0
}
