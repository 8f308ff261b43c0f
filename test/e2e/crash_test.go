package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	clientv3 "go.etcd.io/etcd/client/v3"
)

const (
	crashNamespace = "default"
	writers        = 4
	// namesPerWriter: each writer owns its names, so the operations on a
	// name are sequential and the expected state is exact.
	namesPerWriter = 25
)

func cycles() int {
	if n, err := strconv.Atoi(os.Getenv("KUBESTORE_CRASH_CYCLES")); err == nil && n > 0 {
		return n
	}
	return 20
}

// outcome is what the store may hold for a name: exactly one state after an
// acknowledged write, either of two after a write whose answer was lost.
type outcome struct {
	value   string // "" means absent
	maybe   string // the other possible value when uncertain
	unknown bool
}

type model struct {
	mu    sync.Mutex
	names map[string]outcome
	maxRV uint64
	acked int64
	// lost and phantom count acknowledged writes missing and objects that
	// should not exist, found by a check or by a write the store refused.
	lost, phantom int64
}

func (m *model) ack(name, value string, rv string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.names[name] = outcome{value: value}
	m.acked++
	if n, err := strconv.ParseUint(rv, 10, 64); err == nil && n > m.maxRV {
		m.maxRV = n
	}
}

func (m *model) unanswered(name, attempted string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	prev := m.names[name]
	if prev.unknown {
		// Two unanswered writes in a row: keep it simple, accept anything
		// until the next check settles it.
		m.names[name] = outcome{unknown: true, value: attempted, maybe: "*"}
		return
	}
	m.names[name] = outcome{value: prev.value, maybe: attempted, unknown: true}
}

func (m *model) get(name string) outcome {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.names[name]
}

// compare checks what the store holds (name -> value) against the model,
// counting losses and phantoms, and settles every uncertain name to what
// is stored.
func (m *model) compare(t testing.TB, stored map[string]string, cycle int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	names := map[string]bool{}
	for n := range m.names {
		names[n] = true
	}
	for n := range stored {
		names[n] = true
	}
	for n := range names {
		want := m.names[n]
		got, present := stored[n]
		if !present {
			got = ""
		}
		switch {
		case want.unknown && (want.maybe == "*" || got == want.value || got == want.maybe):
			m.names[n] = outcome{value: got}
		case want.unknown:
			t.Errorf("cycle %d: %s holds %q, want %q or %q", cycle, n, got, want.value, want.maybe)
			m.lost++
			m.names[n] = outcome{value: got}
		case got == want.value:
		case want.value == "":
			t.Errorf("cycle %d: %s holds %q, but it was deleted or never acknowledged", cycle, n, got)
			m.phantom++
			m.names[n] = outcome{value: got}
		default:
			t.Errorf("cycle %d: %s holds %q, want the acknowledged %q", cycle, n, got, want.value)
			m.lost++
			m.names[n] = outcome{value: got}
		}
	}
}

// counts is what the test prints at the end.
type counts struct {
	cycles, acked, lost, phantom, informerDivergences, watchDivergences, rvRegressions, relists int64
	// observedGone counts objects a watcher was told of that the server
	// no longer held after a restart, with no DELETED event (history went
	// back); observedChecked counts the objects so checked.
	observedGone, observedChecked int64
}

// TestCrashSafety kills the binary with SIGKILL while clients write and
// watch, restarts it, and checks that nothing acknowledged was lost,
// nothing unacknowledged appeared, resourceVersions never went back, and
// watchers converged without help.
func TestCrashSafety(t *testing.T) {
	dir := shortTempDir(t)
	// Every restart takes the same port, so that the clients below live
	// through the crashes with one config.
	port := strconv.Itoa(freePort(t))
	p := start(t, dir, "--secure-port", port)
	ch := startChurn(t, p)
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	for cycle := 1; cycle <= cycles(); cycle++ {
		time.Sleep(300*time.Millisecond + time.Duration(rng.Int64N(int64(1700*time.Millisecond))))
		p.kill()
		ch.c.cycles++
		p = start(t, dir, "--secure-port", port)
		ch.check(t, cycle, p)
	}
	ch.finish(t, "crash test")
}

