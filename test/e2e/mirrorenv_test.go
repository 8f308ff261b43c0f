package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/yaml"

	"github.com/kubestore/kubestore/test/link"
)

// The mirror suites' environment: the upstream kubestore the tests share
// (mirrorUpstream), each test's link to it (mirrorEnv), the edges started
// on it (edge), a watcher of an edge's resource and the checks on what it
// saw (view), and convergence with the upstream (converge, mirrorDiff).

// mirrorUpstream is the upstream kubestore of the mirror tests. They share
// one, each in namespaces of its own: the first to ask starts it, TestMain
// stops it.
type mirrorUpstream struct {
	up    *proc
	upDyn dynamic.Interface
	upCS  kubernetes.Interface
}

var sharedUpstream struct {
	once sync.Once
	u    *mirrorUpstream
}

// mirrorEnv is a test's access to an upstream: a link of its own (the
// test cuts it at will) and a directory for its edges.
type mirrorEnv struct {
	*mirrorUpstream
	dir  string
	link *link.Link
	// node is its edges' --node-name.
	node string
}

// newMirrorEnv is an environment on the shared upstream.
func newMirrorEnv(t *testing.T) *mirrorEnv {
	t.Helper()
	sharedUpstream.once.Do(func() {
		dir, err := os.MkdirTemp("", "ks")
		must(t, err)
		suite.Cleanup(func() {
			if suite.Failed() {
				suite.Logf("kept %s (the mirror tests' upstream)", dir)
				return
			}
			os.RemoveAll(dir)
		})
		sharedUpstream.u = startMirrorUpstream(t, suite, dir)
	})
	if sharedUpstream.u == nil {
		t.Fatal("the mirror tests' upstream did not start (see the test that started it)")
	}
	suite.sharedBy(t)
	return mirrorEnvOn(t, sharedUpstream.u)
}

// newOwnMirrorEnv is an environment on an upstream of the test's own, for
// a test that counts what the upstream serves.
func newOwnMirrorEnv(t *testing.T) *mirrorEnv {
	t.Helper()
	return mirrorEnvOn(t, startMirrorUpstream(t, t, shortTempDir(t)))
}

func mirrorEnvOn(t *testing.T, u *mirrorUpstream) *mirrorEnv {
	t.Helper()
	env := &mirrorEnv{mirrorUpstream: u, dir: shortTempDir(t), node: edgeNode}
	env.link = link.New(t, strings.TrimPrefix(u.up.server(), "https://"))
	return env
}

// startMirrorUpstream starts an upstream in dir, owned by o; t is the test
// that asked for it.
func startMirrorUpstream(t *testing.T, o owner, dir string) *mirrorUpstream {
	t.Helper()
	tokens := filepath.Join(dir, "tokens.csv")
	policy := filepath.Join(dir, "policy.yaml")
	must(t, os.WriteFile(tokens, []byte(mirrorToken+","+mirrorUser+",edge-mirror-uid\n"), 0o600))
	must(t, os.WriteFile(policy, []byte(mirrorPolicy), 0o600))
	// configmaps are read straight from etcd upstream, so that a resume
	// from a compacted resourceVersion gets 410 (the watch cache would
	// otherwise still hold the history); the tests compact themselves.
	// The tests' pods name edges' nodes that no kubelet registers
	// upstream: no pod garbage collector, which would delete them after
	// 40 s as a cluster's does.
	up := launchOwned(t, o, binary(t), nil, filepath.Join(dir, "up"), "--token-auth-file", tokens, "--authorization-policy-file", policy,
		"--watch-cache-sizes", "configmaps#0", "--etcd-compaction-interval", "0", "--controllers", "*,-pod-garbage-collector-controller")
	up.waitReady()
	cfg := restConfigOf(t, up.kubeconfig)
	return &mirrorUpstream{up: up, upDyn: dynamic.NewForConfigOrDie(cfg), upCS: kubernetes.NewForConfigOrDie(cfg)}
}

