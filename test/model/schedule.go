package model

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"time"
)

// Op is what a step does.
type Op string

// The steps of a schedule: the links' faults and the gateways' kills, the
// kubelets' writes (each on its own node's identity, through its own
// gateway), the cluster's writers (upstream), and local users writing
// through any gateway of the site.
const (
	// The uplink of gateway G: refused (every connection closed and
	// refused), hung (open, nothing moves), slow (each chunk late), and
	// back.
	LinkCut     Op = "link-cut"
	LinkHang    Op = "link-hang"
	LinkSlow    Op = "link-slow"
	LinkRestore Op = "link-restore"
	// Kill kills gateway G with SIGKILL and starts it again.
	Kill Op = "kill"

	// The kubelet of node N: its Ready condition's heartbeat, a condition
	// that flips (DiskPressure), its Lease (renewed, and its duration
	// changed), its CSINode's driver, the status of its pod P (phase,
	// Ready, a probe's condition), an Event about it, a dry run of a
	// status write, and its sync: the terminal status and final delete of
	// the pods the cluster marked for deletion.
	KubeletHeartbeat Op = "kubelet-heartbeat"
	KubeletCondition Op = "kubelet-condition"
	KubeletLease     Op = "kubelet-lease"
	KubeletCSINode   Op = "kubelet-csinode"
	KubeletPodStatus Op = "kubelet-pod-status"
	KubeletEvent     Op = "kubelet-event"
	KubeletDryRun    Op = "kubelet-dry-run"
	KubeletSync      Op = "kubelet-sync"

	// The cluster's writers: pod P of node N created, deleted gracefully
	// (the kubelet finishes it), deleted at once and created again (a new
	// uid); the attach-detach controller's volumesAttached of node N, its
	// labels and taints, a pod's DisruptionTarget and labels, the labels
	// of a Lease.
	ClusterCreatePod     Op = "cluster-create-pod"
	ClusterDeletePod     Op = "cluster-delete-pod"
	ClusterRecreatePod   Op = "cluster-recreate-pod"
	ClusterVolumes       Op = "cluster-volumes"
	ClusterNodeLabel     Op = "cluster-node-label"
	ClusterTaint         Op = "cluster-taint"
	ClusterDisruption    Op = "cluster-disruption"
	ClusterPodLabel      Op = "cluster-pod-label"
	ClusterLeaseLabel    Op = "cluster-lease-label"
	ClusterCSINodeLabel  Op = "cluster-csinode-label"
	ClusterNodeCondition Op = "cluster-node-condition"

	// The site's own operations, by its operator: the CA rotated on
	// gateway G (kubestore ca rotate, as the README says it) and, later,
	// finished (ca finish --force); gateway G updated to a newer release
	// (on trial) and, later, back on its own (the fallback); gateway G
	// removed from the site (kubestore member remove, through another
	// member) and, once it stopped, started again: it rejoins.
	SiteCARotate    Op = "site-ca-rotate"
	SiteCAFinish    Op = "site-ca-finish"
	SiteUpdate      Op = "site-update"
	SiteFallback    Op = "site-fallback"
	SiteMemberReset Op = "site-member-remove"

	// A local user of the site, through gateway G: a label of node N's
	// pod P (any node's: its own gateway's or another's), a write of a
	// local ConfigMap, and the deletion of a namespace (a local one, or
	// the one the copies are in, which is refused).
	LocalPodLabel        Op = "local-pod-label"
	LocalConfigMap       Op = "local-configmap"
	LocalNamespaceDelete Op = "local-namespace-delete"
)

// Step is one step of a schedule, At after its start. G is a gateway, N a
// node (gateway N is node N's), P a pod slot of node N, V a value that
// makes the write's value unique.
type Step struct {
	At time.Duration
	Op Op
	G  int `json:",omitempty"`
	N  int `json:",omitempty"`
	P  int `json:",omitempty"`
	V  int `json:",omitempty"`
}

func (s Step) String() string {
	return fmt.Sprintf("%6.2fs %-22s g=%d n=%d p=%d v=%d", s.At.Seconds(), s.Op, s.G, s.N, s.P, s.V)
}

// Options size a schedule.
type Options struct {
	// Gateways is the site's size (1 to 3); each is a node.
	Gateways int
	// Duration is how long the steps last; Pods the pod slots per node.
	Duration time.Duration
	Pods     int
	// MaxOutage bounds a link's fault (kube-apiserver's node-lifecycle
	// controller marks a node unknown after 40 s).
	MaxOutage time.Duration
}

// Schedule is what one seed makes.
type Schedule struct {
	Seed    uint64
	Options Options
	// Nodes are the nodes' names, gateway i's node first: they share
	// prefixes (edge-1, edge-10), as node names do.
	Nodes []string
	Steps []Step
}

