package main

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
)

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

// target is a goal from the issue; ok reports whether the figure meets it.
type target struct {
	text string
	ok   bool
}

func (t target) cell() string {
	if t.text == "" {
		return ""
	}
	if t.ok {
		return t.text + " met"
	}
	return t.text + " MISSED"
}

func (r *Result) encodeMs(format string) float64 {
	for _, e := range r.Encode {
		if e.Format == format {
			return e.MedianMs
		}
	}
	return 0
}

// printTable writes the one table of a run.
func printTable(w io.Writer, r *Result) {
	m := r.Machine
	fmt.Fprintf(w, "kubestore bench: %s (%s, %d bytes)\n", r.Binary.Path, r.Binary.Arch, r.Binary.Bytes)
	fmt.Fprintf(w, "machine: %d CPUs, %s, %s RAM, kernel %s, %s; load avg %s at start, %s at end; %s, %d s\n",
		m.CPUs, m.CPUModel, m.MemTotal, m.Kernel, m.GoVersion, m.LoadStart, m.LoadEnd, m.StartedUTC, m.DurationSec)
	c := r.Counts
	fmt.Fprintf(w, "CPU is user+system time of the server process (LIST: per request; the bench's own watchers share the machine)\n")
	if r.ran(sectionStore) {
		fmt.Fprintf(w, "load: %d ConfigMaps of 1 KiB, %d Pods on %d Nodes; %d clients; %d runs per LIST; serve args: %q\n",
			c.ConfigMaps, c.Pods, c.Nodes, c.Clients, c.ListRuns, r.ServeArgs)
	}
	if f := r.IdleFlash; f != nil && f.Skipped != "" {
		fmt.Fprintf(w, "idle flash: skipped: %s\n", f.Skipped)
	} else if f != nil {
		fmt.Fprintf(w, "idle flash: a fresh kubestore on a data dir of its own, no client, no change; write_bytes of /proc/PID/io over the window (the log's share given apart); serve args: %q\n", r.ServeArgs)
	}
	if m := r.Mirror; m != nil {
		fmt.Fprintf(w, "mirror: an edge kubestore mirrors %d ConfigMaps of 1 KiB from an upstream kubestore through a TCP proxy; %d change upstream during a %.0f s outage; serve args: %q\n",
			m.Objects, m.Changes, m.OutageSec, r.ServeArgs)
	}
	if g := r.Gateway; g != nil {
		fmt.Fprintf(w, "gateway: a fresh kubestore per scale (%v copies of the gateway set, one per namespace); memory %.0f s after the load; serve args: %q\n",
			r.Counts.GatewayScales, r.Counts.IdleSec, r.ServeArgs)
	}
	if c := r.Controllers; c != nil {
		fmt.Fprintf(w, "controllers: a fresh kubestore per run with %d namespaces, each a ConfigMap owning %d others and %d ClusterIP Services; memory %.0f s after the load\n",
			c.Namespaces, c.Children, c.Services, r.Counts.IdleSec)
	}
	if p := r.Peer; p != nil && p.Skipped != "" {
		fmt.Fprintf(w, "peer: skipped: %s\n", p.Skipped)
	} else if p != nil {
		fmt.Fprintf(w, "peer: kube-apiserver and etcd (one fresh pair per gateway scale, %v) on the gateway section's data; memory of both processes %.0f s after the first start and after the load, beside kubestore's from the store and gateway sections of this run\n",
			r.Counts.GatewayScales, r.Counts.IdleSec)
	}
	if c := r.CachePolicy; c != nil {
		fmt.Fprintf(w, "cache policy: a fresh kubestore (--profiling) per run on %d copies of the gateway set, every resource cached, then each one read from etcd (--watch-cache-sizes=<resource>#0); memory %.0f s after the load, live heap after a forced collection; %d GETs by name of a resource by 4 clients\n",
			c.Scale, r.Counts.IdleSec, r.Counts.CachePolicyGets)
	}
	if n := r.NodeAgents; n != nil && n.Skipped != "" {
		fmt.Fprintf(w, "node agents: skipped: %s\n", n.Skipped)
	} else if n != nil {
		fmt.Fprintf(w, "node agents: an edge kubestore (default mirror rules, --node-name %s) mirrors an upstream kubestore through a TCP proxy and serves kubemark's hollow kubelet with %d pods (%d ConfigMaps, %d Secrets); windows of %.0f s, %.0f s after the edge's sync (the edge alone) and after the pods are Ready (with the kubelet); %d pods deleted and %d created upstream during a %.0f s outage; serve args: %q\n",
			agentNode, n.Pods, n.ConfigMaps, n.Secrets, n.WindowSec, r.Counts.IdleSec, n.Deleted, n.Created, n.OutageSec, r.ServeArgs)
	}
	if u := r.Update; u != nil && u.Skipped != "" {
		fmt.Fprintf(w, "update: skipped: %s\n", u.Skipped)
	} else if u != nil {
		fmt.Fprintf(w, "update: a fresh data dir of %d ConfigMaps of 1 KiB, updated to %s (a newer data format), committed with kubestore update commit, then taken back by this release with --restore-on-newer-data; serve args: %q\n",
			u.ConfigMaps, u.NewerBin, r.ServeArgs)
	}
	if c := r.Compare; c != nil && c.Skipped != "" {
		fmt.Fprintf(w, "compare: skipped: %s\n", c.Skipped)
	} else if c != nil {
		fmt.Fprintf(w, "compare: %d rounds, alternating which goes first, each binary on a fresh data dir: %d ConfigMaps of 1 KiB created, updated %d times, then LISTed from the cache and (after a restart with --watch-cache-sizes=configmaps#0) from etcd; -bin against %s; serve args: %q\n",
			c.Rounds, c.ConfigMaps, c.UpdatePasses, c.BaseBin, r.ServeArgs)
	}
	if c := r.ClusterCost; c != nil && c.Skipped != "" {
		fmt.Fprintf(w, "cluster cost: skipped: %s\n", c.Skipped)
	} else if c != nil {
		fmt.Fprintf(w, "cluster cost: a fresh kube-apiserver + etcd per arm (Node,RBAC authorization, NodeRestriction and ServiceAccount admission, a token per agent), %d pods per node with a ConfigMap and a Secret mounted; kubelets (kubemark's hollow kubelet on kube-apiserver, then a hollow kube-proxy beside each, idle), gateways (a kubestore per node mirroring kube-apiserver with the default rules, its hollow kubelet on it) and a site of three gateways; each agent through one TCP proxy that counts the bytes; per node: the arm's %.0f s idle and %.0f s churn windows (%g pods created and deleted per node and minute) less a %.0f s baseline with nothing attached, each %.0f s after what came before; serve args: %q\n",
			c.PodsPerNode, c.IdleSec, c.ChurnSec, c.ChurnPerNodePerMin, c.SettleSec, c.SettleSec, r.ServeArgs)
	}
	fmt.Fprintln(w)

	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(figure, value string, t target) {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", figure, value, t.cell())
	}
	fmt.Fprintf(tw, "figure\tvalue\ttarget\n")
	fmt.Fprintf(tw, "------\t-----\t------\n")
	strip := "stripped"
	if !r.Binary.Stripped {
		strip = "NOT stripped"
	}
	row("binary size", fmt.Sprintf("%.1f MB (%s)", float64(r.Binary.Bytes)/1e6, strip), target{"<= 50 MB", r.Binary.Bytes <= 50e6})
	xz := "not measured (-xz=false or no xz)"
	if r.Binary.XZBytes > 0 {
		xz = fmt.Sprintf("%.2f MB", float64(r.Binary.XZBytes)/1e6)
	}
	// Issue 15 started from 15.64 MB (d3165e9) and may add at most 2 %.
	row("binary size, xz -9", xz, target{"<= 15.95 MB", r.Binary.XZBytes > 0 && r.Binary.XZBytes <= 15.95e6})
	if r.ran(sectionStore) {
		storeRows(row, r)
	}
	if f := r.IdleFlash; f != nil && f.Skipped == "" {
		idleFlashRows(row, r)
	}
	if r.Mirror != nil {
		mirrorRows(row, r)
	}
	if r.Cgroup != nil {
		cgroupRows(row, r)
	}
	if r.Controllers != nil {
		controllersRows(row, r)
	}
	if r.Gateway != nil {
		gatewayRows(row, r)
	}
	if p := r.Peer; p != nil && p.Skipped == "" {
		peerRows(row, r)
	}
	if r.CachePolicy != nil {
		cachePolicyRows(row, r)
	}
	if n := r.NodeAgents; n != nil && n.Skipped == "" {
		nodeAgentsRows(row, r)
	}
	if u := r.Update; u != nil && u.Skipped == "" {
		updateRows(row, r)
	}
	if r.Site != nil {
		siteRows(row, r)
	}
	if c := r.Compare; c != nil && c.Skipped == "" {
		compareRows(row, r)
	}
	if c := r.ClusterCost; c != nil && c.Skipped == "" {
		clusterCostRows(row, r)
	}
	tw.Flush()
}