// namespaces creates namespaces upstream.
func (u *mirrorUpstream) namespaces(t *testing.T, names ...string) {
	t.Helper()
	for _, ns := range names {
		_, err := u.upCS.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		must(t, err)
	}
}

// upstream is the upstream's state of a resource: objects by
// namespace/name.
func (e *mirrorUpstream) upstream(t *testing.T, gvr schema.GroupVersionResource, ns string, opts metav1.ListOptions) map[string]*unstructured.Unstructured {
	t.Helper()
	list, err := e.upDyn.Resource(gvr).Namespace(ns).List(t.Context(), opts)
	must(t, err)
	out := map[string]*unstructured.Unstructured{}
	for i := range list.Items {
		if list.Items[i].GetName() == rootCA {
			continue // the upstream's own, never mirrored
		}
		out[key(&list.Items[i])] = &list.Items[i]
	}
	return out
}

func (e *mirrorUpstream) upMetrics(t *testing.T) metricsText {
	t.Helper()
	code, _, body := doRequest(t, restConfigOf(t, e.up.kubeconfig), http.MethodGet, "/metrics", "", "")
	if code != http.StatusOK {
		t.Fatalf("upstream /metrics: %d %s", code, body)
	}
	return metricsText(body)
}

// compact compacts the upstream's etcd at its current revision, through
// its unix socket, and returns the revision.
func (e *mirrorUpstream) compact(t *testing.T) int64 {
	t.Helper()
	c, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{"unix://" + filepath.Join(e.up.dataDir, "etcd", "etcd.sock")},
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
	})
	must(t, err)
	defer c.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	resp, err := c.Get(ctx, "compact-probe")
	must(t, err)
	rev := resp.Header.Revision
	_, err = c.Compact(ctx, rev, clientv3.WithCompactPhysical())
	must(t, err)
	return rev
}

// edge is a kubestore mirroring the upstream through the link.
type edge struct {
	env     *mirrorEnv
	dataDir string
	args    []string
	p       *proc
	cfg     *rest.Config
	cs      kubernetes.Interface
	dyn     dynamic.Interface
}

// startEdge starts an edge named name with rules (none: the default
// rules) whose upstream identity is the admin certificate, or the token
// when given, and extra flags. The process lives as long as owner; it
// always takes the same port, so that clients live through its restarts.
func (e *mirrorEnv) startEdge(owner, t *testing.T, name string, rules []mirrorRule, token string, extra ...string) *edge {
	t.Helper()
	kc := filepath.Join(e.dir, name+"-upstream.kubeconfig")
	writeEdgeKubeconfig(t, e.up.kubeconfig, e.link.Addr, token, kc)
	args := append([]string{"--secure-port", strconv.Itoa(freePort(t)), flagUpstreamKubeconfig, kc, flagNodeName, e.node}, extra...)
	if len(rules) > 0 {
		data, err := yaml.Marshal(map[string]any{"mirror": map[string]any{"rules": rules}})
		must(t, err)
		path := filepath.Join(e.dir, name+".yaml")
		must(t, os.WriteFile(path, data, 0o600))
		args = append(args, "--config", path)
	}
	ed := &edge{env: e, dataDir: filepath.Join(e.dir, name), args: args}
	ed.p = start(owner, ed.dataDir, args...)
	ed.cfg = restConfigOf(t, ed.p.kubeconfig)
	ed.cs = kubernetes.NewForConfigOrDie(ed.cfg)
	ed.dyn = dynamic.NewForConfigOrDie(ed.cfg)
	return ed
}

// restart starts the edge again on its data dir and port, after a stop
// or a kill; owner owns the new process.
func (ed *edge) restart(owner *testing.T) {
	owner.Helper()
	ed.p.kill()
	ed.p = start(owner, ed.dataDir, ed.args...)
}

