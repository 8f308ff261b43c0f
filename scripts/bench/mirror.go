package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

const (
	// mirrorRule is the one rule of the edge; the objects it mirrors carry
	// it in mirrorRuleAnnotation (package mirrored's AnnotationRule).
	mirrorRule           = "bench"
	mirrorRuleAnnotation = "mirror.kubestore.io/rule"
	// emptyNamespace is what the edge mirrors for its baseline: a
	// namespace that exists upstream and holds nothing.
	emptyNamespace = "bench-empty"
	// mirrorDeadline bounds each wait for the mirror (initial sync,
	// noticing the cut, resync).
	mirrorDeadline = 5 * time.Minute
)

// MirrorResult is an edge kubestore mirroring the ConfigMaps of one
// namespace of an upstream kubestore through a TCP proxy.
type MirrorResult struct {
	Objects   int     `json:"objects"`
	Changes   int     `json:"changes"`
	OutageSec float64 `json:"outageSec"`

	// The baseline: the edge restarted mirroring an empty namespace;
	// StartCPUMs is its CPU from exec to /mirrorz ok.
	EmptyReadyMs    float64 `json:"emptyReadyMs"`
	EmptyMirrorzMs  float64 `json:"emptyMirrorzMs"`
	EmptyStartCPUMs float64 `json:"emptyStartCPUMs"`
	MemEmpty        Mem     `json:"memEmpty"`

	// Initial sync: the edge restarted with the rule of the loaded
	// namespace, from exec to /mirrorz ok with every object stored.
	ReadyMs        float64 `json:"readyMs"`
	InitialSyncMs  float64 `json:"initialSyncMs"`
	SyncCPUMs      float64 `json:"syncCPUMs"` // exec to synced
	MemSynced      Mem     `json:"memSynced"` // Idle after the sync
	IdleCPUPercent float64 `json:"idleCPUPercent"`
	// Per 1,000 mirrored objects, over the baseline.
	RSSPer1000       int64   `json:"rssPer1000"`
	AnonPer1000      int64   `json:"anonPer1000"`
	SyncCPUPer1000Ms float64 `json:"syncCPUPer1000Ms"`

	// The outage: LinkDownMs is from the cut to /mirrorz answering 503.
	LinkDownMs float64 `json:"linkDownMs"`
	// The resync, from the link's restore: /mirrorz ok (MirrorzOkMs),
	// every change seen by a watcher on the edge (ChangesMs), both
	// (ResyncMs).
	MirrorzOkMs float64 `json:"mirrorzOkMs"`
	ChangesMs   float64 `json:"changesMs"`
	ResyncMs    float64 `json:"resyncMs"`
	// Events a watcher on the edge's ConfigMaps got from before the cut
	// to flushWait after the resync, by type; ChangedSeen of them were
	// the changed objects with their new content.
	Events      int            `json:"events"`
	EventTypes  map[string]int `json:"eventTypes"`
	ChangedSeen int            `json:"changedSeen"`
	// What the edge wrote to disk and its CPU, from the restore to
	// flushWait after the resync.
	ResyncWriteBytes int64   `json:"resyncWriteBytes"`
	ResyncCPUMs      float64 `json:"resyncCPUMs"`

	// The edge's kubestore_mirror_* series of the rule after the
	// initial sync and after the resync.
	MetricsSynced   map[string]float64 `json:"metricsSynced"`
	MetricsResynced map[string]float64 `json:"metricsResynced"`
}

// mirrorDelta is how much a kubestore_mirror_ series of the rule moved
// during the resync.
func (m *MirrorResult) mirrorDelta(name string, labels ...string) float64 {
	key := name + "{" + strings.Join(append(labels, `rule="`+mirrorRule+`"`), ",") + "}"
	return m.MetricsResynced[key] - m.MetricsSynced[key]
}

