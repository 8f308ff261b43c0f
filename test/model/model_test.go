package model

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

// The judge must judge: each invariant fails on a history and final state
// that break it, and holds on one that keeps it. A checker that cannot
// fail proves nothing.

var t0 = time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)

// write is a write that began at second s and took 100 ms.
func write(s int, writer string, ref Ref, uid, slot, value string, outcome Outcome) Write {
	return Write{Step: s, Writer: writer, Ref: ref, UID: uid, Slot: slot, Value: value, Owner: OwnerOf(ref.Kind, slot),
		Began: t0.Add(time.Duration(s) * time.Second), Ended: t0.Add(time.Duration(s)*time.Second + 100*time.Millisecond), Outcome: outcome}
}

var (
	node1 = Ref{Kind: NodeKind, Name: "edge-1"}
	pod1  = Ref{Kind: PodKind, Namespace: "model", Name: "p"}
)

// upstreamPod is pod1 of edge-1 upstream with slots.
func upstreamPod(uid string, slots map[string]string) Object {
	full := map[string]string{}
	for s := range owners[PodKind] {
		full[s] = ""
	}
	for k, v := range slots {
		full[k] = v
	}
	return Object{Ref: pod1, UID: uid, Node: "edge-1", Slots: full, Rule: "pods@edge-1", Content: "pod " + uid}
}

func created(uid string) Write {
	return write(0, "cluster", pod1, uid, SlotCreate, uid, Acked)
}

func invariants(vs []Violation) []string {
	var out []string
	for _, v := range vs {
		out = append(out, v.Invariant)
	}
	return out
}

