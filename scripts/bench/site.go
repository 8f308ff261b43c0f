package main

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// SiteResult is the site section: the same creates (-configmaps
// ConfigMaps of 1 KiB, -clients clients) against one kubestore alone and
// against a site of three on this machine (the clients spread over the
// three gateways' APIs), the memory of each, and a fourth gateway joining
// the site with the ConfigMaps present. Then the mirror of one rule
// (-mirror-objects ConfigMaps, -mirror-changes of them updated) on three
// separate edges and on a site of three, each through one TCP proxy to
// an upstream kubestore of its own.
type SiteResult struct {
	ConfigMaps int          `json:"configMaps"`
	Clients    int          `json:"clients"`
	Single     SiteWriteRun `json:"single"`
	Site       SiteWriteRun `json:"site"`
	// JoinReadyMs is a fourth gateway's exec to ready (joined, caught up,
	// promoted) with the ConfigMaps in the site.
	JoinReadyMs float64 `json:"joinReadyMs"`

	MirrorObjects int           `json:"mirrorObjects"`
	MirrorChanges int           `json:"mirrorChanges"`
	MirrorEdges   SiteMirrorRun `json:"mirrorEdges"`
	MirrorSite    SiteMirrorRun `json:"mirrorSite"`
}

// SiteWriteRun is one run of the creates.
type SiteWriteRun struct {
	CreatesPerSec float64 `json:"createsPerSec"`
	P50Ms         float64 `json:"p50Ms"`
	P99Ms         float64 `json:"p99Ms"`
	// Mem is each member's memory after the creates.
	Mem []Mem `json:"mem"`
}

// SiteMirrorRun is three kubestores mirroring the same rule: the
// upstream already holds the objects when the first starts; the changes
// are made once every one serves them.
type SiteMirrorRun struct {
	// UpstreamWatches are the WATCH requests open on the upstream once
	// every one serves the changes, less those open before the first
	// started (apiserver_longrunning_requests).
	UpstreamWatches float64 `json:"upstreamWatches"`
	// The link proxy's bytes, to the upstream (sent) and from it
	// (received), from the first start until every one serves the
	// objects (Sync), and until every one serves the changes too.
	SyncSentBytes     int64 `json:"syncSentBytes"`
	SyncReceivedBytes int64 `json:"syncReceivedBytes"`
	SentBytes         int64 `json:"sentBytes"`
	ReceivedBytes     int64 `json:"receivedBytes"`
	// SyncMs is from the first start until every one serves the objects;
	// ChangesMs from the first update until every one serves them all.
	SyncMs    float64 `json:"syncMs"`
	ChangesMs float64 `json:"changesMs"`
}

// site measures a site of three gateways against one kubestore: writes,
// then the mirror.
func (b *bench) site(ctx context.Context) error {
	r := &SiteResult{ConfigMaps: b.o.ConfigMaps, Clients: b.o.Clients}
	b.res.Site = r
	if err := b.siteWriteRuns(ctx, r); err != nil {
		return err
	}
	return b.siteMirror(ctx, r)
}

// siteWriteRuns measures the creates through one kubestore and through a
// site of three, and a fourth gateway's join.
func (b *bench) siteWriteRuns(ctx context.Context, r *SiteResult) error {
	single, _, err := b.startOn(ctx, filepath.Join(b.root, "site-single"), "site-single")
	if err != nil {
		return err
	}
	err = b.siteWrites(ctx, "single", []*server{single}, &r.Single)
	single.kill()
	if err != nil {
		return err
	}

	gs, err := b.newGatewaySite("site", 4)
	if err != nil {
		return err
	}
	var members []*server
	defer func() {
		for _, m := range members {
			m.kill()
		}
	}()
	for i := range 3 {
		m, _, err := gs.start(ctx, i)
		if err != nil {
			return err
		}
		members = append(members, m)
	}
	if err := b.siteWrites(ctx, "site of three", members, &r.Site); err != nil {
		return err
	}
	joiner, ready, err := gs.start(ctx, 3)
	if err != nil {
		return err
	}
	members = append(members, joiner)
	r.JoinReadyMs = ms(ready)
	b.logf("site: a fourth gateway joined with %d ConfigMaps present, ready in %v", r.ConfigMaps, ready.Round(time.Millisecond))
	return nil
}

