package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// cachePolicyResources are the gateway set's resources, as
// --watch-cache-sizes names them, with the path of the first copy's
// namespace they are read by name under.
var cachePolicyResources = []struct{ name, path string }{
	{"pods", "/api/v1/namespaces/gw-0/pods"},
	{"configmaps", "/api/v1/namespaces/gw-0/configmaps"},
	{"secrets", "/api/v1/namespaces/gw-0/secrets"},
	{"services", "/api/v1/namespaces/gw-0/services"},
	{"endpointslices.discovery.k8s.io", "/apis/discovery.k8s.io/v1/namespaces/gw-0/endpointslices"},
	{"leases.coordination.k8s.io", "/apis/coordination.k8s.io/v1/namespaces/gw-0/leases"},
}

// CachePolicyResult is what each resource's watch cache costs and what
// turning it off costs: one fresh server on the gateway set with every
// resource cached, then one per resource with that one read from etcd
// (--watch-cache-sizes=<resource>#0).
type CachePolicyResult struct {
	Scale int              `json:"scale"`
	Runs  []CachePolicyRun `json:"runs"`
}

// CachePolicyRun is one server: the resource left uncached ("" for none),
// its memory once idle (the live heap after a forced collection), and the
// cost of a GET by name of each resource it measured.
type CachePolicyRun struct {
	Uncached string   `json:"uncached"`
	Mem      Mem      `json:"mem"`
	LiveHeap int64    `json:"liveHeapBytes"`
	Gets     []GetRun `json:"gets"`
}

// GetRun is what reading one resource costs: -cache-policy-gets GETs by
// name (4 workers), as node agents read their ConfigMaps and Secrets (a GET
// without resourceVersion is read from etcd, cached or not); LISTs of the
// namespace at resourceVersion 0, as an informer's first list; and
// watches of one object each (fieldSelector metadata.name), as the
// kubelet watches the ConfigMaps and Secrets its pods use.
type GetRun struct {
	Resource string  `json:"resource"`
	P50Ms    float64 `json:"p50Ms"`
	P99Ms    float64 `json:"p99Ms"`
	// CPUMs is the server's CPU per GET.
	CPUMs float64 `json:"cpuMsPerGet"`
	// ListP50Ms and ListCPUMs are per LIST of the namespace.
	ListP50Ms float64 `json:"listP50Ms"`
	ListCPUMs float64 `json:"listCpuMs"`
	// Watches were open at once; WatchHeap is the live heap they added.
	Watches   int   `json:"watches"`
	WatchHeap int64 `json:"watchHeapBytes"`
}

// cachePolicyLists and cachePolicyWatches are the LISTs and the watches
// of the read cost.
const (
	cachePolicyLists   = 20
	cachePolicyWatches = 100
)

func (b *bench) cachePolicy(ctx context.Context) error {
	r := &CachePolicyResult{Scale: b.o.CachePolicyScale}
	b.res.CachePolicy = r
	runs := []string{""}
	for _, res := range cachePolicyResources {
		runs = append(runs, res.name)
	}
	for i, uncached := range runs {
		dir := filepath.Join(b.root, fmt.Sprintf("cache-policy-%d", i))
		args := []string{"--profiling"}
		if uncached != "" {
			args = append(args, "--watch-cache-sizes="+uncached+"#0")
		}
		srv, _, err := b.startOn(ctx, dir, "cache-policy", args...)
		if err != nil {
			return err
		}
		run := CachePolicyRun{Uncached: uncached}
		err = b.cachePolicyRun(ctx, srv, &run)
		if serr := stopServer(srv); err == nil {
			err = serr
		}
		if err != nil {
			return fmt.Errorf("cache policy, %s uncached: %w", orNone(uncached), err)
		}
		os.RemoveAll(dir)
		r.Runs = append(r.Runs, run)
	}
	return nil
}

func (b *bench) cachePolicyRun(ctx context.Context, srv *server, run *CachePolicyRun) error {
	if _, err := b.gatewayLoad(ctx, srv, b.o.CachePolicyScale); err != nil {
		return err
	}
	if err := sleep(ctx, b.o.Idle); err != nil {
		return err
	}
	var err error
	if run.Mem, err = b.memOf(srv, "cache policy, "+orNone(run.Uncached)+" uncached"); err != nil {
		return err
	}
	if run.LiveHeap, err = liveHeap(ctx, srv); err != nil {
		return err
	}
	for _, res := range cachePolicyResources {
		// The all-cached server measures every resource's cached read;
		// the others their uncached one.
		if run.Uncached != "" && res.name != run.Uncached {
			continue
		}
		g, err := b.getByName(ctx, srv, res.name, res.path)
		if err != nil {
			return err
		}
		b.logf("cache policy, %s uncached: %s: GET p50 %.2f ms, p99 %.2f ms, server CPU %.3f ms each; LIST rv=0 p50 %.2f ms, CPU %.2f ms; %d watches by name %+.1f MB live heap",
			orNone(run.Uncached), res.name, g.P50Ms, g.P99Ms, g.CPUMs, g.ListP50Ms, g.ListCPUMs, g.Watches, float64(g.WatchHeap)/1e6)
		run.Gets = append(run.Gets, g)
	}
	return nil
}