func (ed *edge) kubectl(args ...string) (string, error) {
	return ed.kubectlEnv(nil, args...)
}

func (ed *edge) kubectlEnv(env []string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "kubectl", append([]string{"--kubeconfig", ed.p.kubeconfig}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func (ed *edge) mustKubectl(t *testing.T, args ...string) string {
	t.Helper()
	out, err := ed.kubectl(args...)
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

func (ed *edge) request(t *testing.T, method, path, contentType, body string) (int, http.Header, string) {
	t.Helper()
	return doRequest(t, ed.cfg, method, path, contentType, body)
}

func (ed *edge) metrics(t *testing.T) metricsText {
	t.Helper()
	code, _, body := ed.request(t, http.MethodGet, "/metrics", "", "")
	if code != http.StatusOK {
		t.Fatalf("edge /metrics: %d %s", code, body)
	}
	return metricsText(body)
}

func (ed *edge) mirrorz(t *testing.T, verbose bool) (int, string) {
	t.Helper()
	path := mirrorzPath
	if verbose {
		path += "?verbose"
	}
	code, _, body := ed.request(t, http.MethodGet, path, "", "")
	return code, body
}

// waitMirrorz waits until /mirrorz answers code with a body containing
// text.
func (ed *edge) waitMirrorz(t *testing.T, code int, text string) {
	t.Helper()
	var got int
	var body string
	if !eventually(mirrorConverge, func() bool {
		got, body = ed.mirrorz(t, false)
		return got == code && strings.Contains(body, text)
	}) {
		_, verbose := ed.mirrorz(t, true)
		t.Errorf("/mirrorz: %d %q, want %d containing %q\n?verbose: %s", got, body, code, text, verbose)
	}
}

// view is what a client of the edge sees of one resource in one namespace
// ("" all): an informer's store, filled by a reflector whose list calls
// and initial-events watches are counted so that a relist shows, and a raw
// watch (bookmarks on) that records every event.
type view struct {
	gvr            schema.GroupVersionResource
	ns             string
	store          cache.Store
	lists          atomic.Int64
	initialWatches atomic.Int64

	mu         sync.Mutex
	events     []event
	rawRelists int
	outOfOrder []string
}

type event struct {
	typ                       watch.EventType
	name                      string
	rv, upstreamRV, uid, rule string
	value                     string
}

func (e event) String() string {
	return fmt.Sprintf("%s %s rv=%s upstream-rv=%s v=%q", e.typ, e.name, e.rv, e.upstreamRV, e.value)
}

// watch starts the view's informer and raw watch on the edge; both stop
// with ctx and follow the edge through restarts (the port stays).
func (ed *edge) watch(ctx context.Context, gvr schema.GroupVersionResource, ns string) *view {
	cfg := rest.CopyConfig(ed.cfg)
	cfg.Timeout = 0
	ri := dynamic.NewForConfigOrDie(cfg).Resource(gvr).Namespace(ns)
	v := &view{gvr: gvr, ns: ns, store: cache.NewStore(cache.MetaNamespaceKeyFunc)}
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			v.lists.Add(1)
			return ri.List(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			if opts.SendInitialEvents != nil && *opts.SendInitialEvents {
				v.initialWatches.Add(1)
			}
			return ri.Watch(ctx, opts)
		},
	}
	r := cache.NewReflectorWithOptions(lw, &unstructured.Unstructured{}, v.store, cache.ReflectorOptions{
		Name: "mirror-test-" + gvr.Resource,
		// Short back-off: the edge restarts in some cases, and what is
		// tested is the edge, not client-go's patience.
		Backoff: &wait.Backoff{Duration: 100 * time.Millisecond, Factor: 2, Jitter: 0.1, Steps: 10, Cap: time.Second},
	})
	go r.RunWithContext(ctx)
	go v.runRaw(ctx, ri)
	return v
}

// relists is how many times the informer listed (or opened a watch with
// initial events); 1 is its first sync.
func (v *view) relists() int64 { return v.lists.Load() + v.initialWatches.Load() }

func (v *view) runRaw(ctx context.Context, ri dynamic.ResourceInterface) {
	last := uint64(0)
	resumedWatch(ctx, ri, 100*time.Millisecond, func() {
		v.mu.Lock()
		v.rawRelists++
		v.mu.Unlock()
	}, func(typ watch.EventType, u *unstructured.Unstructured, from string) {
		n, _ := strconv.ParseUint(u.GetResourceVersion(), 10, 64)
		resumed, _ := strconv.ParseUint(from, 10, 64)
		last = max(last, resumed)
		v.mu.Lock()
		defer v.mu.Unlock()
		if n <= last {
			v.outOfOrder = append(v.outOfOrder, fmt.Sprintf("%s %s at %d after %d", typ, key(u), n, last))
		}
		last = n
		value, _, _ := unstructured.NestedString(u.Object, "data", "v")
		ann := u.GetAnnotations()
		v.events = append(v.events, event{typ: typ, name: u.GetName(), rv: u.GetResourceVersion(), upstreamRV: ann[annUpstreamRV], uid: string(u.GetUID()), rule: ann[annRule], value: value})
	})
}

// resumedWatch lists and watches ri as a raw client does until ctx ends:
// each watch resumes from the last resourceVersion it saw (bookmarks
// included), through the server's restarts, and only a 410 makes it list
// again, which it reports to relisted. Every event but bookmarks goes to
// seen, in order, with the resourceVersion its watch resumed from.
func resumedWatch(ctx context.Context, ri dynamic.ResourceInterface, pause time.Duration, relisted func(), seen func(watch.EventType, *unstructured.Unstructured, string)) {
	rv := ""
	for ctx.Err() == nil {
		if rv == "" {
			list, err := ri.List(ctx, metav1.ListOptions{})
			if err != nil {
				time.Sleep(pause)
				continue
			}
			rv = list.GetResourceVersion()
		}
		w, err := ri.Watch(ctx, metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true})
		if err != nil {
			if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
				relisted()
				rv = ""
			}
			time.Sleep(pause)
			continue
		}
		rv = consumeWatch(w, rv, relisted, seen)
	}
}

