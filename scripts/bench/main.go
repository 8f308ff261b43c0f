// Command bench measures a built kubestore binary as a separate process:
// size, start-up, memory, LIST, write throughput, watch fan-out, flash
// writes and informer start, what an idle server writes to flash over
// minutes, then an edge mirroring a second kubestore
// (initial sync, memory, and the resync after an outage), the memory of
// each controller, the gateway data set, and an edge serving a real
// kubelet (kubemark's) through an outage, all in one run (-only runs one
// section). It builds nothing; make bench builds the binary and runs it.
// It prints one table and writes the figures as JSON (-out).
//
//	go run ./scripts/bench -bin bin/kubestore [-serve-arg=--memory-limit=128Mi] [-only=mirror]
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// stringList is a repeatable string flag.
type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, " ") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

// intList is a comma-separated list of integers flag.
type intList []int

func (l *intList) String() string {
	var out []string
	for _, n := range *l {
		out = append(out, strconv.Itoa(n))
	}
	return strings.Join(out, ",")
}

func (l *intList) Set(v string) error {
	*l = nil
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			return fmt.Errorf("%q is not a positive integer", f)
		}
		*l = append(*l, n)
	}
	return nil
}

// options of one benchmark run. Counts of zero are derived from Scale.
type options struct {
	Bin          string
	Out          string
	ServeArgs    []string
	Scale        float64
	ConfigMaps   int
	Pods         int
	Nodes        int
	Watchers     int
	Clients      int
	ListRuns     int
	WriteUpdates int
	WriteRate    float64
	WatchRate    float64
	Idle         time.Duration
	CPUWindow    time.Duration
	DataRoot     string
	Keep         bool
	// XZ compresses the binary with xz -9 (about a minute on one core).
	XZ         bool
	ProfileDir string
	Log        io.Writer
	// Only is the one section to run; empty runs all.
	Only string
	// The mirror section: objects mirrored, how many change upstream
	// during the outage, and how long the link is cut.
	MirrorObjects int
	MirrorChanges int
	MirrorOutage  time.Duration
	// The controllers section: namespaces of its data set.
	ControllerNamespaces int
	// The gateway section: the copies of the gateway set each server
	// holds, the burst of updates, and the slow write stream.
	GatewayScales    []int
	BurstUpdates     int
	BurstDuration    time.Duration
	SlowWriteUpdates int
	SlowWriteRate    float64
	// The peer section: where kube-apiserver and etcd are (make
	// upstream-bins; missing: the section is skipped).
	PeerBinDir string
	// The cache-policy section: the copies of the gateway set, and the
	// GETs by name of each resource.
	CachePolicyScale int
	CachePolicyGets  int
	// The node-agents section: the kubemark binary (missing: the section
	// is skipped), the steady window and the outage.
	Kubemark   string
	NodeWindow time.Duration
	NodeOutage time.Duration
	// The update section: a release of a newer data format (missing: the
	// section is skipped).
	NewerBin string
	// The idle-flash section: how long an idle server's writes are
	// measured (0: the section is skipped).
	IdleFlash time.Duration
	// The cgroup section: the memory cgroup limits, in MiB, kubestore and
	// the peer (kube-apiserver + etcd, when built) run in.
	CgroupKubestore []int
	CgroupPeer      []int
	// CgroupScales are the copies of the gateway set loaded in turn.
	CgroupScales []int
	// SymbolsBin is -bin's build with its symbol table ("": none).
	SymbolsBin string
	// The compare section: a build of an earlier commit whose server CPU
	// per create, update and LIST is measured beside -bin's ("": the
	// section is skipped), in rounds.
	CompareBin    string
	CompareRounds int
	// The cluster-cost section: the node counts of its arms, its idle and
	// churn windows, the churn's pods per node and minute, and the
	// gateways' ClusterRole on the cluster.
	CostNodes     []int
	CostIdle      time.Duration
	CostChurn     time.Duration
	CostChurnRate float64
	GatewayRBAC   string
	// KubectlSettle is how long after kubectl's OpenAPI reads the
	// cgroup section's create comes (0: kubectlSettle; no flag).
	KubectlSettle time.Duration
}