// TestCheckAfterRestartFollowsTheServersOwnWrites is the check's own test
// (issue 38): an object the server writes right after the check's first
// list (as the root-CA publisher of a server that was up less than a second
// before its cut does) reaches the watchers; they must be compared with
// what the server holds then, not with the older list, and the check must
// pass. It failed, "want absent", when the watchers were compared with the
// first list.
func TestCheckAfterRestartFollowsTheServersOwnWrites(t *testing.T) {
	p := start(t, shortTempDir(t))
	ch := startChurn(t, p)
	time.Sleep(time.Second) // some acknowledged writes
	ch.afterList = func() {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "written-by-the-server"}}
		if _, err := p.clientset().CoreV1().ConfigMaps(crashNamespace).Create(t.Context(), cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		// As in the failure, the watchers are told before they are
		// compared.
		if !eventually(convergeTimeout, func() bool {
			_, inInformer, _ := ch.store.GetByKey(crashNamespace + "/" + cm.Name)
			_, inWatch := ch.rw.view()[cm.Name]
			return inInformer && inWatch
		}) {
			t.Fatal("the watchers were not told of the server's write")
		}
	}
	ch.c.cycles++
	ch.check(t, 1, p)
	ch.finish(t, "check test")
}

// churn is the clients of a crash test, which live through every restart
// of the server: writers of ConfigMaps, checked against a model of what
// was acknowledged, a client-go informer and a plain watch that resumes.
type churn struct {
	ctx    context.Context
	cancel context.CancelFunc
	client kubernetes.Interface
	m      *model
	c      counts
	store  *observingStore
	rw     *rawWatcher
	// afterList, when set, runs right after a check's first list: a test
	// of the check writes there as the server's own controllers may.
	afterList func()
	// Writers pause while a check runs.
	gate sync.RWMutex
	wg   sync.WaitGroup
}

// startChurn starts the clients against p; every later server must serve
// the same port with the same CA.
func startChurn(t *testing.T, p *proc) *churn {
	cfg := p.restConfig()
	cfg.Timeout = 5 * time.Second
	ctx, cancel := context.WithCancel(t.Context())
	t.Cleanup(cancel)
	ch := &churn{ctx: ctx, cancel: cancel, client: kubernetes.NewForConfigOrDie(cfg), m: &model{names: map[string]outcome{}}}

	// The informer's reflector (WatchList, as client-go v0.37 does by
	// default) lives through every crash: it must recover by itself, by
	// resuming its watch or relisting. Its backoff is shortened from
	// client-go's default (which grows to 30-60 s while the server is down
	// and resets only after 2 quiet minutes) so that a kill every few
	// seconds does not turn into minutes of waiting; what is tested is the
	// server's side of the recovery, not client-go's patience.
	informerCfg := rest.CopyConfig(cfg)
	informerCfg.Timeout = 0
	lw := cache.NewListWatchFromClient(kubernetes.NewForConfigOrDie(informerCfg).CoreV1().RESTClient(), "configmaps", crashNamespace, fields.Everything())
	ch.store = &observingStore{Store: cache.NewStore(cache.MetaNamespaceKeyFunc)}
	reflector := cache.NewReflectorWithOptions(lw, &corev1.ConfigMap{}, ch.store, cache.ReflectorOptions{
		Name:    "crash-test",
		Backoff: &wait.Backoff{Duration: 100 * time.Millisecond, Factor: 2, Jitter: 0.1, Steps: 10, Cap: time.Second},
	})
	go reflector.RunWithContext(ctx)

	// The raw watcher resumes from the last resourceVersion it saw; on 410
	// it relists. Its view must converge too, and its events must come in
	// resourceVersion order.
	ch.rw = &rawWatcher{client: ch.client, seen: &observed{}}
	go ch.rw.run(ctx, &ch.c)

	for w := range writers {
		ch.wg.Add(1)
		go func() {
			defer ch.wg.Done()
			writeAtRandom(ctx, ch.client, ch.m, &ch.gate, w)
		}()
	}
	return ch
}

