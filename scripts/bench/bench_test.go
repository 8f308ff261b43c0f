package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kubestore/kubestore/config"
)

func TestOnly(t *testing.T) {
	for _, tc := range []struct {
		only    string
		want    []string
		wantErr bool
	}{
		{only: "", want: []string{sectionStore, sectionIdleFlash, sectionMirror, sectionControllers, sectionGateway, sectionPeer, sectionCachePolicy, sectionNodeAgents, sectionUpdate, sectionSite, sectionCgroup, sectionCompare, sectionClusterCost}},
		{only: "cluster-cost", want: []string{sectionClusterCost}},
		{only: "node-agents,cluster-cost", want: []string{sectionNodeAgents, sectionClusterCost}},
		{only: "cluster-costs", wantErr: true},
		{only: "site", want: []string{sectionSite}},
		{only: "update", want: []string{sectionUpdate}},
		{only: "peer", want: []string{sectionPeer}},
		{only: "store,gateway,peer", want: []string{sectionStore, sectionGateway, sectionPeer}},
		{only: "gateway,peers", wantErr: true},
		{only: "cache-policy", want: []string{sectionCachePolicy}},
		{only: "node-agents", want: []string{sectionNodeAgents}},
		{only: "gateway", want: []string{sectionGateway}},
		{only: "controllers", want: []string{sectionControllers}},
		{only: "mirror", want: []string{sectionMirror}},
		{only: "store", want: []string{sectionStore}},
		{only: "idle-flash", want: []string{sectionIdleFlash}},
		{only: "cgroup", want: []string{sectionCgroup}},
		{only: "compare", want: []string{sectionCompare}},
		{only: "mirrors", wantErr: true},
	} {
		t.Run("only="+tc.only, func(t *testing.T) {
			o := options{Scale: 1, Clients: 1, ListRuns: 1, WriteRate: 1, WatchRate: 1, MirrorOutage: time.Second, Only: tc.only,
				BurstDuration: time.Second, SlowWriteRate: 1}
			err := o.complete()
			if (err != nil) != tc.wantErr {
				t.Fatalf("complete() = %v, want error %t", err, tc.wantErr)
			}
			if err == nil && !slices.Equal(o.sections(), tc.want) {
				t.Errorf("sections() = %q, want %q", o.sections(), tc.want)
			}
			if err == nil && (o.MirrorObjects != 10000 || o.MirrorChanges != 100) {
				t.Errorf("mirror counts at scale 1 = %d, %d; want 10000, 100", o.MirrorObjects, o.MirrorChanges)
			}
			if err == nil && (o.NodeWindow != time.Minute || o.NodeOutage != 10*time.Minute) {
				t.Errorf("node-agents window and outage at scale 1 = %v, %v; want 1m, 10m", o.NodeWindow, o.NodeOutage)
			}
		})
	}
}