// The benchmark's sections, in the order they run.
const (
	sectionStore       = "store"
	sectionIdleFlash   = "idle-flash"
	sectionMirror      = "mirror"
	sectionControllers = "controllers"
	sectionGateway     = "gateway"
	sectionPeer        = "peer"
	sectionCachePolicy = "cache-policy"
	sectionNodeAgents  = "node-agents"
	sectionUpdate      = "update"
	sectionSite        = "site"
	sectionCgroup      = "cgroup"
	sectionCompare     = "compare"
	sectionClusterCost = "cluster-cost"
)

var allSections = []string{sectionStore, sectionIdleFlash, sectionMirror, sectionControllers, sectionGateway, sectionPeer, sectionCachePolicy, sectionNodeAgents, sectionUpdate, sectionSite, sectionCgroup, sectionCompare, sectionClusterCost}

// sections are the sections this run measures.
func (o *options) sections() []string {
	if o.Only == "" {
		return allSections
	}
	return strings.Split(o.Only, ",")
}

func scaled(n int, full int, scale float64) int {
	if n > 0 {
		return n
	}
	return max(1, int(math.Round(float64(full)*scale)))
}

// scaledDuration is d, or full times scale when d is 0.
func scaledDuration(d, full time.Duration, scale float64) time.Duration {
	if d != 0 {
		return d
	}
	return time.Duration(float64(full) * scale)
}