// consumeWatch hands w's events to seen until it ends, and returns the
// resourceVersion to resume from ("" to relist).
func consumeWatch(w watch.Interface, rv string, relisted func(), seen func(watch.EventType, *unstructured.Unstructured, string)) string {
	defer w.Stop()
	from := rv
	for ev := range w.ResultChan() {
		if ev.Type == watch.Error {
			if err := apierrors.FromObject(ev.Object); apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
				relisted()
				return ""
			}
			return rv
		}
		u, ok := ev.Object.(*unstructured.Unstructured)
		if !ok {
			continue
		}
		rv = u.GetResourceVersion()
		if ev.Type != watch.Bookmark {
			seen(ev.Type, u, from)
		}
	}
	return rv
}

// mark is the position of the next event.
func (v *view) mark() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return len(v.events)
}

func (v *view) since(mark int) []event {
	v.mu.Lock()
	defer v.mu.Unlock()
	return append([]event(nil), v.events[mark:]...)
}

// localRVs are the mirrored objects' local resourceVersions by name (the
// edge's own kube-root-ca.crt left out).
func (v *view) localRVs() map[string]string {
	out := map[string]string{}
	for _, o := range v.store.List() {
		u := o.(*unstructured.Unstructured)
		if u.GetName() == rootCA {
			continue
		}
		out[u.GetName()] = u.GetResourceVersion()
	}
	return out
}

// keys are the informer's objects' namespace/name, sorted.
func (v *view) keys() []string {
	var out []string
	for _, o := range v.store.List() {
		out = append(out, key(o.(*unstructured.Unstructured)))
	}
	sort.Strings(out)
	return out
}

