package server_test

import (
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
)

// listWatchSubject is one resource the list/watch semantics are checked on,
// through the dynamic client so cached and uncached kinds share the checks.
type listWatchSubject struct {
	ts       *testServer
	gvr      schema.GroupVersionResource
	kind     string
	ns       string
	cached   bool
	resource string
}

func newSubject(t *testing.T, ts *testServer, resource, kind string, cached bool) *listWatchSubject {
	t.Helper()
	ns := fmt.Sprintf("lw-%s", resource)
	if _, err := ts.client.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return &listWatchSubject{ts: ts, gvr: corev1.SchemeGroupVersion.WithResource(resource), kind: kind, ns: ns, cached: cached, resource: resource}
}

func (s *listWatchSubject) client() dynamic.ResourceInterface {
	return s.ts.dynamic.Resource(s.gvr).Namespace(s.ns)
}

func (s *listWatchSubject) create(t *testing.T, name string) *unstructured.Unstructured {
	t.Helper()
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": s.gvr.GroupVersion().String(), "kind": s.kind,
		"metadata": map[string]any{"name": name, "labels": map[string]any{"gen": "0"}},
	}}
	out, err := s.client().Create(t.Context(), obj, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create %s: %v", name, err)
	}
	return out
}

func (s *listWatchSubject) relabel(t *testing.T, name, gen string) *unstructured.Unstructured {
	t.Helper()
	patch := fmt.Sprintf(`{"metadata":{"labels":{"gen":%q}}}`, gen)
	out, err := s.client().Patch(t.Context(), name, "application/merge-patch+json", []byte(patch), metav1.PatchOptions{})
	if err != nil {
		t.Fatalf("patch %s: %v", name, err)
	}
	return out
}

func (s *listWatchSubject) delete(t *testing.T, name string) {
	t.Helper()
	if err := s.client().Delete(t.Context(), name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete %s: %v", name, err)
	}
}

func (s *listWatchSubject) list(t *testing.T, opts metav1.ListOptions) *unstructured.UnstructuredList {
	t.Helper()
	l, err := s.client().List(t.Context(), opts)
	if err != nil {
		t.Fatalf("list %+v: %v", opts, err)
	}
	return l
}

func names(l *unstructured.UnstructuredList) []string {
	var out []string
	for _, i := range l.Items {
		out = append(out, i.GetName())
	}
	slices.Sort(out)
	return out
}

func rv(t *testing.T, s string) uint64 {
	t.Helper()
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		t.Fatalf("resourceVersion %q: %v", s, err)
	}
	return n
}

// servedBy checks where a read was served: by the watch cache (no etcd
// range) when the resource is cached, by etcd otherwise.
func (s *listWatchSubject) servedBy(t *testing.T, what string, read func()) {
	t.Helper()
	ts := s.ts
	etcd, cache := ts.etcdLists(s.resource), ts.cacheLists(s.resource)
	read()
	dEtcd, dCache := ts.etcdLists(s.resource)-etcd, ts.cacheLists(s.resource)-cache
	switch {
	case s.cached && (dEtcd != 0 || dCache < 1):
		t.Errorf("%s: want it served by the watch cache, got %v etcd lists and %v cache lists", what, dEtcd, dCache)
	case !s.cached && (dEtcd < 1 || dCache != 0):
		t.Errorf("%s: want it served by etcd, got %v etcd lists and %v cache lists", what, dEtcd, dCache)
	}
}

