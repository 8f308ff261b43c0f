package mirror

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/kubestore/kubestore/records/family"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubestore/kubestore/cacher/cachertest"
	"github.com/kubestore/kubestore/config"
	"github.com/kubestore/kubestore/records"
)

// stateBackend is the real store of the mirror's records: kubestore's
// records on the embedded etcd behind cacher.Backend, on a temp dir.
func stateBackend(t *testing.T) *records.Store {
	t.Helper()
	return cachertest.Records(cachertest.Open(t, func(c *config.Config) { c.Etcd.QuotaBackendBytes = 64 << 20 }))
}

// The node's pending writes survive a restart (they are in etcd), one
// record per object however many writes; a reconciliation clears a record
// unless the node wrote again meanwhile.
func TestPendingRecords(t *testing.T) {
	b := stateBackend(t)
	ctx := t.Context()
	p := newPending(b, "n")
	pod := pendingRecord{Resource: "pods", Namespace: "ns", Name: "p", Rule: "pods", UID: "uid-1"}
	record := func(p *pending, rec pendingRecord, w ownWrite) {
		t.Helper()
		applied, err := p.record(ctx, rec, w)
		if err != nil {
			t.Fatal(err)
		}
		applied()
	}
	for range 3 {
		record(p, pod, ownStatus)
	}
	record(p, pod, ownDelete)
	lease := pendingRecord{Resource: "leases.coordination.k8s.io", Namespace: leaseNS, Name: "n", Rule: "node-lease"}
	record(p, lease, ownCreate)

	// A restart reads them back.
	again := newPending(b, "n")
	if err := again.load(ctx, func(pendingRecord) bool { return true }); err != nil {
		t.Fatal(err)
	}
	all := again.all()
	if len(all) != 2 {
		t.Fatalf("%d records after a restart, want 2: %+v", len(all), all)
	}
	got, ok := again.get(podsResource, "ns", "p")
	if !ok || !got.has(ownStatus) || !got.has(ownDelete) || len(got.Writes) != 2 || got.UID != "uid-1" {
		t.Errorf("the pod's record %+v, want writes status and delete once each, uid-1", got)
	}
	if _, ok := again.get(leasesResource, leaseNS, "n"); !ok {
		t.Error("the lease's record is gone after a restart")
	}

	// Written again during its reconciliation: kept.
	again.begin(got)
	record(again, pod, ownStatus)
	if cleared, err := again.clear(ctx, got); err != nil || cleared {
		t.Errorf("clear of a record written during its reconciliation: %v %v, want it kept", cleared, err)
	}
	// Recorded, and a reconciliation begins before the write is applied
	// locally: the local copy it pushed lacks the write, so the record
	// stays until the next reconciliation after the write.
	applied, err := again.record(ctx, pod, ownStatus)
	if err != nil {
		t.Fatal(err)
	}
	again.begin(got)
	if cleared, err := again.clear(ctx, got); err != nil || cleared {
		t.Errorf("clear of a record whose write is being applied: %v %v, want it kept", cleared, err)
	}
	applied()
	if cleared, err := again.clear(ctx, got); err != nil || cleared {
		t.Errorf("clear by a reconciliation that began before the write was applied: %v %v, want it kept", cleared, err)
	}
	// Not written again: cleared, in etcd too.
	again.begin(got)
	if cleared, err := again.clear(ctx, got); err != nil || !cleared {
		t.Errorf("clear: %v %v, want cleared", cleared, err)
	}
	third := newPending(b, "n")
	if err := third.load(ctx, func(pendingRecord) bool { return true }); err != nil {
		t.Fatal(err)
	}
	if _, ok := third.get(podsResource, "ns", "p"); ok {
		t.Error("a cleared record is back after a restart")
	}
}

// The uids of deleted objects are remembered for deletedFor and at most
// maxDeleted of them, the oldest going first.
func TestDeletedUIDs(t *testing.T) {
	var d deletedUIDs
	d.add("")
	if d.has("") {
		t.Error("an empty uid is remembered")
	}
	for i := range maxDeleted + 10 {
		d.add(types.UID(fmt.Sprint(i)))
	}
	if len(d.at) > maxDeleted {
		t.Errorf("%d uids remembered, want at most %d", len(d.at), maxDeleted)
	}
	if !d.has(types.UID(fmt.Sprint(maxDeleted + 9))) {
		t.Error("the latest uid is forgotten")
	}
	if d.has("0") {
		t.Error("the oldest uid is still remembered past the bound")
	}
	d.at["old"] = time.Now().Add(-deletedFor - time.Second)
	if d.has("old") {
		t.Error("a uid older than deletedFor is still remembered")
	}
}