// Prefix is the schedule of its first n steps.
func (s Schedule) Prefix(n int) Schedule {
	out := s
	out.Steps = s.Steps[:min(n, len(s.Steps))]
	return out
}

func (s Schedule) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "seed %d: %d gateways (%s), %d steps over %s\n", s.Seed, s.Options.Gateways, strings.Join(s.Nodes, ", "), len(s.Steps), s.Options.Duration)
	for i, st := range s.Steps {
		fmt.Fprintf(&b, "  %3d %s\n", i, st)
	}
	return b.String()
}

// nodeNames are the nodes of a site of n, sharing prefixes.
var nodeNames = []string{"edge-1", "edge-10", "edge-11"}

// Generate makes the schedule of seed: the same seed makes the same
// schedule. The steps come every 150 to 450 ms; each gateway's link
// fails now and then (refused, hung or slow, for 2 s to MaxOutage) and
// comes back; a gateway is killed rarely; the rest are writes, the
// kubelets' most.
func Generate(seed uint64, opts Options) Schedule {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	s := Schedule{Seed: seed, Options: opts, Nodes: nodeNames[:opts.Gateways]}
	// faultUntil is when gateway g's fault ends (its restore step).
	faultUntil := make([]time.Duration, opts.Gateways)
	lastKill := -time.Hour
	v := 0
	add := func(st Step) {
		v++
		st.V = v
		s.Steps = append(s.Steps, st)
	}
	for at := time.Second; at < opts.Duration; at += time.Duration(150+r.IntN(300)) * time.Millisecond {
		g := r.IntN(opts.Gateways)
		n, p := r.IntN(opts.Gateways), r.IntN(opts.Pods)
		x := r.IntN(100)
		switch {
		case x < 6 && faultUntil[g] < at && at < opts.Duration-3*time.Second:
			op := []Op{LinkCut, LinkCut, LinkHang, LinkSlow}[r.IntN(4)]
			d := 2*time.Second + time.Duration(r.Int64N(int64(opts.MaxOutage-2*time.Second)))
			faultUntil[g] = min(at+d, opts.Duration-time.Second)
			add(Step{At: at, Op: op, G: g})
			add(Step{At: faultUntil[g], Op: LinkRestore, G: g})
		case x < 8 && at-lastKill > 8*time.Second && at < opts.Duration-6*time.Second:
			lastKill = at
			add(Step{At: at, Op: Kill, G: g})
		case x < 52:
			op := []Op{KubeletHeartbeat, KubeletHeartbeat, KubeletCondition, KubeletLease, KubeletLease, KubeletCSINode,
				KubeletPodStatus, KubeletPodStatus, KubeletPodStatus, KubeletEvent, KubeletDryRun, KubeletSync, KubeletSync}[r.IntN(13)]
			add(Step{At: at, Op: op, G: n, N: n, P: p})
		case x < 85:
			op := []Op{ClusterCreatePod, ClusterCreatePod, ClusterDeletePod, ClusterRecreatePod, ClusterVolumes, ClusterNodeLabel,
				ClusterTaint, ClusterDisruption, ClusterPodLabel, ClusterLeaseLabel, ClusterCSINodeLabel, ClusterNodeCondition}[r.IntN(12)]
			add(Step{At: at, Op: op, N: n, P: p})
		default:
			op := []Op{LocalPodLabel, LocalPodLabel, LocalConfigMap, LocalNamespaceDelete}[r.IntN(4)]
			add(Step{At: at, Op: op, G: g, N: n, P: p})
		}
	}
	// The site's operations, each at most once: a CA rotation in half the
	// schedules, finished 10 to 15 s later; an update and its fallback in
	// a third; a member removed and rejoining in a third of the sites of
	// three (a site of two would lose its quorum).
	if r.IntN(2) == 0 {
		at := time.Duration(4+r.IntN(10)) * time.Second
		add(Step{At: at, Op: SiteCARotate, G: r.IntN(opts.Gateways)})
		add(Step{At: at + time.Duration(10+r.IntN(6))*time.Second, Op: SiteCAFinish, G: r.IntN(opts.Gateways)})
	}
	if r.IntN(3) == 0 {
		at := time.Duration(4+r.IntN(16)) * time.Second
		g := r.IntN(opts.Gateways)
		add(Step{At: at, Op: SiteUpdate, G: g})
		add(Step{At: at + time.Duration(8+r.IntN(5))*time.Second, Op: SiteFallback, G: g})
	}
	if opts.Gateways == 3 && r.IntN(3) == 0 {
		add(Step{At: time.Duration(8+r.IntN(16)) * time.Second, Op: SiteMemberReset, G: r.IntN(opts.Gateways)})
	}
	sort.SliceStable(s.Steps, func(i, j int) bool { return s.Steps[i].At < s.Steps[j].At })
	return s
}