// checkListWatchSemantics runs every row of DESIGN.md's request-paths table
// that concerns reads of one resource, asserting behaviour and, through
// the upstream metrics, which layer served it.
func checkListWatchSemantics(t *testing.T, s *listWatchSubject) {
	ts := s.ts
	for i := range 5 {
		s.create(t, fmt.Sprintf("seed-%d", i))
	}

	t.Run("list rv empty is a consistent read", func(t *testing.T) {
		fresh := s.create(t, "fresh")
		consistent := ts.consistentReads(s.resource, "false")
		var l *unstructured.UnstructuredList
		s.servedBy(t, `list resourceVersion=""`, func() { l = s.list(t, metav1.ListOptions{}) })
		if !slices.Contains(names(l), "fresh") {
			t.Errorf("list right after a create misses it: %v", names(l))
		}
		if rv(t, l.GetResourceVersion()) < rv(t, fresh.GetResourceVersion()) {
			t.Errorf("list resourceVersion %s older than the write %s", l.GetResourceVersion(), fresh.GetResourceVersion())
		}
		got := ts.consistentReads(s.resource, "false") - consistent
		if s.cached && got != 1 {
			t.Errorf("apiserver_watch_cache_consistent_read_total{fallback=false} rose by %v, want 1", got)
		}
		if !s.cached && got != 0 {
			t.Errorf("uncached resource went through the cache: consistent reads rose by %v", got)
		}
	})

	t.Run("list rv 0 ignores limit when cached", func(t *testing.T) {
		var l *unstructured.UnstructuredList
		s.servedBy(t, `list resourceVersion="0"`, func() { l = s.list(t, metav1.ListOptions{ResourceVersion: "0", Limit: 2}) })
		if s.cached {
			if len(l.Items) < 6 || l.GetContinue() != "" {
				t.Errorf("cached list with resourceVersion=0 must ignore limit: got %d items, continue %q", len(l.Items), l.GetContinue())
			}
		} else if len(l.Items) != 2 || l.GetContinue() == "" {
			t.Errorf("etcd list with limit 2: got %d items, continue %q", len(l.Items), l.GetContinue())
		}
	})

	t.Run("list rv N NotOlderThan", func(t *testing.T) {
		latest := s.relabel(t, "seed-0", "1")
		want := latest.GetResourceVersion()
		var l *unstructured.UnstructuredList
		s.servedBy(t, "list resourceVersion=N NotOlderThan", func() {
			l = s.list(t, metav1.ListOptions{ResourceVersion: want, ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan})
		})
		if rv(t, l.GetResourceVersion()) < rv(t, want) {
			t.Errorf("NotOlderThan %s returned older resourceVersion %s", want, l.GetResourceVersion())
		}
		for _, i := range l.Items {
			if i.GetName() == "seed-0" && i.GetLabels()["gen"] != "1" {
				t.Errorf("NotOlderThan returned stale seed-0: %v", i.GetLabels())
			}
		}
	})

	t.Run("list rv N Exact returns that snapshot", func(t *testing.T) {
		before := s.list(t, metav1.ListOptions{})
		snap := before.GetResourceVersion()
		s.create(t, "after-snapshot")
		s.relabel(t, "seed-1", "exact")
		var l *unstructured.UnstructuredList
		s.servedBy(t, "list resourceVersion=N Exact", func() {
			l = s.list(t, metav1.ListOptions{ResourceVersion: snap, ResourceVersionMatch: metav1.ResourceVersionMatchExact})
		})
		if l.GetResourceVersion() != snap {
			t.Errorf("Exact list at %s answered at %s", snap, l.GetResourceVersion())
		}
		if !slices.Equal(names(l), names(before)) {
			t.Errorf("Exact list at %s: got %v, want %v", snap, names(l), names(before))
		}
		for _, i := range l.Items {
			if i.GetName() == "seed-1" && i.GetLabels()["gen"] == "exact" {
				t.Errorf("Exact list shows a write made after its resourceVersion")
			}
		}
	})

	t.Run("reads from a future rv time out", func(t *testing.T) {
		cur := s.list(t, metav1.ListOptions{}).GetResourceVersion()
		future := strconv.FormatUint(rv(t, cur)+1000, 10)
		path := "/apis/" + s.gvr.GroupVersion().String()
		if s.gvr.Group == "" {
			path = "/api/" + s.gvr.Version
		}
		path += "/namespaces/" + s.ns + "/" + s.gvr.Resource
		for what, req := range map[string]*rest.Request{
			"list": ts.client.CoreV1().RESTClient().Get().AbsPath(path).
				Param("resourceVersion", future).Param("resourceVersionMatch", "NotOlderThan"),
			"get": ts.client.CoreV1().RESTClient().Get().AbsPath(path, "seed-0").Param("resourceVersion", future),
		} {
			start := time.Now()
			err := req.MaxRetries(0).Do(t.Context()).Error()
			if s.cached {
				// The cache waits ~3s for the revision, then answers 504.
				if !apierrors.IsTimeout(err) || !hasCause(err, metav1.CauseTypeResourceVersionTooLarge) {
					t.Errorf("%s at future resourceVersion: got %v, want 504 Timeout with cause ResourceVersionTooLarge", what, err)
				}
				if waited := time.Since(start); waited < 2*time.Second {
					t.Errorf("%s at future resourceVersion answered after %s, want the cache to wait for it", what, waited)
				}
			} else if err == nil && what == "list" {
				t.Errorf("list at future resourceVersion from etcd succeeded")
			}
		}
	})

	t.Run("get paths", func(t *testing.T) {
		obj := s.relabel(t, "seed-2", "get")
		gets := ts.etcdGets(s.resource)
		if _, err := s.client().Get(t.Context(), "seed-2", metav1.GetOptions{}); err != nil {
			t.Fatal(err)
		}
		if d := ts.etcdGets(s.resource) - gets; d != 1 {
			t.Errorf(`get resourceVersion="" must be a quorum read from etcd: %v etcd gets`, d)
		}
		for _, v := range []string{"0", obj.GetResourceVersion()} {
			gets := ts.etcdGets(s.resource)
			got, err := s.client().Get(t.Context(), "seed-2", metav1.GetOptions{ResourceVersion: v})
			if err != nil {
				t.Fatalf("get at %q: %v", v, err)
			}
			d := ts.etcdGets(s.resource) - gets
			if s.cached && d != 0 {
				t.Errorf("get resourceVersion=%q must come from the cache: %v etcd gets", v, d)
			}
			if v != "0" && got.GetLabels()["gen"] != "get" {
				t.Errorf("get resourceVersion=%s returned a stale object", v)
			}
		}
	})

	t.Run("limit and continue paginate one snapshot across writes", func(t *testing.T) {
		for i := range 23 {
			s.create(t, fmt.Sprintf("page-%02d", i))
		}
		etcd := ts.etcdLists(s.resource)
		first := s.list(t, metav1.ListOptions{Limit: 10})
		snapshot := first.GetResourceVersion()
		want := names(s.list(t, metav1.ListOptions{ResourceVersion: snapshot, ResourceVersionMatch: metav1.ResourceVersionMatchExact}))
		total := len(want)
		if len(first.Items) != 10 || first.GetContinue() == "" {
			t.Fatalf("first page: %d items, continue %q", len(first.Items), first.GetContinue())
		}
		if rc := first.GetRemainingItemCount(); rc == nil || *rc != int64(total-10) {
			t.Errorf("remainingItemCount %v, want %d", rc, total-10)
		}
		// Writes between pages must not show in later pages.
		s.create(t, "page-new")
		s.delete(t, "page-22")
		s.relabel(t, "page-21", "between")

		got := names(first)
		cont := first.GetContinue()
		pages := 1
		for cont != "" {
			p := s.list(t, metav1.ListOptions{Limit: 10, Continue: cont})
			if p.GetResourceVersion() != snapshot {
				t.Errorf("page %d at resourceVersion %s, want the first page's %s", pages+1, p.GetResourceVersion(), snapshot)
			}
			for _, i := range p.Items {
				if i.GetName() == "page-21" && i.GetLabels()["gen"] == "between" {
					t.Errorf("a later page shows a write made after the first page")
				}
			}
			got = append(got, names(p)...)
			cont = p.GetContinue()
			pages++
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("pages: got %d names, want the %d of the snapshot\ngot  %v\nwant %v", len(got), len(want), got, want)
		}
		if wantPages := (total + 9) / 10; pages != wantPages {
			t.Errorf("%d pages, want %d", pages, wantPages)
		}
		d := ts.etcdLists(s.resource) - etcd
		if s.cached && d != 0 {
			t.Errorf("paginated list from the cache made %v etcd range requests", d)
		}
	})

	t.Run("watch from rv replays exactly the later events in order", func(t *testing.T) {
		start := s.list(t, metav1.ListOptions{}).GetResourceVersion()
		s.create(t, "w1")
		s.relabel(t, "w1", "1")
		s.create(t, "w2")
		s.delete(t, "w1")
		w, err := s.client().Watch(t.Context(), metav1.ListOptions{ResourceVersion: start})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		want := []string{"ADDED w1", "MODIFIED w1", "ADDED w2", "DELETED w1"}
		got := collect(t, w, len(want), 10*time.Second)
		if !slices.Equal(got, want) {
			t.Fatalf("replayed events %v, want %v", got, want)
		}
		assertQuiet(t, w, 500*time.Millisecond)
	})

	t.Run("bookmarks advance a filtered watch", func(t *testing.T) {
		// A watch that selects nothing learns from bookmarks how far the
		// resource has moved: the cacher sends one just before the watch
		// times out. Watches served straight from etcd get no periodic
		// bookmarks, as upstream (storage.ListOptions.ProgressNotify is for
		// the watch cache only; KEP-956 makes bookmarks best effort): they
		// end quietly at their timeout.
		cur := s.list(t, metav1.ListOptions{}).GetResourceVersion()
		w, err := s.client().Watch(t.Context(), metav1.ListOptions{ResourceVersion: cur, AllowWatchBookmarks: true,
			TimeoutSeconds: ptr.To[int64](5), LabelSelector: "selects=nothing"})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		later := s.create(t, "unseen").GetResourceVersion()
		deadline := time.After(10 * time.Second)
		for {
			select {
			case ev, ok := <-w.ResultChan():
				if !ok {
					if s.cached {
						t.Fatal("watch ended without a bookmark")
					}
					return
				}
				if ev.Type != watch.Bookmark {
					t.Fatalf("filtered watch got %s", ev.Type)
				}
				u := ev.Object.(*unstructured.Unstructured)
				if u.GetKind() != s.kind || rv(t, u.GetResourceVersion()) < rv(t, later) {
					t.Errorf("bookmark %s at %s, want a %s at >= %s", u.GetKind(), u.GetResourceVersion(), s.kind, later)
				}
				if s.cached {
					return
				}
			case <-deadline:
				t.Fatal("a watch with a 5s timeout neither sent a bookmark nor ended within 10s")
			}
		}
	})

	t.Run("WatchList streams the state then the initial-events-end bookmark", func(t *testing.T) {
		want := names(s.list(t, metav1.ListOptions{}))
		w, err := s.client().Watch(t.Context(), metav1.ListOptions{
			SendInitialEvents:    ptr.To(true),
			ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan,
			AllowWatchBookmarks:  true,
		})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		var got []string
		deadline := time.After(10 * time.Second)
	initial:
		for {
			select {
			case ev := <-w.ResultChan():
				u, _ := ev.Object.(*unstructured.Unstructured)
				switch ev.Type {
				case watch.Added:
					got = append(got, u.GetName())
				case watch.Bookmark:
					if u.GetAnnotations()[metav1.InitialEventsAnnotationKey] == "true" {
						break initial
					}
				default:
					t.Fatalf("unexpected %s event during the initial state", ev.Type)
				}
			case <-deadline:
				t.Fatalf("no initial-events-end bookmark within 10s; got %d objects", len(got))
			}
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("initial events %v, want %v", got, want)
		}
		s.create(t, "after-watchlist")
		if ev := collect(t, w, 1, 10*time.Second); !slices.Equal(ev, []string{"ADDED after-watchlist"}) {
			t.Errorf("live event after the initial state: %v", ev)
		}
	})
}

