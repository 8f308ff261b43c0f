package node

import (
	"context"
	"fmt"
	"reflect"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
)

// upstreamNodeRules is what k8s.io/kubernetes v1.37.2's
// bootstrappolicy.NodeRules() returns with the default feature gates, one
// rule a line as verbs, API groups, resources, resource names and
// non-resource URLs (printed from upstream with %q).
var upstreamNodeRules = []string{
	`["create"] ["authentication.k8s.io"] ["tokenreviews"] [] []`,
	`["create"] ["authorization.k8s.io"] ["localsubjectaccessreviews" "subjectaccessreviews"] [] []`,
	`["get" "list" "watch"] [""] ["services"] [] []`,
	`["create" "get" "list" "watch"] [""] ["nodes"] [] []`,
	`["patch" "update"] [""] ["nodes/status"] [] []`,
	`["patch" "update"] [""] ["nodes"] [] []`,
	`["create" "patch" "update"] ["" "events.k8s.io"] ["events"] [] []`,
	`["get" "list" "watch"] [""] ["pods"] [] []`,
	`["create" "delete"] [""] ["pods"] [] []`,
	`["patch" "update"] [""] ["pods/status"] [] []`,
	`["create"] [""] ["pods/eviction"] [] []`,
	`["get" "list" "watch"] [""] ["configmaps" "secrets"] [] []`,
	`["get"] [""] ["persistentvolumeclaims" "persistentvolumes"] [] []`,
	`["get"] [""] ["endpoints"] [] []`,
	`["create" "get" "list" "watch"] ["certificates.k8s.io"] ["certificatesigningrequests"] [] []`,
	`["create" "delete" "get" "patch" "update"] ["coordination.k8s.io"] ["leases"] [] []`,
	`["get"] ["storage.k8s.io"] ["volumeattachments"] [] []`,
	`["create"] [""] ["serviceaccounts/token"] [] []`,
	`["get" "patch" "update"] [""] ["persistentvolumeclaims/status"] [] []`,
	`["get" "list" "watch"] ["storage.k8s.io"] ["csidrivers"] [] []`,
	`["create" "delete" "get" "patch" "update"] ["storage.k8s.io"] ["csinodes"] [] []`,
	`["get" "list" "watch"] ["node.k8s.io"] ["runtimeclasses"] [] []`,
	`["get"] ["resource.k8s.io"] ["resourceclaims"] [] []`,
	`["deletecollection"] ["resource.k8s.io"] ["resourceslices"] [] []`,
	`["get" "list" "watch"] ["certificates.k8s.io"] ["clustertrustbundles"] [] []`,
	`["get"] [""] ["serviceaccounts"] [] []`,
	`["create" "get" "list" "watch"] ["certificates.k8s.io"] ["podcertificaterequests"] [] []`,
}

func TestNodeRulesMatchUpstream(t *testing.T) {
	rules := NodeRules()
	got := make([]string, len(rules))
	for i, r := range rules {
		got[i] = fmt.Sprintf("%q %q %q %q %q", r.Verbs, r.APIGroups, r.Resources, r.ResourceNames, r.NonResourceURLs)
	}
	if !reflect.DeepEqual(got, upstreamNodeRules) {
		t.Errorf("NodeRules() differs from upstream's:")
		for i := 0; i < max(len(got), len(upstreamNodeRules)); i++ {
			var g, u string
			if i < len(got) {
				g = got[i]
			}
			if i < len(upstreamNodeRules) {
				u = upstreamNodeRules[i]
			}
			if g != u {
				t.Errorf("rule %d: got %s, upstream %s", i, g, u)
			}
		}
	}
}

func TestNodeRulesReturnsNewSlice(t *testing.T) {
	rules := NodeRules()
	rules[0].Verbs[0] = "delete"
	if NodeRules()[0].Verbs[0] != "create" {
		t.Error("NodeRules() returned rules shared with an earlier call")
	}
}

func TestPolicyRuleBuilderErrors(t *testing.T) {
	for name, b := range map[string]*policyRuleBuilder{
		"no verbs":               newRule().Groups("").Resources("pods"),
		"no resources nor urls":  newRule("get").Groups(""),
		"resources and urls":     newRule("get").Groups("").Resources("pods").URLs("/healthz"),
		"resources but no group": newRule("get").Resources("pods"),
	} {
		if _, err := b.Rule(); err == nil {
			t.Errorf("%s: expected an error", name)
		}
	}
	rule, err := newRule("watch", "get", "get").Groups("b", "a").Resources("y", "x").Rule()
	if err != nil {
		t.Fatal(err)
	}
	want := rbacv1.PolicyRule{Verbs: []string{"get", "watch"}, APIGroups: []string{"a", "b"}, Resources: []string{"x", "y"}}
	if !reflect.DeepEqual(rule, want) {
		t.Errorf("expected %v, got %v", want, rule)
	}
}

