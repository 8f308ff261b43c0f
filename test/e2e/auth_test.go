package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// kubectl auth whoami and auth can-i tell the truth for each identity
// kubestore knows: the admin, a token user the policy file grants some
// verbs, one it grants nothing; impersonation by the admin; and the rules
// of auth can-i --list. Served by the review APIs and kubestore's own
// authorizer (kube-apiserver's SelfSubjectReview, SelfSubjectAccessReview,
// SelfSubjectRulesReview, SubjectAccessReview).
func TestKubectlAuth(t *testing.T) {
	requireKubectl(t)
	dir := shortTempDir(t)
	tokens := filepath.Join(dir, "tokens.csv")
	policy := filepath.Join(dir, "policy.yaml")
	for path, data := range map[string]string{
		tokens: "agent-token-0123456789,agent,1001,\"agents\"\nother-token-0123456789,other,1002\n",
		policy: `rules:
- groups: ["agents"]
  verbs: ["get", "list", "watch"]
  resources: ["pods", "leases.coordination.k8s.io"]
  namespaces: ["node1"]
- users: ["agent"]
  verbs: ["get"]
  nonResourceURLs: ["/metrics"]
`,
	} {
		if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	p := start(t, filepath.Join(dir, "data"), "--token-auth-file", tokens, "--authorization-policy-file", policy)
	as := func(token string, args ...string) (string, error) {
		return p.kubectl(append([]string{"--kubeconfig=/dev/null", "--server=" + p.server(), "--insecure-skip-tls-verify", "--token=" + token}, args...)...)
	}
	expect := func(who string, out string, err error, want string, allowed bool) {
		t.Helper()
		if !strings.Contains(out, want) || (err == nil) != allowed {
			t.Errorf("%s: %q (err %v), want %q and allowed=%t", who, out, err, want, allowed)
		}
	}

	// The reviews as files, as kubectl validates them (by /openapi/v2:
	// they have no PATCH in /openapi/v3 to validate on the server).
	reviews := map[string]string{
		"TokenReview":             "apiVersion: authentication.k8s.io/v1\nkind: TokenReview\nspec:\n  token: agent-token-0123456789\n",
		"SelfSubjectAccessReview": "apiVersion: authorization.k8s.io/v1\nkind: SelfSubjectAccessReview\nspec:\n  resourceAttributes:\n    verb: list\n    resource: secrets\n",
	}
	for kind, manifest := range reviews {
		file := filepath.Join(dir, kind+".yaml")
		if err := os.WriteFile(file, []byte(manifest), 0o600); err != nil {
			t.Fatal(err)
		}
		if out, err := p.kubectl("create", "-f", file, "-o", "jsonpath={.status}"); err != nil || !strings.Contains(out, "true") {
			t.Errorf("kubectl create -f of a %s: %q %v, want it validated, answered and true", kind, out, err)
		}
	}

	out := p.mustKubectl("auth", "whoami", "-o", "jsonpath={.status.userInfo.username} {.status.userInfo.groups}")
	if out != "kubestore-admin [\"system:masters\",\"system:authenticated\"]" {
		t.Errorf("admin whoami: %q", out)
	}
	out, err := as("agent-token-0123456789", "auth", "whoami", "-o", "jsonpath={.status.userInfo.username} {.status.userInfo.uid} {.status.userInfo.groups}")
	expect("agent whoami", out, err, "agent 1001 [\"agents\",\"system:authenticated\"]", true)

	for _, tc := range []struct {
		who, token string
		args       []string
		want       string
	}{
		{"admin", "", []string{"delete", "nodes"}, "yes"},
		{"admin", "", []string{"get", "/metrics"}, "yes"},
		{"agent", "agent-token-0123456789", []string{"list", "pods", "-n", "node1"}, "yes"},
		{"agent", "agent-token-0123456789", []string{"watch", "leases.coordination.k8s.io", "-n", "node1"}, "yes"},
		{"agent", "agent-token-0123456789", []string{"get", "/metrics"}, "yes"},
		{"agent", "agent-token-0123456789", []string{"delete", "pods", "-n", "node1"}, "no"},
		{"agent", "agent-token-0123456789", []string{"list", "pods", "-n", "default"}, "no"},
		{"agent", "agent-token-0123456789", []string{"list", "secrets", "-n", "node1"}, "no"},
		{"other", "other-token-0123456789", []string{"list", "pods", "-n", "node1"}, "no"},
	} {
		var out string
		var err error
		if tc.token == "" {
			out, err = p.kubectl(append([]string{"auth", "can-i"}, tc.args...)...)
		} else {
			out, err = as(tc.token, append([]string{"auth", "can-i"}, tc.args...)...)
		}
		// auth can-i exits 1 for "no".
		expect(tc.who+" can-i "+strings.Join(tc.args, " "), out, err, tc.want, tc.want == "yes")
	}

	// The admin asks about others (SubjectAccessReview through
	// impersonation headers, as kubectl --as does).
	out, err = p.kubectl("auth", "can-i", "list", "pods", "-n", "node1", "--as", "agent", "--as-group", "agents")
	expect("can-i --as agent", out, err, "yes", true)
	out, err = p.kubectl("auth", "can-i", "list", "pods", "-n", "node1", "--as", "other")
	expect("can-i --as other", out, err, "no", false)
	// Only the admin may ask about others.
	sar := filepath.Join(dir, "sar.yaml")
	if err := os.WriteFile(sar, []byte("apiVersion: authorization.k8s.io/v1\nkind: SubjectAccessReview\nspec:\n  user: agent\n  groups: [agents]\n  resourceAttributes:\n    verb: list\n    resource: pods\n    namespace: node1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// --validate=false: kubectl validates create-only kinds (they have no
	// PATCH to probe for server-side validation) against /openapi/v2,
	// which kubestore does not serve (it serves /openapi/v3).
	out = p.mustKubectl("create", "--validate=false", "-f", sar, "-o", "jsonpath={.status.allowed}")
	if out != "true" {
		t.Errorf("admin's SubjectAccessReview for agent: allowed=%q, want true", out)
	}
	out, err = as("agent-token-0123456789", "create", "--validate=false", "-f", sar, "-o", "jsonpath={.status.allowed}")
	expect("agent's SubjectAccessReview", out, err, "Forbidden", false)

	// auth can-i --list: the policy's rules for the namespace and the
	// basic user's.
	out, err = as("agent-token-0123456789", "auth", "can-i", "--list", "-n", "node1")
	for _, want := range []string{"pods", "leases.coordination.k8s.io", "[get list watch]", "selfsubjectaccessreviews.authorization.k8s.io", "/metrics"} {
		expect("agent can-i --list -n node1", out, err, want, true)
	}
	if out, _ := as("agent-token-0123456789", "auth", "can-i", "--list", "-n", "default"); strings.Contains(out, "pods") {
		t.Errorf("agent can-i --list -n default lists pods:\n%s", out)
	}

	// Token users need no policy rule for discovery (kube-apiserver's
	// system:discovery role): kubectl works, and says Forbidden only
	// for what the policy does not grant.
	out, err = as("other-token-0123456789", "get", "pods", "-n", "node1")
	expect("other get pods", out, err, "Forbidden", false)
	if strings.Contains(out, "couldn't get current server API group list") {
		t.Errorf("discovery refused to a token user: %s", out)
	}
}

// kubectl reads events through both APIs: one written as core/v1 is listed
// as events.k8s.io/v1, with upstream's field selectors for each.
func TestKubectlEventsBothAPIs(t *testing.T) {
	requireKubectl(t)
	p := start(t, filepath.Join(shortTempDir(t), "data"))
	ev := filepath.Join(t.TempDir(), "ev.yaml")
	if err := os.WriteFile(ev, []byte("apiVersion: events.k8s.io/v1\nkind: Event\nmetadata:\n  name: probe-failed\neventTime: \"2026-11-24T00:00:00.000000Z\"\nreportingController: kubestore.io/e2e\nreportingInstance: e2e-1\naction: Probe\nreason: Unhealthy\ntype: Warning\nnote: probe failed\nregarding:\n  apiVersion: v1\n  kind: Pod\n  name: agent\n  namespace: default\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p.mustKubectl("create", "-f", ev)
	if out := p.mustKubectl("get", "events", "--field-selector", "involvedObject.name=agent", "-o", "jsonpath={.items[*].message}"); out != "probe failed" {
		t.Errorf("core/v1 view: %q", out)
	}
	if out := p.mustKubectl("get", "events.v1.events.k8s.io", "--field-selector", "regarding.name=agent", "-o", "jsonpath={.items[*].note}"); out != "probe failed" {
		t.Errorf("events.k8s.io/v1 view: %q", out)
	}
	if out := p.mustKubectl("events", "--for", "pod/agent"); !strings.Contains(out, "probe failed") || !strings.Contains(out, "Unhealthy") {
		t.Errorf("kubectl events --for pod/agent:\n%s", out)
	}
}
