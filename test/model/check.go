package model

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"
)

// The invariants (doc.go says the promise each stands for).
const (
	Lost     = "lost"
	Reverted = "reverted"
	Phantom  = "phantom"
	Zombie   = "zombie"
	Foreign  = "foreign"
	Agree    = "agree"
	Order    = "history"
)

// Violation is an invariant a run broke, and how.
type Violation struct {
	Invariant string
	What      string
}

func (v Violation) String() string { return v.Invariant + ": " + v.What }

// Object is an object as one side holds it.
type Object struct {
	Ref Ref
	UID string
	// Node is the node it belongs to: a pod's spec.nodeName, a Node's,
	// Lease's or CSINode's name.
	Node  string
	Slots map[string]string
	// Rule is the mirror's rule annotation of a copy.
	Rule string
	// Content is the object without what is local to a copy (its
	// resourceVersion, the mirror's annotations): two sides hold the same
	// object when their Contents are equal.
	Content string
}

// Record is a pending write of the site's store: the node under whose
// name it is kept, the object it is of, that object's node ("" when it
// cannot be told), and whether it is quarantined.
type Record struct {
	Dir         string
	Ref         Ref
	ObjectNode  string
	Quarantined bool
}

// Final is what the driver read once every link was back and the writers
// had stopped.
type Final struct {
	// Nodes are the site's nodes, by gateway.
	Nodes []string
	// Upstream are the upstream's objects of the model; Gateways each
	// gateway's of the site's nodes (its copies), by gateway name.
	Upstream map[Ref]Object
	Gateways map[string]map[Ref]Object
	// Deleted is the last state of each object the upstream deleted
	// during the run, by uid (its watch's DELETED events).
	Deleted map[string]Object
	Records []Record
}

// Rules are the mirror's rule base names the driver configures, by kind: a
// copy of node N's object names <base>@N.
var Rules = map[Kind]string{NodeKind: "node", LeaseKind: "node-lease", CSINodeKind: "csinode", PodKind: "pods"}

// initial are the values a slot may have before any write of it: an
// object as its creator made it.
var initial = map[string][]string{SlotPhase: {"", "Pending"}}