// The uids of objects deleted upstream through the edge survive a
// restart; those older than deletedFor are forgotten, records included.
func TestDeletedUIDsSurviveARestart(t *testing.T) {
	b := stateBackend(t)
	ctx := t.Context()
	m := &Mirror{state: b}
	m.deletedUpstream(ctx, "gone-1")
	old, _ := json.Marshal(time.Now().Add(-deletedFor - time.Minute))
	if err := b.PutState(ctx, deletedState+"gone-long-ago", old); err != nil {
		t.Fatal(err)
	}
	again := &Mirror{state: b}
	again.loadDeleted(ctx)
	if !again.deleted.has("gone-1") {
		t.Error("a uid deleted upstream is forgotten at a restart")
	}
	if again.deleted.has("gone-long-ago") {
		t.Error("a uid deleted longer than deletedFor ago is remembered")
	}
	recs, err := b.ListState(ctx, deletedState)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 {
		t.Errorf("records %v after the load, want only gone-1's", recs)
	}
}

// The outbox counts each queued Event once, however many writes of it
// queue it side by side.
func TestOutboxBytesUnderConcurrency(t *testing.T) {
	o := newOutbox(&uplink{})
	var wg sync.WaitGroup
	for i := range 200 {
		wg.Go(func() {
			o.enqueue(queuedEvent{Namespace: "ns", Name: fmt.Sprint("e", i%10), Bytes: 100, Queued: time.Now()})
		})
	}
	wg.Wait()
	if n, bytes := o.queued(); n != 10 || bytes != 1000 {
		t.Errorf("queued %d Events of %d bytes, want 10 of 1000", n, bytes)
	}
}

// Pending records are each node's: a gateway loads its own node's, never
// another's of the same store; a record of a release before per-node
// records is taken by the node whose object it is (mine says), and moved
// under its name; another node's is left for that node.
func TestPendingRecordsPerNode(t *testing.T) {
	b := stateBackend(t)
	ctx := t.Context()
	a, other := newPending(b, "edge-a"), newPending(b, "edge-b")
	for _, x := range []struct {
		p    *pending
		name string
	}{{a, "pa"}, {other, "pb"}} {
		applied, err := x.p.record(ctx, pendingRecord{Resource: "pods", Namespace: "ns", Name: x.name, Rule: "pods", UID: x.name}, ownStatus)
		if err != nil {
			t.Fatal(err)
		}
		applied()
	}
	for _, name := range []string{"old", "theirs"} {
		legacy, _ := json.Marshal(pendingRecord{Resource: "pods", Namespace: "ns", Name: name, Rule: "pods", UID: name, Writes: []ownWrite{ownStatus}})
		if err := b.PutState(ctx, pendingState+"pods/ns/"+name, legacy); err != nil {
			t.Fatal(err)
		}
	}
	again := newPending(b, "edge-a")
	if err := again.load(ctx, func(r pendingRecord) bool { return r.Name == "old" }); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range again.all() {
		names = append(names, r.Name)
	}
	if strings.Join(names, ",") != "old,pa" && strings.Join(names, ",") != "pa,old" {
		t.Errorf("edge-a loads %v, want its own pa and the earlier release's old", names)
	}
	recs, err := b.ListState(ctx, pendingState)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := recs[pendingState+"pods/ns/old"]; ok {
		t.Error("the earlier release's record is still under its old name")
	}
	mine, err := b.ListState(ctx, nodeState(family.MirrorPending, "edge-a"))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := mine[nodeState(family.MirrorPending, "edge-a")+"pods/ns/old"]; !ok {
		t.Errorf("the earlier release's record is not under edge-a's: %v", mine)
	}
	if _, ok := recs[pendingState+"pods/ns/theirs"]; !ok {
		t.Errorf("the earlier release's record of another node's pod was moved: %v", recs)
	}
}