// mirror measures an edge mirroring Objects ConfigMaps of an upstream
// kubestore: its baseline on an empty namespace, the initial sync, and the
// resync after the link was cut for MirrorOutage while Changes of them
// were updated upstream.
func (b *bench) mirror(ctx context.Context) error {
	r := &MirrorResult{Objects: b.o.MirrorObjects, Changes: b.o.MirrorChanges, OutageSec: b.o.MirrorOutage.Seconds()}
	b.res.Mirror = r
	var servers []*server
	defer func() {
		for _, s := range servers {
			s.kill()
		}
	}()
	// forget drops a stopped server from those killed on return.
	forget := func(s *server) {
		for i := range servers {
			if servers[i] == s {
				servers = append(servers[:i], servers[i+1:]...)
				return
			}
		}
	}

	// The upstream, with both namespaces, and the proxy to it.
	up, _, err := b.startOn(ctx, filepath.Join(b.root, "up"), "upstream")
	if err != nil {
		return err
	}
	servers = append(servers, up)
	upCS := b.clientsOf(up, b.o.Clients)
	for _, ns := range []string{benchNamespace, emptyNamespace} {
		if _, err := upCS[0].CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating namespace %s upstream: %w", ns, err)
		}
	}
	proxy, kubeconfig, err := b.proxied(up)
	if err != nil {
		return err
	}
	defer proxy.cut()
	edgeArgs := func(namespace string) ([]string, error) {
		return b.mirrorArgs(kubeconfig, "bench-edge", namespace)
	}
	edgeDir := filepath.Join(b.root, "edge")
	// startEdge starts the edge and waits until /mirrorz is ok with want
	// objects of the rule stored; it returns the edge, the time from exec
	// to /readyz and to that point, and the edge's CPU until then.
	startEdge := func(namespace string, want int) (*server, time.Duration, time.Duration, time.Duration, error) {
		args, err := edgeArgs(namespace)
		if err != nil {
			return nil, 0, 0, 0, err
		}
		execAt := time.Now()
		edge, ready, err := b.startOn(ctx, edgeDir, "edge", args...)
		if err != nil {
			return nil, 0, 0, 0, err
		}
		servers = append(servers, edge)
		if err := waitMirror(ctx, edge, namespace, want); err != nil {
			return edge, 0, 0, 0, err
		}
		synced := time.Since(execAt)
		cpu, err := cpuTime(edge.pid())
		return edge, ready, synced, cpu, err
	}

	// The first start creates the edge's PKI; the baseline is a restart,
	// as the initial sync below is.
	edge, _, _, _, err := startEdge(emptyNamespace, 0)
	if err != nil {
		return err
	}
	if err := stopServer(edge); err != nil {
		return err
	}
	forget(edge)
	edge, ready, synced, cpu, err := startEdge(emptyNamespace, 0)
	if err != nil {
		return err
	}
	r.EmptyReadyMs, r.EmptyMirrorzMs, r.EmptyStartCPUMs = ms(ready), ms(synced), ms(cpu)
	b.logf("mirror: edge on an empty namespace: /readyz %v, /mirrorz ok %v, CPU %v", ready.Round(time.Millisecond), synced.Round(time.Millisecond), cpu)
	if err := sleep(ctx, b.o.Idle); err != nil {
		return err
	}
	if r.MemEmpty, err = b.memOf(edge, "of the edge mirroring nothing"); err != nil {
		return err
	}
	if err := stopServer(edge); err != nil {
		return err
	}
	forget(edge)

	// Load the upstream while the edge is down, then the initial sync.
	cms := make([]*corev1.ConfigMap, r.Objects)
	d, err := parallel(ctx, b.o.Clients, r.Objects, func(ctx context.Context, w, i int) error {
		cm, err := upCS[w].CoreV1().ConfigMaps(benchNamespace).Create(ctx, configMap(i), metav1.CreateOptions{})
		cms[i] = cm
		return err
	})
	if err != nil {
		return fmt.Errorf("creating configmaps upstream: %w", err)
	}
	b.logf("mirror: %d configmaps created upstream in %v", r.Objects, d.Round(time.Millisecond))
	edge, ready, synced, cpu, err = startEdge(benchNamespace, r.Objects)
	if err != nil {
		return err
	}
	r.ReadyMs, r.InitialSyncMs, r.SyncCPUMs = ms(ready), ms(synced), ms(cpu)
	r.SyncCPUPer1000Ms = (r.SyncCPUMs - r.EmptyStartCPUMs) * 1000 / float64(r.Objects)
	b.logf("mirror: initial sync of %d configmaps: /readyz %v, /mirrorz ok with all stored %v, edge CPU %v", r.Objects, ready.Round(time.Millisecond), synced.Round(time.Millisecond), cpu)
	if r.MetricsSynced, err = mirrorMetrics(ctx, edge); err != nil {
		return err
	}
	if err := sleep(ctx, b.o.Idle); err != nil {
		return err
	}
	if r.MemSynced, err = b.memOf(edge, fmt.Sprintf("of the edge mirroring %d", r.Objects)); err != nil {
		return err
	}
	r.RSSPer1000 = (r.MemSynced.VmRSS - r.MemEmpty.VmRSS) * 1000 / int64(r.Objects)
	r.AnonPer1000 = (r.MemSynced.RssAnon - r.MemEmpty.RssAnon) * 1000 / int64(r.Objects)
	if r.IdleCPUPercent, err = cpuPercent(ctx, edge.pid(), b.o.CPUWindow); err != nil {
		return err
	}
	b.logf("mirror: edge idle CPU with the mirror in sync %.2f%%", r.IdleCPUPercent)

	// The outage, watched from the edge.
	ew, err := startEdgeWatch(ctx, edge, cms, r.Changes)
	if err != nil {
		return err
	}
	defer ew.stop()
	cutAt := time.Now()
	proxy.cut()
	down, err := waitMirrorz(ctx, edge, false)
	if err != nil {
		return fmt.Errorf("after cutting the link: %w", err)
	}
	r.LinkDownMs = ms(down.Sub(cutAt))
	b.logf("mirror: link cut; /mirrorz not ok after %v", down.Sub(cutAt).Round(time.Millisecond))
	if _, err := parallel(ctx, b.o.Clients, r.Changes, func(ctx context.Context, w, k int) error {
		i := changedIndex(k, r.Objects, r.Changes)
		cm := cms[i].DeepCopy()
		cm.Data["payload"] = payload(i, 1)
		_, err := upCS[w].CoreV1().ConfigMaps(benchNamespace).Update(ctx, cm, metav1.UpdateOptions{})
		return err
	}); err != nil {
		return fmt.Errorf("updating configmaps upstream during the outage: %w", err)
	}
	if left := time.Until(cutAt.Add(b.o.MirrorOutage)); left > 0 {
		b.logf("mirror: %d configmaps updated upstream; link restored in %v", r.Changes, left.Round(time.Second))
		if err := sleep(ctx, left); err != nil {
			return err
		}
	} else {
		b.logf("mirror: the %d updates outlasted the %v outage", r.Changes, b.o.MirrorOutage)
	}

	// The resync.
	wrote, err := writeBytes(edge.pid())
	if err != nil {
		return err
	}
	cpu, err = cpuTime(edge.pid())
	if err != nil {
		return err
	}
	restoredAt := time.Now()
	if err := proxy.restore(); err != nil {
		return err
	}
	var mirrorzOk, changesAt time.Time
	hc, err := rest.HTTPClientFor(edge.cfg)
	if err != nil {
		return err
	}
	deadline := time.NewTimer(mirrorDeadline)
	defer deadline.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, _, err := mirrorz(ctx, hc, edge)
		if err != nil {
			return err
		}
		now := time.Now()
		if ok && mirrorzOk.IsZero() {
			mirrorzOk = now
		}
		if at := ew.allChangedAt(); !at.IsZero() && changesAt.IsZero() {
			changesAt = at
		}
		if ok && !changesAt.IsZero() {
			r.MirrorzOkMs, r.ChangesMs, r.ResyncMs = ms(mirrorzOk.Sub(restoredAt)), ms(changesAt.Sub(restoredAt)), ms(now.Sub(restoredAt))
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline.C:
			_, verbose, _ := mirrorz(ctx, hc, edge)
			return fmt.Errorf("resync not done %v after the link was restored: %d of %d changes seen by the edge's watcher; /mirrorz?verbose:\n%s",
				mirrorDeadline, ew.changedSeen(), r.Changes, verbose)
		case <-tick.C:
		}
	}
	b.logf("mirror: resync: /mirrorz ok after %.0f ms, all %d changes on the edge after %.0f ms", r.MirrorzOkMs, r.Changes, r.ChangesMs)
	// Events that come late, and the last bbolt batch, are counted too.
	if err := sleep(ctx, flushWait); err != nil {
		return err
	}
	after, err := writeBytes(edge.pid())
	if err != nil {
		return err
	}
	r.ResyncWriteBytes = after - wrote
	r.ResyncCPUMs = ms(b.serverCPUOf(edge) - cpu)
	r.Events, r.EventTypes, r.ChangedSeen = ew.counts()
	if r.MetricsResynced, err = mirrorMetrics(ctx, edge); err != nil {
		return err
	}
	b.logf("mirror: the edge's watcher got %d events (%v), %d of them the %d changes; edge wrote %d bytes, CPU %.0f ms; counters during the resync: relists +%.0f, resumes +%.0f, updated +%.0f, unchanged +%.0f",
		r.Events, r.EventTypes, r.ChangedSeen, r.Changes, r.ResyncWriteBytes, r.ResyncCPUMs,
		r.mirrorDelta("kubestore_mirror_relists_total"), r.mirrorDelta("kubestore_mirror_resumes_total"),
		r.mirrorDelta("kubestore_mirror_applied_total", `op="updated"`), r.mirrorDelta("kubestore_mirror_applied_total", `op="unchanged"`))
	ew.stop()
	if err := waitMirror(ctx, edge, benchNamespace, r.Objects); err != nil {
		return fmt.Errorf("after the resync: %w", err)
	}
	if err := stopServer(edge); err != nil {
		return err
	}
	forget(edge)
	if err := stopServer(up); err != nil {
		return err
	}
	forget(up)
	if r.Events != r.Changes {
		return fmt.Errorf("the edge's watcher got %d events during the outage and resync (%v), want exactly the %d changed objects", r.Events, r.EventTypes, r.Changes)
	}
	return nil
}

