package e2e

import (
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"

	"github.com/kubestore/kubestore/config"
)

// siteGateway is one kubestore of a site on this machine: its own data dir,
// API port (picked by the server) and peer port, all on loopback.
type siteGateway struct {
	name     string
	dir      string
	apiPort  int
	peerPort int
	// extra are flags of every start.
	extra []string
	// bin is the release it runs, binary(t) when empty.
	bin string
	p   *proc
}

// newGateway picks the gateway's ports once: a gateway keeps its address
// across restarts, and the others' --join names it.
func newGateway(t *testing.T, name string) *siteGateway {
	return &siteGateway{name: name, dir: shortTempDir(t), apiPort: freePort(t), peerPort: freePort(t)}
}

// url is the gateway's API, the --join of the others.
func (g *siteGateway) url() string { return "https://127.0.0.1:" + strconv.Itoa(g.apiPort) }

func (g *siteGateway) args(join, token string) []string {
	args := []string{"--secure-port", strconv.Itoa(g.apiPort), "--member-name", g.name, "--peer-advertise-address", "127.0.0.1",
		"--peer-bind-address", "127.0.0.1", "--peer-port", strconv.Itoa(g.peerPort)}
	if join != "" {
		args = append(args, "--join", join, "--join-token", token)
	}
	args = append(args, g.extra...)
	// KUBESTORE_SITE_RAFT=HEARTBEAT,ELECTION measures other raft timing
	// (docs/PERFORMANCE.md, "A site of several gateways").
	if hb, el, ok := strings.Cut(os.Getenv("KUBESTORE_SITE_RAFT"), ","); ok {
		args = append(args, "--etcd-heartbeat-interval", hb, "--etcd-election-timeout", el)
	}
	return args
}

// launch starts the gateway's kubestore without waiting.
func (g *siteGateway) launch(t *testing.T, join, token string) {
	t.Helper()
	g.p = launch(t, g.release(t), nil, g.dir, g.args(join, token)...)
}

// start starts it and waits until it serves.
func (g *siteGateway) start(t *testing.T, join, token string) {
	t.Helper()
	g.launch(t, join, token)
	g.waitServing(t)
}

// waitServing waits until the gateway's /readyz passes, leaving out the
// check of the other members (which fails while one of them is down).
func (g *siteGateway) waitServing(t *testing.T) {
	t.Helper()
	ok := eventually(90*time.Second, func() bool { return g.p.hasExited() || g.p.readyAt("/readyz?exclude=etcd-members") })
	if !ok || g.p.hasExited() {
		t.Fatalf("gateway %s not serving within 90s (exited: %v)\n%s", g.name, g.p.hasExited(), g.p.logs())
	}
}

// release is the binary the gateway runs.
func (g *siteGateway) release(t *testing.T) string {
	if g.bin != "" {
		return g.bin
	}
	return binary(t)
}

// kubestore runs a kubestore command of the gateway's release on its data
// dir.
func (g *siteGateway) kubestore(t *testing.T, args ...string) (string, error) {
	t.Helper()
	out, err := exec.Command(g.release(t), append(args, "--data-dir", g.dir, "--peer-advertise-address", "127.0.0.1")...).CombinedOutput()
	return string(out), err
}

// token is the join token kubestore member token prints on the gateway.
func (g *siteGateway) token(t *testing.T) string {
	t.Helper()
	out, err := g.kubestore(t, "member", "token")
	if err != nil {
		t.Fatalf("member token on %s: %v\n%s", g.name, err, out)
	}
	return strings.TrimSpace(out)
}

// foundSite starts first, founding a site, then each of the others joining
// it in turn, and returns the site's join token.
func foundSite(t *testing.T, first *siteGateway, others ...*siteGateway) string {
	t.Helper()
	first.start(t, "", "")
	token := first.token(t)
	for _, g := range others {
		g.start(t, first.url(), token)
	}
	return token
}

func (g *siteGateway) memberList(t *testing.T) string {
	t.Helper()
	out, err := g.kubestore(t, "member", "list")
	if err != nil {
		t.Fatalf("member list on %s: %v\n%s", g.name, err, out)
	}
	return out
}

