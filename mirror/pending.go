package mirror

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/kubestore/kubestore/records/family"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// pendingRecord is what the local etcd keeps of an object the node wrote
// while the link was down, until the write is reconciled with the
// upstream: which writes, the object's uid then, and since when; and what
// tells the node's own changes from the rest of the object: the part of
// the object the node writes (ownedPart) as the edge held it before the
// node's first offline write, and at the node's final delete.
type pendingRecord struct {
	Resource  string     `json:"resource"`
	Namespace string     `json:"namespace,omitempty"`
	Name      string     `json:"name"`
	Rule      string     `json:"rule"`
	UID       string     `json:"uid,omitempty"`
	Writes    []ownWrite `json:"writes"`
	Since     time.Time  `json:"since"`
	// Base is the owned part before the node's first offline write: what
	// the node changed is the difference between it and the owned part it
	// left. Absent for an object the node created offline: all of it is
	// the node's.
	Base json.RawMessage `json:"base,omitempty"`
	// Final is the owned part when the node finally deleted the object:
	// the terminal status a pod's final delete follows, replayed before
	// it once the local copy is gone.
	Final json.RawMessage `json:"final,omitempty"`
	// Quarantined says the upstream kept failing the record (a 5xx, a
	// timeout) for quarantineAfter: it no longer holds the local copy,
	// which follows the cluster again, and is tried every retryMax with
	// Owned, the owned part as the node had left it then.
	Quarantined bool            `json:"quarantined,omitempty"`
	Owned       json.RawMessage `json:"owned,omitempty"`
}

func (p *pendingRecord) gr() schema.GroupResource { return schema.ParseGroupResource(p.Resource) }

// kind is what the node owns of the record's kind (nil for a kind it does
// not write, which no record of this release holds).
func (p *pendingRecord) kind() *ownedKind { return ownedKinds[p.gr()] }

func (p *pendingRecord) has(w ownWrite) bool { return slices.Contains(p.Writes, w) }

// pendingState starts the key of a record in memory, and in the state of
// a release before records were kept per node (moved at load).
var pendingState = family.MirrorPending.Dir() + "/"

// durable is the key in the mirror's state of the record of key: under
// the node's own prefix, so that gateways sharing one store never load,
// reconcile or clear each other's.
func (p *pending) durable(key string) string {
	return nodeState(family.MirrorPending, p.node) + strings.TrimPrefix(key, pendingState)
}

// nodeState is the prefix of a family of the mirror's records (prefix
// ends in "/") kept per node: mirror-pending@<node>/.
func nodeState(f family.Family, node string) string { return f.NodeDir(node) + "/" }

func pendingKey(gr schema.GroupResource, namespace, name string) string {
	ns := namespace
	if ns == "" {
		ns = "-"
	}
	return pendingState + gr.String() + "/" + ns + "/" + name
}

// pending holds the records, in memory and, durably, in the local etcd.
type pending struct {
	state State
	node  string

	mu      sync.Mutex
	records map[string]*pendingRecord
	// dirty are the records written again since a reconciliation of them
	// began: that reconciliation does not clear them.
	dirty map[string]bool
	// applying counts the writes recorded and not yet applied locally: a
	// reconciliation reads the local copy, which does not hold them yet,
	// so it must not clear their record.
	applying map[string]int
	// retries holds back a record the upstream could not take, so the
	// others reconcile meanwhile (no head of line).
	retries map[string]retry
	// locks serialise the reconciliations of one object: the loop's and
	// that of a write of the node forwarded meanwhile.
	locks map[string]*keyLock
}

// keyLock is the lock of one object's reconciliation, with how many hold
// or wait for it.
type keyLock struct {
	sync.Mutex
	users int
}

// retry is when a record is tried again, after how many failures; fails
// and since count those the upstream answered (failed).
type retry struct {
	at    time.Time
	tries int
	fails int
	since time.Time
}

// Retries of a record the upstream could not take back off from
// retryFirst to retryMax. One it has failed for quarantineAfter, at least
// quarantineFails times, is quarantined (pendingRecord.Quarantined).
const (
	retryFirst      = 5 * time.Second
	retryMax        = 2 * time.Minute
	quarantineAfter = time.Minute
	quarantineFails = 3
)

func newPending(state State, node string) *pending {
	return &pending{state: state, node: node, records: map[string]*pendingRecord{}, dirty: map[string]bool{}, applying: map[string]int{},
		retries: map[string]retry{}, locks: map[string]*keyLock{}}
}