func TestCheck(t *testing.T) {
	kubelet := "kubelet:edge-1"
	for _, c := range []struct {
		name   string
		writes []Write
		final  Final
		want   []string
	}{
		{
			name:   "the node's latest acknowledged status is upstream",
			writes: []Write{created("u1"), write(1, kubelet, pod1, "u1", SlotPhase, "Running", Acked)},
			final:  Final{Upstream: map[Ref]Object{pod1: upstreamPod("u1", map[string]string{SlotPhase: "Running"})}},
		},
		{
			name: "an acknowledged status lost",
			writes: []Write{created("u1"), write(1, kubelet, pod1, "u1", SlotPhase, "Running", Acked),
				write(2, kubelet, pod1, "u1", SlotPhase, "Succeeded", Acked)},
			final: Final{Upstream: map[Ref]Object{pod1: upstreamPod("u1", map[string]string{SlotPhase: "Running"})}},
			want:  []string{Lost},
		},
		{
			name: "a later write whose answer was lost may have landed",
			writes: []Write{created("u1"), write(1, kubelet, pod1, "u1", SlotProbe, "True/p-1", Acked),
				write(2, kubelet, pod1, "u1", SlotProbe, "True/p-2", Unknown)},
			final: Final{Upstream: map[Ref]Object{pod1: upstreamPod("u1", map[string]string{SlotProbe: "True/p-2"})}},
		},
		{
			name: "a refused write landed",
			writes: []Write{created("u1"), write(1, kubelet, pod1, "u1", SlotProbe, "True/p-1", Acked),
				write(2, kubelet, pod1, "u1", SlotProbe, "True/p-2", Refused)},
			final: Final{Upstream: map[Ref]Object{pod1: upstreamPod("u1", map[string]string{SlotProbe: "True/p-2"})}},
			want:  []string{Lost},
		},
		{
			name:   "the cluster's DisruptionTarget reverted by the edge",
			writes: []Write{created("u1"), write(1, "cluster", pod1, "u1", SlotDisruption, "True/d-1", Acked)},
			final:  Final{Upstream: map[Ref]Object{pod1: upstreamPod("u1", nil)}},
			want:   []string{Reverted},
		},
		{
			name: "the node's writes to a pod that went do not count for the new one",
			writes: []Write{created("u1"), write(1, kubelet, pod1, "u1", SlotPhase, "Running", Acked), write(2, "cluster", pod1, "u1", SlotForceDelete, "", Acked),
				created("u2")},
			final: Final{Upstream: map[Ref]Object{pod1: upstreamPod("u2", map[string]string{SlotPhase: "Pending"})}},
		},
		{
			name:  "a pod no writer created",
			final: Final{Upstream: map[Ref]Object{pod1: upstreamPod("u9", nil)}},
			want:  []string{Phantom},
		},
		{
			name:   "a pod the cluster deleted is back upstream",
			writes: []Write{created("u1"), write(2, "cluster", pod1, "u1", SlotForceDelete, "", Acked)},
			final:  Final{Upstream: map[Ref]Object{pod1: upstreamPod("u1", nil)}},
			want:   []string{Zombie},
		},
		{
			name: "the final delete after the terminal status",
			writes: []Write{created("u1"), write(1, kubelet, pod1, "u1", SlotPhase, "Succeeded", Acked),
				write(2, kubelet, pod1, "u1", SlotFinalDelete, "Succeeded", Acked)},
			final: Final{Deleted: map[string]Object{"u1": upstreamPod("u1", map[string]string{SlotPhase: "Succeeded"})}},
		},
		{
			name: "the final delete lost",
			writes: []Write{created("u1"), write(1, kubelet, pod1, "u1", SlotPhase, "Succeeded", Acked),
				write(2, kubelet, pod1, "u1", SlotFinalDelete, "Succeeded", Acked)},
			final: Final{Upstream: map[Ref]Object{pod1: upstreamPod("u1", map[string]string{SlotPhase: "Succeeded"})}},
			want:  []string{Lost},
		},
		{
			name: "the final delete before the terminal status",
			writes: []Write{created("u1"), write(1, kubelet, pod1, "u1", SlotPhase, "Succeeded", Acked),
				write(2, kubelet, pod1, "u1", SlotFinalDelete, "Succeeded", Acked)},
			final: Final{Deleted: map[string]Object{"u1": upstreamPod("u1", map[string]string{SlotPhase: "Pending"})}},
			want:  []string{Lost},
		},
		{
			name:   "every gateway agrees with the upstream",
			writes: []Write{created("u1")},
			final: Final{Nodes: []string{"edge-1", "edge-10"}, Upstream: map[Ref]Object{pod1: upstreamPod("u1", nil)},
				Gateways: map[string]map[Ref]Object{"gw-1": {pod1: upstreamPod("u1", nil)}, "gw-10": {pod1: upstreamPod("u1", nil)}}},
		},
		{
			name:   "a gateway lacks a node's pod, another holds it otherwise",
			writes: []Write{created("u1")},
			final: Final{Nodes: []string{"edge-1", "edge-10"}, Upstream: map[Ref]Object{pod1: upstreamPod("u1", nil)},
				Gateways: map[string]map[Ref]Object{"gw-1": {}, "gw-10": {pod1: func() Object { o := upstreamPod("u1", nil); o.Content = "other"; return o }()}}},
			want: []string{Agree, Agree},
		},
		{
			name:   "a gateway holds a pod the upstream deleted",
			writes: []Write{created("u1")},
			final: Final{Nodes: []string{"edge-1"}, Deleted: map[string]Object{"u1": upstreamPod("u1", nil)},
				Gateways: map[string]map[Ref]Object{"gw-1": {pod1: upstreamPod("u1", nil)}}},
			want: []string{Zombie, Agree},
		},
		{
			name:   "another node's rule on a copy, another node's record",
			writes: []Write{created("u1")},
			final: Final{Nodes: []string{"edge-1", "edge-10"}, Upstream: map[Ref]Object{pod1: upstreamPod("u1", nil)},
				Gateways: map[string]map[Ref]Object{"gw-1": {pod1: func() Object { o := upstreamPod("u1", nil); o.Rule = "pods@edge-10"; return o }()}},
				Records:  []Record{{Dir: "edge-10", Ref: pod1, ObjectNode: "edge-1"}}},
			want: []string{Foreign, Foreign},
		},
		{
			name:   "a pending write never reconciled; a quarantined one is counted, not lost",
			writes: []Write{created("u1")},
			final: Final{Upstream: map[Ref]Object{pod1: upstreamPod("u1", nil)},
				Records: []Record{{Dir: "edge-1", Ref: pod1, ObjectNode: "edge-1"}, {Dir: "edge-1", Ref: node1, ObjectNode: "edge-1", Quarantined: true}}},
			want: []string{Agree},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := invariants(Check(c.writes, c.final))
			if strings.Join(got, ",") != strings.Join(c.want, ",") {
				t.Errorf("violations %v, want %v:\n%v", got, c.want, Check(c.writes, c.final))
			}
		})
	}
}

