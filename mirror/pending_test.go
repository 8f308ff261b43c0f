package mirror

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

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
	if err := again.load(ctx); err != nil {
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
	if err := third.load(ctx); err != nil {
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
// records is taken as the node's and moved under its name.
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
	legacy, _ := json.Marshal(pendingRecord{Resource: "pods", Namespace: "ns", Name: "old", Rule: "pods", UID: "old", Writes: []ownWrite{ownStatus}})
	if err := b.PutState(ctx, pendingState+"pods/ns/old", legacy); err != nil {
		t.Fatal(err)
	}
	again := newPending(b, "edge-a")
	if err := again.load(ctx); err != nil {
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
	if _, ok := recs[nodeState(pendingState, "edge-a")+"pods/ns/old"]; !ok {
		t.Errorf("the earlier release's record is not under edge-a's: %v", recs)
	}
}