// row is the member list's row of name, "" without one.
func row(list, name string) string {
	for _, line := range strings.Split(list, "\n") {
		if f := strings.Fields(line); len(f) > 0 && f[0] == name {
			return line
		}
	}
	return ""
}

// voters reports whether list names exactly names, each a voter (or the
// leader) that the listing gateway reaches.
func voters(list string, names ...string) bool {
	if strings.Count(strings.TrimSpace(list), "\n") != len(names) {
		return false
	}
	for _, n := range names {
		r := row(list, n)
		if r == "" || strings.Contains(r, "learner") || strings.Contains(r, " no: ") {
			return false
		}
	}
	return true
}

// siteWriters create ConfigMaps through every gateway's API and record
// the ones acknowledged.
type siteWriters struct {
	mu    sync.Mutex
	acked map[string]bool
	// firstAfter is, per gateway, when its first write issued after mark
	// was acknowledged.
	mark       time.Time
	firstAfter map[string]time.Time
	failed     int
	cancel     context.CancelFunc
	wg         sync.WaitGroup
}

func startSiteWriters(t *testing.T, gws ...*siteGateway) *siteWriters {
	return startSiteWritersTimeout(t, 500*time.Millisecond, gws...)
}

// startSiteWritersTimeout starts writers whose requests time out after
// timeout: a short one measures when the site takes writes again, a long
// one also what a writer waits for the write it had in flight.
func startSiteWritersTimeout(t *testing.T, timeout time.Duration, gws ...*siteGateway) *siteWriters {
	ctx, cancel := context.WithCancel(context.Background())
	w := &siteWriters{acked: map[string]bool{}, firstAfter: map[string]time.Time{}, cancel: cancel}
	for _, g := range gws {
		rc := g.p.restConfig()
		rc.Timeout = timeout
		client := kubernetes.NewForConfigOrDie(rc)
		w.wg.Go(func() {
			for i := 0; ctx.Err() == nil; i++ {
				name := fmt.Sprintf("w-%s-%d", g.name, i)
				began := time.Now()
				_, err := client.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{
					ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"i": strconv.Itoa(i)}}, metav1.CreateOptions{})
				w.mu.Lock()
				if err == nil {
					w.acked[name] = true
					if !w.mark.IsZero() && began.After(w.mark) && w.firstAfter[g.name].IsZero() {
						w.firstAfter[g.name] = time.Now()
					}
				} else {
					w.failed++
				}
				w.mu.Unlock()
				if err != nil {
					time.Sleep(50 * time.Millisecond)
				}
			}
		})
	}
	return w
}

// acknowledged are the writes through gateway name acknowledged so far.
func (w *siteWriters) acknowledged(name string) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for n := range w.acked {
		if strings.HasPrefix(n, "w-"+name+"-") {
			out = append(out, n)
		}
	}
	return out
}

// stop stops the writers (once) and returns what was acknowledged.
func (w *siteWriters) stop() map[string]bool {
	w.cancel()
	w.wg.Wait()
	return w.snapshot()
}

// snapshot is a copy of what was acknowledged so far.
func (w *siteWriters) snapshot() map[string]bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return maps.Clone(w.acked)
}

// missing lists the acknowledged ConfigMaps g does not have. A list that
// fails is tried again for 30 s: a member that has just started or lost
// its leader refuses a consistent read for a moment, which says nothing
// of what it holds.
func missing(t *testing.T, g *siteGateway, acked map[string]bool) []string {
	t.Helper()
	var list *corev1.ConfigMapList
	var err error
	if !eventually(30*time.Second, func() bool {
		list, err = g.p.clientset().CoreV1().ConfigMaps("default").List(context.Background(), metav1.ListOptions{})
		return err == nil
	}) {
		t.Fatalf("listing on %s: %v", g.name, err)
	}
	have := map[string]bool{}
	for _, cm := range list.Items {
		have[cm.Name] = true
	}
	var out []string
	for name := range acked {
		if !have[name] {
			out = append(out, name)
		}
	}
	return out
}