// Only the node's writes to an object hold its local copy: a pod deleted
// and created again upstream (another uid) is stored as it comes; the
// node's status leaves the cluster's other changes through (heldOwned); its
// offline creation and final delete stand whole; a quarantined record
// holds nothing.
func TestPendingHolds(t *testing.T) {
	b := stateBackend(t)
	ctx := t.Context()
	p := newPending(b, "n")
	record := func(rec pendingRecord, w ownWrite) {
		t.Helper()
		applied, err := p.record(ctx, rec, w)
		if err != nil {
			t.Fatal(err)
		}
		applied()
	}
	record(pendingRecord{Resource: "pods", Namespace: "ns", Name: "status", UID: "u1"}, ownStatus)
	record(pendingRecord{Resource: "pods", Namespace: "ns", Name: "deleted", UID: "u2"}, ownDelete)
	record(pendingRecord{Resource: "nodes", Name: "n"}, ownCreate)
	for _, c := range []struct {
		gr       schema.GroupResource
		ns, name string
		uid      types.UID
		want     holding
		wantWhat string
	}{
		{podsResource, "ns", "status", "u1", heldOwned, "the node's status of the pod"},
		{podsResource, "ns", "status", "other", notHeld, "the pod recreated upstream"},
		{podsResource, "ns", "deleted", "u2", heldWhole, "the pod the node deleted"},
		{podsResource, "ns", "deleted", "other", notHeld, "a new pod of the deleted one's name"},
		{nodesResource, "", "n", "upstream-uid", heldWhole, "the Node the node created offline"},
		{podsResource, "ns", "none", "u3", notHeld, "a pod the node did not write"},
	} {
		if got := p.holds(c.gr, c.ns, c.name, c.uid); got != c.want {
			t.Errorf("%s: holds %d, want %d", c.wantWhat, got, c.want)
		}
	}
	rec, _ := p.get(podsResource, "ns", "status")
	p.begin(rec)
	if err := p.quarantine(ctx, rec, json.RawMessage(`{"phase":"Running"}`)); err != nil {
		t.Fatal(err)
	}
	if got := p.holds(podsResource, "ns", "status", "u1"); got != notHeld {
		t.Errorf("a quarantined record holds %d, want notHeld", got)
	}
	again := newPending(b, "n")
	if err := again.load(ctx, func(pendingRecord) bool { return true }); err != nil {
		t.Fatal(err)
	}
	if r, ok := again.get(podsResource, "ns", "status"); !ok || !r.Quarantined || string(r.Owned) != `{"phase":"Running"}` {
		t.Errorf("the quarantined record after a restart: %+v, want quarantined with the node's status", r)
	}
	// The node writes the pod again: its new write is what is pending.
	record(pendingRecord{Resource: "pods", Namespace: "ns", Name: "status", UID: "u1", Base: json.RawMessage(`{"phase":"Pending"}`)}, ownStatus)
	if r, _ := p.get(podsResource, "ns", "status"); r.Quarantined || string(r.Base) != `{"phase":"Pending"}` {
		t.Errorf("the record after the node wrote a quarantined object again: %+v, want a new one on the copy's state", r)
	}
}

// A record is quarantined once the upstream itself failed it (not the
// link) three times over a minute; failures of the link count for the
// back-off only.
func TestPendingQuarantineNeedsTheUpstreamsFailures(t *testing.T) {
	p := newPending(stateBackend(t), "n")
	applied, err := p.record(t.Context(), pendingRecord{Resource: "pods", Namespace: "ns", Name: "p", UID: "u"}, ownStatus)
	if err != nil {
		t.Fatal(err)
	}
	applied()
	rec, _ := p.get(podsResource, "ns", "p")
	for i := range 10 {
		if _, q := p.failed(rec, false); q {
			t.Fatalf("quarantined after %d failures of the link", i+1)
		}
	}
	if _, q := p.failed(rec, true); q {
		t.Fatal("quarantined at the upstream's first failure")
	}
	// The first failure a minute ago.
	key := pendingKey(podsResource, "ns", "p")
	r := p.retries[key]
	r.since = time.Now().Add(-quarantineAfter)
	p.retries[key] = r
	if _, q := p.failed(rec, true); q {
		t.Fatal("quarantined at the upstream's second failure")
	}
	if _, q := p.failed(rec, true); !q {
		t.Error("not quarantined at the upstream's third failure, a minute after the first")
	}
}

