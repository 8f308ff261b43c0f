package model

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
)

// Kind is a kind of object the model follows.
type Kind string

// The kinds: a node's own objects, its pods, and its kubelet's Events.
const (
	NodeKind    Kind = "Node"
	LeaseKind   Kind = "Lease"
	CSINodeKind Kind = "CSINode"
	PodKind     Kind = "Pod"
	EventKind   Kind = "Event"
)

// Ref names an object upstream.
type Ref struct {
	Kind      Kind
	Namespace string
	Name      string
}

func (r Ref) String() string {
	if r.Namespace == "" {
		return string(r.Kind) + " " + r.Name
	}
	return string(r.Kind) + " " + r.Namespace + "/" + r.Name
}

// Owner is who writes a slot: the node (its kubelet) or the cluster (its
// controllers, its users, and local users whose writes the edge
// forwarded).
type Owner string

const (
	NodeOwned    Owner = "node"
	ClusterOwned Owner = "cluster"
)

// Outcome is what a writer was told of its write.
type Outcome string

const (
	// Acked: a success answer. Refused: an answer that says it was not
	// made (a 4xx, a 503 of the mirror). Unknown: no answer (a timeout, a
	// broken connection), or a 5xx: it may or may not have been made.
	Acked   Outcome = "acked"
	Refused Outcome = "refused"
	Unknown Outcome = "unknown"
)

// Slots a write may set, besides a field's: the object's creation and its
// deletions. The value of a final delete is the terminal phase the
// kubelet wrote before it.
const (
	SlotCreate      = "create"
	SlotFinalDelete = "delete/final"
	SlotForceDelete = "delete/force"
	SlotGraceDelete = "delete/graceful"
)

// Write is one write of the history: who (an identity, as the server
// knew it), what (the object, the uid the writer wrote to when it named
// one, the slot and its value), whose the slot is, and what the writer
// was told.
type Write struct {
	Step    int
	Writer  string
	Ref     Ref
	UID     string
	Slot    string
	Value   string
	Owner   Owner
	Began   time.Time
	Ended   time.Time
	Outcome Outcome
	Err     string
}

func (w Write) String() string {
	uid := ""
	if w.UID != "" {
		uid = " uid=" + shortUID(w.UID)
	}
	err := ""
	if w.Err != "" {
		err = ": " + w.Err
	}
	return fmt.Sprintf("step %d %s %s%s %s=%q %s%s", w.Step, w.Writer, w.Ref, uid, w.Slot, w.Value, w.Outcome, err)
}

func shortUID(uid string) string {
	if len(uid) > 8 {
		return uid[:8]
	}
	return uid
}

// History is what every writer did and was told, safe for concurrent
// writers.
type History struct {
	mu     sync.Mutex
	writes []Write
}

// Add records w.
func (h *History) Add(w Write) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.writes = append(h.writes, w)
}

// Writes are the writes, in the order they began.
func (h *History) Writes() []Write {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := slices.Clone(h.writes)
	sort.SliceStable(out, func(i, j int) bool { return out[i].Began.Before(out[j].Began) })
	return out
}

// Counts are the writes by writer kind (the identity's first word) and
// outcome, for a run's figures.
func (h *History) Counts() map[string]int {
	out := map[string]int{}
	for _, w := range h.Writes() {
		who, _, _ := strings.Cut(w.Writer, ":")
		out[who+" "+string(w.Outcome)]++
	}
	return out
}