// TestSiteOfThreeGateways runs a site of three kubestores as one embedded
// etcd cluster (issue 26): a join whose token pins another CA is refused;
// two gateways join at once (k3s#7000, "too many learners"); the raft
// leader is killed under writes through every gateway and no acknowledged
// write is lost; the dead member is visible on the survivors (k3s#11231);
// a gateway joins while a dead member is still listed (k3s#10462); a
// member removed while down rejoins at its next start with its old data,
// and a wiped one rejoins under its name (k3s#13498), with nothing cleaned
// up by hand.
func TestSiteOfThreeGateways(t *testing.T) {
	a, b, c := newGateway(t, "gw-a"), newGateway(t, "gw-b"), newGateway(t, "gw-c")
	a.start(t, "", "")
	token, join := a.token(t), a.url()
	if _, err := config.ParseJoinToken(token); err != nil {
		t.Fatalf("member token printed %q: %v", token, err)
	}

	{
		t.Log("a token pinning another CA is refused")
		parsed, _ := config.ParseJoinToken(token)
		wrong := config.FormatJoinToken([]byte("another site's CA"), parsed.Secret)
		x := newGateway(t, "gw-x")
		x.launch(t, join, wrong)
		if err := x.p.wait(90 * time.Second); err == nil {
			t.Fatalf("a join with a wrong CA hash started\n%s", x.p.logs())
		}
		if logs := x.p.logs(); !strings.Contains(logs, "refusing to join") || !strings.Contains(logs, "--join-token pins") {
			t.Errorf("the refusal does not say why:\n%s", logs)
		}
		if _, err := os.Stat(filepath.Join(x.dir, "etcd", "member")); err == nil {
			t.Errorf("the refused joiner has etcd data")
		}
		if r := row(a.memberList(t), "gw-x"); r != "" {
			t.Errorf("the site lists the refused joiner: %s", r)
		}
	}

	// Two joins at once: etcd admits one learner at a time, the other
	// waits for it and joins next.
	b.launch(t, join, token)
	c.launch(t, join, token)
	b.waitServing(t)
	c.waitServing(t)
	if !eventually(30*time.Second, func() bool { return voters(a.memberList(t), "gw-a", "gw-b", "gw-c") }) {
		t.Fatalf("after two joins at once, the site is not three reachable voters:\n%s", a.memberList(t))
	}
	// One object, written on one gateway, read on another, a Secret
	// included (the site shares its encryption key).
	a.p.mustKubectl("create", "secret", "generic", "shared", "--from-literal=k=v")
	if got := c.p.mustKubectl("get", "secret", "shared", "-o", "jsonpath={.data.k}"); got != "dg==" {
		t.Fatalf("a Secret written on gw-a reads %q on gw-c", got)
	}

	gws := map[string]*siteGateway{a.name: a, b.name: b, c.name: c}
	var leader *siteGateway
	for _, g := range gws {
		if strings.Contains(row(a.memberList(t), g.name), "leader") {
			leader = g
		}
	}
	if leader == nil {
		t.Fatalf("no leader in\n%s", a.memberList(t))
	}
	var survivors []*siteGateway
	for _, g := range []*siteGateway{a, b, c} {
		if g != leader {
			survivors = append(survivors, g)
		}
	}

	{
		// The writers wait for their writes as long as a kubelet or
		// kubectl does: a write a survivor forwarded to the dying leader
		// held its writer until etcd's request timeout, 7 s (issue 48's
		// 5.3-5.6 s), which writers of 0.5 s never saw.
		t.Log("kill -9 the leader under writes")
		w := startSiteWritersTimeout(t, 30*time.Second, a, b, c)
		time.Sleep(3 * time.Second)
		w.mu.Lock()
		w.mark = time.Now()
		killed := w.mark
		w.mu.Unlock()
		leader.p.kill()
		time.Sleep(8 * time.Second)
		acked := w.stop()
		for _, g := range survivors {
			if w.firstAfter[g.name].IsZero() {
				t.Fatalf("no write through %s succeeded in the 8 s after the leader %s was killed", g.name, leader.name)
			}
			resumed := w.firstAfter[g.name].Sub(killed)
			t.Logf("writes through %s resumed %s after the leader was killed", g.name, resumed.Round(time.Millisecond))
			if resumed > 5*time.Second {
				t.Errorf("writes through %s resumed %s after the leader was killed, want within 5 s of a member's loss", g.name, resumed.Round(time.Millisecond))
			}
		}
		t.Logf("%d writes acknowledged, %d failed (the killed gateway's and those in flight at the election)", len(acked), w.failed)
		for _, g := range survivors {
			if m := missing(t, g, acked); len(m) > 0 {
				t.Fatalf("%d acknowledged writes missing on %s: %v", len(m), g.name, m[:min(5, len(m))])
			}
		}

		// The dead member is visible on the survivors before anything
		// else goes wrong: the metric and the member list name it. Their
		// /readyz passes: they keep quorum, and serve.
		s := survivors[0]
		if !eventually(20*time.Second, func() bool {
			return strings.Contains(s.p.mustKubectl("get", "--raw", "/metrics"), `kubestore_site_member_reachable{member="`+leader.name+`"} 0`)
		}) {
			t.Errorf("metrics on %s do not show %s unreachable", s.name, leader.name)
		}
		for _, g := range survivors {
			if out, err := g.p.kubectl("get", "--raw", "/readyz?verbose"); err != nil || !strings.Contains(out, "[+]etcd-members ok") {
				t.Errorf("/readyz?verbose on %s with %s dead and quorum kept: %v\n%s", g.name, leader.name, err, out)
			}
		}
		metrics := s.p.mustKubectl("get", "--raw", "/metrics")
		if want := `kubestore_site_member_reachable{member="` + leader.name + `"} 0`; !strings.Contains(metrics, want) {
			t.Errorf("metrics on %s lack %s", s.name, want)
		}
		if r := row(s.memberList(t), leader.name); !strings.Contains(r, " no: ") {
			t.Errorf("member list on %s shows the dead member as reachable: %s", s.name, r)
		}

		// The killed gateway comes back with its data and catches up.
		if leader == a {
			leader.start(t, "", "")
		} else {
			leader.start(t, join, token)
		}
		if m := missing(t, leader, acked); len(m) > 0 {
			t.Fatalf("%d acknowledged writes missing on the restarted %s: %v", len(m), leader.name, m[:min(5, len(m))])
		}
		if !eventually(30*time.Second, func() bool { return voters(s.memberList(t), "gw-a", "gw-b", "gw-c") }) {
			t.Fatalf("the site is not whole again:\n%s", s.memberList(t))
		}
		if !eventually(20*time.Second, func() bool { return s.p.ready() }) {
			t.Errorf("/readyz on %s still fails with every member back", s.name)
		}
	}

	{
		t.Log("a join while a dead member is listed, then its removal and rejoin")
		// c goes down and stays listed. etcd counts a joiner as down until
		// it has caught up, so with c down a join could cost the site its
		// quorum: it is refused in one line that says what to do.
		c.p.kill()
		d := newGateway(t, "gw-d")
		d.launch(t, b.url(), token)
		if err := d.p.wait(90 * time.Second); err == nil {
			t.Fatalf("gw-d joined a site of three with gw-c down\n%s", d.p.logs())
		}
		if logs := d.p.logs(); !strings.Contains(logs, "members gw-c are unreachable") || !strings.Contains(logs, "kubestore member remove") {
			t.Errorf("the refused join does not name the dead member and the way out:\n%s", logs)
		}
		// The dead member is removed while down; d joins.
		if out, err := a.kubestore(t, "member", "remove", "gw-c"); err != nil {
			t.Fatalf("member remove gw-c: %v\n%s", err, out)
		}
		if r := row(a.memberList(t), "gw-c"); r != "" {
			t.Fatalf("gw-c still listed after its removal: %s", r)
		}
		d.start(t, b.url(), token)
		if !eventually(30*time.Second, func() bool { return voters(a.memberList(t), "gw-a", "gw-b", "gw-d") }) {
			t.Fatalf("gw-d did not become a voter:\n%s", a.memberList(t))
		}
		// ... and rejoins at its next start, its old data kept aside.
		a.p.mustKubectl("create", "configmap", "after-removal")
		c.start(t, join, token)
		if _, err := os.Stat(filepath.Join(aside(t, c.dir, "etcd.removed"), "member")); err != nil {
			t.Errorf("gw-c's old data is not kept in etcd.removed: %v", err)
		}
		c.p.mustKubectl("get", "configmap", "after-removal")

		// d is wiped and started again under its name and address: the
		// join replaces its stale entry.
		stopGracefully(t, d.p)
		if err := os.RemoveAll(d.dir); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(d.dir, 0o700); err != nil {
			t.Fatal(err)
		}
		d.start(t, join, token)
		d.p.mustKubectl("get", "configmap", "after-removal")
		if !eventually(30*time.Second, func() bool { return voters(a.memberList(t), "gw-a", "gw-b", "gw-c", "gw-d") }) {
			t.Fatalf("the site is not four reachable voters:\n%s", a.memberList(t))
		}

		// A member removed while it runs stops, saying so in one line.
		if out, err := a.kubestore(t, "member", "remove", "gw-d"); err != nil {
			t.Fatalf("member remove gw-d: %v\n%s", err, out)
		}
		if err := d.p.wait(30 * time.Second); err == nil || !strings.Contains(d.p.logs(), "this member was removed from its site") {
			t.Errorf("gw-d removed while running: exit %v, want a failure saying it was removed\n%s", err, d.p.logs())
		}
	}
}