// load reads the records a previous run of this node left; those of a
// release before records were kept per node are moved under the node's
// when mine says they are of its objects (the others are left to their
// own node's gateway).
func (p *pending) load(ctx context.Context, mine func(pendingRecord) bool) error {
	own, err := p.state.ListState(ctx, nodeState(family.MirrorPending, p.node))
	if err != nil {
		return err
	}
	legacy, err := p.state.ListState(ctx, pendingState)
	if err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	read := func(key string, data []byte) (*pendingRecord, error) {
		var r pendingRecord
		if err := json.Unmarshal(data, &r); err != nil {
			return nil, fmt.Errorf("reading the pending write %s: %w", key, err)
		}
		return &r, nil
	}
	for key, data := range own {
		r, err := read(key, data)
		if err != nil {
			return err
		}
		p.records[pendingKey(r.gr(), r.Namespace, r.Name)] = r
	}
	for key, data := range legacy {
		r, err := read(key, data)
		if err != nil {
			return err
		}
		if !mine(*r) {
			continue
		}
		p.records[pendingKey(r.gr(), r.Namespace, r.Name)] = r
		if err := p.state.PutState(ctx, p.durable(key), data); err != nil {
			return err
		}
		if err := p.state.DeleteState(ctx, key); err != nil {
			return err
		}
	}
	return nil
}

// record marks w to obj pending, durably before it returns: the write is
// applied locally after it, so a power cut in between leaves a record of a
// write that did not happen, which reconciles to the same state, rather
// than a write nobody reconciles. The caller calls applied once the local
// write is done (or failed): until then no reconciliation clears the
// record, since the local copy it pushes does not hold the write yet.
func (p *pending) record(ctx context.Context, rec pendingRecord, w ownWrite) (applied func(), err error) {
	key := pendingKey(rec.gr(), rec.Namespace, rec.Name)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.dirty[key] = true
	p.applying[key]++
	release := func() {
		if p.applying[key]--; p.applying[key] == 0 {
			delete(p.applying, key)
		}
		p.dirty[key] = true
	}
	applied = func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		release()
	}
	defer func() {
		if err != nil {
			// Under p.mu still (its Unlock is deferred before this), and
			// whatever the return statement set applied to.
			release()
			applied = nil
		}
	}()
	cur, ok := p.records[key]
	if ok && cur.Quarantined {
		// The node wrote again: its new write, on the copy that has
		// followed the cluster since, is what it reports now. The
		// quarantined one is dropped.
		quarantined.WithLabelValues("superseded").Inc()
		ok = false
		delete(p.retries, key)
	}
	if ok && cur.has(w) && (rec.UID == "" || cur.UID == rec.UID) && rec.Final == nil {
		return applied, nil
	}
	next := rec
	next.Writes = []ownWrite{w}
	next.Since = time.Now()
	if ok {
		// The base stays the one before the node's first write.
		next = *cur
		if !cur.has(w) {
			next.Writes = append(slices.Clone(cur.Writes), w)
		}
		if rec.UID != "" {
			next.UID = rec.UID
		}
		if rec.Final != nil {
			next.Final = rec.Final
		}
	}
	data, err := json.Marshal(next)
	if err != nil {
		return nil, err
	}
	if err := p.state.PutState(ctx, p.durable(key), data); err != nil {
		return nil, err
	}
	p.records[key] = &next
	return applied, nil
}

// undo puts prev (nil: none) back as the record of rec's object: the
// write recorded after it failed locally, so there is nothing of it to
// replay. The caller still holds the write's applied, so no
// reconciliation cleared the record meanwhile.
func (p *pending) undo(ctx context.Context, rec pendingRecord, prev *pendingRecord) error {
	key := pendingKey(rec.gr(), rec.Namespace, rec.Name)
	p.mu.Lock()
	defer p.mu.Unlock()
	if prev == nil {
		if err := p.state.DeleteState(ctx, p.durable(key)); err != nil {
			return err
		}
		delete(p.records, key)
		return nil
	}
	data, err := json.Marshal(prev)
	if err != nil {
		return err
	}
	if err := p.state.PutState(ctx, p.durable(key), data); err != nil {
		return err
	}
	restored := *prev
	p.records[key] = &restored
	return nil
}

// holding is what the node's pending writes do to the cluster's changes of
// an object's local copy (pending.holds).
type holding int

const (
	// notHeld: the cluster's object is stored as it comes.
	notHeld holding = iota
	// heldOwned: the node's writes to the owned part are pending; the
	// cluster's changes are stored around it (a label, a
	// deletionTimestamp reach the node while its status waits).
	heldOwned
	// heldWhole: the node created the object offline, or finally deleted
	// it: the local state stands until reconciled.
	heldWhole
)

// holds says how the node's pending writes of an object hold its local
// copy against the cluster's object of uid: only writes to that object
// hold it (a pod deleted and created again upstream is another, stored as
// it comes), and a quarantined record holds nothing.
func (p *pending) holds(gr schema.GroupResource, namespace, name string, uid types.UID) holding {
	rec, ok := p.get(gr, namespace, name)
	switch {
	case !ok || rec.Quarantined:
		return notHeld
	case rec.has(ownCreate):
		return heldWhole
	case rec.UID != "" && rec.UID != string(uid):
		return notHeld
	case rec.has(ownDelete):
		return heldWhole
	}
	return heldOwned
}