// TestSmoke runs the whole benchmark at a tiny scale against the binary
// make test built, and checks that every figure was measured. The
// node-agents section runs when KUBESTORE_UPSTREAM_BIN_DIR has kubemark
// (make upstream-bins), and is checked to skip otherwise.
func TestSmoke(t *testing.T) {
	bin := os.Getenv("KUBESTORE_BIN")
	if bin == "" {
		t.Skip("KUBESTORE_BIN is not set (make test sets it)")
	}
	kubemark, peerBins := filepath.Join(t.TempDir(), "no-kubemark"), filepath.Join(t.TempDir(), "no-upstream")
	if dir := os.Getenv("KUBESTORE_UPSTREAM_BIN_DIR"); dir != "" {
		kubemark, peerBins = filepath.Join(dir, "kubemark"), dir
	}
	newer := os.Getenv("KUBESTORE_NEWER_BIN")
	if newer == "" {
		newer = filepath.Join(t.TempDir(), "no-newer-release")
	}
	out := filepath.Join(t.TempDir(), "bench.json")
	var log bytes.Buffer
	o := options{
		Bin: bin, Out: out, Scale: 0.01, Clients: 4, ListRuns: 3, WriteRate: 200, WatchRate: 200,
		Idle: time.Second, CPUWindow: time.Second, DataRoot: t.TempDir(), Log: &log, MirrorOutage: 2 * time.Second,
		GatewayScales: []int{1}, BurstDuration: time.Second, SlowWriteRate: 50, Kubemark: kubemark, CachePolicyScale: 1, PeerBinDir: peerBins,
		NewerBin: newer, IdleFlash: 2 * time.Second, CgroupKubestore: []int{256}, CgroupPeer: []int{512}, CgroupScales: []int{1},
		KubectlSettle: time.Second, CompareBin: bin, CompareRounds: 1,
		CostNodes: []int{1}, CostIdle: 3 * time.Second, CostChurn: 3 * time.Second, CostChurnRate: 20, GatewayRBAC: "../../docs/node/gateway-rbac.yaml",
	}
	res, err := run(t.Context(), o)
	if res != nil {
		var table bytes.Buffer
		printTable(&table, res)
		t.Logf("table:\n%s", table.String())
	}
	if err != nil {
		t.Fatalf("bench: %v\n%s", err, log.String())
	}
	if err := writeJSON(out, res); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var got Result
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatalf("bench.json: %v", err)
	}

	if got.Counts.ConfigMaps != 100 || got.Counts.Pods != 10 || got.Counts.Nodes != 1 || got.Counts.Watchers != 1 {
		t.Errorf("counts at scale 0.01 = %+v", got.Counts)
	}
	positive := map[string]float64{
		"binary bytes":     float64(got.Binary.Bytes),
		"ready fresh":      got.ReadyFreshMs,
		"ready empty":      got.ReadyEmptyMs,
		"ready with data":  got.ReadyDataMs,
		"idle RSS":         float64(got.MemIdle.VmRSS),
		"idle anonymous":   float64(got.MemIdle.RssAnon),
		"loaded RSS":       float64(got.MemLoaded.VmRSS),
		"after lists HWM":  float64(got.MemAfterLists.VmHWM),
		"creates/s":        got.CreatesPerSec,
		"updates/s":        got.UpdatesPerSec,
		"create CPU":       got.CreateCPUMs,
		"data dir bytes":   float64(got.DataDirBytes),
		"WAL bytes":        float64(got.WALBytes),
		"data dir phases":  float64(len(got.DataDirs)),
		"watch p50":        got.Watch.P50Ms,
		"disk writes":      float64(got.Writes.WriteBytes),
		"slow disk writes": float64(got.SlowWrites.WriteBytes),
		"informer sync":    got.Informer.SyncMs,
		"encode json":      got.encodeMs("json"),
		"encode protobuf":  got.encodeMs("protobuf"),
	}
	for name, v := range positive {
		if v <= 0 {
			t.Errorf("%s = %v, want > 0", name, v)
		}
	}
	switch c := got.Cgroup; {
	case c == nil:
		t.Error("no cgroup section")
	case c.Skipped != "":
		t.Logf("cgroup: skipped: %s", c.Skipped)
	case len(c.Kubestore) != 1 || c.Kubestore[0].Ready != "" || len(c.Kubestore[0].Steps) != 2 || c.Kubestore[0].PeakBytes <= 0:
		t.Errorf("cgroup = %+v, want kubestore in 256 MiB with the gateway set ×1 and kubectl's step measured", c.Kubestore)
	case !c.Kubestore[0].Steps[1].Kubectl || !c.Kubestore[0].Steps[1].fits():
		t.Errorf("cgroup's kubectl step = %+v, want kubectl's OpenAPI reads and a create answered in 256 MiB", c.Kubestore[0].Steps[1])
	}
	// The binary against itself, one round: a create, the update passes
	// and every LIST variant, cached and uncached, measured for each side.
	if c := got.Compare; c == nil || c.Skipped != "" || len(c.Ops) != 2+2*len(listVariants) {
		t.Errorf("compare = %+v, want create, update and %d LIST figures", c, 2*len(listVariants))
	} else {
		for _, op := range c.Ops {
			n := 1
			if op.Op == "update" {
				n = compareUpdatePasses
			}
			// A LIST of 100 ConfigMaps can take less than the 10 ms
			// the kernel counts CPU in: a figure may be 0.
			if len(op.BinMs) != n || len(op.BaseMs) != n || slices.Min(op.BinMs) < 0 || slices.Min(op.BaseMs) < 0 {
				t.Errorf("compare %s: %+v, want %d figures on each side", op.Op, op, n)
			}
		}
	}
	if f := got.IdleFlash; f == nil || f.Skipped != "" || f.WindowSec < 2 || f.BytesPerSec < 0 {
		t.Errorf("idle flash = %+v, want a window of 2 s measured", f)
	}
	switch p := got.Peer; {
	case p == nil:
		t.Error("no peer section")
	case p.Skipped == "" && (p.Idle.VmRSS <= 0 || len(p.Runs) != 1 || p.Runs[0].Mem.VmRSS <= 0):
		t.Errorf("peer = %+v, want its idle and gateway ×1 memory", p)
	case p.Skipped == "" && (p.Store == nil || p.Store.ConfigMaps != 100 || p.Store.AfterLists.VmRSS <= 0 || p.Store.AfterRestart.VmRSS <= 0 ||
		p.Store.PeerAfterLists.VmRSS <= 0 || p.Store.PeerAfterRestart.VmRSS <= 0):
		t.Errorf("peer store comparison = %+v, want 100 ConfigMaps and both servers' memory after the LISTs and after a restart", p.Store)
	case p.Skipped == "" && (!storeSpeedMeasured(p.Store.Speed) || !storeSpeedMeasured(p.Store.PeerSpeed)):
		t.Errorf("peer store comparison: kubestore %+v, peer %+v, want both servers' creates and every LIST variant timed", p.Store.Speed, p.Store.PeerSpeed)
	case p.Skipped != "" && os.Getenv("KUBESTORE_UPSTREAM_BIN_DIR") != "":
		t.Errorf("peer skipped with KUBESTORE_UPSTREAM_BIN_DIR set: %s", p.Skipped)
	}
	if c := got.CachePolicy; c == nil || len(c.Runs) != 1+len(cachePolicyResources) {
		t.Errorf("cache policy = %+v, want a run with every resource cached and one per resource", c)
	} else {
		for _, run := range c.Runs {
			if run.LiveHeap <= 0 || len(run.Gets) == 0 || run.Gets[0].P50Ms <= 0 {
				t.Errorf("cache policy, %s uncached: %+v", orNone(run.Uncached), run)
			}
		}
	}
	if got.MemAfterLists.VmHWM < got.MemAfterLists.VmRSS {
		t.Errorf("HWM %d below RSS %d", got.MemAfterLists.VmHWM, got.MemAfterLists.VmRSS)
	}
	for _, w := range []WatchResult{got.Watch, got.WatchPaced} {
		if w.Expected != 2*got.Counts.Pods || w.Delivered != w.Expected || w.P50Ms <= 0 {
			t.Errorf("watch %+v: want all %d events delivered", w, 2*got.Counts.Pods)
		}
	}
	// 100 and, when the root CA publisher runs, kube-root-ca.crt.
	if got.Informer.Objects < 100 || got.Informer.Objects > 101 || !got.Informer.WatchList {
		t.Errorf("informer = %+v, want 100 objects synced by WatchList", got.Informer)
	}
	if want := 2 * len(listVariants); len(got.Lists) != want {
		t.Fatalf("%d LIST results, want %d", len(got.Lists), want)
	}
	for _, l := range got.Lists {
		if l.MedianMs <= 0 || l.P99Ms < l.MedianMs || (!l.Gzip && (l.Items < 100 || l.Items > 101)) {
			t.Errorf("LIST %+v", l)
		}
		if l.Variant == "limit=500" && l.Pages != 1 {
			t.Errorf("LIST %+v: 100 items in pages of 500 take one page", l)
		}
	}
	if m := got.Mirror; m == nil {
		t.Error("no mirror figures")
	} else {
		if m.Objects != 100 || m.Changes != 1 || m.Events != 1 || m.ChangedSeen != 1 {
			t.Errorf("mirror %d objects, %d changes: the edge's watcher got %d events (%v), %d of the changes; want 100, 1, exactly 1", m.Objects, m.Changes, m.Events, m.EventTypes, m.ChangedSeen)
		}
		for name, v := range map[string]float64{
			"mirror initial sync": m.InitialSyncMs, "mirror resync": m.ResyncMs, "mirror synced RSS": float64(m.MemSynced.VmRSS),
			"mirror empty RSS": float64(m.MemEmpty.VmRSS), "mirror resync writes": float64(m.ResyncWriteBytes),
			"mirror resumes": m.mirrorDelta("kubestore_mirror_resumes_total"),
		} {
			if v <= 0 {
				t.Errorf("%s = %v, want > 0", name, v)
			}
		}
	}
	if c := got.Controllers; c == nil || len(c.Runs) != len(benchControllers)+2 {
		t.Errorf("controllers = %+v, want a run with none, each of %d and all", c, len(benchControllers))
	} else {
		for _, run := range c.Runs {
			if run.Mem.VmRSS <= 0 || run.LoadMs <= 0 {
				t.Errorf("controllers run %+v: want memory and load time", run)
			}
		}
	}
	if g := got.Gateway; g == nil || len(g.Runs) != 1 {
		t.Errorf("gateway = %+v, want one run", g)
	} else {
		run := g.Runs[0]
		if run.Scale != 1 || run.Objects != 1900 || run.Mem.VmRSS <= 0 || run.Mappings.Binary <= 0 || run.Mappings.Anon <= 0 {
			t.Errorf("gateway run %+v: want 1,900 objects, memory and its mappings", run)
		}
		if g.BurstUpdates != 100 || g.BurstRate <= 0 || g.BurstPeak < g.BurstAfter.VmRSS/2 || g.BurstAfter.VmRSS <= 0 {
			t.Errorf("gateway burst %+v: want 100 updates, a rate and a peak", g)
		}
	}
	_, statErr := os.Stat(kubemark)
	switch n := got.NodeAgents; {
	case n == nil:
		t.Error("no node-agents result")
	case statErr != nil:
		if !strings.Contains(n.Skipped, "make upstream-bins") {
			t.Errorf("node-agents without kubemark: skipped %q, want it to name make upstream-bins", n.Skipped)
		}
	default:
		if n.Skipped != "" || n.Pods != 110 || n.Deleted != 5 || n.Created != 5 {
			t.Errorf("node-agents %+v: want 110 pods, 5 deleted and 5 created", n)
		}
		// The node, its Lease, its pods, 10 ConfigMaps and 10 Secrets; the
		// kubelet's status writes gave each pod an entry of its own.
		if mf := n.ManagedFields; mf.Objects < 2+110+10+10 || mf.Entries < 2*110 || mf.Bytes <= 0 || mf.Bytes >= mf.ObjectsBytes || mf.DecodedWithout <= 0 || mf.Decoded <= mf.DecodedWithout {
			t.Errorf("node-agents managedFields %+v: want at least 132 objects with an entry each and the kubelet's on every pod", mf)
		}
		for name, v := range map[string]float64{
			"start": n.StartMs, "requests sent at the start": n.StartSent, "writes forwarded at the start": n.StartForwarded,
			"edge RSS": float64(n.WithKubelet.EdgeMem.VmRSS), "kubelet RSS": float64(n.KubeletMem.VmRSS),
			"reconnect": n.ReconnectMs, "bytes sent upstream": float64(n.SentBytes), "bytes received": float64(n.ReceivedBytes),
		} {
			if v <= 0 {
				t.Errorf("node-agents %s = %v, want > 0", name, v)
			}
		}
	}
	_, newerErr := os.Stat(newer)
	switch u := got.Update; {
	case u == nil:
		t.Error("no update result")
	case newerErr != nil:
		if !strings.Contains(u.Skipped, "make build-format2") {
			t.Errorf("update without a newer release: skipped %q, want it to name make build-format2", u.Skipped)
		}
	case u.Skipped != "" || u.ConfigMaps != 100 || u.CommitKeys < 100 || u.SnapshotBytes <= 0 || u.DatabaseBytes <= 0 ||
		u.ReadyMs <= 0 || u.TrialReadyMs <= 0 || u.CommitMs <= 0 || u.WayBackReadyMs <= 0:
		t.Errorf("update %+v: want 100 ConfigMaps, at least as many keys rewritten, a snapshot and every time", u)
	}
	switch s := got.Site; {
	case s == nil:
		t.Error("no site result")
	case s.ConfigMaps != 100 || s.Single.CreatesPerSec <= 0 || s.Site.CreatesPerSec <= 0 || s.Site.P99Ms <= 0 ||
		len(s.Single.Mem) != 1 || len(s.Site.Mem) != 3 || s.Site.Mem[2].VmRSS <= 0 || s.JoinReadyMs <= 0:
		t.Errorf("site %+v: want 100 ConfigMaps through one kubestore and three members, each one's memory, a join", s)
	case s.MirrorObjects != 100 || s.MirrorChanges != 1 || s.MirrorEdges.UpstreamWatches < 3 || s.MirrorSite.UpstreamWatches < 1 ||
		s.MirrorSite.UpstreamWatches >= s.MirrorEdges.UpstreamWatches || s.MirrorEdges.ReceivedBytes <= s.MirrorEdges.SyncReceivedBytes ||
		s.MirrorSite.ReceivedBytes <= s.MirrorSite.SyncReceivedBytes || s.MirrorSite.SentBytes <= 0:
		t.Errorf("site mirror %+v, %+v: want 100 ConfigMaps and 1 change, fewer upstream watches for the site than for three edges, the link's bytes", s.MirrorEdges, s.MirrorSite)
	}
	switch c := got.ClusterCost; {
	case c == nil:
		t.Error("no cluster-cost result")
	case statErr != nil:
		if !strings.Contains(c.Skipped, "make upstream-bins") {
			t.Errorf("cluster-cost without kubemark: skipped %q, want it to name make upstream-bins", c.Skipped)
		}
	case len(c.Arms) != 4:
		t.Errorf("cluster-cost arms %+v, want kubelets and gateways ×1, kubelets and the site ×3", c.Arms)
	default:
		for _, a := range c.Arms {
			if a.Error != "" || a.Idle.PerNode == nil || a.Churn.PerNode == nil || a.Idle.Watches <= a.Baseline.Watches || a.Churn.ReceivedBytes <= 0 || a.Created == 0 {
				t.Errorf("cluster-cost %s ×%d: %+v, want more watches than the baseline, bytes and pods churned", a.Arm, a.Nodes, a)
			}
			if (a.Arm == armKubelets) != (a.Proxies != nil) {
				t.Errorf("cluster-cost %s ×%d: kube-proxy window %+v, want one for kubelets only", a.Arm, a.Nodes, a.Proxies)
			}
		}
	}
	var table bytes.Buffer
	printTable(&table, &got)
	wantNodeAgents := "node agents: reconnect, 5 deleted + 5 created upstream"
	if statErr != nil {
		wantNodeAgents = "node agents: skipped: "
	}
	wantUpdate := "update: kubestore update commit (format 1 to 2)"
	if newerErr != nil {
		wantUpdate = "update: skipped: "
	}
	for _, want := range []string{wantNodeAgents, wantUpdate, "binary size", "creates/s", "gateway ×1 (1900 objects)", "peak RSS over a burst", "disk writes per update (6 at ", "disk writes at idle", "idle flash: fresh data dir", "cm protobuf rv=0 cached", "cm protobuf rv=0 uncached", "informer cold sync", "mirror: resync after 2 s outage", "controllers: garbage-collector-controller, over none", "site: a fourth gateway joins with 100 ConfigMaps present", "site: mirror of one rule, upstream watches"} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("table lacks %q", want)
		}
	}
}