// Check checks the final state against the history: every invariant but
// the watchers' (CheckWatches), none of which may be broken once the
// sides agree.
func Check(writes []Write, f Final) []Violation {
	var out []Violation
	add := func(inv, format string, args ...any) {
		out = append(out, Violation{inv, fmt.Sprintf(format, args...)})
	}
	bySlot := map[Ref]map[string][]Write{}
	uidsCreated := map[string]bool{}
	namesCreated := map[Ref]bool{}
	finalDeletes := map[string]Write{}
	forceDeleted := map[string]bool{}
	for _, w := range writes {
		if w.Outcome == Refused {
			continue
		}
		switch w.Slot {
		case SlotCreate:
			namesCreated[w.Ref] = true
			if w.UID != "" {
				uidsCreated[w.UID] = true
			}
		case SlotFinalDelete:
			if w.Outcome == Acked {
				finalDeletes[w.UID] = w
			}
		case SlotForceDelete:
			forceDeleted[w.UID] = true
		}
		if bySlot[w.Ref] == nil {
			bySlot[w.Ref] = map[string][]Write{}
		}
		bySlot[w.Ref][w.Slot] = append(bySlot[w.Ref][w.Slot], w)
	}

	for _, ref := range sortedRefs(f.Upstream) {
		o := f.Upstream[ref]
		// Phantom: an object no writer made.
		switch {
		case ref.Kind == PodKind && !uidsCreated[o.UID] && !unknownCreate(bySlot[ref]):
			add(Phantom, "%s (uid %s) is upstream, and no writer created it", ref, shortUID(o.UID))
		case ref.Kind != PodKind && !namesCreated[ref]:
			add(Phantom, "%s is upstream, and no writer created it", ref)
		}
		if w, ok := finalDeletes[o.UID]; ok {
			add(Lost, "%s (uid %s) is upstream after the node's final delete was acknowledged (%s)", ref, shortUID(o.UID), w)
		}
		if forceDeleted[o.UID] {
			add(Zombie, "%s (uid %s) is upstream after the cluster deleted it", ref, shortUID(o.UID))
		}
		for _, slot := range slices.Sorted(maps.Keys(owners[ref.Kind])) {
			allowed, last := allowedValues(bySlot[ref][slot], o.UID, slot)
			if got := o.Slots[slot]; !slices.Contains(allowed, got) {
				inv := Lost
				if OwnerOf(ref.Kind, slot) == ClusterOwned {
					inv = Reverted
				}
				latest := "no write of it was acknowledged"
				if last != nil {
					latest = "the latest acknowledged is " + last.String()
				}
				add(inv, "%s (uid %s) has %s=%q upstream; %s (allowed %q)", ref, shortUID(o.UID), slot, got, latest, allowed)
			}
		}
	}

	// The kubelet's final delete lands after its terminal status.
	for _, uid := range slices.Sorted(maps.Keys(finalDeletes)) {
		w := finalDeletes[uid]
		last, ok := f.Deleted[uid]
		if !ok || forceDeleted[uid] {
			continue
		}
		if got := last.Slots[SlotPhase]; got != w.Value {
			add(Lost, "%s (uid %s) was deleted upstream in phase %q; the kubelet wrote %q before its final delete (%s)", w.Ref, shortUID(uid), got, w.Value, w)
		}
	}

	// Zombies on the gateways, and whether every side agrees.
	for _, g := range slices.Sorted(maps.Keys(f.Gateways)) {
		copies := f.Gateways[g]
		for _, ref := range sortedRefs(copies) {
			c := copies[ref]
			if _, gone := f.Deleted[c.UID]; gone && f.Upstream[ref].UID != c.UID {
				add(Zombie, "%s holds %s (uid %s), which the upstream deleted", g, ref, shortUID(c.UID))
			}
			if base, ok := Rules[ref.Kind]; ok && c.Rule != base+"@"+c.Node {
				add(Foreign, "%s's copy of %s, node %s's, names rule %q", g, ref, c.Node, c.Rule)
			}
			u, ok := f.Upstream[ref]
			switch {
			case !ok:
				add(Agree, "%s holds %s (uid %s), which the upstream does not", g, ref, shortUID(c.UID))
			case u.UID != c.UID:
				add(Agree, "%s holds %s with uid %s, the upstream %s", g, ref, shortUID(c.UID), shortUID(u.UID))
			case u.Content != c.Content:
				add(Agree, "%s holds %s otherwise than the upstream: %s", g, ref, contentDiff(u.Content, c.Content))
			}
		}
		for _, ref := range sortedRefs(f.Upstream) {
			u := f.Upstream[ref]
			if _, ok := copies[ref]; !ok && ref.Kind != EventKind && slices.Contains(f.Nodes, u.Node) {
				add(Agree, "%s lacks %s (uid %s), node %s's", g, ref, shortUID(u.UID), u.Node)
			}
		}
	}

	// Each node's records are of its own objects, and none is left.
	for _, r := range f.Records {
		switch {
		case r.ObjectNode != "" && r.ObjectNode != r.Dir:
			add(Foreign, "node %s's records hold a pending write of %s, node %s's", r.Dir, r.Ref, r.ObjectNode)
		case !r.Quarantined:
			add(Agree, "node %s's pending write of %s is not reconciled", r.Dir, r.Ref)
		}
	}
	return out
}

// unknownCreate reports whether a create of the object's name had no
// answer: its uid is not known.
func unknownCreate(slots map[string][]Write) bool {
	return slices.ContainsFunc(slots[SlotCreate], func(w Write) bool { return w.Outcome == Unknown })
}