// storeRows are the figures of the store section.
func storeRows(row func(figure, value string, t target), r *Result) {
	c := r.Counts
	row("exec to /readyz, first start (creates PKI)", fmt.Sprintf("%.0f ms", r.ReadyFreshMs), target{})
	row("exec to /readyz, empty", fmt.Sprintf("%.0f ms", r.ReadyEmptyMs), target{})
	row("exec to /readyz, with the data", fmt.Sprintf("%.0f ms", r.ReadyDataMs), target{"<= 1 s", r.ReadyDataMs > 0 && r.ReadyDataMs <= 1000})
	memRow := func(what string, mem Mem, rss, anon int64) {
		var tr, ta target
		if rss > 0 {
			tr = target{"<= " + mib(rss), mem.VmRSS <= rss}
			ta = target{"<= " + mib(anon), mem.RssAnon <= anon}
		}
		row("RSS "+what, mib(mem.VmRSS), tr)
		row("anonymous "+what, mib(mem.RssAnon), ta)
		row("HWM "+what, mib(mem.VmHWM), target{})
	}
	memRow(fmt.Sprintf("idle (%.0f s after ready)", c.IdleSec), r.MemIdle, 40<<20, 16<<20)
	row("idle: the binary's resident pages", r.IdleBinaryPages.String(), target{})
	row(fmt.Sprintf("CPU idle (%.0f s window)", c.CPUWindowSec), fmt.Sprintf("%.2f %% of a core", r.IdleCPUPercent), target{"<= 1 %", r.IdleCPUPercent <= 1})
	memRow("loaded", r.MemLoaded, 0, 0)
	memRow("after the lists", r.MemAfterLists, 128<<20, 64<<20)
	row("CPU idle with the data", fmt.Sprintf("%.2f %% of a core", r.LoadedCPUPercent), target{"<= 1 %", r.LoadedCPUPercent <= 1})
	for _, l := range r.Lists {
		name := fmt.Sprintf("LIST %d cm %s %s %s", l.Items, l.Format, l.Variant, l.Cache)
		if l.Gzip {
			name = fmt.Sprintf("LIST cm %s %s %s gzip", l.Format, l.Variant, l.Cache)
		}
		val := fmt.Sprintf("p50 %.1f ms, p99 %.1f ms, CPU %.0f ms", l.MedianMs, l.P99Ms, l.ServerCPUMs)
		var t target
		if enc := r.encodeMs(l.Format); enc > 0 && !l.Gzip {
			ratio := l.MedianMs / enc
			val += fmt.Sprintf(" (%.2fx encode)", ratio)
			if l.Cache == "cached" && l.Variant != "limit=500" {
				t = target{"<= 1.3x encode", ratio <= 1.3}
			}
		}
		row(name, val, t)
	}
	for _, e := range r.Encode {
		row("encode in-process, "+e.Format, fmt.Sprintf("p50 %.1f ms, p99 %.1f ms, %.1f MB", e.MedianMs, e.P99Ms, float64(e.Bytes)/1e6), target{})
	}
	row(fmt.Sprintf("creates/s, %d clients", c.Clients), fmt.Sprintf("%.0f (server CPU %.2f ms each)", r.CreatesPerSec, r.CreateCPUMs), target{">= 700", r.CreatesPerSec >= 700})
	row(fmt.Sprintf("updates/s, %d clients", c.Clients), fmt.Sprintf("%.0f (server CPU %.2f ms each)", r.UpdatesPerSec, r.UpdateCPUMs), target{})
	for _, wr := range []WatchResult{r.Watch, r.WatchPaced} {
		how := fmt.Sprintf("%d clients flat out", c.Clients)
		if wr.Rate > 0 {
			how = fmt.Sprintf("%.0f/s", wr.Rate)
		}
		row(fmt.Sprintf("watch: %d+%d watchers, %d updates, %s", wr.PodWatchers, wr.NodeWatchers, wr.Updates, how),
			fmt.Sprintf("%d/%d delivered, p50 %.1f ms, p99 %.1f ms; CPU server %.1f s, bench %.1f s", wr.Delivered, wr.Expected, wr.P50Ms, wr.P99Ms, wr.ServerCPUSec, wr.BenchCPUSec),
			target{"all delivered", wr.Expected > 0 && wr.Delivered == wr.Expected})
	}
	for _, fw := range []WriteResult{r.Writes, r.SlowWrites} {
		row(fmt.Sprintf("disk writes per update (%d at %.0f/s)", fw.Updates, fw.AchievedRate), fmt.Sprintf("%.0f bytes", fw.BytesPerUpdate), target{"<= 6 KiB", fw.BytesPerUpdate > 0 && fw.BytesPerUpdate <= 6<<10})
	}
	row("disk writes at idle, empty", fmt.Sprintf("%.0f bytes/s", r.IdleWriteBytesPerSec), target{})
	for _, d := range r.DataDirs {
		t := target{}
		if d.Phase == "fresh" {
			t = target{"≤ 32 MiB", d.Bytes <= 32<<20}
		}
		row("data dir on disk, "+d.Phase, fmt.Sprintf("%s (etcd WAL %s)", mib(d.Bytes), mib(d.WALBytes)), t)
	}
	how := "WatchList"
	if !r.Informer.WatchList {
		how = fmt.Sprintf("LIST+watch (%d lists)", r.Informer.Lists)
	}
	row(fmt.Sprintf("informer cold sync, %d cm", r.Informer.Objects), fmt.Sprintf("%.0f ms (%s)", r.Informer.SyncMs, how), target{})
	tokenAuthRows(row, r)
}