// getByName GETs the objects under path by name, round robin.
func (b *bench) getByName(ctx context.Context, srv *server, resource, path string) (GetRun, error) {
	// Names from a JSON list; the GETs in protobuf, as node agents read.
	body, err := clientFor(srv, false).CoreV1().RESTClient().Get().AbsPath(path).DoRaw(ctx)
	if err != nil {
		return GetRun{}, err
	}
	var list struct {
		Items []struct {
			Metadata struct{ Name string } `json:"metadata"`
		} `json:"items"`
	}
	if err := json.Unmarshal(body, &list); err != nil || len(list.Items) == 0 {
		return GetRun{}, fmt.Errorf("listing %s: %d items, %v", path, len(list.Items), err)
	}
	rc := clientFor(srv, true).CoreV1().RESTClient()
	n := b.o.CachePolicyGets
	lat := make([]time.Duration, n)
	cpu0 := b.serverCPUOf(srv)
	_, err = parallel(ctx, 4, n, func(ctx context.Context, _, i int) error {
		start := time.Now()
		_, err := rc.Get().AbsPath(path, list.Items[i%len(list.Items)].Metadata.Name).DoRaw(ctx)
		lat[i] = time.Since(start)
		return err
	})
	if err != nil {
		return GetRun{}, err
	}
	cpu := b.serverCPUOf(srv) - cpu0
	g := GetRun{Resource: resource, P50Ms: ms(percentile(lat, 50)), P99Ms: ms(percentile(lat, 99)), CPUMs: ms(cpu) / float64(n)}

	lists := make([]time.Duration, cachePolicyLists)
	cpu0 = b.serverCPUOf(srv)
	for i := range lists {
		start := time.Now()
		if _, err := rc.Get().AbsPath(path).Param("resourceVersion", "0").DoRaw(ctx); err != nil {
			return GetRun{}, err
		}
		lists[i] = time.Since(start)
	}
	g.ListCPUMs = ms(b.serverCPUOf(srv)-cpu0) / cachePolicyLists
	g.ListP50Ms = ms(percentile(lists, 50))

	before, err := liveHeap(ctx, srv)
	if err != nil {
		return GetRun{}, err
	}
	g.Watches = min(cachePolicyWatches, len(list.Items))
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for i := range g.Watches {
		w, err := rc.Get().AbsPath(path).Param("watch", "true").
			Param("fieldSelector", "metadata.name="+list.Items[i].Metadata.Name).Watch(wctx)
		if err != nil {
			return GetRun{}, fmt.Errorf("watch %d: %w", i, err)
		}
		defer w.Stop()
	}
	if err := sleep(ctx, 2*time.Second); err != nil {
		return GetRun{}, err
	}
	after, err := liveHeap(ctx, srv)
	g.WatchHeap = after - before
	return g, err
}

// liveHeap is the server's heap after a forced collection: the heap
// profile's gc=1 collects, then /metrics reports what is allocated.
func liveHeap(ctx context.Context, srv *server) (int64, error) {
	rc := clientFor(srv, false).CoreV1().RESTClient()
	if _, err := rc.Get().AbsPath("/debug/pprof/heap").Param("gc", "1").DoRaw(ctx); err != nil {
		return 0, fmt.Errorf("forcing a collection: %w", err)
	}
	const series = "go_memstats_heap_alloc_bytes"
	m, err := metricsOf(ctx, srv, series)
	if err != nil {
		return 0, err
	}
	v, ok := m[series]
	if !ok {
		return 0, fmt.Errorf("no %s in /metrics", series)
	}
	return int64(v), nil
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// cachePolicyRows are the figures of the cache-policy section: for each
// resource, what its cache holds (the live heap the run without it saves)
// and what reading it by name costs without.
func cachePolicyRows(row func(figure, value string, t target), r *Result) {
	c := r.CachePolicy
	if len(c.Runs) == 0 || c.Runs[0].Uncached != "" {
		return
	}
	all := c.Runs[0]
	row(fmt.Sprintf("cache policy ×%d: all cached, RSS (anonymous), live heap", c.Scale),
		fmt.Sprintf("%s (%s), %.1f MB", mib(all.Mem.VmRSS), mib(all.Mem.RssAnon), float64(all.LiveHeap)/1e6), target{})
	cached := map[string]GetRun{}
	for _, g := range all.Gets {
		cached[g.Resource] = g
	}
	for _, run := range c.Runs[1:] {
		value := fmt.Sprintf("live heap %+.1f MB, RSS %+.1f MiB", float64(run.LiveHeap-all.LiveHeap)/1e6, float64(run.Mem.VmRSS-all.Mem.VmRSS)/(1<<20))
		if len(run.Gets) == 1 {
			g, was := run.Gets[0], cached[run.Uncached]
			value += fmt.Sprintf("; GET p50 %.2f → %.2f ms, CPU %.3f → %.3f ms; LIST rv=0 p50 %.1f → %.1f ms, CPU %.1f → %.1f ms; %d watches by name %+.1f → %+.1f MB",
				was.P50Ms, g.P50Ms, was.CPUMs, g.CPUMs, was.ListP50Ms, g.ListP50Ms, was.ListCPUMs, g.ListCPUMs, g.Watches, float64(was.WatchHeap)/1e6, float64(g.WatchHeap)/1e6)
		}
		row(fmt.Sprintf("cache policy ×%d: %s uncached", c.Scale, run.Uncached), value, target{})
	}
}