func TestCostArms(t *testing.T) {
	for _, tc := range []struct {
		nodes []int
		want  []string
	}{
		{[]int{1, 10, 30}, []string{"kubelets×1", "gateways×1", "kubelets×3", "site×3", "kubelets×10", "gateways×10", "kubelets×30", "gateways×30"}},
		{[]int{3}, []string{"kubelets×3", "gateways×3", "site×3"}},
		{[]int{10, 1}, []string{"kubelets×1", "gateways×1", "kubelets×3", "site×3", "kubelets×10", "gateways×10"}},
	} {
		var got []string
		for _, a := range costArms(tc.nodes) {
			got = append(got, fmt.Sprintf("%s×%d", a.Arm, a.Nodes))
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("costArms(%v) = %q, want %q", tc.nodes, got, tc.want)
		}
	}
}

func TestCostPerNode(t *testing.T) {
	base := CostWindow{Sec: 30, APIServerCPUSec: 3, APIServer: Mem{VmRSS: 300 << 20}, Watches: 2, Requests: 60}
	w := CostWindow{Sec: 60, APIServerCPUSec: 12, EtcdCPUSec: 6, APIServer: Mem{VmRSS: 320 << 20}, Watches: 42, Requests: 420,
		ReceivedBytes: 600_000, SentBytes: 60_000}
	got := *w.perNode(base, 10)
	want := CostPerNode{RSSBytes: 2 << 20, CPUMillicores: 10, EtcdCPUMillicores: 10, Watches: 4, RequestsPerMin: 30,
		ReceivedBytesPerMin: 60_000, SentBytesPerMin: 6_000}
	if got != want {
		t.Errorf("perNode = %+v, want %+v", got, want)
	}
}

func TestXZSize(t *testing.T) {
	if _, err := exec.LookPath("xz"); err != nil {
		t.Skip("no xz")
	}
	path := filepath.Join(t.TempDir(), "zeros")
	if err := os.WriteFile(path, make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	n, err := xzSize(path)
	if err != nil || n <= 0 || n > 4096 {
		t.Errorf("xzSize of 1 MiB of zeros = %d, %v; want a few hundred bytes", n, err)
	}
}

// The bench measures every controller --controllers knows: a new one
// left out would run in the "none" run of every other.
func TestBenchControllersAreTheServers(t *testing.T) {
	if !slices.Equal(benchControllers, config.Controllers) {
		t.Errorf("the bench measures %v, --controllers knows %v", benchControllers, config.Controllers)
	}
}

// storeSpeedMeasured says whether s holds the creates and the six LIST
// variants of the store comparison, each timed.
func storeSpeedMeasured(s StoreSpeed) bool {
	if s.CreatesPerSec <= 0 || s.CreateCPUMs < 0 || len(s.Lists) != 6 {
		return false
	}
	for _, l := range s.Lists {
		if l.MedianMs <= 0 || l.Items < 100 || l.ServerCPUMs < 0 {
			return false
		}
	}
	return true
}