func hasCause(err error, cause metav1.CauseType) bool {
	se, ok := err.(apierrors.APIStatus)
	if !ok || se.Status().Details == nil {
		return false
	}
	for _, c := range se.Status().Details.Causes {
		if c.Type == cause {
			return true
		}
	}
	return false
}

// collect reads n non-bookmark events as "TYPE name".
func collect(t *testing.T, w watch.Interface, n int, timeout time.Duration) []string {
	t.Helper()
	var got []string
	deadline := time.After(timeout)
	for len(got) < n {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatalf("watch closed after %v", got)
			}
			if ev.Type == watch.Bookmark {
				continue
			}
			if ev.Type == watch.Error {
				t.Fatalf("watch error after %v: %v", got, apierrors.FromObject(ev.Object))
			}
			m, err := metaName(ev.Object)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, string(ev.Type)+" "+m)
		case <-deadline:
			t.Fatalf("only %d of %d events within %s: %v", len(got), n, timeout, got)
		}
	}
	return got
}

func assertQuiet(t *testing.T, w watch.Interface, d time.Duration) {
	t.Helper()
	timer := time.After(d)
	for {
		select {
		case ev := <-w.ResultChan():
			if ev.Type != watch.Bookmark {
				n, _ := metaName(ev.Object)
				t.Errorf("unexpected extra event %s %s", ev.Type, n)
			}
		case <-timer:
			return
		}
	}
}