// check compares the restarted server with the model and the watchers with
// the server, with the writers paused.
func (ch *churn) check(t testing.TB, cycle int, p *proc) {
	ch.gate.Lock()
	defer ch.gate.Unlock()
	if !checkAfterRestart(t, ch.ctx, ch.client, ch.m, ch.store, ch.rw, &ch.c, cycle, ch.afterList) {
		explainDivergence(t, ch.ctx, ch.client, p, ch.store, cycle)
	}
}

// explainDivergence says, for each object the informer holds that the
// server's list does not, whether etcd itself holds it: a store that went
// back loses it in etcd too, a watch cache that missed it does not
// (issue 38).
func explainDivergence(t testing.TB, ctx context.Context, client kubernetes.Interface, p *proc, informer cache.Store, cycle int) {
	list, err := client.CoreV1().ConfigMaps(crashNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Logf("cycle %d: listing again: %v", cycle, err)
		return
	}
	listed := map[string]bool{}
	for _, cm := range list.Items {
		listed[cm.Name] = true
	}
	c := p.etcdClient()
	for _, o := range informer.List() {
		cm := o.(*corev1.ConfigMap)
		if listed[cm.Name] {
			continue
		}
		key := "/registry/configmaps/" + cm.Namespace + "/" + cm.Name
		resp, err := c.Get(ctx, key)
		switch {
		case err != nil:
			t.Logf("cycle %d: reading %s from etcd: %v", cycle, key, err)
		case len(resp.Kvs) == 0:
			t.Logf("cycle %d: %s (resourceVersion %s in the informer) is not in etcd at revision %d", cycle, key, cm.ResourceVersion, resp.Header.Revision)
		default:
			t.Logf("cycle %d: %s is in etcd at mod revision %d (the informer has %s); etcd's revision %d; compacted: %s", cycle, key, resp.Kvs[0].ModRevision, cm.ResourceVersion, resp.Header.Revision, compactedRevision(ctx, c))
		}
	}
	// What the server said of its storage since its start.
	var lines []string
	for _, l := range strings.Split(p.logs(), "\n") {
		if strings.Contains(l, "ompact") || strings.Contains(l, "cacher") || strings.Contains(l, "watch cache") || strings.Contains(l, "kvstore") {
			lines = append(lines, l)
		}
	}
	t.Logf("cycle %d: the server's log on compaction and its caches:\n%s", cycle, strings.Join(lines[max(0, len(lines)-60):], "\n"))
}

// compactedRevision is the revision etcd is compacted at: a read of
// revision 1 fails naming it.
func compactedRevision(ctx context.Context, c *clientv3.Client) string {
	_, err := c.Get(ctx, "/", clientv3.WithRev(1))
	if err == nil {
		return "(none)"
	}
	return err.Error()
}

// finish stops the clients, prints the summary line and fails the test on
// any loss, phantom, divergence or regression.
func (ch *churn) finish(t testing.TB, name string) {
	ch.cancel()
	ch.wg.Wait()
	c := &ch.c
	c.acked, c.lost, c.phantom = ch.m.acked, ch.m.lost, ch.m.phantom
	summary := fmt.Sprintf("%s: cycles=%d acknowledged-writes=%d lost=%d phantom=%d observed-gone=%d informer-divergences=%d watch-divergences=%d rv-regressions=%d watch-relists=%d",
		name, c.cycles, c.acked, c.lost, c.phantom, c.observedGone, c.informerDivergences, c.watchDivergences, c.rvRegressions, c.relists)
	fmt.Println(summary)
	t.Log(summary)
	if c.acked < c.cycles {
		t.Errorf("only %d writes were acknowledged in %d cycles: the test did not exercise the store", c.acked, c.cycles)
	}
	if c.cycles > 0 && c.observedChecked == 0 {
		t.Errorf("the watchers observed no object of the server's own in %d cycles: history was not checked", c.cycles)
	}
	if c.lost+c.phantom+c.observedGone+c.informerDivergences+c.watchDivergences+c.rvRegressions > 0 {
		t.Fail()
	}
}

// reportOnly turns a test's failures into lines of a report, counted: a
// test that measures what happens where nothing is promised (a device that
// lies about its flushes) reports what a test that judges would fail on.
type reportOnly struct {
	testing.TB
	failures int
}