func TestCheckWatches(t *testing.T) {
	ev := func(typ string, rv int64, content string) WatchEvent {
		return WatchEvent{Type: typ, Ref: pod1, UID: "u1", RV: rv, Content: content}
	}
	for _, c := range []struct {
		name string
		log  WatchLog
		want int
	}{
		{"one event per change", WatchLog{Events: []WatchEvent{ev("ADDED", 5, "a"), ev("MODIFIED", 7, "b"), ev("DELETED", 9, "b")}}, 0},
		{"a resourceVersion back", WatchLog{Events: []WatchEvent{ev("ADDED", 5, "a"), ev("MODIFIED", 4, "b")}}, 1},
		{"an event for no change", WatchLog{Events: []WatchEvent{ev("ADDED", 5, "a"), ev("MODIFIED", 7, "a")}}, 1},
		{"a relist after the gateway's restart", WatchLog{Relists: []time.Time{t0.Add(10 * time.Second)}, Restarts: []time.Time{t0.Add(5 * time.Second)}}, 0},
		{"a relist with no restart", WatchLog{Relists: []time.Time{t0.Add(10 * time.Second)}, Restarts: []time.Time{t0.Add(15 * time.Second)}}, 1},
	} {
		if got := CheckWatches([]WatchLog{c.log}); len(got) != c.want {
			t.Errorf("%s: %d violations %v, want %d", c.name, len(got), got, c.want)
		}
	}
}

// A seed makes one schedule, whatever runs it; each fault of a link ends
// within the schedule.
func TestGenerate(t *testing.T) {
	opts := Options{Gateways: 3, Duration: 40 * time.Second, Pods: 4, MaxOutage: 12 * time.Second}
	a, b := Generate(7, opts), Generate(7, opts)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("seed 7 made two schedules")
	}
	if reflect.DeepEqual(a.Steps, Generate(8, opts).Steps) {
		t.Error("seeds 7 and 8 made the same steps")
	}
	ops := map[Op]int{}
	down := map[int]bool{}
	for _, s := range a.Steps {
		ops[s.Op]++
		switch s.Op {
		case LinkCut, LinkHang, LinkSlow:
			if down[s.G] {
				t.Errorf("gateway %d's link fails again before it was restored: %s", s.G, s)
			}
			down[s.G] = true
		case LinkRestore:
			down[s.G] = false
		}
		if s.At >= opts.Duration {
			t.Errorf("a step after the schedule's end: %s", s)
		}
	}
	for g, d := range down {
		if d {
			t.Errorf("gateway %d's link is not restored by the end", g)
		}
	}
	if ops[KubeletPodStatus] == 0 || ops[ClusterCreatePod] == 0 || ops[LinkRestore] == 0 {
		t.Errorf("a schedule of 40 s without some of the writers or faults: %v", ops)
	}
}

// Shrink finds the shortest failing prefix by bisection.
func TestShrink(t *testing.T) {
	s := Generate(3, Options{Gateways: 2, Duration: 30 * time.Second, Pods: 3, MaxOutage: 5 * time.Second})
	culprit := len(s.Steps) / 3
	runs := 0
	got := Shrink(s, 20, func(p Schedule) bool { runs++; return len(p.Steps) > culprit })
	if len(got.Steps) != culprit+1 {
		t.Errorf("shrunk to %d steps, want %d (the first %d pass)", len(got.Steps), culprit+1, culprit)
	}
	if runs > 10 {
		t.Errorf("%d runs to shrink %d steps", runs, len(s.Steps))
	}
}
