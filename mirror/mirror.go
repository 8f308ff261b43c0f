// Package mirror copies objects of an upstream cluster into the local store
// and keeps them there, online or not: the job of KubeEdge's MetaServer,
// OpenYurt's YurtHub and SuperEdge's lite-apiserver, done with real
// revisions. The config's rules say what is mirrored; for each, a stream
// lists and watches the upstream with client-go (WatchList when the
// upstream serves it, bookmarks on) and writes what changed into the local
// etcd through the resource's storage, below the REST layer, so an object
// keeps the upstream's uid and metadata and gets a local resourceVersion.
//
// Each mirrored object records the rule and the upstream resourceVersion
// it came from in two annotations; each stream persists the last upstream
// resourceVersion it applied, so a restart or an outage resumes the
// upstream watch where it stopped. A resync after a 410 is a diff against
// what is stored: an object whose upstream resourceVersion did not change
// is not written, so local watchers get exactly one event per upstream
// change and none for the rest.
//
// A mirrored object belongs to the upstream: WithWriteThrough forwards
// local writes to it while the link is up and refuses them with 503 while
// it is down, except the node's own writes (its Node's status, Lease and
// CSINode, its pods' status and final deletes), which it applies locally
// and keeps pending until the link is back, and the Events of the node's
// agents, which it queues for the upstream. Objects no rule matches are
// local.
//
// Use:
//
//	m, err := mirror.New(cc.Config().Mirror, stores, state)
//	handler = m.WithWriteThrough(handler, serializer, decoder, maxBodyBytes)
//	go m.Run(ctx) // until ctx ends
package mirror

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/kubestore/kubestore/records/family"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/kubestore/kubestore/config"
)

// Mirror mirrors the rules' objects and forwards writes to them. It
// holds the two flows: downstream, the streams that copy the upstream's
// objects into the local store (stream.go, apply.go, references.go), and
// the uplink, the node's writes going up (uplink.go). Both reach the
// upstream through one link (link.go).
type Mirror struct {
	*link
	stores Stores
	state  State
	node   string
	rules  []*rule
	// up is the uplink: write-through, the node's pending offline writes
	// and their reconciliation, the Event outbox.
	up *uplink

	// noWatchList is set once the upstream refused a WatchList: it is too
	// old or has the feature off, and every relist lists.
	noWatchList atomic.Bool

	mu      sync.Mutex
	streams map[string]*stream
	refs    *references
	// deleted are the uids of objects the upstream deleted.
	deleted deletedUIDs
	// elect, when set, runs each rule's streams only while this process
	// leads the rule (SetElector).
	elect Elector
	// deferred are the copies waiting for their terminating namespace to
	// go (deferred.go).
	deferred deferredCopies
	// foreignRules are the rules of other gateways whose copies writes
	// through this one reached, by resource and name (mirroredBy); site
	// the resources every gateway's rules mirror (mirroredOnSite).
	foreignRules sync.Map
	site         siteResources
	// view, when set, is the node's view of default/kubernetes (SetView).
	view *view
}

// rule is a config rule with its selectors resolved.
type rule struct {
	// name identifies the rule's copies (mirrored.AnnotationRule), records and
	// election: the config's name, and for a rule that selects by the
	// node, <name>@<node>, so that the gateways of a site, each a node,
	// never take each other's copies for their own. base is the config's
	// name.
	name   string
	base   string
	gr     schema.GroupResource
	cfg    config.MirrorRule
	label  string
	field  string
	labels labels.Selector
	fields fields.Selector
	// referencedBy is the pods rule whose pods say which objects of this
	// rule are mirrored.
	referencedBy string
	// object, when set, is the one object the rule mirrors: the
	// CustomResourceDefinition of a custom resource's rule.
	object string
	// foreign marks a rule this gateway does not run: another gateway's
	// of the site, whose copy a write through this one reached
	// (mirroredBy). A write's answer keeps the copy that rule's; nothing
	// else of this gateway follows it.
	foreign bool
}