// mirrorArgs are the arguments of an edge named node that mirrors the
// ConfigMaps of namespace from the upstream of kubeconfig: the bench rule,
// in a config file.
func (b *bench) mirrorArgs(kubeconfig, node, namespace string) ([]string, error) {
	path := filepath.Join(b.root, "mirror-"+namespace+".yaml")
	rules := fmt.Sprintf("mirror:\n  rules:\n  - name: %s\n    resource: configmaps\n    namespaces: [%s]\n", mirrorRule, namespace)
	if err := os.WriteFile(path, []byte(rules), 0o644); err != nil {
		return nil, err
	}
	return []string{"--upstream-kubeconfig", kubeconfig, "--node-name", node, "--config", path}, nil
}

// changedIndex is the k-th of changes objects updated during the outage,
// spread over all of them.
func changedIndex(k, objects, changes int) int { return k * objects / changes }

// clientsOf returns n clientsets of srv, each with its own connection.
func (b *bench) clientsOf(srv *server, n int) []*kubernetes.Clientset {
	cs := make([]*kubernetes.Clientset, n)
	for i := range cs {
		cs[i] = clientFor(srv, true)
	}
	return cs
}

func (b *bench) serverCPUOf(srv *server) time.Duration {
	d, _ := cpuTime(srv.pid())
	return d
}