func relistCounts(views []*view) []int64 {
	out := make([]int64, len(views))
	for i, v := range views {
		out[i] = v.relists()
	}
	return out
}

// checkNoRelist fails if an informer listed again since counts were taken.
func checkNoRelist(t *testing.T, views []*view, counts []int64) {
	t.Helper()
	for i, v := range views {
		if n := v.relists(); n != counts[i] {
			t.Errorf("the edge informer of %s in %q relisted: %d lists or initial-events watches, %d before", v.gvr.Resource, v.ns, n, counts[i])
		}
		v.mu.Lock()
		raw := v.rawRelists
		v.mu.Unlock()
		if raw > 0 {
			t.Logf("the raw watch of %s in %q has relisted %d times (410)", v.gvr.Resource, v.ns, raw)
		}
	}
}

// checkOrdered fails if the raw watch saw a resourceVersion go back.
func checkOrdered(t *testing.T, v *view) {
	t.Helper()
	v.mu.Lock()
	defer v.mu.Unlock()
	if len(v.outOfOrder) > 0 {
		t.Errorf("the edge's watch of %s in %q delivered events out of order: %s", v.gvr.Resource, v.ns, strings.Join(v.outOfOrder, "; "))
	}
}

// checkChanges checks the events since mark: exactly one for each changed
// name, of the change's type, and none for the others, whose local
// resourceVersions stayed as before.
func checkChanges(t *testing.T, v *view, mark int, before map[string]string, changes map[string]watch.EventType) {
	t.Helper()
	byName := map[string][]event{}
	for _, e := range v.since(mark) {
		byName[e.name] = append(byName[e.name], e)
	}
	for name, typ := range changes {
		evs := byName[name]
		if len(evs) != 1 || evs[0].typ != typ {
			t.Errorf("edge watch of %s: %s changed upstream (%s), got %d events: %s", v.gvr.Resource, name, typ, len(evs), describeEvents(evs))
		}
	}
	now := v.localRVs()
	for name, rv := range before {
		if _, changed := changes[name]; changed {
			continue
		}
		if evs := byName[name]; len(evs) > 0 {
			t.Errorf("edge watch of %s: %s did not change upstream, got %d events: %s", v.gvr.Resource, name, len(evs), describeEvents(evs))
		}
		if now[name] != rv {
			t.Errorf("edge %s %s did not change upstream, but its local resourceVersion went %s -> %s", v.gvr.Resource, name, rv, now[name])
		}
	}
	for name, evs := range byName {
		if _, changed := changes[name]; !changed {
			if _, existed := before[name]; !existed {
				t.Errorf("edge watch of %s: events for %s, which is neither changed nor known: %s", v.gvr.Resource, name, describeEvents(evs))
			}
		}
	}
}

func describeEvents(evs []event) string {
	var b strings.Builder
	for _, e := range evs {
		fmt.Fprintf(&b, "  %s\n", e)
	}
	return b.String()
}

// converge waits until the view's informer holds exactly want's objects,
// each the upstream's object but for the local resourceVersion and the
// mirror's annotations (rule, when not "", and the upstream
// resourceVersion).
func converge(t *testing.T, v *view, rule string, want func(*testing.T) map[string]*unstructured.Unstructured) {
	t.Helper()
	convergeOpts(t, v, rule, want, mirrorConverge, false)
}

func convergeWithin(t *testing.T, v *view, rule string, want func(*testing.T) map[string]*unstructured.Unstructured, timeout time.Duration) {
	t.Helper()
	convergeOpts(t, v, rule, want, timeout, false)
}

// convergeMirrored is converge ignoring the edge's local objects (those
// without the mirror's annotation).
func convergeMirrored(t *testing.T, v *view, rule string, want func(*testing.T) map[string]*unstructured.Unstructured) {
	t.Helper()
	convergeOpts(t, v, rule, want, mirrorConverge, true)
}

