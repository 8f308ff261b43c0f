package mirror

import (
	"context"
	"fmt"
	"github.com/kubestore/kubestore/records/family"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/storage"
	"k8s.io/klog/v2"
)

// uplink is the flow from the edge to the upstream: a local write to a
// mirrored object forwarded while the link is up and refused while it is
// down (writethrough.go), the node's own writes applied locally while it
// is down and kept pending (pending.go) until they are reconciled with the
// upstream's copy (reconcile.go), and the node's agents' Events queued and
// sent upstream (events.go). It reaches the upstream through the link it
// shares with the streams, and the rest of the mirror only through
// downstream.
type uplink struct {
	*link
	down   downstream
	stores Stores
	state  State
	node   string
	// pending are the node's own writes made while the link was down, to
	// reconcile.
	pending *pending
	// events sends the node's agents' Events upstream.
	events *outbox
	// trust, when set, is the cluster's token issuer the gateway trusts
	// for the tokens it relays (tokens.go).
	trust TokenTrust
	// decisions are the cluster's decisions on its ServiceAccounts'
	// requests (ClusterAuthorizer).
	decisions *decisions
}

func newUplink(down downstream, l *link, stores Stores, state State, node string) *uplink {
	u := &uplink{link: l, down: down, stores: stores, state: state, node: node, pending: newPending(state, node)}
	u.events = newOutbox(u)
	u.decisions = &decisions{u: u, byKey: map[string]*decision{}}
	return u
}

// load reads the node's writes a previous run left pending: their objects
// stay as the node left them until they are reconciled, so the streams
// must know them before they write. Those a release before per-node
// records left are taken when they are this node's.
func (u *uplink) load(ctx context.Context) {
	alone := u.aloneOnStore(ctx)
	mine := func(rec pendingRecord) bool { return u.legacyMine(ctx, rec.gr(), rec.Namespace, rec.Name, alone) }
	if err := u.pending.load(ctx, mine); err != nil {
		klog.ErrorS(err, "Mirror: reading the node's pending writes")
	}
}

// aloneOnStore reports whether no other gateway mirrors into this store:
// no other node recorded the rules it runs (configuredState).
func (u *uplink) aloneOnStore(ctx context.Context) bool {
	recs, err := u.state.ListStatePrefix(ctx, configuredState)
	if err != nil {
		return false
	}
	for name := range recs {
		if name != family.MirrorConfigured.For(u.node) {
			return false
		}
	}
	return true
}

// legacyMine reports whether a record a release before per-node records
// left, of object namespace/name of gr (a pending write, or the object an
// Event is about), is this node's: its Node, Lease or CSINode, or a pod
// the local store has bound to it. One whose node cannot be told (a pod
// the node deleted) is this node's only when no other gateway shares the
// store: no gateway takes another node's records.
func (u *uplink) legacyMine(ctx context.Context, gr schema.GroupResource, namespace, name string, alone bool) bool {
	k := ownedKinds[gr]
	if k == nil {
		return alone
	}
	var obj runtime.Object
	if k.boundTo != nil {
		store, err := u.stores.Store(ctx, gr)
		if err != nil {
			return alone
		}
		obj = store.New()
		if err := store.Get(ctx, store.Key(namespace, name), storage.GetOptions{}, obj); err != nil {
			return alone
		}
	}
	return k.mine(u.node, namespace, name, obj)
}

// run sends the queued Events and reconciles the pending writes until ctx
// ends.
func (u *uplink) run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Go(func() { u.events.run(ctx) })
	wg.Go(func() { u.reconcileLoop(ctx) })
	wg.Wait()
}

// report is the node's pending writes and the Events queued, for
// /mirrorz?verbose.
func (u *uplink) report() []string {
	var out []string
	now := time.Now()
	for _, rec := range u.pending.all() {
		out = append(out, rec.describe(now))
	}
	n, bytes := u.events.queued()
	return append(out, fmt.Sprintf("events queued=%d bytes=%d", n, bytes))
}