// proxied opens a link proxy to the upstream and writes the kubeconfig of
// the edge's upstream through it.
func (b *bench) proxied(up *server) (*linkProxy, string, error) {
	upURL, err := url.Parse(up.url)
	if err != nil {
		return nil, "", err
	}
	proxy, err := newLinkProxy(upURL.Host)
	if err != nil {
		return nil, "", err
	}
	kubeconfig, err := b.proxiedKubeconfig(up, proxy.addr)
	if err != nil {
		proxy.cut()
		return nil, "", err
	}
	return proxy, kubeconfig, nil
}

// proxiedKubeconfig writes the upstream's admin kubeconfig with its server
// rewritten to the proxy: what the edge uses.
func (b *bench) proxiedKubeconfig(up *server, proxyAddr string) (string, error) {
	kc, err := clientcmd.LoadFromFile(up.kubeconfig)
	if err != nil {
		return "", err
	}
	for _, c := range kc.Clusters {
		c.Server = "https://" + proxyAddr
	}
	path := filepath.Join(b.root, "upstream-via-proxy.kubeconfig")
	return path, clientcmd.WriteToFile(*kc, path)
}

// mirrorz asks the edge's /mirrorz?verbose; ok is a 200.
func mirrorz(ctx context.Context, hc *http.Client, srv *server) (bool, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.url+"/mirrorz?verbose", nil)
	if err != nil {
		return false, "", err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return false, "", fmt.Errorf("GET /mirrorz: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return false, "", err
	}
	switch resp.StatusCode {
	case http.StatusOK:
		return true, string(body), nil
	case http.StatusServiceUnavailable:
		return false, string(body), nil
	}
	return false, "", fmt.Errorf("GET /mirrorz: HTTP %d: %.300s", resp.StatusCode, body)
}