func (r *reportOnly) Errorf(format string, args ...any) {
	r.failures++
	r.TB.Logf("REPORT (a judging test fails here): "+format, args...)
}

func (r *reportOnly) Error(args ...any) {
	r.failures++
	r.TB.Log(append([]any{"REPORT (a judging test fails here):"}, args...)...)
}

func (r *reportOnly) Fail() { r.failures++ }

// writeAtRandom creates, updates and deletes its own names at random until ctx
// ends, recording each acknowledged write and each unanswered one.
func writeAtRandom(ctx context.Context, client kubernetes.Interface, m *model, gate *sync.RWMutex, w int) {
	rng := rand.New(rand.NewPCG(uint64(w), uint64(time.Now().UnixNano())))
	cms := client.CoreV1().ConfigMaps(crashNamespace)
	for seq := 0; ctx.Err() == nil; seq++ {
		name := fmt.Sprintf("w%d-%d", w, rng.IntN(namesPerWriter))
		value := fmt.Sprintf("%d-%d", w, seq)
		gate.RLock()
		cur := m.get(name)
		var err error
		// rv and result are what the write leaves when acknowledged;
		// attempted is what it may have left when its answer was lost.
		var rv, result, attempted string
		switch {
		case cur.unknown:
			// Settle it first: whatever is stored now is the truth.
			var got *corev1.ConfigMap
			got, err = cms.Get(ctx, name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				m.mu.Lock()
				m.names[name] = outcome{}
				m.mu.Unlock()
				err = nil
			} else if err == nil {
				m.mu.Lock()
				m.names[name] = outcome{value: got.Data["v"]}
				m.mu.Unlock()
			}
			gate.RUnlock()
			if err != nil {
				time.Sleep(50 * time.Millisecond)
			}
			continue
		case cur.value == "":
			attempted = value
			var got *corev1.ConfigMap
			got, err = cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"v": value}}, metav1.CreateOptions{})
			if err == nil {
				rv, result = got.ResourceVersion, value
			}
		case rng.IntN(4) == 0:
			attempted = ""
			err = cms.Delete(ctx, name, metav1.DeleteOptions{})
		default:
			attempted = value
			var got *corev1.ConfigMap
			got, err = cms.Update(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"v": value}}, metav1.UpdateOptions{})
			if err == nil {
				rv, result = got.ResourceVersion, value
			}
		}
		switch {
		case err == nil:
			m.ack(name, result, rv)
		case apierrors.IsAlreadyExists(err) || apierrors.IsNotFound(err) || apierrors.IsConflict(err):
			// A definite refusal of a write that the acknowledged state
			// allows: that state is gone.
			m.mu.Lock()
			if apierrors.IsAlreadyExists(err) {
				m.phantom++
			} else {
				m.lost++
			}
			m.names[name] = outcome{unknown: true, maybe: "*"}
			m.mu.Unlock()
			fmt.Printf("%s: %v, but the acknowledged state is %q\n", name, err, cur.value)
		default:
			m.unanswered(name, attempted)
		}
		gate.RUnlock()
		if err != nil {
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// checkAfterRestart compares the store with the model, and the informer's
// and raw watcher's views with the store. The writers are paused, but the
// server's own controllers are not (the root-CA publisher creates
// kube-root-ca.crt in the first second of a fresh store): the watchers are
// compared with what the server holds when they are compared, listed again
// whenever they differ (issue 38), while the model is compared with the
// first list, which no controller's write can change for the test's names.
func checkAfterRestart(t testing.TB, ctx context.Context, client kubernetes.Interface, m *model, informer *observingStore, rw *rawWatcher, c *counts, cycle int, afterList func()) bool {
	var list *corev1.ConfigMapList
	var err error
	for range 100 {
		if list, err = client.CoreV1().ConfigMaps(crashNamespace).List(ctx, metav1.ListOptions{}); err == nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("cycle %d: listing after restart: %v", cycle, err)
	}
	if afterList != nil {
		afterList()
	}
	stored := map[string]string{}
	for _, cm := range list.Items {
		stored[cm.Name] = cm.Data["v"]
	}
	listRV, _ := strconv.ParseUint(list.ResourceVersion, 10, 64)
	m.mu.Lock()
	if listRV < m.maxRV {
		c.rvRegressions++
		t.Errorf("cycle %d: list resourceVersion %d is below the acknowledged %d", cycle, listRV, m.maxRV)
	}
	m.mu.Unlock()
	m.compare(t, stored, cycle)

	current := resourceVersions(list)
	// holds waits until ok holds of what the server holds, listing again
	// each time it does not.
	holds := func(ok func(server map[string]string) bool) bool {
		return eventually(convergeTimeout, func() bool {
			if ok(current) {
				return true
			}
			if l, err := client.CoreV1().ConfigMaps(crashNamespace).List(ctx, metav1.ListOptions{}); err == nil {
				current = resourceVersions(l)
			}
			return ok(current)
		})
	}
	converged := func(view func() map[string]string) func(map[string]string) bool {
		return func(server map[string]string) bool { return mapDiff(server, view(), 1) == "" }
	}
	informerView := func() map[string]string {
		v := map[string]string{}
		for _, o := range informer.List() {
			cm := o.(*corev1.ConfigMap)
			v[cm.Name] = cm.ResourceVersion
		}
		return v
	}
	start := time.Now()
	ok := true
	if !holds(converged(informerView)) {
		c.informerDivergences++
		ok = false
		t.Errorf("cycle %d: the informer did not converge to the stored objects: %s", cycle, viewDiff(current, informerView()))
	}
	if !holds(converged(rw.view)) {
		c.watchDivergences++
		ok = false
		t.Errorf("cycle %d: the resumed watch did not converge to the stored objects: %s", cycle, viewDiff(current, rw.view()))
	}
	for _, w := range []struct {
		name string
		seen *observed
	}{{"the informer", informer.seen()}, {"the resumed watch", rw.seen}} {
		if !holds(func(server map[string]string) bool { return len(w.seen.gone(server)) == 0 }) {
			gone := w.seen.gone(current)
			c.observedGone += int64(len(gone))
			ok = false
			t.Errorf("cycle %d: %s was told of objects the server no longer holds, with no DELETED event: %s", cycle, w.name, strings.Join(gone, ", "))
		}
		c.observedChecked += int64(w.seen.len())
	}
	t.Logf("cycle %d: %d objects, watchers converged in %s", cycle, len(current), time.Since(start).Round(time.Millisecond))
	return ok
}

// resourceVersions is a list's name -> resourceVersion.
func resourceVersions(list *corev1.ConfigMapList) map[string]string {
	out := make(map[string]string, len(list.Items))
	for _, cm := range list.Items {
		out[cm.Name] = cm.ResourceVersion
	}
	return out
}

// writerName matches the names the test's writers own (writeAtRandom).
var writerName = regexp.MustCompile(`^w[0-9]+-[0-9]+$`)

// observed is what a watcher was told of the objects no writer of the test
// touches (kube-root-ca.crt, written by the server itself): name -> the
// newest resourceVersion seen. A DELETED event forgets the name; a relist
// that lacks it does not, since that is the loss the check looks for.
type observed struct {
	mu sync.Mutex
	rv map[string]uint64
}

func (o *observed) saw(name, resourceVersion string, deleted bool) {
	if writerName.MatchString(name) {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.rv == nil {
		o.rv = map[string]uint64{}
	}
	if deleted {
		delete(o.rv, name)
		return
	}
	if n, err := strconv.ParseUint(resourceVersion, 10, 64); err == nil && n > o.rv[name] {
		o.rv[name] = n
	}
}

func (o *observed) len() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.rv)
}