// upstreamWatches is how many watches of resource the upstream serves now.
func upstreamWatches(t *testing.T, env *mirrorEnv, resource string) float64 {
	t.Helper()
	n, _ := env.upMetrics(t).value("apiserver_longrunning_requests", "resource", resource, "verb", "WATCH")
	return n
}

// TestSiteMirrorsOnce: two gateways of a site of three mirror the same rule, and
// the rule's objects are streamed from the upstream once for the site, by
// the gateway elected for it; both serve them. When the elected gateway is
// killed, the other takes the rule over (issue 26).
func TestSiteMirrorsOnce(t *testing.T) {
	// Parallel: it waits more than it computes (leases, elections, polls),
	// with windows of tens of seconds (make test runs the waiting suites
	// side by side).
	t.Parallel()
	requireKubectl(t)
	// An upstream of its own: it counts the upstream's watches.
	env := newOwnMirrorEnv(t)
	ctx := t.Context()
	const ns = "shared"
	up := env.upCS.CoreV1().ConfigMaps(ns)
	_, err := env.upCS.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	must(t, err)
	for i := range 10 {
		_, err := up.Create(ctx, cm(ns, fmt.Sprintf("s-%02d", i), "0"), metav1.CreateOptions{})
		must(t, err)
	}
	before := upstreamWatches(t, env, "configmaps")
	rules := []mirrorRule{{Name: "shared", Resource: "configmaps", Namespaces: []string{ns}}}
	ga, gb := newGateway(t, "gw-a"), newGateway(t, "gw-b")
	a := env.startEdge(t, t, "edge-a", rules, "", ga.args("", "")...)
	ga.dir = a.dataDir
	token := ga.token(t)
	b := env.startEdge(t, t, "edge-b", rules, "", gb.args(a.p.server(), token)...)
	// A third member, mirroring nothing, keeps the site's quorum when one
	// of the two dies.
	newGateway(t, "gw-c").start(t, a.p.server(), token)
	want := func(t *testing.T) map[string]*unstructured.Unstructured {
		return env.upstream(t, gvrConfigMaps, ns, metav1.ListOptions{})
	}
	va, vb := a.watch(ctx, gvrConfigMaps, ns), b.watch(ctx, gvrConfigMaps, ns)
	converge(t, va, "shared", want)
	converge(t, vb, "shared", want)
	if !eventually(20*time.Second, func() bool { return upstreamWatches(t, env, "configmaps")-before == 1 }) {
		t.Fatalf("the site watches the rule's ConfigMaps upstream %v times, want once", upstreamWatches(t, env, "configmaps")-before)
	}

	// The elected gateway is the one whose /mirrorz lists the stream.
	leader, other := a, b
	if strings.Contains(b.mustKubectl(t, "get", "--raw", "/mirrorz?verbose"), "shared") {
		leader, other = b, a
	}
	leader.p.kill()
	_, err = up.Create(ctx, cm(ns, "after-kill", "1"), metav1.CreateOptions{})
	must(t, err)
	vo := va
	if other == b {
		vo = vb
	}
	// The holder's lease (10 s) lapses, the other gateway takes the
	// rule over and resumes the stream.
	convergeWithin(t, vo, "shared", want, 60*time.Second)
}

