package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Result is every figure of one run; it is what -out holds.
type Result struct {
	Machine   Machine  `json:"machine"`
	Binary    Binary   `json:"binary"`
	ServeArgs []string `json:"serveArgs"`
	Counts    Counts   `json:"counts"`
	// Sections are the parts of the benchmark this run measured (-only).
	Sections []string `json:"sections"`

	ReadyFreshMs float64 `json:"readyFreshMs"` // first start: generates the PKI
	ReadyEmptyMs float64 `json:"readyEmptyMs"` // restart on the empty data dir
	ReadyDataMs  float64 `json:"readyDataMs"`  // restart on the loaded data dir

	MemIdle Mem `json:"memIdle"`
	// IdleBinaryPages is what of the binary the idle server holds.
	IdleBinaryPages  BinaryPages `json:"idleBinaryPages"`
	IdleCPUPercent   float64     `json:"idleCPUPercent"`
	MemLoaded        Mem         `json:"memLoaded"`
	MemAfterLists    Mem         `json:"memAfterLists"`
	LoadedCPUPercent float64     `json:"loadedIdleCPUPercent"` // idle, with the data, after the lists

	CreatesPerSec float64 `json:"createsPerSec"`
	UpdatesPerSec float64 `json:"updatesPerSec"`
	// Server CPU (user+system) per write: less sensitive than the rates
	// to other work on a shared machine.
	CreateCPUMs float64 `json:"createServerCPUMs"`
	UpdateCPUMs float64 `json:"updateServerCPUMs"`

	Lists  []ListResult `json:"lists"`
	Encode []Encode     `json:"encode"`

	// DataDirBytes is the disk the data dir takes (allocated blocks) after
	// the flash-write phase: etcd's WAL segments are preallocated.
	DataDirBytes int64 `json:"dataDirBytes"`
	WALBytes     int64 `json:"walBytes"`
	// DataDirs is the same after each phase that changes it: fresh (the
	// first start), loaded, after the writes.
	DataDirs []DataDirSize `json:"dataDirs"`

	Watch      WatchResult `json:"watch"`      // updates as fast as the clients go
	WatchPaced WatchResult `json:"watchPaced"` // updates at -watch-rate
	Writes     WriteResult `json:"writes"`
	SlowWrites WriteResult `json:"slowWrites"` // at -slow-write-rate
	// IdleWriteBytesPerSec is what the server writes to disk at idle, on
	// the empty data dir: its own Leases and bookkeeping.
	IdleWriteBytesPerSec float64         `json:"idleWriteBytesPerSec"`
	Informer             InformerResult  `json:"informer"`
	TokenAuth            TokenAuthResult `json:"tokenAuth"`

	IdleFlash   *IdleFlashResult   `json:"idleFlash,omitempty"`
	Cgroup      *CgroupResult      `json:"cgroup,omitempty"`
	Mirror      *MirrorResult      `json:"mirror,omitempty"`
	Controllers *ControllersResult `json:"controllers,omitempty"`
	Gateway     *GatewayResult     `json:"gateway,omitempty"`
	Peer        *PeerResult        `json:"peer,omitempty"`
	CachePolicy *CachePolicyResult `json:"cachePolicy,omitempty"`
	NodeAgents  *NodeAgentsResult  `json:"nodeAgents,omitempty"`
	Update      *UpdateResult      `json:"update,omitempty"`
	Site        *SiteResult        `json:"site,omitempty"`
	Compare     *CompareResult     `json:"compare,omitempty"`
	ClusterCost *ClusterCostResult `json:"clusterCost,omitempty"`
}

// ran reports whether the run measured section.
func (r *Result) ran(section string) bool { return slices.Contains(r.Sections, section) }