func TestListWatchSemanticsCached(t *testing.T) {
	ts := startServer(t, testConfig(t))
	checkListWatchSemantics(t, newSubject(t, ts, "configmaps", "ConfigMap", true))
}

// A resource with watch cache size 0 is read straight from etcd and behaves
// the same (--watch-cache-sizes=secrets#0).
func TestListWatchSemanticsUncached(t *testing.T) {
	cfg := testConfig(t)
	cfg.Cache.Sizes = []string{"secrets#0"}
	ts := startServer(t, cfg)
	// Metrics are per process: other tests' servers count too.
	reads := func() float64 { return ts.consistentReads("secrets", "false") + ts.consistentReads("secrets", "true") }
	if n := delta(reads, func() { checkListWatchSemantics(t, newSubject(t, ts, "secrets", "Secret", false)) }); n != 0 {
		t.Errorf("secrets#0 went through a watch cache: %v consistent reads", n)
	}
}

func TestWatchExpiredAfterCompaction(t *testing.T) {
	cfg := testConfig(t)
	cfg.Cache.Sizes = []string{"secrets#0"}
	ts := startServer(t, cfg)
	ctx := t.Context()
	cached := newSubject(t, ts, "configmaps", "ConfigMap", true)
	uncached := newSubject(t, ts, "secrets", "Secret", false)
	old := map[*listWatchSubject]string{}
	for _, s := range []*listWatchSubject{cached, uncached} {
		old[s] = s.create(t, "old").GetResourceVersion()
		for i := range 5 {
			s.relabel(t, "old", strconv.Itoa(i))
		}
	}
	resp, err := ts.backend.Client().Get(ctx, "compact-marker")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ts.backend.Client().Compact(ctx, resp.Header.Revision); err != nil {
		t.Fatal(err)
	}

	// etcd refuses the compacted revision at once for an uncached resource.
	expectExpired(t, uncached, old[uncached])
	// The watch cache keeps its own history: after a restart its history
	// starts after the compaction, and the old revision is gone there too.
	ts.stop()
	ts = startServer(t, cfg)
	cached.ts, uncached.ts = ts, ts
	expectExpired(t, cached, old[cached])
	expectExpired(t, uncached, old[uncached])

	// A client that relists gets the current state and can watch on.
	l := cached.list(t, metav1.ListOptions{})
	w, err := cached.client().Watch(ctx, metav1.ListOptions{ResourceVersion: l.GetResourceVersion()})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	cached.relabel(t, "old", "after")
	if got := collect(t, w, 1, 10*time.Second); !slices.Equal(got, []string{"MODIFIED old"}) {
		t.Errorf("watch after relist: %v", got)
	}
}