// ruleFor is rule cfg as the gateway of node runs it: its selectors with
// node's name, named <name>@<node> when it selects by the node.
func ruleFor(cfg config.MirrorRule, node string) (*rule, error) {
	label, field := cfg.Selectors(node)
	ls, err := labels.Parse(label)
	if err != nil {
		return nil, err
	}
	fs, err := fields.ParseSelector(field)
	if err != nil {
		return nil, err
	}
	if name, ok := localOnly[cfg.GroupResource()]; ok {
		if not := fields.OneTermNotEqualSelector("metadata.name", name); fs.Empty() {
			fs = not
		} else {
			fs = fields.AndSelectors(fs, not)
		}
		field = fs.String()
	}
	name := cfg.RuleName()
	if cfg.SelectsNode() {
		name += "@" + node
	}
	return &rule{name: name, base: cfg.RuleName(), gr: cfg.GroupResource(), cfg: cfg, label: label, field: field,
		labels: ls, fields: fs, referencedBy: cfg.ReferencedBy}, nil
}

// localOnly are objects each API server publishes for itself, which the
// edge's own controllers keep: kube-root-ca.crt holds the CA that verifies
// the edge, not the upstream. No rule mirrors them, and writes to them
// stay local.
var localOnly = map[schema.GroupResource]string{{Resource: "configmaps"}: "kube-root-ca.crt"}

// namespaces are the local namespaces, whose delete the write-through
// checks (namespaceDeletable) and whose terminating state defers a copy.
var namespaces = schema.GroupResource{Resource: "namespaces"}

// crdResource is where custom resources are defined.
var crdResource = schema.GroupResource{Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions"}

// userAgent identifies the mirror at the upstream.
const userAgent = "kubestore-mirror"

// New builds the mirror of cfg, which Complete validated; nothing runs
// until Run.
func New(cfg config.Mirror, stores Stores, state State) (*Mirror, error) {
	upstream, err := LoadUpstream(cfg)
	if err != nil {
		return nil, err
	}
	l, err := newLink(upstream)
	if err != nil {
		return nil, err
	}
	m := &Mirror{link: l, stores: stores, state: state, node: cfg.EffectiveNodeName(), streams: map[string]*stream{}}
	for _, r := range cfg.Rules {
		rl, err := ruleFor(r, m.node)
		if err != nil {
			return nil, err
		}
		m.rules = append(m.rules, rl)
	}
	// A custom resource's definition is mirrored with it, once however
	// many rules name the resource.
	defined := map[schema.GroupResource]bool{}
	for _, r := range slices.Clone(m.rules) {
		if !stores.Builtin(r.gr) && !defined[r.gr] {
			defined[r.gr] = true
			m.rules = append(m.rules, &rule{name: r.name + "-definition", base: r.name + "-definition", gr: crdResource, object: r.gr.String(),
				labels: labels.Everything(), fields: fields.Everything()})
		}
	}
	m.refs = newReferences(m)
	m.up = newUplink(m, l, stores, state, m.node)
	registerMetrics()
	return m, nil
}

// LoadUpstream reads --upstream-kubeconfig. The server checks it before
// anything costly starts, so a bad file fails the start with one line.
func LoadUpstream(cfg config.Mirror) (*rest.Config, error) {
	upstream, err := clientcmd.BuildConfigFromFlags("", cfg.UpstreamKubeconfig)
	if err != nil {
		return nil, fmt.Errorf("invalid --%s %q: %w", config.FlagUpstreamKubeconfig, cfg.UpstreamKubeconfig, err)
	}
	return upstream, nil
}

// Upstream names the upstream in messages: its host and port.
func (m *Mirror) Upstream() string { return m.host }

// Run mirrors until ctx ends, then persists where each stream stopped.
func (m *Mirror) Run(ctx context.Context) {
	klog.InfoS("Mirroring the upstream", "upstream", m.host, "node", m.node, "rules", len(m.rules))
	m.deferred.start(ctx)
	defer m.deferred.wait()
	if err := m.forgetRemovedRules(ctx); err != nil {
		klog.ErrorS(err, "Mirror: deleting the copies of rules no longer configured")
	}
	// The node's writes of a previous run that were not reconciled: their
	// objects stay as the node left them until they are.
	m.up.load(ctx)
	m.loadDeleted(ctx)
	m.up.forgetTokens(ctx)
	// The references of the pods already mirrored first: a referenced
	// object no pod needs any more is deleted before anything is synced.
	if err := m.refs.seed(ctx); err != nil {
		klog.ErrorS(err, "Mirror: reading the mirrored pods' references")
	}
	var wg sync.WaitGroup
	for _, r := range m.rules {
		if r.referencedBy != "" {
			continue
		}
		wg.Go(func() { m.runRule(ctx, r) })
	}
	wg.Add(5)
	go func() {
		defer wg.Done()
		m.refreshView(ctx)
	}()
	go func() {
		defer wg.Done()
		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(deletedFor):
				m.loadDeleted(ctx)
				m.up.forgetTokens(ctx)
			}
		}
	}()
	go func() {
		defer wg.Done()
		m.up.run(ctx)
	}()
	go func() {
		defer wg.Done()
		wait.UntilWithContext(ctx, m.updateMetrics, time.Second)
	}()
	go func() {
		defer wg.Done()
		wait.UntilWithContext(ctx, m.probe, probeEvery)
	}()
	<-ctx.Done()
	wg.Wait()
	m.refs.wait()
}