// Counts are the sizes the run used.
type Counts struct {
	ConfigMaps   int     `json:"configMaps"`
	Pods         int     `json:"pods"`
	Nodes        int     `json:"nodes"`
	Watchers     int     `json:"watchers"`
	Clients      int     `json:"clients"`
	ListRuns     int     `json:"listRuns"`
	WriteUpdates int     `json:"writeUpdates"`
	WriteRate    float64 `json:"writeRate"`
	WatchRate    float64 `json:"watchRate"`
	IdleSec      float64 `json:"idleSec"`
	// GatewayScales are the copies of the gateway set, one server each.
	GatewayScales []int `json:"gatewayScales"`
	// CachePolicyGets are the GETs by name of each resource.
	CachePolicyGets int     `json:"cachePolicyGets"`
	CPUWindowSec    float64 `json:"cpuWindowSec"`
}

// run performs the whole benchmark. On error it returns what it measured
// so far together with the error.
func run(ctx context.Context, o options) (*Result, error) {
	if err := o.complete(); err != nil {
		return nil, err
	}
	res := &Result{
		Machine:   describeMachine(),
		ServeArgs: append([]string{}, o.ServeArgs...),
		Counts: Counts{ConfigMaps: o.ConfigMaps, Pods: o.Pods, Nodes: o.Nodes, Watchers: o.Watchers, Clients: o.Clients,
			ListRuns: o.ListRuns, WriteUpdates: o.WriteUpdates, WriteRate: o.WriteRate, WatchRate: o.WatchRate,
			IdleSec: o.Idle.Seconds(), CPUWindowSec: o.CPUWindow.Seconds(), GatewayScales: o.GatewayScales,
			CachePolicyGets: o.CachePolicyGets},
		Sections: o.sections(),
	}
	started := time.Now()
	defer func() {
		res.Machine.LoadEnd = loadAvg()
		res.Machine.DurationSec = int(time.Since(started).Seconds())
	}()
	bin, err := inspectBinary(o.Bin, o.XZ)
	if err != nil {
		return nil, err
	}
	res.Binary = bin
	// Short: the etcd unix socket path inside must stay under 108 bytes.
	root, err := os.MkdirTemp(o.DataRoot, "ksb")
	if err != nil {
		return nil, err
	}
	if o.Keep {
		fmt.Fprintf(o.Log, "bench: data and logs kept in %s\n", root)
	} else {
		defer os.RemoveAll(root)
	}
	b := &bench{o: o, res: res, dataDir: filepath.Join(root, "d"), root: root}
	err = b.run(ctx)
	if b.srv != nil {
		b.srv.kill()
	}
	return res, err
}

type bench struct {
	o       options
	res     *Result
	root    string
	dataDir string
	starts  int
	srv     *server
	cms     []*corev1.ConfigMap // the last written version of each
	pods    []*corev1.Pod
}

func (b *bench) logf(format string, args ...any) {
	fmt.Fprintf(b.o.Log, "%s bench: %s\n", time.Now().UTC().Format("15:04:05"), fmt.Sprintf(format, args...))
}

// start runs a new kubestore process on the data dir with the -serve-arg
// arguments plus extra.
func (b *bench) start(ctx context.Context, extra ...string) (time.Duration, error) {
	srv, ready, err := b.startOn(ctx, b.dataDir, "server", extra...)
	if err != nil {
		return 0, err
	}
	b.srv = srv
	return ready, nil
}

// startOn runs a new kubestore process on dataDir with the -serve-arg
// arguments plus extra; its log is <name>-<n>.log in the root.
func (b *bench) startOn(ctx context.Context, dataDir, name string, extra ...string) (*server, time.Duration, error) {
	b.starts++
	logPath := filepath.Join(b.root, fmt.Sprintf("%s-%d.log", name, b.starts))
	args := append(append([]string{}, b.o.ServeArgs...), extra...)
	if b.o.ProfileDir != "" {
		args = append(args, "--profiling")
	}
	srv, ready, err := startServer(ctx, b.o.Bin, dataDir, logPath, args)
	if err != nil {
		return nil, 0, err
	}
	who := "kubestore"
	if name != "server" {
		who = name + ": kubestore"
	}
	b.logf("%s %s ready in %v (pid %d)", who, strings.Join(args, " "), ready.Round(time.Millisecond), srv.pid())
	return srv, ready, nil
}