// expectExpired asserts that a watch from rv fails with 410 Gone (Expired),
// either as the response or as the first event.
func expectExpired(t *testing.T, s *listWatchSubject, rv string) {
	t.Helper()
	w, err := s.client().Watch(t.Context(), metav1.ListOptions{ResourceVersion: rv})
	if err != nil {
		if !apierrors.IsResourceExpired(err) && !apierrors.IsGone(err) {
			t.Errorf("%s watch from compacted %s: got %v, want 410 Expired", s.resource, rv, err)
		}
		return
	}
	defer w.Stop()
	select {
	case ev := <-w.ResultChan():
		status := apierrors.FromObject(ev.Object)
		if ev.Type != watch.Error || (!apierrors.IsResourceExpired(status) && !apierrors.IsGone(status)) {
			t.Errorf("%s watch from compacted %s: first event %s %v, want ERROR 410 Expired", s.resource, rv, ev.Type, status)
		}
		if code := apierrors.ReasonForError(status); code != metav1.StatusReasonExpired && code != metav1.StatusReasonGone {
			t.Errorf("reason %q, want Expired", code)
		}
	case <-time.After(10 * time.Second):
		t.Errorf("%s watch from compacted %s: no event within 10s", s.resource, rv)
	}
}

func metaName(obj any) (string, error) {
	type named interface{ GetName() string }
	n, ok := obj.(named)
	if !ok {
		return "", fmt.Errorf("event object %T has no name", obj)
	}
	return n.GetName(), nil
}