// mirrorRows are the figures of the mirror section: the edge's.
func mirrorRows(row func(figure, value string, t target), r *Result) {
	m := r.Mirror
	idle := fmt.Sprintf("%.0f s after", r.Counts.IdleSec)
	row("mirror: edge RSS / anonymous, mirroring nothing ("+idle+")", fmt.Sprintf("%s / %s", mib(m.MemEmpty.VmRSS), mib(m.MemEmpty.RssAnon)), target{})
	row(fmt.Sprintf("mirror: edge RSS / anonymous, %d mirrored (%s)", m.Objects, idle), fmt.Sprintf("%s / %s", mib(m.MemSynced.VmRSS), mib(m.MemSynced.RssAnon)), target{})
	row("mirror: edge RSS / anonymous per 1,000 mirrored", fmt.Sprintf("%s / %s", mib(m.RSSPer1000), mib(m.AnonPer1000)), target{})
	row(fmt.Sprintf("mirror: initial sync, exec to /mirrorz ok with all %d", m.Objects), fmt.Sprintf("%.0f ms (/readyz %.0f ms; nothing to mirror: %.0f ms)", m.InitialSyncMs, m.ReadyMs, m.EmptyMirrorzMs), target{})
	row("mirror: edge CPU of the initial sync per 1,000 mirrored", fmt.Sprintf("%.0f ms (exec to synced %.0f ms, with nothing %.0f ms)", m.SyncCPUPer1000Ms, m.SyncCPUMs, m.EmptyStartCPUMs), target{})
	row(fmt.Sprintf("mirror: edge CPU idle, %d mirrored, in sync", m.Objects), fmt.Sprintf("%.2f %% of a core", m.IdleCPUPercent), target{})
	row("mirror: link cut to /mirrorz not ok", fmt.Sprintf("%.0f ms", m.LinkDownMs), target{})
	row(fmt.Sprintf("mirror: resync after %.0f s outage, %d changed", m.OutageSec, m.Changes), fmt.Sprintf("%.0f ms (/mirrorz ok %.0f ms, all changes on the edge %.0f ms)", m.ResyncMs, m.MirrorzOkMs, m.ChangesMs), target{})
	row("mirror: events to an edge watcher, outage + resync", fmt.Sprintf("got %d, target %d (%d of the changes; %s)", m.Events, m.Changes, m.ChangedSeen, eventTypes(m.EventTypes)),
		target{fmt.Sprintf("exactly %d", m.Changes), m.Events == m.Changes && m.ChangedSeen == m.Changes})
	row("mirror: edge disk writes during the resync", fmt.Sprintf("%d bytes (%.0f per change)", m.ResyncWriteBytes, float64(m.ResyncWriteBytes)/float64(max(m.Changes, 1))), target{})
	row("mirror: edge CPU during the resync", fmt.Sprintf("%.0f ms", m.ResyncCPUMs), target{})
	row("mirror: edge counters during the resync", fmt.Sprintf("relists +%.0f, resumes +%.0f, applied updated +%.0f created +%.0f deleted +%.0f unchanged +%.0f",
		m.mirrorDelta("kubestore_mirror_relists_total"), m.mirrorDelta("kubestore_mirror_resumes_total"),
		m.mirrorDelta("kubestore_mirror_applied_total", `op="updated"`), m.mirrorDelta("kubestore_mirror_applied_total", `op="created"`),
		m.mirrorDelta("kubestore_mirror_applied_total", `op="deleted"`), m.mirrorDelta("kubestore_mirror_applied_total", `op="unchanged"`)), target{})
}

// eventTypes prints event counts by type, sorted.
func eventTypes(types map[string]int) string {
	if len(types) == 0 {
		return "no events"
	}
	var parts []string
	for _, t := range slices.Sorted(maps.Keys(types)) {
		parts = append(parts, fmt.Sprintf("%d %s", types[t], t))
	}
	return strings.Join(parts, ", ")
}