// gone lists the observed objects that server (name -> resourceVersion)
// lacks or holds at an older resourceVersion than was seen.
func (o *observed) gone(server map[string]string) []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []string
	for name, seen := range o.rv {
		held, present := server[name]
		n, _ := strconv.ParseUint(held, 10, 64)
		if !present || n < seen {
			out = append(out, fmt.Sprintf("%s (seen at %d, held %q)", name, seen, held))
		}
	}
	return out
}

// observingStore is the informer's store, recording what the informer was
// told as it is told (observed).
type observingStore struct {
	cache.Store
	o observed
}

func (s *observingStore) seen() *observed { return &s.o }

func (s *observingStore) record(obj any, deleted bool) {
	if cm, ok := obj.(*corev1.ConfigMap); ok {
		s.o.saw(cm.Name, cm.ResourceVersion, deleted)
	} else if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		if cm, ok := d.Obj.(*corev1.ConfigMap); ok {
			s.o.saw(cm.Name, cm.ResourceVersion, deleted)
		}
	}
}

func (s *observingStore) Add(obj any) error {
	s.record(obj, false)
	return s.Store.Add(obj)
}

func (s *observingStore) Update(obj any) error {
	s.record(obj, false)
	return s.Store.Update(obj)
}

func (s *observingStore) Delete(obj any) error {
	s.record(obj, true)
	return s.Store.Delete(obj)
}