// TestNodeRulesFallback checks requests the authorizer does not subdivide,
// which NodeRules decides.
func TestNodeRulesFallback(t *testing.T) {
	authz := NewAuthorizer(NewGraph())
	node0 := &user.DefaultInfo{Name: "system:node:node0", Groups: []string{"system:nodes"}}
	for _, tc := range []struct {
		name   string
		attrs  authorizer.AttributesRecord
		expect authorizer.Decision
	}{
		{"create tokenreview", authorizer.AttributesRecord{User: node0, ResourceRequest: true, Verb: "create", APIGroup: "authentication.k8s.io", Resource: "tokenreviews"}, authorizer.DecisionAllow},
		{"create subjectaccessreview", authorizer.AttributesRecord{User: node0, ResourceRequest: true, Verb: "create", APIGroup: "authorization.k8s.io", Resource: "subjectaccessreviews"}, authorizer.DecisionAllow},
		{"list services", authorizer.AttributesRecord{User: node0, ResourceRequest: true, Verb: "list", Resource: "services"}, authorizer.DecisionAllow},
		{"create service", authorizer.AttributesRecord{User: node0, ResourceRequest: true, Verb: "create", Resource: "services", Namespace: "ns0"}, authorizer.DecisionNoOpinion},
		{"create events", authorizer.AttributesRecord{User: node0, ResourceRequest: true, Verb: "create", Resource: "events", Namespace: "ns0"}, authorizer.DecisionAllow},
		{"patch events.k8s.io events", authorizer.AttributesRecord{User: node0, ResourceRequest: true, Verb: "patch", APIGroup: "events.k8s.io", Resource: "events", Namespace: "ns0", Name: "e"}, authorizer.DecisionAllow},
		{"delete events", authorizer.AttributesRecord{User: node0, ResourceRequest: true, Verb: "delete", Resource: "events", Namespace: "ns0", Name: "e"}, authorizer.DecisionNoOpinion},
		{"get endpoints", authorizer.AttributesRecord{User: node0, ResourceRequest: true, Verb: "get", Resource: "endpoints", Namespace: "ns0", Name: "e"}, authorizer.DecisionAllow},
		{"list endpoints", authorizer.AttributesRecord{User: node0, ResourceRequest: true, Verb: "list", Resource: "endpoints", Namespace: "ns0"}, authorizer.DecisionNoOpinion},
		{"create csr", authorizer.AttributesRecord{User: node0, ResourceRequest: true, Verb: "create", APIGroup: "certificates.k8s.io", Resource: "certificatesigningrequests"}, authorizer.DecisionAllow},
		{"approve csr", authorizer.AttributesRecord{User: node0, ResourceRequest: true, Verb: "update", APIGroup: "certificates.k8s.io", Resource: "certificatesigningrequests", Subresource: "approval", Name: "c"}, authorizer.DecisionNoOpinion},
		{"watch csidrivers", authorizer.AttributesRecord{User: node0, ResourceRequest: true, Verb: "watch", APIGroup: "storage.k8s.io", Resource: "csidrivers"}, authorizer.DecisionAllow},
		{"list runtimeclasses", authorizer.AttributesRecord{User: node0, ResourceRequest: true, Verb: "list", APIGroup: "node.k8s.io", Resource: "runtimeclasses"}, authorizer.DecisionAllow},
		{"list clustertrustbundles", authorizer.AttributesRecord{User: node0, ResourceRequest: true, Verb: "list", APIGroup: "certificates.k8s.io", Resource: "clustertrustbundles"}, authorizer.DecisionAllow},
		{"create clustertrustbundles", authorizer.AttributesRecord{User: node0, ResourceRequest: true, Verb: "create", APIGroup: "certificates.k8s.io", Resource: "clustertrustbundles"}, authorizer.DecisionNoOpinion},
		{"list deployments", authorizer.AttributesRecord{User: node0, ResourceRequest: true, Verb: "list", APIGroup: "apps", Resource: "deployments"}, authorizer.DecisionNoOpinion},
		{"get healthz", authorizer.AttributesRecord{User: node0, ResourceRequest: false, Verb: "get", Path: "/healthz"}, authorizer.DecisionNoOpinion},
	} {
		t.Run(tc.name, func(t *testing.T) {
			decision, reason, err := authz.Authorize(context.Background(), tc.attrs)
			if err != nil {
				t.Fatal(err)
			}
			if decision != tc.expect {
				t.Errorf("expected %v, got %v (%s)", tc.expect, decision, reason)
			}
		})
	}
}