// gatewaySite starts the gateways of one site on this machine, each with
// a data dir and log named <name>-<i>: the first founds the site, the
// others join it.
type gatewaySite struct {
	b     *bench
	name  string
	ports []int // the API and peer port of each gateway
	join  string
	token string
}

// newGatewaySite reserves the ports of n gateways.
func (b *bench) newGatewaySite(name string, n int) (*gatewaySite, error) {
	ports, err := freePorts(2 * n)
	if err != nil {
		return nil, err
	}
	return &gatewaySite{b: b, name: name, ports: ports}, nil
}

// start starts gateway i with extra arguments and returns once it is
// ready; gateway 0 founds the site and starts first.
func (s *gatewaySite) start(ctx context.Context, i int, extra ...string) (*server, time.Duration, error) {
	name := fmt.Sprintf("%s-%d", s.name, i)
	dir := filepath.Join(s.b.root, name)
	args := []string{"--secure-port", strconv.Itoa(s.ports[2*i]), "--member-name", fmt.Sprintf("gw-%d", i),
		"--peer-advertise-address", "127.0.0.1", "--peer-bind-address", "127.0.0.1", "--peer-port", strconv.Itoa(s.ports[2*i+1])}
	if i > 0 {
		args = append(args, "--join", s.join, "--join-token", s.token)
	}
	srv, ready, err := s.b.startOn(ctx, dir, name, append(args, extra...)...)
	if err != nil || i > 0 {
		return srv, ready, err
	}
	out, err := exec.CommandContext(ctx, s.b.o.Bin, "member", "token", "--data-dir", dir, "--peer-advertise-address", "127.0.0.1").CombinedOutput()
	if err != nil {
		srv.kill()
		return nil, 0, fmt.Errorf("kubestore member token: %v\n%s", err, out)
	}
	s.token, s.join = strings.TrimSpace(string(out)), srv.url
	return srv, ready, nil
}

// siteWrites creates the ConfigMaps through servers, the clients spread
// over them, and records the rate, the latencies and each one's memory.
func (b *bench) siteWrites(ctx context.Context, what string, servers []*server, run *SiteWriteRun) error {
	clients := make([]*kubernetes.Clientset, b.o.Clients)
	for i := range clients {
		clients[i] = clientFor(servers[i%len(servers)], true)
	}
	var mu sync.Mutex
	lat := make([]time.Duration, 0, b.o.ConfigMaps)
	elapsed, err := parallel(ctx, b.o.Clients, b.o.ConfigMaps, func(ctx context.Context, w, i int) error {
		cm := configMap(i)
		cm.Namespace = "default"
		start := time.Now()
		_, err := clients[w].CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{})
		d := time.Since(start)
		mu.Lock()
		lat = append(lat, d)
		mu.Unlock()
		return err
	})
	if err != nil {
		return err
	}
	run.CreatesPerSec = float64(b.o.ConfigMaps) / elapsed.Seconds()
	run.P50Ms, run.P99Ms = ms(percentile(lat, 50)), ms(percentile(lat, 99))
	for i, s := range servers {
		m, err := b.memOf(s, fmt.Sprintf("%s, member %d", what, i))
		if err != nil {
			return err
		}
		run.Mem = append(run.Mem, m)
	}
	b.logf("site: %s: %.0f creates/s, p50 %.1f ms, p99 %.1f ms", what, run.CreatesPerSec, run.P50Ms, run.P99Ms)
	return nil
}

// siteMirror measures the mirror of one rule on three separate edges and
// on a site of three: the upstream watches each opens and the bytes over
// the link.
func (b *bench) siteMirror(ctx context.Context, r *SiteResult) error {
	r.MirrorObjects, r.MirrorChanges = b.o.MirrorObjects, b.o.MirrorChanges
	edge := func(ctx context.Context, i int, args []string) (*server, error) {
		name := fmt.Sprintf("site-edge-%d", i)
		srv, _, err := b.startOn(ctx, filepath.Join(b.root, name), name, args...)
		return srv, err
	}
	if err := b.siteMirrorRun(ctx, "three edges", "site-edges-up", edge, &r.MirrorEdges); err != nil {
		return err
	}
	gs, err := b.newGatewaySite("site-mirror", 3)
	if err != nil {
		return err
	}
	member := func(ctx context.Context, i int, args []string) (*server, error) {
		srv, _, err := gs.start(ctx, i, args...)
		return srv, err
	}
	if err := b.siteMirrorRun(ctx, "a site of three", "site-mirror-up", member, &r.MirrorSite); err != nil {
		return err
	}
	e, s := r.MirrorEdges, r.MirrorSite
	b.logf("site: mirror, a site of three against three edges: upstream watches %.0f against %.0f, bytes received %s, sent %s",
		s.UpstreamWatches, e.UpstreamWatches, ratio(s.ReceivedBytes, e.ReceivedBytes), ratio(s.SentBytes, e.SentBytes))
	return nil
}