// TestSiteClusterReset: a site of three loses two members for good (its
// quorum); kubestore cluster reset makes the survivor a site of one with
// all its data, and the other two, started again with their old data, find
// they are no longer members and join the reset site by themselves.
func TestSiteClusterReset(t *testing.T) {
	releaseOnly(t)
	a, b, c := newGateway(t, "gw-a"), newGateway(t, "gw-b"), newGateway(t, "gw-c")
	token := foundSite(t, a, b, c)
	for i := range 20 {
		b.p.mustKubectl("create", "configmap", fmt.Sprintf("before-%d", i))
	}
	b.p.kill()
	c.p.kill()
	// The survivor serves no write without quorum, and stops.
	if _, err := a.p.kubectl("create", "configmap", "no-quorum", "--request-timeout=3s"); err == nil {
		t.Fatalf("a write succeeded on a site with one member of three")
	}
	a.p.kill()

	out, err := a.kubestore(t, "cluster", "reset")
	if err != nil {
		t.Fatalf("cluster reset: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(aside(t, a.dir, "etcd.before-reset"), "member", "wal")); err != nil {
		t.Errorf("the data before the reset is not kept: %v", err)
	}
	a.start(t, "", "")
	for i := range 20 {
		a.p.mustKubectl("get", "configmap", fmt.Sprintf("before-%d", i))
	}
	a.p.mustKubectl("create", "configmap", "after-reset")
	if l := a.memberList(t); !voters(l, "gw-a") {
		t.Fatalf("after the reset the site is not gw-a alone:\n%s", l)
	}

	// The others come back with their old data and join the reset site.
	b.start(t, a.url(), token)
	c.start(t, a.url(), token)
	for _, g := range []*siteGateway{b, c} {
		g.p.mustKubectl("get", "configmap", "after-reset")
		g.p.mustKubectl("get", "configmap", "before-19")
		if _, err := os.Stat(filepath.Join(aside(t, g.dir, "etcd.removed"), "member")); err != nil {
			t.Errorf("%s's old data is not kept in etcd.removed: %v", g.name, err)
		}
	}
	if !eventually(30*time.Second, func() bool { return voters(a.memberList(t), "gw-a", "gw-b", "gw-c") }) {
		t.Fatalf("the reset site is not three reachable voters:\n%s", a.memberList(t))
	}
}

// A removed member rejoins at its next start with --join, also the one
// that founded the site: its etcd records the removal in the data
// directory, and the next start asks the site to take it back. Before, a
// founder never asked (it could be told by a site that replaced it that it
// is gone), and every start with --join failed on its removal (found by
// the mirror's model checker, issue 48).
func TestSiteFounderRemovedRejoins(t *testing.T) {
	t.Parallel()
	a, b, c := newGateway(t, "gw-a"), newGateway(t, "gw-b"), newGateway(t, "gw-c")
	token := foundSite(t, a, b, c)
	// The site refuses a removal until its members reached each other for
	// 5 s: it just formed.
	var out []byte
	if !eventually(30*time.Second, func() bool {
		var err error
		out, err = exec.Command(binary(t), "member", "remove", "gw-a", "--data-dir", b.dir).CombinedOutput()
		return err == nil
	}) {
		t.Fatalf("member remove gw-a through gw-b:\n%s", out)
	}
	if err := a.p.wait(60 * time.Second); err == nil || !strings.Contains(a.p.logs(), "removed from its site") {
		t.Fatalf("gw-a, removed: %v, want it stopped saying so\n%s", err, a.p.logs())
	}
	a.start(t, b.url(), token)
	if !eventually(60*time.Second, func() bool { return voters(b.memberList(t), "gw-a", "gw-b", "gw-c") }) {
		t.Fatalf("gw-a did not rejoin as a voter:\n%s", b.memberList(t))
	}
	a.p.mustKubectl("create", "configmap", "back")
	c.p.mustKubectl("get", "configmap", "back")
	if matches, _ := filepath.Glob(filepath.Join(a.dir, "etcd.removed.*")); len(matches) != 1 {
		t.Errorf("gw-a's data of before its removal kept aside: %v, want one etcd.removed.<time>", matches)
	}
}