// waitMirrorz polls /mirrorz until it is ok (or not, with ok false) and
// returns when it saw that.
func waitMirrorz(ctx context.Context, srv *server, ok bool) (time.Time, error) {
	hc, err := rest.HTTPClientFor(srv.cfg)
	if err != nil {
		return time.Time{}, err
	}
	deadline := time.NewTimer(mirrorDeadline)
	defer deadline.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		got, verbose, err := mirrorz(ctx, hc, srv)
		if err != nil {
			return time.Time{}, err
		}
		if got == ok {
			return time.Now(), nil
		}
		select {
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		case <-deadline.C:
			return time.Time{}, fmt.Errorf("/mirrorz ok=%t for %v; /mirrorz?verbose:\n%s", got, mirrorDeadline, verbose)
		case <-tick.C:
		}
	}
}

var configMapsResource = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}

// waitMirror waits until /mirrorz is ok and want ConfigMaps of namespace
// carry the rule's annotation on the edge.
func waitMirror(ctx context.Context, edge *server, namespace string, want int) error {
	mc, err := metadata.NewForConfig(edge.cfg)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(mirrorDeadline)
	for {
		if _, err := waitMirrorz(ctx, edge, true); err != nil {
			return err
		}
		list, err := mc.Resource(configMapsResource).Namespace(namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return fmt.Errorf("listing the edge's configmaps: %w", err)
		}
		got := 0
		for _, o := range list.Items {
			// The bench's own: the namespace also holds kube-root-ca.crt.
			if o.Annotations[mirrorRuleAnnotation] == mirrorRule && strings.HasPrefix(o.Name, "cm-") {
				got++
			}
		}
		if got == want {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("/mirrorz ok but %d mirrored configmaps in %s on the edge after %v, want %d", got, namespace, mirrorDeadline, want)
		}
		if err := sleep(ctx, 20*time.Millisecond); err != nil {
			return err
		}
	}
}

