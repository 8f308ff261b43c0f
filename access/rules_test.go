package access

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"

	"github.com/kubestore/kubestore/config"
)

// Every authenticated user may discover the API and review itself, as
// kube-apiserver's system:discovery and system:basic-user roles allow;
// nothing else without a policy rule, and nothing for the unauthenticated.
func TestAuthorizeBasicUser(t *testing.T) {
	bob := &user.DefaultInfo{Name: "bob", Groups: []string{user.AllAuthenticated}}
	stranger := &user.DefaultInfo{Name: "system:anonymous", Groups: []string{user.AllUnauthenticated}}
	review := func(u user.Info, verb, group, resource string) authorizer.AttributesRecord {
		return authorizer.AttributesRecord{User: u, Verb: verb, APIGroup: group, Resource: resource, ResourceRequest: true}
	}
	for _, tc := range []struct {
		name  string
		attrs authorizer.AttributesRecord
		want  authorizer.Decision
	}{
		{"discovery", nonResource(bob, "get", "/apis/coordination.k8s.io/v1"), authorizer.DecisionAllow},
		{"version", nonResource(bob, "get", "/version"), authorizer.DecisionAllow},
		{"openapi", nonResource(bob, "get", "/openapi/v3/api/v1"), authorizer.DecisionAllow},
		{"whoami", review(bob, "create", "authentication.k8s.io", "selfsubjectreviews"), authorizer.DecisionAllow},
		{"can-i", review(bob, "create", "authorization.k8s.io", "selfsubjectaccessreviews"), authorizer.DecisionAllow},
		{"can-i --list", review(bob, "create", "authorization.k8s.io", "selfsubjectrulesreviews"), authorizer.DecisionAllow},
		{"asking about others", review(bob, "create", "authorization.k8s.io", "subjectaccessreviews"), authorizer.DecisionNoOpinion},
		{"metrics", nonResource(bob, "get", "/metrics"), authorizer.DecisionNoOpinion},
		{"posting to discovery", nonResource(bob, "post", "/api"), authorizer.DecisionNoOpinion},
		{"unauthenticated discovery", nonResource(stranger, "get", "/api"), authorizer.DecisionNoOpinion},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if d, _, err := authorizeBasicUser(t.Context(), tc.attrs); d != tc.want || err != nil {
				t.Errorf("got %v %v, want %v", d, err, tc.want)
			}
		})
	}
}

// RulesFor lists what the authorizer allows: for the admin everything, for
// others the basic user's rules and the policy rules naming them and the
// namespace, split per API group as RBAC lists them.
func TestRulesFor(t *testing.T) {
	pol := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(pol, []byte(`rules:
- groups: [agents]
  verbs: [get, list]
  resources: [pods, pods/status, leases.coordination.k8s.io]
  namespaces: [node1]
- users: [alice]
  verbs: ["*"]
  resources: ["*"]
  namespaces: ["*"]
- users: [alice]
  verbs: [get]
  nonResourceURLs: [/metrics]
`), 0o600); err != nil {
		t.Fatal(err)
	}
	a, err := Load(config.Server{AuthorizationPolicyFile: pol})
	if err != nil {
		t.Fatal(err)
	}
	agent := &user.DefaultInfo{Name: "agent", Groups: []string{"agents", user.AllAuthenticated}}
	alice := &user.DefaultInfo{Name: "alice", Groups: []string{user.AllAuthenticated}}
	root := &user.DefaultInfo{Name: "root", Groups: []string{user.SystemPrivilegedGroup}}
	show := func(u user.Info, ns string) string {
		res, nonRes, incomplete, err := a.RulesFor(t.Context(), u, ns)
		if err != nil || incomplete {
			t.Fatalf("RulesFor(%s, %s): incomplete %t, %v", u.GetName(), ns, incomplete, err)
		}
		var s string
		for _, r := range res {
			s += fmt.Sprintf("%v %v %v;", r.GetVerbs(), r.GetAPIGroups(), r.GetResources())
		}
		for _, r := range nonRes {
			s += fmt.Sprintf("%v %v;", r.GetVerbs(), r.GetNonResourceURLs())
		}
		return s
	}
	basic := "[create] [authentication.k8s.io] [selfsubjectreviews];[create] [authorization.k8s.io] [selfsubjectaccessreviews];[create] [authorization.k8s.io] [selfsubjectrulesreviews];"
	basicURLs := fmt.Sprintf("[get] %v;", basicUserRules.nonResourceURLs)
	for _, tc := range []struct {
		who  user.Info
		ns   string
		want string
	}{
		{root, "any", "[*] [*] [*];[*] [*];"},
		{agent, "node1", basic + "[get list] [] [pods pods/status];[get list] [coordination.k8s.io] [leases];" + basicURLs},
		{agent, "default", basic + basicURLs},
		{alice, "default", basic + "[*] [*] [*];" + basicURLs + "[get] [/metrics];"},
	} {
		if got := show(tc.who, tc.ns); got != tc.want {
			t.Errorf("RulesFor(%s, %s):\n got %s\nwant %s", tc.who.GetName(), tc.ns, got, tc.want)
		}
	}
}