// allowedValues are the values a slot may end with: the latest
// acknowledged write's, or one a later write whose answer was lost made
// (none acknowledged: the creator's, or an unanswered write's). Only
// writes to the object of uid count, or those that named none.
func allowedValues(writes []Write, uid, slot string) ([]string, *Write) {
	var last *Write
	var relevant []Write
	for _, w := range writes {
		if w.UID != "" && w.UID != uid {
			continue
		}
		relevant = append(relevant, w)
		if w.Outcome == Acked && (last == nil || w.Ended.After(last.Ended)) {
			last = &w
		}
	}
	var allowed []string
	if last != nil {
		allowed = append(allowed, last.Value)
	} else {
		allowed = append(allowed, initial[slot]...)
		if len(initial[slot]) == 0 {
			allowed = append(allowed, "")
		}
	}
	for _, w := range relevant {
		if w.Outcome == Unknown && (last == nil || !w.Began.Before(last.Began)) && !slices.Contains(allowed, w.Value) {
			allowed = append(allowed, w.Value)
		}
	}
	return allowed, last
}

func sortedRefs(m map[Ref]Object) []Ref {
	refs := slices.Collect(maps.Keys(m))
	sort.Slice(refs, func(i, j int) bool { return refs[i].String() < refs[j].String() })
	return refs
}

// contentDiff is the first place two contents differ, with some context.
func contentDiff(a, b string) string {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	from := max(0, i-60)
	cut := func(s string) string {
		end := min(len(s), i+60)
		if from >= end {
			return ""
		}
		return strings.TrimSpace(s[from:end])
	}
	return fmt.Sprintf("upstream …%s… copy …%s…", cut(a), cut(b))
}

// WatchEvent is an event a local watcher saw.
type WatchEvent struct {
	Type string
	Ref  Ref
	UID  string
	RV   int64
	// Content is the object without its resourceVersion and managedFields.
	Content string
}

// WatchLog is what one watcher of a gateway's resource saw: its events,
// when it had to relist (410 Gone), and when a gateway of the site was
// killed or started again (a member's loss may cost the site its quorum,
// and each watch cache its etcd watch).
type WatchLog struct {
	Gateway  string
	Events   []WatchEvent
	Relists  []time.Time
	Restarts []time.Time
}

// relistAfterRestart is how long after a gateway's restart its watchers
// may find their resourceVersion gone: the restarted watch cache starts
// at the current revision.
const relistAfterRestart = time.Minute

// CheckWatches checks that each local watcher saw one true history:
// resourceVersions only grow, no event repeats an object unchanged (one
// event per change), and no relist happens but after a gateway of the
// site was killed or started again (an uplink's flap never makes one).
func CheckWatches(logs []WatchLog) []Violation {
	var out []Violation
	for _, l := range logs {
		var last int64
		previous := map[Ref]WatchEvent{}
		for _, e := range l.Events {
			if e.RV <= last {
				out = append(out, Violation{Order, fmt.Sprintf("a watcher of %s got %s %s at resourceVersion %d after %d", l.Gateway, e.Type, e.Ref, e.RV, last)})
			}
			last = max(last, e.RV)
			if p, ok := previous[e.Ref]; ok && e.Type == "MODIFIED" && p.Type != "DELETED" && p.UID == e.UID && p.Content == e.Content {
				out = append(out, Violation{Order, fmt.Sprintf("a watcher of %s got %s %s at resourceVersion %d for no change (as at %d)", l.Gateway, e.Type, e.Ref, e.RV, p.RV)})
			}
			previous[e.Ref] = e
		}
		for _, r := range l.Relists {
			if !slices.ContainsFunc(l.Restarts, func(s time.Time) bool { return !s.After(r) && r.Sub(s) <= relistAfterRestart }) {
				out = append(out, Violation{Order, fmt.Sprintf("a watcher of %s had to relist (410) at %s, with no gateway of the site killed or started again in the minute before", l.Gateway, r.Format("15:04:05.000"))})
			}
		}
	}
	return out
}