func convergeOpts(t *testing.T, v *view, rule string, want func(*testing.T) map[string]*unstructured.Unstructured, timeout time.Duration, onlyMirrored bool) {
	t.Helper()
	var diff string
	if eventually(timeout, func() bool {
		diff = mirrorDiff(want(t), v.store.List(), rule, onlyMirrored)
		return diff == ""
	}) {
		return
	}
	t.Errorf("the edge informer of %s in %q did not converge to the upstream within %s:\n%s", v.gvr.Resource, v.ns, timeout, diff)
}

// rootCA is the ConfigMap every API server publishes in every namespace.
const rootCA = "kube-root-ca.crt"

// mirrorDiff describes how the edge's objects differ from the upstream's
// ("" when they do not).
func mirrorDiff(want map[string]*unstructured.Unstructured, edgeObjs []any, rule string, onlyMirrored bool) string {
	var out []string
	got := map[string]*unstructured.Unstructured{}
	for _, o := range edgeObjs {
		u := o.(*unstructured.Unstructured)
		if onlyMirrored && u.GetAnnotations()[annRule] == "" || u.GetName() == rootCA {
			continue
		}
		got[key(u)] = u
	}
	// Each API server publishes its own kube-root-ca.crt; none is
	// mirrored.
	want = maps.Clone(want)
	maps.DeleteFunc(want, func(_ string, u *unstructured.Unstructured) bool { return u.GetName() == rootCA })
	for k, w := range want {
		g, ok := got[k]
		if !ok {
			out = append(out, k+": missing on the edge")
			continue
		}
		ann := g.GetAnnotations()
		if ann[annUpstreamRV] != w.GetResourceVersion() {
			out = append(out, fmt.Sprintf("%s: %s=%q, upstream resourceVersion %s", k, annUpstreamRV, ann[annUpstreamRV], w.GetResourceVersion()))
		}
		if (rule != "" && ann[annRule] != rule) || ann[annRule] == "" {
			out = append(out, fmt.Sprintf("%s: %s=%q, want %q", k, annRule, ann[annRule], rule))
		}
		if d := fieldDiff(stripLocal(w), stripLocal(g)); d != "" {
			out = append(out, k+": "+d)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			out = append(out, k+": on the edge, not in the upstream's filtered state")
		}
	}
	sort.Strings(out)
	if len(out) > 8 {
		out = append(out[:8], fmt.Sprintf("and %d more", len(out)-8))
	}
	return strings.Join(out, "\n")
}

// stripLocal is the object without what is local to a copy: its
// resourceVersion and the mirror's annotations.
func stripLocal(u *unstructured.Unstructured) map[string]any {
	c := u.DeepCopy()
	unstructured.RemoveNestedField(c.Object, "metadata", "resourceVersion")
	if ann := c.GetAnnotations(); ann != nil {
		delete(ann, annRule)
		delete(ann, annUpstreamRV)
		if len(ann) == 0 {
			unstructured.RemoveNestedField(c.Object, "metadata", "annotations")
		} else {
			c.SetAnnotations(ann)
		}
	}
	return c.Object
}

// fieldDiff lists the paths where two objects differ (the first few).
func fieldDiff(want, got map[string]any) string {
	fw, fg := map[string]string{}, map[string]string{}
	flatten("", want, fw)
	flatten("", got, fg)
	return mapDiff(fw, fg, 4)
}

func flatten(prefix string, v any, out map[string]string) {
	switch x := v.(type) {
	case map[string]any:
		if len(x) == 0 {
			out[prefix] = "{}"
		}
		for k, e := range x {
			flatten(prefix+"."+k, e, out)
		}
	case []any:
		if len(x) == 0 {
			out[prefix] = "[]"
		}
		for i, e := range x {
			flatten(fmt.Sprintf("%s[%d]", prefix, i), e, out)
		}
	default:
		b, _ := json.Marshal(x)
		out[prefix] = string(b)
	}
}