// The kubelet's final delete offline is recorded before the local delete:
// while the store deletes the pod, its copy already stands whole (the
// stream cannot bring the cluster's copy back, with its older status, for
// the reconciliation to replay before the delete), a reconciliation cannot
// clear the record, and the record keeps the pod's terminal status. A
// delete the store refuses leaves the record as it was.
func TestFinalDeleteOfflineIsRecordedBeforeTheLocalDelete(t *testing.T) {
	ctx := t.Context()
	p := newPending(stateBackend(t), "n")
	u := &uplink{link: &link{host: "upstream.invalid"}, pending: p}
	status := pendingRecord{Resource: "pods", Namespace: "ns", Name: "p", Rule: "pods", UID: "u1", Base: json.RawMessage(`{"phase":"Running"}`)}
	applied, err := p.record(ctx, status, ownStatus)
	if err != nil {
		t.Fatal(err)
	}
	applied()
	final := status
	final.Base = json.RawMessage(`{"phase":"Succeeded"}`)

	deleteWith := func(code int) *httptest.ResponseRecorder {
		t.Helper()
		var during holding
		var cleared bool
		next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			during = p.holds(podsResource, "ns", "p", "u1")
			rec, _ := p.get(podsResource, "ns", "p")
			p.begin(rec)
			if cleared, err = p.clear(ctx, rec); err != nil {
				t.Error(err)
			}
			w.WriteHeader(code)
		})
		w := httptest.NewRecorder()
		wt := &writeThrough{u: u, next: next, w: w, r: httptest.NewRequest(http.MethodDelete, "/api/v1/namespaces/ns/pods/p", nil)}
		wt.finalDeleteOffline(final)
		if during != heldWhole {
			t.Errorf("while the store deleted the pod its copy was held %d, want heldWhole", during)
		}
		if cleared {
			t.Error("a reconciliation cleared the record while the delete was applied")
		}
		return w
	}

	// Refused locally (the pod is gone, or another uid): the record is
	// the status alone again.
	if w := deleteWith(http.StatusConflict); w.Code != http.StatusConflict {
		t.Fatalf("answered %d, want the store's 409", w.Code)
	}
	rec, ok := p.get(podsResource, "ns", "p")
	if !ok || rec.has(ownDelete) || rec.Final != nil || string(rec.Base) != `{"phase":"Running"}` {
		t.Fatalf("after a refused delete the record is %+v, want the status record as it was", rec)
	}
	again := newPending(p.state, "n")
	if err := again.load(ctx, func(pendingRecord) bool { return true }); err != nil {
		t.Fatal(err)
	}
	if rec, _ := again.get(podsResource, "ns", "p"); rec.has(ownDelete) {
		t.Fatalf("after a refused delete and a restart the record is %+v, want no delete", rec)
	}

	if w := deleteWith(http.StatusOK); w.Code != http.StatusOK {
		t.Fatalf("answered %d, want 200", w.Code)
	}
	rec, _ = p.get(podsResource, "ns", "p")
	if !rec.has(ownStatus) || !rec.has(ownDelete) || string(rec.Final) != `{"phase":"Succeeded"}` || string(rec.Base) != `{"phase":"Running"}` {
		t.Fatalf("after the delete the record is %+v, want status and delete, base Running, final Succeeded", rec)
	}

	// With no record before it, a refused delete leaves none.
	other := pendingRecord{Resource: "pods", Namespace: "ns", Name: "q", Rule: "pods", UID: "u2", Base: json.RawMessage(`{"phase":"Failed"}`)}
	wt := &writeThrough{u: u, w: httptest.NewRecorder(), r: httptest.NewRequest(http.MethodDelete, "/api/v1/namespaces/ns/pods/q", nil),
		next: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNotFound) })}
	wt.finalDeleteOffline(other)
	if rec, ok := p.get(podsResource, "ns", "q"); ok {
		t.Fatalf("a refused delete of a pod with no record left %+v", rec)
	}
}

// A record its state write fails for (the request that made it timed
// out) returns the error and holds nothing back: it neither panics nor
// deadlocks, and leaves no write counted as applying.
func TestPendingRecordWhoseWriteFails(t *testing.T) {
	p := newPending(stateBackend(t), "n")
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	done := make(chan error, 1)
	go func() {
		applied, err := p.record(ctx, pendingRecord{Resource: "nodes", Name: "n", Rule: "node"}, ownStatus)
		if applied != nil {
			err = fmt.Errorf("applied = %p with error %v, want nil", applied, err)
		} else if err == nil {
			err = fmt.Errorf("no error with a cancelled context")
		} else {
			err = nil
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("record did not return within 30 s: deadlocked")
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.applying) != 0 {
		t.Errorf("applying = %v after the failed record, want none", p.applying)
	}
}