// newStream registers the stream of rule r in namespace ns, or of the one
// object ns/name.
func (m *Mirror) newStream(r *rule, ns, name string) *stream {
	s := &stream{m: m, rule: r, namespace: ns, name: name}
	m.mu.Lock()
	m.streams[s.id()] = s
	m.mu.Unlock()
	return s
}

func (m *Mirror) dropStream(s *stream) {
	m.mu.Lock()
	delete(m.streams, s.id())
	m.mu.Unlock()
}

func (m *Mirror) allStreams() []*stream {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]*stream, 0, len(m.streams))
	for _, s := range m.streams {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id() < out[j].id() })
	return out
}

// Problems are the streams that are not connected and synced, each with
// why; none means the mirror is in sync with the upstream.
func (m *Mirror) Problems() []string {
	var out []string
	for _, s := range m.allStreams() {
		st := s.status()
		switch {
		case st.err != nil:
			out = append(out, fmt.Sprintf("%s: %v", s.id(), st.err))
		case !st.connected:
			out = append(out, s.id()+": not connected to "+m.host)
		case !st.synced:
			out = append(out, s.id()+": syncing")
		}
	}
	if ip := m.uncoveredService(); ip != "" {
		out = append(out, fmt.Sprintf("the cluster's Service default/kubernetes is at %s, which the serving certificate does not cover: the node's pods cannot verify the gateway there", ip))
	}
	return out
}

// Report is the per-stream state, one line each, then the node's pending
// writes and the Events queued for the upstream, for /mirrorz?verbose.
func (m *Mirror) Report() []string {
	var out []string
	for _, s := range m.allStreams() {
		st := s.status()
		line := fmt.Sprintf("%s connected=%t synced=%t objects=%d", s.id(), st.connected, st.synced, st.objects)
		if !st.lastSync.IsZero() {
			line += " lastSync=" + st.lastSync.UTC().Format(time.RFC3339)
		}
		if st.err != nil {
			line += " error=" + strings.ReplaceAll(st.err.Error(), "\n", " ")
		}
		out = append(out, line)
		for _, key := range slices.Sorted(maps.Keys(st.skipped)) {
			out = append(out, fmt.Sprintf("skipped %s %s: %s", s.id(), key, strings.ReplaceAll(st.skipped[key], "\n", " ")))
		}
	}
	out = append(out, m.deferredReport()...)
	return slices.Clip(append(out, m.up.report()...))
}

// ruleRecord is what the local etcd keeps of each rule the mirror runs: a
// rule later removed from the config left copies, and only this says in
// which resource.
type ruleRecord struct {
	Resource string `json:"resource"`
}

var rulesState = family.MirrorRules.Start()

// configuredState + a node's name records the shared rules (those that do
// not select by the node) that node's gateway is configured with: a
// gateway whose configuration lacks one that another gateway of its site
// has never deletes its copies. A record stays when its gateway goes for
// good (the rule's copies then stay until one gateway is configured with
// the rule and removes it again, or are deleted by hand).
var configuredState = family.MirrorConfigured.Start()

