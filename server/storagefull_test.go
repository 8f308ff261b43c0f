package server_test

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	etcdclient "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
)

// storageFullQuota is the etcd quota of the storage-full tests: small, so
// that a few dozen large ConfigMaps fill it.
const storageFullQuota = 16 << 20

// noSpaceMessage is what etcd's "mvcc: database space exceeded" becomes in
// the Status the apiserver returns. Upstream has no special case for it:
// the etcd3 store returns etcd's error, the registry's Interpret*Error
// functions pass unknown errors through, and responsewriters.ErrorToAPIStatus
// turns them into a 500 with reason "" and the error text as message (what
// kube-apiserver answers too).
const noSpaceMessage = "etcdserver: mvcc: database space exceeded"

// fillStorage creates ConfigMaps of 256 KiB in ns, and of half the size
// (down to 1 KiB) after each one refused alone for the room left (413),
// until a create fails; it returns the names created and the failure, and checks that
// the failure came fast.
func fillStorage(t *testing.T, client kubernetes.Interface, ns string) ([]string, error) {
	t.Helper()
	value := strings.Repeat("x", 256<<10)
	var names []string
	// The quota guard refuses before the database passes the quota: no
	// more than the quota's worth of values is acknowledged. A create it
	// refuses alone (413) while smaller ones fit halves the next ones'
	// size, down to 1 KiB, so a few dozen creates fill the database.
	for i := range 5000 {
		name := fmt.Sprintf("fill-%04d", i)
		start := time.Now()
		_, err := client.CoreV1().ConfigMaps(ns).Create(t.Context(), &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Data:       map[string]string{"value": value},
		}, metav1.CreateOptions{})
		took := time.Since(start)
		switch {
		case err != nil && apierrors.IsRequestEntityTooLargeError(err) && len(value) > 1<<10:
			if !strings.Contains(err.Error(), "--etcd-quota-backend-bytes") {
				t.Errorf("a create refused for the room left does not name the quota: %v", err)
			}
			t.Logf("create %d (%d KiB) refused alone after %s: %v", i, len(value)>>10, took.Round(time.Millisecond), err)
			value = value[:len(value)/2]
		case err != nil:
			if took > 5*time.Second {
				t.Errorf("the failing write took %s, want a fast failure (< 5s)", took)
			}
			t.Logf("create %d (%d KiB) failed after %s: %v", i, len(value)>>10, took.Round(time.Millisecond), err)
			return names, err
		default:
			names = append(names, name)
		}
	}
	t.Fatalf("%d ConfigMaps fit in a %d MiB quota", len(names), storageFullQuota>>20)
	return nil, nil
}

// wantNoSpace checks that err is the Status for etcd's NOSPACE.
func wantNoSpace(t *testing.T, what string, err error) {
	t.Helper()
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		t.Fatalf("%s: %v (%T), want a Kubernetes Status error", what, err, err)
	}
	s := status.Status()
	if s.Code != http.StatusInternalServerError || s.Message != noSpaceMessage {
		t.Fatalf("%s: Status code %d reason %q message %q, want code 500 message %q", what, s.Code, s.Reason, s.Message, noSpaceMessage)
	}
}

// checkReadsWhileFull checks that the server stays ready and serves reads
// while etcd refuses writes, and returns the events of a watch opened then.
func checkReadsWhileFull(t *testing.T, ts *testServer, ns string, names []string) <-chan watch.Event {
	t.Helper()
	ctx := t.Context()
	cms := ts.client.CoreV1().ConfigMaps(ns)
	for _, path := range []string{"/readyz", "/livez", "/healthz"} {
		var code int
		body, _ := ts.client.CoreV1().RESTClient().Get().AbsPath(path).Param("verbose", "true").Do(ctx).StatusCode(&code).Raw()
		if code != http.StatusOK {
			t.Errorf("%s while etcd is full: %d\n%s", path, code, body)
		}
	}
	for _, rv := range []string{"", "0"} {
		list, err := cms.List(ctx, metav1.ListOptions{ResourceVersion: rv})
		if err != nil {
			t.Fatalf("list (resourceVersion %q) while full: %v", rv, err)
		}
		if len(list.Items) != len(names) {
			t.Errorf("list (resourceVersion %q) while full: %d items, want %d", rv, len(list.Items), len(names))
		}
		if _, err := cms.Get(ctx, names[0], metav1.GetOptions{ResourceVersion: rv}); err != nil {
			t.Errorf("get (resourceVersion %q) while full: %v", rv, err)
		}
	}
	list, err := cms.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := cms.Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatalf("watch while full: %v", err)
	}
	t.Cleanup(w.Stop)
	// Read it all the time: a watcher that stops reading is ended by the
	// cacher (see TestSlowWatcherIsEnded).
	events := make(chan watch.Event, 1024)
	go func() {
		defer close(events)
		for ev := range w.ResultChan() {
			events <- ev
		}
	}()
	return events
}

// deleteAll deletes names, which etcd allows while its NOSPACE alarm is
// armed, and waits for w to report every deletion.
func deleteAll(t *testing.T, ts *testServer, ns string, names []string, events <-chan watch.Event) {
	t.Helper()
	for _, name := range names {
		if err := ts.client.CoreV1().ConfigMaps(ns).Delete(t.Context(), name, metav1.DeleteOptions{}); err != nil {
			t.Fatalf("delete %s while full: %v", name, err)
		}
	}
	deleted := map[string]bool{}
	timeout := time.After(30 * time.Second)
	for len(deleted) < len(names) {
		select {
		case ev, ok := <-events:
			if !ok {
				t.Fatalf("the watch opened while full ended after %d of %d deletions", len(deleted), len(names))
			}
			if ev.Type == watch.Deleted {
				deleted[ev.Object.(*corev1.ConfigMap).Name] = true
			}
		case <-timeout:
			t.Fatalf("the watch opened while full saw %d of %d deletions in 30s", len(deleted), len(names))
		}
	}
}