// complete derives the counts that were not given from Scale.
func (o *options) complete() error {
	if o.Scale <= 0 {
		return fmt.Errorf("invalid -scale %v: must be > 0", o.Scale)
	}
	o.ConfigMaps = scaled(o.ConfigMaps, 10000, o.Scale)
	o.Pods = scaled(o.Pods, 1000, o.Scale)
	o.Nodes = scaled(o.Nodes, 100, o.Scale)
	o.Watchers = scaled(o.Watchers, 100, o.Scale)
	o.WriteUpdates = scaled(o.WriteUpdates, 10000, o.Scale)
	o.MirrorObjects = scaled(o.MirrorObjects, 10000, o.Scale)
	o.MirrorChanges = scaled(o.MirrorChanges, 100, o.Scale)
	o.ControllerNamespaces = scaled(o.ControllerNamespaces, 100, o.Scale)
	o.BurstUpdates = scaled(o.BurstUpdates, 10000, o.Scale)
	o.SlowWriteUpdates = scaled(o.SlowWriteUpdates, 600, o.Scale)
	o.CachePolicyGets = scaled(o.CachePolicyGets, 1000, o.Scale)
	if o.CachePolicyScale == 0 {
		o.CachePolicyScale = 5
	}
	if o.CompareRounds < 0 {
		return fmt.Errorf("invalid -compare-rounds %d: must be > 0", o.CompareRounds)
	}
	if o.CompareRounds == 0 {
		o.CompareRounds = 4
	}
	o.NodeWindow = scaledDuration(o.NodeWindow, time.Minute, o.Scale)
	o.NodeOutage = scaledDuration(o.NodeOutage, 10*time.Minute, o.Scale)
	if o.GatewayScales == nil {
		o.GatewayScales = []int{1, 5}
	}
	if o.CgroupKubestore == nil {
		o.CgroupKubestore = []int{64, 96, 128}
	}
	if o.CgroupPeer == nil {
		o.CgroupPeer = []int{256, 512}
	}
	if o.CgroupScales == nil {
		o.CgroupScales = []int{1, 5}
	}
	if o.CostNodes == nil {
		o.CostNodes = []int{1, 10, 30}
	}
	if o.CostIdle == 0 {
		o.CostIdle = defaultCostWindow
	}
	if o.CostChurn == 0 {
		o.CostChurn = defaultCostWindow
	}
	if o.CostChurnRate == 0 {
		o.CostChurnRate = defaultCostChurnRate
	}
	if o.CostIdle < 0 || o.CostChurn < 0 {
		return fmt.Errorf("invalid -cluster-cost-idle %v or -cluster-cost-churn %v: must be > 0", o.CostIdle, o.CostChurn)
	}
	if o.CostChurnRate < 0 {
		return fmt.Errorf("invalid -cluster-cost-churn-rate %v: must be > 0", o.CostChurnRate)
	}
	for _, s := range o.GatewayScales {
		if s <= 0 {
			return fmt.Errorf("invalid -gateway-scales %v: each must be > 0", o.GatewayScales)
		}
	}
	if o.BurstDuration <= 0 {
		return fmt.Errorf("invalid -burst-duration %v: must be > 0", o.BurstDuration)
	}
	if o.SlowWriteRate <= 0 {
		return fmt.Errorf("invalid -slow-write-rate %v: must be > 0", o.SlowWriteRate)
	}
	for _, s := range o.sections() {
		if !slices.Contains(allSections, s) {
			return fmt.Errorf("invalid -only %q: must be some of %s, comma separated, or empty for all", o.Only, strings.Join(allSections, ", "))
		}
	}
	if o.MirrorChanges > o.MirrorObjects {
		return fmt.Errorf("invalid -mirror-changes %d: more than the %d mirrored objects", o.MirrorChanges, o.MirrorObjects)
	}
	if o.MirrorOutage <= 0 {
		return fmt.Errorf("invalid -mirror-outage %v: must be > 0", o.MirrorOutage)
	}
	if o.IdleFlash < 0 {
		return fmt.Errorf("invalid -idle-flash %v: must be >= 0 (0 skips the section)", o.IdleFlash)
	}
	if o.NodeWindow <= 0 {
		return fmt.Errorf("invalid -node-window %v: must be > 0", o.NodeWindow)
	}
	if o.NodeOutage <= 0 {
		return fmt.Errorf("invalid -node-outage %v: must be > 0", o.NodeOutage)
	}
	if o.Clients <= 0 {
		return fmt.Errorf("invalid -clients %d: must be > 0", o.Clients)
	}
	if o.ListRuns <= 0 {
		return fmt.Errorf("invalid -list-runs %d: must be > 0", o.ListRuns)
	}
	if o.WriteRate <= 0 {
		return fmt.Errorf("invalid -write-rate %v: must be > 0", o.WriteRate)
	}
	if o.WatchRate <= 0 {
		return fmt.Errorf("invalid -watch-rate %v: must be > 0", o.WatchRate)
	}
	if o.Nodes > o.Pods {
		o.Nodes = o.Pods
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	return nil
}

func main() {
	o := options{Log: os.Stderr}
	var serveArgs stringList
	flag.StringVar(&o.Bin, "bin", "bin/kubestore", "kubestore binary to measure (not built by this program)")
	flag.StringVar(&o.Out, "out", "bench.json", "file the figures are written to as JSON; empty writes none")
	flag.Var(&serveArgs, "serve-arg", "extra argument for every kubestore process (repeatable), e.g. -serve-arg=--memory-limit=128Mi")
	flag.Float64Var(&o.Scale, "scale", 1, "multiplies every count below that is left at 0 (1 = 10,000 ConfigMaps, 1,000 Pods, 100 nodes, 100 watchers, 10,000 flash-write updates, 10,000 mirrored ConfigMaps of which 100 change)")
	flag.IntVar(&o.ConfigMaps, "configmaps", 0, "ConfigMaps of 1 KiB to create (0: 10000 x scale)")
	flag.IntVar(&o.Pods, "pods", 0, "Pods to create (0: 1000 x scale)")
	flag.IntVar(&o.Nodes, "nodes", 0, "Nodes the pods are spread over (0: 100 x scale)")
	flag.IntVar(&o.Watchers, "watchers", 0, "watchers on all pods, and as many per-node watchers (0: 100 x scale)")
	flag.IntVar(&o.Clients, "clients", 16, "concurrent clients for creates and updates")
	flag.IntVar(&o.ListRuns, "list-runs", 20, "runs of each LIST variant")
	flag.IntVar(&o.WriteUpdates, "write-updates", 0, "updates of the flash-write measurement (0: 10000 x scale)")
	flag.Float64Var(&o.WriteRate, "write-rate", 100, "updates per second of the flash-write measurement")
	flag.Float64Var(&o.WatchRate, "watch-rate", 100, "pod updates per second of the paced watch fan-out (the other one updates as fast as -clients go)")
	flag.DurationVar(&o.Idle, "idle", 30*time.Second, "wait after start before the idle memory sample")
	flag.DurationVar(&o.CPUWindow, "cpu-window", 10*time.Second, "window of the idle CPU measurements")
	flag.StringVar(&o.DataRoot, "data-root", "", "directory for the temporary data dir (default: the system temp dir; must be on the disk whose writes are measured)")
	flag.BoolVar(&o.Keep, "keep", false, "keep the data dir and server logs")
	flag.BoolVar(&o.XZ, "xz", true, "also measure the binary compressed with xz -9 (about a minute of one core, before anything else runs)")
	flag.StringVar(&o.ProfileDir, "profile-dir", "", "if set, serve with --profiling and save heap profiles (idle, loaded, after the lists) and a CPU profile of the first cached LISTs there")
	flag.StringVar(&o.Only, "only", "", "run only these sections, comma separated (peer's ratios need gateway and store in the same run): store (one process: start-up, memory, LISTs, writes, watches, flash, informer) or idle-flash (what an idle server on a fresh data dir writes over -idle-flash) or mirror (an edge mirroring a second kubestore) or controllers (the memory of each of --controllers) or gateway (memory of the gateway data set x1 and x5, a burst of updates, flash at 10 updates/s) or peer (kube-apiserver + etcd from -peer-bin-dir on the gateway data set, each figure beside kubestore's) or cache-policy (each gateway resource's watch cache: the memory it holds, what a GET by name costs without it) or node-agents (an edge serving kubemark's hollow kubelet with 110 pods: requests, CPU, memory, the reconnect after an outage) or update (the -configmaps updated to -newer-bin's data format: the pre-update snapshot, the trial start, the commit, the way back) or site (the -configmaps created through one kubestore and through a site of three: rate, latency, memory of each member; a fourth gateway's join with them present; then the upstream watches and link bytes of the -mirror-objects and -mirror-changes on three separate edges and on a site of three); or compare (the server CPU per create, update and LIST of -bin beside -compare-bin's, in -compare-rounds rounds) or cluster-cost (what kube-apiserver from -peer-bin-dir pays per node, idle and under pod churn: -cluster-cost-nodes hollow kubelets on it, as many gateways each serving one, and a site of three; needs -kubemark); empty runs all")
	flag.IntVar(&o.MirrorObjects, "mirror-objects", 0, "mirror and site: ConfigMaps of 1 KiB the edge mirrors (0: 10000 x scale)")
	flag.IntVar(&o.MirrorChanges, "mirror-changes", 0, "mirror: ConfigMaps updated upstream during the outage; site: updated once every mirror serves them (0: 100 x scale, 1 % of the mirrored ones)")
	flag.DurationVar(&o.MirrorOutage, "mirror-outage", 60*time.Second, "mirror: how long the link between edge and upstream is cut")
	flag.IntVar(&o.ControllerNamespaces, "controller-namespaces", 0, "controllers: namespaces, each with a ConfigMap owning 20 others and 4 Services (0: 100 x scale)")
	flag.Var((*intList)(&o.GatewayScales), "gateway-scales", "gateway: copies of the gateway set (200 agent Pods, 1,000 ConfigMaps of 2.4 KiB, 500 Secrets, 50 headless Services with EndpointSlices, 100 Leases), one server per entry (default 1,5)")
	flag.IntVar(&o.BurstUpdates, "burst-updates", 0, "gateway: ConfigMap updates of the burst (0: 10000 x scale)")
	flag.DurationVar(&o.BurstDuration, "burst-duration", 10*time.Second, "gateway: the burst's updates are paced over this long")
	flag.IntVar(&o.SlowWriteUpdates, "slow-write-updates", 0, "gateway: updates of the slow flash-write measurement (0: 600 x scale)")
	flag.Float64Var(&o.SlowWriteRate, "slow-write-rate", 10, "gateway: updates per second of the slow flash-write measurement")
	flag.StringVar(&o.SymbolsBin, "symbols-bin", "", "gateway: the same build as -bin with its symbol table (make build-symbols), to attribute the binary's resident pages to modules; empty: by section only")
	flag.StringVar(&o.PeerBinDir, "peer-bin-dir", "bin/upstream", "peer: directory of kube-apiserver and etcd (make upstream-bins builds them; missing: the section is skipped)")
	flag.IntVar(&o.CachePolicyScale, "cache-policy-scale", 0, "cache-policy: copies of the gateway set each server holds (0: 5)")
	flag.IntVar(&o.CachePolicyGets, "cache-policy-gets", 0, "cache-policy: GETs by name of each resource (0: 1000 x scale)")
	flag.StringVar(&o.CompareBin, "compare-bin", "", "compare: a build of an earlier commit (make bench-compare BASE=<rev> builds one); the server CPU per create, update and LIST of -configmaps ConfigMaps of -bin beside it, in rounds that alternate which goes first (empty: the section is skipped)")
	flag.IntVar(&o.CompareRounds, "compare-rounds", 0, "compare: rounds, each a fresh data dir for each binary (0: 4)")
	flag.StringVar(&o.NewerBin, "newer-bin", "bin/kubestore-format2", "update: a release of a newer data format to update to (make build-format2 builds this tree as one; missing: the section is skipped)")
	flag.StringVar(&o.Kubemark, "kubemark", "bin/upstream/kubemark", "node-agents: kubemark binary, for its hollow kubelet (make upstream-bins builds it; missing: the section is skipped)")
	flag.DurationVar(&o.NodeWindow, "node-window", 0, "node-agents: the steady window of the requests and CPU measurement (0: 60s x scale)")
	flag.DurationVar(&o.NodeOutage, "node-outage", 0, "node-agents: how long the link is cut while the kubelet goes on (0: 10m x scale)")
	flag.Var((*intList)(&o.CgroupKubestore), "cgroup-kubestore", "cgroup: memory cgroup limits in MiB kubestore runs in, comma separated (default 64,96,128; issue 39's targets: the gateway set ×1 in 64, ×5 in 96)")
	flag.Var((*intList)(&o.CgroupPeer), "cgroup-peer", "cgroup: memory cgroup limits in MiB kube-apiserver + etcd run in (default 256,512; skipped without -peer-bin-dir's binaries)")
	flag.Var((*intList)(&o.CgroupScales), "cgroup-scales", "cgroup: copies of the gateway set loaded in turn in each cgroup, each followed by a LIST of everything (default 1,5)")
	flag.Var((*intList)(&o.CostNodes), "cluster-cost-nodes", "cluster-cost: the node counts, comma separated; for each, kubelets on kube-apiserver and as many gateways each serving one (default 1,10,30; the site of three runs beside three kubelets in any case)")
	flag.DurationVar(&o.CostIdle, "cluster-cost-idle", 0, "cluster-cost: the idle window of each arm (0: "+defaultCostWindow.String()+")")
	flag.DurationVar(&o.CostChurn, "cluster-cost-churn", 0, "cluster-cost: the pod churn window of each arm (0: "+defaultCostWindow.String()+")")
	flag.Float64Var(&o.CostChurnRate, "cluster-cost-churn-rate", 0, fmt.Sprintf("cluster-cost: pods created, and as many deleted, per node and minute during the churn window (0: %g)", defaultCostChurnRate))
	flag.StringVar(&o.GatewayRBAC, "gateway-rbac", "docs/node/gateway-rbac.yaml", "cluster-cost: the gateways' ClusterRole, applied to each kube-apiserver")
	flag.DurationVar(&o.IdleFlash, "idle-flash", 5*time.Minute, "idle-flash: how long the writes of an idle server on a fresh data dir are measured, from 10 s after ready (issue 39's target: <= 1 KB/s over 5 minutes); 0 skips the section")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "bench: unexpected arguments %q\n", flag.Args())
		os.Exit(2)
	}
	o.ServeArgs = serveArgs
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := run(ctx, o)
	if res != nil {
		printTable(os.Stdout, res)
		if o.Out != "" {
			if werr := writeJSON(o.Out, res); werr != nil {
				fmt.Fprintln(os.Stderr, "bench:", werr)
				os.Exit(1)
			}
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func writeJSON(path string, res *Result) error {
	b, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}