// forgetRemovedRules deletes the copies of rules that are no longer
// configured (or now name another resource), with their records, and
// records the configured ones. The rules of another gateway's node, and
// the shared rules another gateway has, are never this gateway's to
// forget.
func (m *Mirror) forgetRemovedRules(ctx context.Context) error {
	others, err := m.othersShared(ctx)
	if err != nil {
		return err
	}
	records, err := m.state.ListState(ctx, rulesState)
	if err != nil {
		return err
	}
	// Custom resources first: their definitions may be among the removed.
	names := slices.Collect(maps.Keys(records))
	sort.Slice(names, func(i, j int) bool {
		return !m.stores.Builtin(recordResource(records[names[i]])) && m.stores.Builtin(recordResource(records[names[j]]))
	})
	for _, name := range names {
		ruleName := strings.TrimPrefix(name, rulesState)
		gr := recordResource(records[name])
		if _, node, ok := strings.Cut(ruleName, "@"); ok && node != m.node {
			// Another gateway's node: its rule, its copies.
			continue
		}
		if others[ruleName] && m.rule(ruleName) == nil {
			// A shared rule another gateway of the site still has.
			klog.InfoS("Mirror: keeping the copies of a rule this gateway is no longer configured with: another gateway has it", "rule", ruleName)
			continue
		}
		if r := m.rule(ruleName); r != nil && r.gr == gr {
			if r.name != ruleName {
				// The record of a release before per-node names: the
				// copies are this node's rule's (it writes its name on
				// them); only the record and its checkpoint go.
				if err := m.state.DeleteState(ctx, checkpoints(ruleName)); err != nil {
					return err
				}
				if err := m.state.DeleteState(ctx, name); err != nil {
					return err
				}
			}
			continue
		}
		old := &rule{name: ruleName, gr: gr}
		// A custom resource's store needs its definition, which the
		// local server reads within moments of the start.
		var store *Store
		err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 15*time.Second, true, func(ctx context.Context) (bool, error) {
			var err error
			store, err = m.stores.Store(ctx, gr)
			return err == nil, nil
		})
		if err != nil {
			// Kept, to be tried at the next start.
			klog.InfoS("Mirror: cannot delete the copies of a rule no longer configured yet", "rule", ruleName, "resource", gr)
			continue
		}
		local, err := m.localObjects(ctx, old, store, "", "")
		if err != nil {
			return err
		}
		for _, ref := range local {
			if _, err := m.remove(ctx, old, store, ref.namespace, ref.name, "", false); err != nil {
				return err
			}
		}
		klog.InfoS("Mirror: deleted the copies of a rule no longer configured", "rule", ruleName, "resource", gr, "objects", len(local))
		if err := m.state.DeleteState(ctx, checkpoints(ruleName)); err != nil {
			return err
		}
		if err := m.state.DeleteState(ctx, name); err != nil {
			return err
		}
	}
	var shared []string
	for _, r := range m.rules {
		if !r.nodeScoped() {
			shared = append(shared, r.name)
		}
		data, _ := json.Marshal(ruleRecord{Resource: r.gr.String()})
		if string(records[rulesState+r.name]) == string(data) {
			continue
		}
		if err := m.state.PutState(ctx, rulesState+r.name, data); err != nil {
			return err
		}
	}
	data, _ := json.Marshal(shared)
	return m.state.PutState(ctx, family.MirrorConfigured.For(m.node), data)
}

// othersShared are the shared rules the other gateways recorded they are
// configured with.
func (m *Mirror) othersShared(ctx context.Context) (map[string]bool, error) {
	records, err := m.state.ListStatePrefix(ctx, configuredState)
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for name, data := range records {
		if name == family.MirrorConfigured.For(m.node) {
			continue
		}
		var rules []string
		json.Unmarshal(data, &rules) //nolint:errcheck // an unreadable record keeps nothing
		for _, r := range rules {
			out[r] = true
		}
	}
	return out, nil
}

func recordResource(data []byte) schema.GroupResource {
	var rec ruleRecord
	json.Unmarshal(data, &rec) //nolint:errcheck // an unreadable record names no resource
	return schema.ParseGroupResource(rec.Resource)
}