func (b *bench) stop() error {
	srv := b.srv
	b.srv = nil
	return stopServer(srv)
}

func stopServer(srv *server) error {
	if err := srv.stop(); err != nil {
		return fmt.Errorf("%w\n%s", err, tail(srv.logPath))
	}
	return nil
}

// client is a clientset with its own connection: client-go shares one
// transport (and so one HTTP/2 connection) between configs that are equal,
// unless the config has its own dialer.
func (b *bench) client(protobuf bool) *kubernetes.Clientset {
	return clientFor(b.srv, protobuf)
}

func clientFor(srv *server, protobuf bool) *kubernetes.Clientset {
	cfg := rest.CopyConfig(srv.cfg)
	d := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	cfg.Dial = d.DialContext
	if protobuf {
		cfg.ContentType = "application/vnd.kubernetes.protobuf"
		cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	}
	return kubernetes.NewForConfigOrDie(cfg)
}

func (b *bench) mem(what string) (Mem, error) {
	return b.memOf(b.srv, what)
}

func (b *bench) memOf(srv *server, what string) (Mem, error) {
	m, err := readMem(srv.pid())
	if err == nil {
		b.logf("memory %s: RSS %s, anonymous %s, HWM %s", what, mib(m.VmRSS), mib(m.RssAnon), mib(m.VmHWM))
	}
	return m, err
}

// heapProfile saves the server's heap profile after a GC, with -profile-dir.
func (b *bench) heapProfile(ctx context.Context, name string) error {
	return b.heapProfileOf(ctx, b.srv, name)
}

func (b *bench) heapProfileOf(ctx context.Context, srv *server, name string) error {
	if b.o.ProfileDir == "" {
		return nil
	}
	return saveProfile(ctx, srv, b.o.ProfileDir, "heap?gc=1", name+".heap.pb.gz")
}

// cpuProfile starts a CPU profile of the server over window, with
// -profile-dir; the channel reports its end.
func (b *bench) cpuProfile(ctx context.Context, name string, window time.Duration) <-chan error {
	done := make(chan error, 1)
	if b.o.ProfileDir == "" {
		done <- nil
		return done
	}
	go func() {
		done <- saveProfile(ctx, b.srv, b.o.ProfileDir, fmt.Sprintf("profile?seconds=%d", int(window.Seconds())), name+".cpu.pb.gz")
	}()
	return done
}

func saveProfile(ctx context.Context, srv *server, dir, query, file string) error {
	path, params, _ := strings.Cut(query, "?")
	req := clientFor(srv, false).CoreV1().RESTClient().Get().AbsPath("/debug/pprof/" + path)
	if k, v, ok := strings.Cut(params, "="); ok {
		req = req.Param(k, v)
	}
	raw, err := req.DoRaw(ctx)
	if err != nil {
		return fmt.Errorf("getting /debug/pprof/%s: %w", query, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, file), raw, 0o644)
}

// serverCPU is the CPU time the server has used so far.
func (b *bench) serverCPU() time.Duration {
	d, _ := cpuTime(b.srv.pid())
	return d
}