// siteMirrorRun starts an upstream (data dir upName) holding the objects,
// and three kubestores with start, each mirroring them through one proxy;
// once every one serves them it updates the changes upstream and waits
// until every one serves those too.
func (b *bench) siteMirrorRun(ctx context.Context, what, upName string, start func(ctx context.Context, i int, args []string) (*server, error), run *SiteMirrorRun) error {
	objects, changes := b.o.MirrorObjects, b.o.MirrorChanges
	var servers []*server
	defer func() {
		for _, s := range servers {
			s.kill()
		}
	}()
	up, _, err := b.startOn(ctx, filepath.Join(b.root, upName), upName)
	if err != nil {
		return err
	}
	servers = append(servers, up)
	upCS := b.clientsOf(up, b.o.Clients)
	if err := createBenchNamespace(ctx, upCS[0]); err != nil {
		return fmt.Errorf("upstream: %w", err)
	}
	cms := make([]*corev1.ConfigMap, objects)
	if _, err := parallel(ctx, b.o.Clients, objects, func(ctx context.Context, w, i int) error {
		cm, err := upCS[w].CoreV1().ConfigMaps(benchNamespace).Create(ctx, configMap(i), metav1.CreateOptions{})
		cms[i] = cm
		return err
	}); err != nil {
		return fmt.Errorf("creating configmaps upstream: %w", err)
	}
	before, err := upstreamWatches(ctx, up)
	if err != nil {
		return err
	}
	proxy, kubeconfig, err := b.proxied(up)
	if err != nil {
		return err
	}
	defer proxy.cut()

	startedAt := time.Now()
	var mirrors []*server
	for i := range 3 {
		args, err := b.mirrorArgs(kubeconfig, fmt.Sprintf("bench-edge-%d", i), benchNamespace)
		if err != nil {
			return err
		}
		srv, err := start(ctx, i, args)
		if err != nil {
			return err
		}
		servers = append(servers, srv)
		mirrors = append(mirrors, srv)
	}
	for _, srv := range mirrors {
		if err := waitMirror(ctx, srv, benchNamespace, objects); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
	}
	run.SyncMs = ms(time.Since(startedAt))
	run.SyncSentBytes, run.SyncReceivedBytes = proxy.bytes()

	want := map[string]string{}
	for k := range changes {
		i := changedIndex(k, objects, changes)
		want[cms[i].Name] = payload(i, 1)
	}
	changedAt := time.Now()
	if _, err := parallel(ctx, b.o.Clients, changes, func(ctx context.Context, w, k int) error {
		i := changedIndex(k, objects, changes)
		cm := cms[i].DeepCopy()
		cm.Data["payload"] = payload(i, 1)
		_, err := upCS[w].CoreV1().ConfigMaps(benchNamespace).Update(ctx, cm, metav1.UpdateOptions{})
		return err
	}); err != nil {
		return fmt.Errorf("updating configmaps upstream: %w", err)
	}
	for _, srv := range mirrors {
		if err := waitPayloads(ctx, srv, want); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
	}
	run.ChangesMs = ms(time.Since(changedAt))
	run.SentBytes, run.ReceivedBytes = proxy.bytes()
	after, err := upstreamWatches(ctx, up)
	if err != nil {
		return err
	}
	run.UpstreamWatches = after - before
	b.logf("site: mirror, %s: upstream watches +%.0f; %d configmaps served by all after %.0f ms, %d bytes received from the upstream, %d sent; %d changes served by all after %.0f ms, %d bytes received in all, %d sent",
		what, run.UpstreamWatches, objects, run.SyncMs, run.SyncReceivedBytes, run.SyncSentBytes, changes, run.ChangesMs, run.ReceivedBytes, run.SentBytes)
	return nil
}

// upstreamWatches are the WATCH requests open on srv, of every resource.
func upstreamWatches(ctx context.Context, srv *server) (float64, error) {
	m, err := metricsOf(ctx, srv, "apiserver_longrunning_requests{")
	if err != nil {
		return 0, err
	}
	n := 0.0
	for key, v := range m {
		if strings.Contains(key, `verb="WATCH"`) {
			n += v
		}
	}
	return n, nil
}

