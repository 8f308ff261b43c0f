package access

import (
	"context"
	"slices"
	"strings"

	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
)

// basicUserRules are what every authenticated user may do on a cluster by
// kube-apiserver's default RBAC: discovery and version (the
// system:discovery and system:public-info-viewer ClusterRoles) and asking
// who they are and what they may do (system:basic-user). kubectl needs the
// first to work at all and `kubectl auth whoami` / `auth can-i` the
// second. See plugin/pkg/auth/authorizer/rbac/bootstrappolicy/policy.go.
var basicUserRules = struct {
	nonResourceURLs []string
	selfReviews     []string // resource.group
}{
	nonResourceURLs: []string{"/api", "/api/*", "/apis", "/apis/*", "/version", "/version/", "/openapi", "/openapi/*",
		"/healthz", "/livez", "/readyz"},
	selfReviews: []string{"selfsubjectreviews.authentication.k8s.io", "selfsubjectaccessreviews.authorization.k8s.io", "selfsubjectrulesreviews.authorization.k8s.io"},
}

// issuerDiscoveryURLs are what ServiceAccounts may read to verify each
// other's tokens (upstream's system:service-account-issuer-discovery role,
// bound to system:serviceaccounts).
var issuerDiscoveryURLs = []string{"/.well-known/openid-configuration", "/openid/v1/jwks"}

const serviceAccountsGroup = "system:serviceaccounts"

// authorizeBasicUser allows every authenticated user basicUserRules, and
// ServiceAccounts the issuer discovery.
func authorizeBasicUser(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	u := a.GetUser()
	if u == nil || !slices.Contains(u.GetGroups(), user.AllAuthenticated) {
		return authorizer.DecisionNoOpinion, "", nil
	}
	if !a.IsResourceRequest() {
		if a.GetVerb() == "get" && matchURL(basicUserRules.nonResourceURLs, a.GetPath()) {
			return authorizer.DecisionAllow, "", nil
		}
		if a.GetVerb() == "get" && slices.Contains(u.GetGroups(), serviceAccountsGroup) && slices.Contains(issuerDiscoveryURLs, a.GetPath()) {
			return authorizer.DecisionAllow, "", nil
		}
		return authorizer.DecisionNoOpinion, "", nil
	}
	if a.GetVerb() == "create" && a.GetSubresource() == "" && slices.Contains(basicUserRules.selfReviews, a.GetResource()+"."+a.GetAPIGroup()) {
		return authorizer.DecisionAllow, "", nil
	}
	return authorizer.DecisionNoOpinion, "", nil
}

// matchURL reports whether path is one of patterns, where a trailing *
// matches any suffix.
func matchURL(patterns []string, path string) bool {
	return slices.ContainsFunc(patterns, func(p string) bool {
		prefix, wild := strings.CutSuffix(p, "*")
		return p == path || (wild && strings.HasPrefix(path, prefix))
	})
}

// RulesFor lists what u may do in namespace, for SelfSubjectRulesReview
// (kubectl auth can-i --list): everything for the admin, the basic user's
// rules, and the policy file's rules that name u or one of its groups and
// the namespace. The list is complete but for a kubelet's (the Node
// authorizer's rules depend on its pods).
func (a *Access) RulesFor(ctx context.Context, u user.Info, namespace string) ([]authorizer.ResourceRuleInfo, []authorizer.NonResourceRuleInfo, bool, error) {
	if slices.Contains(u.GetGroups(), user.SystemPrivilegedGroup) {
		return []authorizer.ResourceRuleInfo{&authorizer.DefaultResourceRuleInfo{Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"}}},
			[]authorizer.NonResourceRuleInfo{&authorizer.DefaultNonResourceRuleInfo{Verbs: []string{"*"}, NonResourceURLs: []string{"*"}}}, false, nil
	}
	var res []authorizer.ResourceRuleInfo
	var nonRes []authorizer.NonResourceRuleInfo
	if slices.Contains(u.GetGroups(), user.AllAuthenticated) {
		for _, r := range basicUserRules.selfReviews {
			resource, group, _ := strings.Cut(r, ".")
			res = append(res, &authorizer.DefaultResourceRuleInfo{Verbs: []string{"create"}, APIGroups: []string{group}, Resources: []string{resource}})
		}
		nonRes = append(nonRes, &authorizer.DefaultNonResourceRuleInfo{Verbs: []string{"get"}, NonResourceURLs: basicUserRules.nonResourceURLs})
		if slices.Contains(u.GetGroups(), serviceAccountsGroup) {
			nonRes = append(nonRes, &authorizer.DefaultNonResourceRuleInfo{Verbs: []string{"get"}, NonResourceURLs: issuerDiscoveryURLs})
		}
	}
	// A kubelet's rules depend on its pods (the Node authorizer's graph):
	// not listed, and the list says it is incomplete, as upstream's.
	var incomplete bool
	var err error
	if nodes := a.nodes.Load(); nodes != nil {
		var nodeRes []authorizer.ResourceRuleInfo
		var nodeNonRes []authorizer.NonResourceRuleInfo
		nodeRes, nodeNonRes, incomplete, err = (*nodes).RulesFor(ctx, u, namespace)
		res, nonRes = append(res, nodeRes...), append(nonRes, nodeNonRes...)
	}
	for _, r := range a.policy.Load().Rules {
		if !r.names(u) {
			continue
		}
		if len(r.NonResourceURLs) > 0 {
			nonRes = append(nonRes, &authorizer.DefaultNonResourceRuleInfo{Verbs: r.Verbs, NonResourceURLs: r.NonResourceURLs})
		}
		if len(r.Resources) > 0 && (slices.Contains(r.Namespaces, "*") || namespace != "" && slices.Contains(r.Namespaces, namespace)) {
			// One rule per API group, as RBAC rules list them.
			byGroup := map[string][]string{}
			var groups []string
			for _, name := range r.Resources {
				group, resource := "*", "*"
				if name != "*" {
					resource, group = splitResource(name)
				}
				if _, ok := byGroup[group]; !ok {
					groups = append(groups, group)
				}
				byGroup[group] = append(byGroup[group], resource)
			}
			for _, g := range groups {
				res = append(res, &authorizer.DefaultResourceRuleInfo{Verbs: r.Verbs, APIGroups: []string{g}, Resources: byGroup[g]})
			}
		}
	}
	return res, nonRes, incomplete, err
}

// splitResource splits a policy file's resource[.group][/subresource] into
// RBAC's resource[/subresource] and group.
func splitResource(name string) (resource, group string) {
	base, sub, hasSub := strings.Cut(name, "/")
	resource, group, _ = strings.Cut(base, ".")
	if hasSub {
		resource += "/" + sub
	}
	return resource, group
}
