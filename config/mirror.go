package config

import (
	"fmt"
	"net/url"
	"os"
	"strings"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Mirror configures the edge mirror: objects of an upstream cluster copied
// into the local store and served from it, online or not (package mirror).
type Mirror struct {
	// UpstreamKubeconfig, when set, turns the mirror on: the kubeconfig of
	// the upstream cluster, with the identity the mirror uses there.
	UpstreamKubeconfig string `json:"upstreamKubeconfig,omitempty"`
	// NodeName replaces $(NODE_NAME) in the rules; empty is the host name,
	// as the kubelet's --hostname-override default.
	NodeName string `json:"nodeName,omitempty"`
	// Rules say what is mirrored; an object no rule matches is local.
	Rules []MirrorRule `json:"rules"`
	// TunnelEndpoints, when set, are the https URLs of the cluster's
	// tunnel endpoints (kubestore tunnel-endpoint, one beside each
	// kube-apiserver): the gateway keeps a tunnel open to each, through
	// which that kube-apiserver reaches this node's kubelet (package
	// tunnel).
	TunnelEndpoints []string `json:"tunnelEndpoints,omitempty"`
	// TunnelCAFile verifies the endpoint's serving certificate; empty is
	// the CA of the upstream kubeconfig, else the system's roots.
	TunnelCAFile string `json:"tunnelCAFile,omitempty"`
}

// MirrorRule selects the objects of one resource that are mirrored.
type MirrorRule struct {
	// Name identifies the rule in metrics, logs and the objects it
	// mirrored; empty is Resource.
	Name string `json:"name,omitempty"`
	// Resource is resource[.group], as in --watch-cache-sizes: pods,
	// endpointslices.discovery.k8s.io, widgets.example.com. A custom
	// resource's CustomResourceDefinition is mirrored with it.
	Resource string `json:"resource"`
	// Namespaces limits a namespaced resource to these namespaces; empty
	// is all.
	Namespaces []string `json:"namespaces,omitempty"`
	// LabelSelector and FieldSelector are sent to the upstream as a list's
	// or watch's selectors; $(NODE_NAME) is replaced by the node name.
	LabelSelector string `json:"labelSelector,omitempty"`
	FieldSelector string `json:"fieldSelector,omitempty"`
	// ReferencedBy names another rule: only the objects that rule's pods
	// reference (volumes, env, envFrom, image pull secrets, the
	// ServiceAccount) are mirrored, each watched by name, as the kubelet
	// watches them. Only configmaps, secrets and serviceaccounts can be
	// referenced, only by a rule of pods.
	ReferencedBy string `json:"referencedBy,omitempty"`
}

// referenceable are the resources a rule may mirror as referenced by pods.
var referenceable = map[schema.GroupResource]bool{{Resource: "configmaps"}: true, {Resource: "secrets"}: true, {Resource: "serviceaccounts"}: true}

// NodeNameVar is replaced by the node name in a rule's selectors.
const NodeNameVar = "$(NODE_NAME)"

// DefaultMirrorRules are what a node runs on: its own Node, Lease (the
// heartbeat the cluster's node-lifecycle controller reads) and CSINode,
// its pods and the ConfigMaps, Secrets and ServiceAccounts they reference, the Services and
// EndpointSlices that kube-proxy and CoreDNS watch, and the RuntimeClasses
// and CSIDrivers the kubelet watches. Nothing else.
func DefaultMirrorRules() []MirrorRule {
	return []MirrorRule{
		{Name: "node", Resource: "nodes", FieldSelector: "metadata.name=" + NodeNameVar},
		{Name: "node-lease", Resource: "leases.coordination.k8s.io", Namespaces: []string{"kube-node-lease"}, FieldSelector: "metadata.name=" + NodeNameVar},
		{Name: "csinode", Resource: "csinodes.storage.k8s.io", FieldSelector: "metadata.name=" + NodeNameVar},
		{Name: "pods", Resource: "pods", FieldSelector: "spec.nodeName=" + NodeNameVar},
		{Name: "configmaps", Resource: "configmaps", ReferencedBy: "pods"},
		{Name: "secrets", Resource: "secrets", ReferencedBy: "pods"},
		{Name: "serviceaccounts", Resource: "serviceaccounts", ReferencedBy: "pods"},
		{Name: "services", Resource: "services"},
		{Name: "endpointslices", Resource: "endpointslices.discovery.k8s.io"},
		{Name: "runtimeclasses", Resource: "runtimeclasses.node.k8s.io"},
		{Name: "csidrivers", Resource: "csidrivers.storage.k8s.io"},
	}
}

// Enabled reports whether the mirror runs.
func (m Mirror) Enabled() bool { return m.UpstreamKubeconfig != "" }

// RuleName is the rule's name, defaulted.
func (r MirrorRule) RuleName() string {
	if r.Name != "" {
		return r.Name
	}
	return r.Resource
}

// GroupResource is the rule's resource.
func (r MirrorRule) GroupResource() schema.GroupResource {
	return schema.ParseGroupResource(r.Resource)
}

// SelectsNode reports whether the rule selects by the node ($(NODE_NAME)
// in a selector): its objects are the node's own (its Node, Lease,
// CSINode, pods), and each gateway of a site mirrors its own node's.
func (r MirrorRule) SelectsNode() bool {
	return strings.Contains(r.LabelSelector, NodeNameVar) || strings.Contains(r.FieldSelector, NodeNameVar)
}

// Selectors are the rule's selectors with $(NODE_NAME) replaced.
func (r MirrorRule) Selectors(nodeName string) (label, field string) {
	return strings.ReplaceAll(r.LabelSelector, NodeNameVar, nodeName), strings.ReplaceAll(r.FieldSelector, NodeNameVar, nodeName)
}

// EffectiveNodeName is NodeName or, when empty, the host name in lower
// case.
func (m Mirror) EffectiveNodeName() string {
	if m.NodeName != "" {
		return m.NodeName
	}
	host, err := os.Hostname()
	if err != nil {
		return ""
	}
	return strings.ToLower(host)
}

// mirrorRulesKey names the rules in messages: they are set in the file only.
const mirrorRulesKey = "mirror.rules"

func (m Mirror) validate() []error {
	var errs []error
	seen := map[string]bool{}
	for _, e := range m.TunnelEndpoints {
		u, err := url.Parse(e)
		switch {
		case !m.Enabled():
			errs = append(errs, invalid(FlagTunnelEndpoint, e, fmt.Sprintf("a tunnel is a mirror's: it needs --%s", FlagUpstreamKubeconfig)))
		case err != nil || u.Scheme != "https" || u.Host == "" || (u.Path != "" && u.Path != "/"):
			errs = append(errs, invalid(FlagTunnelEndpoint, e, "must be https://HOST[:PORT] of the tunnel endpoint"))
		case seen[e]:
			errs = append(errs, invalid(FlagTunnelEndpoint, e, "is given twice"))
		}
		seen[e] = true
	}
	if !m.Enabled() {
		return errs
	}
	node := m.EffectiveNodeName()
	if msgs := validation.IsDNS1123Subdomain(node); len(msgs) > 0 {
		errs = append(errs, invalid(FlagNodeName, node, "must be a node name (DNS subdomain): "+strings.Join(msgs, "; ")))
	}
	if len(m.Rules) == 0 {
		errs = append(errs, fmt.Errorf("invalid %s: empty: with --%s set, at least one rule (kubestore config defaults prints the default ones)", mirrorRulesKey, FlagUpstreamKubeconfig))
	}
	byName := map[string]MirrorRule{}
	for i, r := range m.Rules {
		if _, dup := byName[r.RuleName()]; dup {
			errs = append(errs, ruleInvalid(i, r, "name", r.RuleName(), "is the name of an earlier rule; give each rule its own name"))
		}
		byName[r.RuleName()] = r
	}
	for i, r := range m.Rules {
		errs = append(errs, r.validate(i, node, byName)...)
	}
	return errs
}

func ruleInvalid(i int, r MirrorRule, field, value, why string) error {
	return fmt.Errorf("invalid %s[%d] (%s) %s %q: %s", mirrorRulesKey, i, r.RuleName(), field, value, why)
}

func (r MirrorRule) validate(i int, node string, byName map[string]MirrorRule) []error {
	var errs []error
	if msgs := validation.IsDNS1123Subdomain(r.RuleName()); len(msgs) > 0 {
		errs = append(errs, ruleInvalid(i, r, "name", r.RuleName(), strings.Join(msgs, "; ")))
	}
	gr := r.GroupResource()
	if r.Resource == "" || len(validation.IsDNS1123Label(gr.Resource)) > 0 || (gr.Group != "" && len(validation.IsDNS1123Subdomain(gr.Group)) > 0) {
		errs = append(errs, ruleInvalid(i, r, "resource", r.Resource, "must be the lowercase plural name, with its group unless it is a core resource, e.g. pods or widgets.example.com"))
	}
	for _, ns := range r.Namespaces {
		if msgs := validation.IsDNS1123Label(ns); len(msgs) > 0 {
			errs = append(errs, ruleInvalid(i, r, "namespaces", ns, strings.Join(msgs, "; ")))
		}
	}
	label, field := r.Selectors(node)
	if _, err := labels.Parse(label); err != nil {
		errs = append(errs, ruleInvalid(i, r, "labelSelector", r.LabelSelector, err.Error()))
	}
	if _, err := fields.ParseSelector(field); err != nil {
		errs = append(errs, ruleInvalid(i, r, "fieldSelector", r.FieldSelector, err.Error()))
	}
	if r.ReferencedBy != "" {
		by, ok := byName[r.ReferencedBy]
		switch {
		case !referenceable[gr]:
			errs = append(errs, ruleInvalid(i, r, "referencedBy", r.ReferencedBy, "only configmaps, secrets and serviceaccounts can be mirrored as referenced by pods"))
		case !ok:
			errs = append(errs, ruleInvalid(i, r, "referencedBy", r.ReferencedBy, "names no rule"))
		case by.GroupResource() != schema.GroupResource{Resource: "pods"}:
			errs = append(errs, ruleInvalid(i, r, "referencedBy", r.ReferencedBy, "must name a rule of pods"))
		case r.LabelSelector != "" || r.FieldSelector != "" || len(r.Namespaces) > 0:
			errs = append(errs, ruleInvalid(i, r, "referencedBy", r.ReferencedBy, "takes no namespaces or selectors: the pods say which objects"))
		}
	}
	return errs
}