// waitPayloads waits until srv serves every ConfigMap of want (name to
// payload) of the bench namespace with its payload.
func waitPayloads(ctx context.Context, srv *server, want map[string]string) error {
	cs := clientFor(srv, true)
	deadline := time.Now().Add(mirrorDeadline)
	for {
		list, err := cs.CoreV1().ConfigMaps(benchNamespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return fmt.Errorf("listing configmaps: %w", err)
		}
		missing := len(want)
		for _, cm := range list.Items {
			if p, ok := want[cm.Name]; ok && cm.Data["payload"] == p {
				missing--
			}
		}
		if missing == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d changed configmaps not served after %v", missing, len(want), mirrorDeadline)
		}
		if err := sleep(ctx, 50*time.Millisecond); err != nil {
			return err
		}
	}
}

// ratio is a of b, as a factor.
func ratio(a, b int64) string {
	if b == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.2f×", float64(a)/float64(b))
}

func siteRows(row func(figure, value string, t target), r *Result) {
	s := r.Site
	mems := func(run SiteWriteRun) string {
		var out []string
		for _, m := range run.Mem {
			out = append(out, mib(m.VmRSS))
		}
		return strings.Join(out, ", ")
	}
	for _, c := range []struct {
		name string
		run  SiteWriteRun
	}{{"one kubestore", s.Single}, {"a site of three", s.Site}} {
		row(fmt.Sprintf("site: %d creates of 1 KiB, %d clients, %s", s.ConfigMaps, s.Clients, c.name),
			fmt.Sprintf("%.0f/s, p50 %.1f ms, p99 %.1f ms; RSS %s", c.run.CreatesPerSec, c.run.P50Ms, c.run.P99Ms, mems(c.run)), target{})
	}
	if s.Single.CreatesPerSec > 0 {
		row("site: a site of three against one kubestore, creates/s", fmt.Sprintf("%.2f×", s.Site.CreatesPerSec/s.Single.CreatesPerSec), target{})
	}
	row(fmt.Sprintf("site: a fourth gateway joins with %d ConfigMaps present, exec to ready", s.ConfigMaps), fmt.Sprintf("%.0f ms", s.JoinReadyMs), target{})
	e, m := s.MirrorEdges, s.MirrorSite
	if e.ReceivedBytes == 0 && m.ReceivedBytes == 0 {
		return
	}
	kb := func(n int64) string { return fmt.Sprintf("%.0f KB", float64(n)/1e3) }
	row("site: mirror of one rule, upstream watches, three edges / a site of three",
		fmt.Sprintf("%.0f / %.0f (%.2f×)", e.UpstreamWatches, m.UpstreamWatches, m.UpstreamWatches/max(e.UpstreamWatches, 1)), target{})
	row(fmt.Sprintf("site: mirror, bytes from the upstream until all serve %d ConfigMaps, three edges / a site of three", s.MirrorObjects),
		fmt.Sprintf("%s / %s (%s)", kb(e.SyncReceivedBytes), kb(m.SyncReceivedBytes), ratio(m.SyncReceivedBytes, e.SyncReceivedBytes)), target{})
	row(fmt.Sprintf("site: mirror, bytes from the upstream until all serve %d ConfigMaps and %d changes", s.MirrorObjects, s.MirrorChanges),
		fmt.Sprintf("%s / %s (%s)", kb(e.ReceivedBytes), kb(m.ReceivedBytes), ratio(m.ReceivedBytes, e.ReceivedBytes)), target{})
	row(fmt.Sprintf("site: mirror, bytes to the upstream until all serve %d ConfigMaps and %d changes", s.MirrorObjects, s.MirrorChanges),
		fmt.Sprintf("%s / %s (%s)", kb(e.SentBytes), kb(m.SentBytes), ratio(m.SentBytes, e.SentBytes)), target{})
	row(fmt.Sprintf("site: mirror, first start to all serving %d ConfigMaps (the site's with its joins); the %d changes", s.MirrorObjects, s.MirrorChanges),
		fmt.Sprintf("%.0f / %.0f ms; %.0f / %.0f ms", e.SyncMs, m.SyncMs, e.ChangesMs, m.ChangesMs), target{})
}