// compact compacts etcd at its current revision. The apiserver's own
// compactor cannot do it while the alarm is armed: its compaction is a
// transaction that also writes compact_rev_key, which etcd refuses.
func compact(t *testing.T, c *etcdclient.Client) {
	t.Helper()
	resp, err := c.Get(t.Context(), "compact-probe")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Compact(t.Context(), resp.Header.Revision, etcdclient.WithCompactPhysical()); err != nil {
		t.Fatalf("compacting at %d: %v", resp.Header.Revision, err)
	}
}

// noSpaceAlarms lists the armed NOSPACE alarms.
func noSpaceAlarms(t *testing.T, c *etcdclient.Client) []*etcdserverpb.AlarmMember {
	t.Helper()
	resp, err := c.AlarmList(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var out []*etcdserverpb.AlarmMember
	for _, a := range resp.Alarms {
		if a.Alarm == etcdserverpb.AlarmType_NOSPACE {
			out = append(out, a)
		}
	}
	return out
}

// When etcd's quota is exhausted, writes fail at once with a Status, the
// server stays ready, reads and watches keep working, deletes work, and
// after compaction, defragmentation and disarming the NOSPACE alarm writes
// work again, all without a restart.
func TestStorageFull(t *testing.T) {
	cfg := testConfig(t)
	cfg.Etcd.QuotaBackendBytes = storageFullQuota
	ts := startServer(t, cfg)
	ctx := t.Context()
	const ns = "default"
	cms := ts.client.CoreV1().ConfigMaps(ns)
	etcd := ts.backend.Client()

	names, err := fillStorage(t, ts.client, ns)
	wantNoSpace(t, "the create beyond the quota", err)
	if len(noSpaceAlarms(t, etcd)) == 0 {
		t.Fatal("etcd raised no NOSPACE alarm")
	}
	status, err := etcd.Status(ctx, etcd.Endpoints()[0])
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("database size when full: %.1f MiB (quota %d MiB, %d ConfigMaps from 256 KiB down stored)",
		float64(status.DbSize)/(1<<20), storageFullQuota>>20, len(names))
	if status.DbSize > storageFullQuota {
		t.Errorf("the database grew to %d bytes, past its quota of %d", status.DbSize, storageFullQuota)
	}

	// Every write now fails, even a tiny one, and fast.
	for what, write := range map[string]func() error{
		"a small create": func() error {
			_, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "small"}}, metav1.CreateOptions{})
			return err
		},
		"an update": func() error {
			cm, err := cms.Get(ctx, names[0], metav1.GetOptions{})
			if err != nil {
				return err
			}
			cm.Data = map[string]string{"value": "small"}
			_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
			return err
		},
	} {
		start := time.Now()
		err := write()
		if took := time.Since(start); took > 5*time.Second {
			t.Errorf("%s while full took %s, want < 5s", what, took)
		}
		wantNoSpace(t, what+" while full", err)
	}

	w := checkReadsWhileFull(t, ts, ns, names)
	deleteAll(t, ts, ns, names, w)

	if status, err = etcd.Status(ctx, etcd.Endpoints()[0]); err != nil {
		t.Fatal(err)
	}
	before := status.DbSize
	compact(t, etcd)
	start := time.Now()
	if _, err := etcd.Defragment(ctx, etcd.Endpoints()[0]); err != nil {
		t.Fatalf("defragment: %v", err)
	}
	defragTook := time.Since(start)
	if status, err = etcd.Status(ctx, etcd.Endpoints()[0]); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d ConfigMaps from 256 KiB down filled the %d MiB quota; after deleting them, compaction and defragmentation (%s) the database is %d KiB (was %.1f MiB)",
		len(names), storageFullQuota>>20, defragTook.Round(time.Millisecond), status.DbSize>>10, float64(before)/(1<<20))
	if status.DbSize >= storageFullQuota {
		t.Fatalf("database still %d bytes after defragmentation, quota %d", status.DbSize, storageFullQuota)
	}
	// Defragmentation alone does not lift the alarm: writes still fail.
	_, err = cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "small"}}, metav1.CreateOptions{})
	wantNoSpace(t, "a create before the alarm is disarmed", err)
	for _, a := range noSpaceAlarms(t, etcd) {
		if _, err := etcd.AlarmDisarm(ctx, (*etcdclient.AlarmMember)(a)); err != nil {
			t.Fatalf("disarming the NOSPACE alarm: %v", err)
		}
	}

	checkWritesWork(t, ts, ns, w)
}

// checkWritesWork creates, updates and deletes a ConfigMap, and sees the
// creation on events, of a watch opened while etcd was full.
func checkWritesWork(t *testing.T, ts *testServer, ns string, events <-chan watch.Event) {
	t.Helper()
	ctx := t.Context()
	cms := ts.client.CoreV1().ConfigMaps(ns)
	cm, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "after"}, Data: map[string]string{"value": strings.Repeat("y", 256<<10)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create after recovery: %v", err)
	}
	cm.Data["value"] = "z"
	if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("update after recovery: %v", err)
	}
	select {
	case ev, ok := <-events:
		if !ok || ev.Type != watch.Added || ev.Object.(*corev1.ConfigMap).Name != "after" {
			t.Fatalf("watch opened while full: got %v (open %v), want ADDED after", ev.Type, ok)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the watch opened while full did not see the create after recovery")
	}
	if err := cms.Delete(ctx, "after", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete after recovery: %v", err)
	}
}