// edgeWatch counts the events of a watch on the edge's ConfigMaps and
// notes when every changed object arrived with its new content.
type edgeWatch struct {
	w    watch.Interface
	done chan struct{}

	mu      sync.Mutex
	want    map[string]string // name -> new payload, until seen
	changes int
	events  int
	types   map[string]int
	allAt   time.Time
}

func startEdgeWatch(ctx context.Context, edge *server, cms []*corev1.ConfigMap, changes int) (*edgeWatch, error) {
	cs := clientFor(edge, true)
	list, err := cs.CoreV1().ConfigMaps(benchNamespace).List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		return nil, err
	}
	w, err := cs.CoreV1().ConfigMaps(benchNamespace).Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		return nil, fmt.Errorf("watching the edge's configmaps: %w", err)
	}
	ew := &edgeWatch{w: w, done: make(chan struct{}), want: map[string]string{}, changes: changes, types: map[string]int{}}
	for k := range changes {
		i := changedIndex(k, len(cms), changes)
		ew.want[cms[i].Name] = payload(i, 1)
	}
	go ew.consume()
	return ew, nil
}

func (ew *edgeWatch) consume() {
	defer close(ew.done)
	for ev := range ew.w.ResultChan() {
		now := time.Now()
		ew.mu.Lock()
		ew.events++
		ew.types[string(ev.Type)]++
		if cm, ok := ev.Object.(*corev1.ConfigMap); ok && ev.Type == watch.Modified {
			if p, wanted := ew.want[cm.Name]; wanted && cm.Data["payload"] == p {
				delete(ew.want, cm.Name)
				if len(ew.want) == 0 {
					ew.allAt = now
				}
			}
		}
		ew.mu.Unlock()
	}
}

// allChangedAt is when the last changed object arrived; zero until then.
func (ew *edgeWatch) allChangedAt() time.Time {
	ew.mu.Lock()
	defer ew.mu.Unlock()
	return ew.allAt
}

func (ew *edgeWatch) changedSeen() int {
	ew.mu.Lock()
	defer ew.mu.Unlock()
	return ew.changes - len(ew.want)
}

func (ew *edgeWatch) counts() (int, map[string]int, int) {
	ew.mu.Lock()
	defer ew.mu.Unlock()
	types := make(map[string]int, len(ew.types))
	for t, n := range ew.types {
		types[t] = n
	}
	return ew.events, types, ew.changes - len(ew.want)
}

func (ew *edgeWatch) stop() {
	ew.w.Stop()
	<-ew.done
}

// mirrorMetrics are the edge's kubestore_mirror_* series of the bench rule
// (and the connected gauge), keyed by name{labels} as /metrics prints them.
func mirrorMetrics(ctx context.Context, srv *server) (map[string]float64, error) {
	out, err := metricsOf(ctx, srv, "kubestore_mirror_")
	for key := range out {
		if strings.Contains(key, "{") && !strings.Contains(key, `rule="`+mirrorRule+`"`) {
			delete(out, key)
		}
	}
	return out, err
}

// metricsOf are the server's /metrics series whose names start with one
// of prefixes, keyed by name{labels} as /metrics prints them.
func metricsOf(ctx context.Context, srv *server, prefixes ...string) (map[string]float64, error) {
	raw, err := clientFor(srv, false).CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("getting /metrics: %w", err)
	}
	return parseMetrics(raw, prefixes...)
}

// parseMetrics are the series of a Prometheus text exposition whose names
// start with one of prefixes, keyed by name{labels}.
func parseMetrics(raw []byte, prefixes ...string) (map[string]float64, error) {
	out := map[string]float64{}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !slices.ContainsFunc(prefixes, func(p string) bool { return strings.HasPrefix(line, p) }) {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		out[line[:i]] = v
	}
	return out, sc.Err()
}