// benchCPU is the CPU time this process has used so far.
func benchCPU() time.Duration {
	d, _ := cpuTime(os.Getpid())
	return d
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-time.After(d):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// DataDirSize is the disk the data dir and its etcd WAL take after a phase.
type DataDirSize struct {
	Phase    string `json:"phase"`
	Bytes    int64  `json:"bytes"`
	WALBytes int64  `json:"walBytes"`
}

// dataDirSize measures the data dir after phase and records it.
func (b *bench) dataDirSize(phase string) (DataDirSize, error) {
	s := DataDirSize{Phase: phase}
	var err error
	if s.Bytes, err = diskUsage(b.dataDir); err != nil {
		return s, err
	}
	if s.WALBytes, err = diskUsage(filepath.Join(b.dataDir, "etcd", "member", "wal")); err != nil {
		return s, err
	}
	b.res.DataDirs = append(b.res.DataDirs, s)
	b.logf("data dir %s: %s on disk, WAL %s", phase, mib(s.Bytes), mib(s.WALBytes))
	return s, nil
}

// run measures the sections -only selects, in allSections' order.
func (b *bench) run(ctx context.Context) error {
	measure := map[string]func(context.Context) error{
		sectionStore: b.store, sectionIdleFlash: b.idleFlash, sectionMirror: b.mirror, sectionControllers: b.controllers, sectionGateway: b.gateway,
		sectionPeer: b.peer, sectionCachePolicy: b.cachePolicy, sectionNodeAgents: b.nodeAgents, sectionUpdate: b.update, sectionSite: b.site, sectionCgroup: b.cgroup, sectionCompare: b.compare,
		sectionClusterCost: b.clusterCost,
	}
	for _, section := range allSections {
		if b.res.ran(section) {
			if err := measure[section](ctx); err != nil {
				return err
			}
		}
	}
	return nil
}

// store measures one kubestore process on its own: start-up, memory,
// LISTs, writes, watches, flash and informers.
func (b *bench) store(ctx context.Context) error {
	res := b.res
	var err error

	// Start-up, empty: the first start also creates the PKI.
	d, err := b.start(ctx)
	if err != nil {
		return err
	}
	res.ReadyFreshMs = ms(d)
	if err := b.stop(); err != nil {
		return err
	}
	if _, err := b.dataDirSize("fresh"); err != nil {
		return err
	}
	if d, err = b.start(ctx); err != nil {
		return err
	}
	res.ReadyEmptyMs = ms(d)

	// Idle.
	b.logf("idling %v", b.o.Idle)
	idleWrites, err := writeBytes(b.srv.pid())
	if err != nil {
		return err
	}
	idleStart := time.Now()
	if err := sleep(ctx, b.o.Idle); err != nil {
		return err
	}
	if res.MemIdle, err = b.mem("idle"); err != nil {
		return err
	}
	if res.IdleBinaryPages, err = readBinaryPages(b.srv.pid(), b.o.SymbolsBin); err != nil {
		return err
	}
	b.logf("idle: the binary's resident pages: %s", res.IdleBinaryPages)
	if err := b.heapProfile(ctx, "idle"); err != nil {
		return err
	}
	if res.IdleCPUPercent, err = cpuPercent(ctx, b.srv.pid(), b.o.CPUWindow); err != nil {
		return err
	}
	b.logf("idle CPU %.2f%%", res.IdleCPUPercent)
	written, err := writeBytes(b.srv.pid())
	if err != nil {
		return err
	}
	res.IdleWriteBytesPerSec = float64(written-idleWrites) / time.Since(idleStart).Seconds()
	if err := b.tokenAuth(ctx); err != nil {
		return err
	}

	// Load.
	if err := b.load(ctx); err != nil {
		return err
	}
	if res.MemLoaded, err = b.mem("loaded"); err != nil {
		return err
	}
	if _, err := b.dataDirSize("loaded"); err != nil {
		return err
	}
	if err := b.heapProfile(ctx, "loaded"); err != nil {
		return err
	}

	// LISTs from the cache and the in-process encode of the same list.
	mode, err := b.configMapsCache(ctx)
	if err != nil {
		return err
	}
	cpuProfile := b.cpuProfile(ctx, "cached-lists", 10*time.Second)
	if err := b.lists(ctx, mode); err != nil {
		return err
	}
	if err := <-cpuProfile; err != nil {
		return err
	}
	if res.MemAfterLists, err = b.mem("after lists"); err != nil {
		return err
	}
	if err := b.heapProfile(ctx, "after-lists"); err != nil {
		return err
	}
	if res.LoadedCPUPercent, err = cpuPercent(ctx, b.srv.pid(), b.o.CPUWindow); err != nil {
		return err
	}
	b.logf("idle CPU with data %.2f%%", res.LoadedCPUPercent)
	if err := b.encode(ctx); err != nil {
		return err
	}

	if err := b.updates(ctx, 1); err != nil {
		return err
	}
	if res.Watch, err = b.watchFanOut(ctx, 0); err != nil {
		return err
	}
	if res.WatchPaced, err = b.watchFanOut(ctx, b.o.WatchRate); err != nil {
		return err
	}
	if err := b.flashWrites(ctx); err != nil {
		return err
	}
	dir, err := b.dataDirSize("after the writes")
	if err != nil {
		return err
	}
	res.DataDirBytes, res.WALBytes = dir.Bytes, dir.WALBytes
	if err := b.informer(ctx); err != nil {
		return err
	}

	// Start-up with the data.
	if err := b.stop(); err != nil {
		return err
	}
	if d, err = b.start(ctx); err != nil {
		return err
	}
	res.ReadyDataMs = ms(d)
	if err := b.stop(); err != nil {
		return err
	}

	// The same LISTs with the cache off for configmaps.
	if _, err := b.start(ctx, "--watch-cache-sizes=configmaps#0"); err != nil {
		return err
	}
	if err := b.lists(ctx, "uncached"); err != nil {
		return err
	}
	if err := b.stop(); err != nil {
		return err
	}
	return nil
}

// configMapsCache is how the server serves the ConfigMaps: "cached", or
// "uncached" when it reads them from etcd, as a small device does by
// default (kubestore_watch_cache_enabled says which).
func (b *bench) configMapsCache(ctx context.Context) (string, error) {
	m, err := metricsOf(ctx, b.srv, `kubestore_watch_cache_enabled{group="",resource="configmaps"}`)
	if err != nil {
		return "", err
	}
	if len(m) != 1 {
		return "", fmt.Errorf("/metrics: %d series of kubestore_watch_cache_enabled for configmaps, want 1", len(m))
	}
	for _, v := range m {
		if v == 1 {
			return "cached", nil
		}
	}
	b.logf("the server reads ConfigMaps from etcd (a small device's default): the first LISTs are uncached too")
	return "uncached", nil
}

// parallel runs fn(worker, i) for i in [0,n) on workers goroutines, each
// worker taking every workers-th index, and returns the elapsed time and
// the first error.
func parallel(ctx context.Context, workers, n int, fn func(ctx context.Context, worker, i int) error) (time.Duration, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	errs := make(chan error, workers)
	start := time.Now()
	for w := range workers {
		go func() {
			for i := w; i < n; i += workers {
				if err := fn(ctx, w, i); err != nil {
					cancel(err)
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	var first error
	for range workers {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	elapsed := time.Since(start)
	if first == nil {
		first = ctx.Err()
	}
	return elapsed, first
}

// paced runs fn(worker, i) for i in [0,n), starting index i at i/rate
// seconds after the start on one of workers goroutines, so that a slow
// answer does not lower the rate; it returns the elapsed time and the
// first error.
func paced(ctx context.Context, workers, n int, rate float64, fn func(ctx context.Context, worker, i int) error) (time.Duration, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	jobs := make(chan int)
	errs := make(chan error, workers)
	for w := range workers {
		go func() {
			for i := range jobs {
				if err := fn(ctx, w, i); err != nil {
					cancel()
					errs <- err
					for range jobs {
					}
					return
				}
			}
			errs <- nil
		}()
	}
	start := time.Now()
	interval := time.Duration(float64(time.Second) / rate)
	timer := time.NewTimer(0)
	defer timer.Stop()
dispatch:
	for i := range n {
		timer.Reset(time.Until(start.Add(time.Duration(i) * interval)))
		select {
		case <-timer.C:
		case <-ctx.Done():
			break dispatch
		}
		select {
		case jobs <- i:
		case <-ctx.Done():
			break dispatch
		}
	}
	close(jobs)
	var first error
	for range workers {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	elapsed := time.Since(start)
	if first == nil {
		first = ctx.Err()
	}
	return elapsed, first
}