// get is the record of an object, if one is pending.
func (p *pending) get(gr schema.GroupResource, namespace, name string) (pendingRecord, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	r, ok := p.records[pendingKey(gr, namespace, name)]
	if !ok {
		return pendingRecord{}, false
	}
	return *r, true
}

// all are the pending records, oldest first.
func (p *pending) all() []pendingRecord {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]pendingRecord, 0, len(p.records))
	for _, r := range p.records {
		out = append(out, *r)
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].Since.Equal(out[j].Since) {
			return out[i].Since.Before(out[j].Since)
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// begin starts a reconciliation of rec: writes recorded from now on keep
// it pending.
func (p *pending) begin(rec pendingRecord) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.dirty, pendingKey(rec.gr(), rec.Namespace, rec.Name))
}

// clear drops rec once reconciled, unless it was written again since
// begin or a write of it is being applied; it reports whether it did.
func (p *pending) clear(ctx context.Context, rec pendingRecord) (bool, error) {
	key := pendingKey(rec.gr(), rec.Namespace, rec.Name)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.dirty[key] || p.applying[key] > 0 {
		return false, nil
	}
	if err := p.state.DeleteState(ctx, p.durable(key)); err != nil {
		return false, err
	}
	delete(p.records, key)
	delete(p.retries, key)
	return true, nil
}

// lock holds the reconciliation of rec's object until the returned
// function is called.
func (p *pending) lock(rec pendingRecord) (unlock func()) {
	key := pendingKey(rec.gr(), rec.Namespace, rec.Name)
	p.mu.Lock()
	l, ok := p.locks[key]
	if !ok {
		l = &keyLock{}
		p.locks[key] = l
	}
	l.users++
	p.mu.Unlock()
	l.Lock()
	return func() {
		l.Unlock()
		p.mu.Lock()
		if l.users--; l.users == 0 {
			delete(p.locks, key)
		}
		p.mu.Unlock()
	}
}

// due reports whether rec may be tried at now.
func (p *pending) due(rec pendingRecord, now time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return !now.Before(p.retries[pendingKey(rec.gr(), rec.Namespace, rec.Name)].at)
}

// failed holds rec back after the upstream could not take it, doubling
// the wait at each failure; it returns the wait, and whether rec is to be
// quarantined now: the upstream itself failed it (answered, not the
// link) quarantineFails times, for quarantineAfter.
func (p *pending) failed(rec pendingRecord, answered bool) (time.Duration, bool) {
	key := pendingKey(rec.gr(), rec.Namespace, rec.Name)
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	r := p.retries[key]
	wait := min(retryFirst<<min(r.tries, 8), retryMax)
	next := retry{at: now.Add(wait), tries: r.tries + 1, fails: r.fails, since: r.since}
	if answered {
		if next.fails == 0 {
			next.since = now
		}
		next.fails++
	}
	p.retries[key] = next
	cur, ok := p.records[key]
	// The node's own creation offline is not quarantined: there is no
	// cluster's object for its copy to follow.
	return wait, answered && ok && !cur.Quarantined && !cur.has(ownCreate) && next.fails >= quarantineFails && now.Sub(next.since) >= quarantineAfter
}

// quarantine marks rec quarantined, owned being the owned part the node
// left, durably: from now on it holds no local copy.
func (p *pending) quarantine(ctx context.Context, rec pendingRecord, owned json.RawMessage) error {
	key := pendingKey(rec.gr(), rec.Namespace, rec.Name)
	p.mu.Lock()
	defer p.mu.Unlock()
	cur, ok := p.records[key]
	if !ok || p.dirty[key] || p.applying[key] > 0 {
		// Written again meanwhile: the node's newer write is tried first.
		return nil
	}
	next := *cur
	next.Quarantined, next.Owned = true, owned
	data, err := json.Marshal(next)
	if err != nil {
		return err
	}
	if err := p.state.PutState(ctx, p.durable(key), data); err != nil {
		return err
	}
	p.records[key] = &next
	quarantined.WithLabelValues("quarantined").Inc()
	return nil
}

// retryAll makes every record due: the link came back. A quarantined
// record keeps its wait (the upstream failed it while the link was up),
// and every record its count of the upstream's failures.
func (p *pending) retryAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for key, r := range p.retries {
		if rec, ok := p.records[key]; ok && rec.Quarantined {
			continue
		}
		r.at, r.tries = time.Time{}, 0
		p.retries[key] = r
	}
}

// describe is one record for /mirrorz?verbose.
func (r pendingRecord) describe(now time.Time) string {
	ws := make([]string, len(r.Writes))
	for i, w := range r.Writes {
		ws[i] = string(w)
	}
	obj := r.Name
	if r.Namespace != "" {
		obj = r.Namespace + "/" + r.Name
	}
	q := ""
	if r.Quarantined {
		q = " quarantined"
	}
	return fmt.Sprintf("pending %s %s writes=%s age=%s%s", r.Resource, obj, strings.Join(ws, ","), now.Sub(r.Since).Round(time.Second), q)
}