func (s *observingStore) Replace(list []any, resourceVersion string) error {
	for _, obj := range list {
		s.record(obj, false)
	}
	return s.Store.Replace(list, resourceVersion)
}

// convergeTimeout bounds the wait for a watcher to catch up.
const convergeTimeout = 30 * time.Second

// viewDiff describes how view differs from want (name -> resourceVersion).
func viewDiff(want, view map[string]string) string { return mapDiff(want, view, 5) }

// rawWatcher keeps a name -> resourceVersion view from a plain watch that
// it resumes from the last resourceVersion it saw after every failure; a
// 410 Gone makes it relist, as the API conventions prescribe.
type rawWatcher struct {
	client kubernetes.Interface
	seen   *observed
	mu     sync.Mutex
	state  map[string]string
}

func (r *rawWatcher) view() map[string]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]string, len(r.state))
	for k, v := range r.state {
		out[k] = v
	}
	return out
}

func (r *rawWatcher) run(ctx context.Context, c *counts) {
	cms := r.client.CoreV1().ConfigMaps(crashNamespace)
	rv := ""
	for ctx.Err() == nil {
		if rv == "" {
			list, err := cms.List(ctx, metav1.ListOptions{})
			if err != nil {
				time.Sleep(50 * time.Millisecond)
				continue
			}
			state := resourceVersions(list)
			for _, cm := range list.Items {
				r.seen.saw(cm.Name, cm.ResourceVersion, false)
			}
			r.mu.Lock()
			r.state = state
			r.mu.Unlock()
			rv = list.ResourceVersion
		}
		w, err := cms.Watch(ctx, metav1.ListOptions{ResourceVersion: rv})
		if err != nil {
			if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
				atomic.AddInt64(&c.relists, 1)
				rv = ""
			}
			time.Sleep(50 * time.Millisecond)
			continue
		}
		rv = r.consume(w, rv, c)
	}
}

// consume applies events until the watch ends and returns the
// resourceVersion to resume from ("" to relist).
func (r *rawWatcher) consume(w watch.Interface, rv string, c *counts) string {
	defer w.Stop()
	last, _ := strconv.ParseUint(rv, 10, 64)
	for ev := range w.ResultChan() {
		switch ev.Type {
		case watch.Error:
			if err := apierrors.FromObject(ev.Object); apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
				atomic.AddInt64(&c.relists, 1)
				return ""
			}
			return rv
		case watch.Bookmark:
			continue
		}
		cm, ok := ev.Object.(*corev1.ConfigMap)
		if !ok {
			continue
		}
		n, _ := strconv.ParseUint(cm.ResourceVersion, 10, 64)
		if n <= last {
			atomic.AddInt64(&c.watchDivergences, 1)
			fmt.Printf("watch event out of order: %s %s at %d after %d\n", ev.Type, cm.Name, n, last)
		}
		last = n
		rv = cm.ResourceVersion
		r.seen.saw(cm.Name, cm.ResourceVersion, ev.Type == watch.Deleted)
		r.mu.Lock()
		if ev.Type == watch.Deleted {
			delete(r.state, cm.Name)
		} else {
			r.state[cm.Name] = cm.ResourceVersion
		}
		r.mu.Unlock()
	}
	return rv
}
