// Package access holds what decides who may do what and read what: the
// data directory's PKI (CA, serving and admin certificates, the admin
// kubeconfig), authentication (unix-socket peers by uid, client
// certificates, the bearer tokens of --token-auth-file), authorization (the
// admin identity, then the rules of --authorization-policy-file), and the
// keys that keep secrets unreadable at rest (--encryption-provider-config).
// Every file an operator hands it is outside input, parsed strictly and
// fuzzed.
package access

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/klog/v2"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"github.com/kubestore/kubestore/config"
)

// Access is the reloadable part of access control: the bearer tokens of
// --token-auth-file and the policy of --authorization-policy-file. Reload
// swaps both at once, or neither.
type Access struct {
	tokenFile, policyFile string
	tokens                atomic.Pointer[[]tokenEntry]
	policy                atomic.Pointer[policy]

	// nodes is the Node authorizer, once the server built it
	// (SetNodeAuthorizer); cluster the mirrored cluster's decisions on its
	// ServiceAccounts (SetClusterAuthorizer).
	nodes   atomic.Pointer[nodeAuthorizer]
	cluster atomic.Pointer[authorizer.Authorizer]

	mu sync.Mutex
	// caches are the token caches of the authenticators built; a reload
	// empties them.
	caches []*tokenCache
}

// nodeAuthorizer is upstream's Node authorizer (access/node): what each
// kubelet may do on its own node's objects.
type nodeAuthorizer interface {
	authorizer.Authorizer
	authorizer.RuleResolver
}

// SetNodeAuthorizer puts nodes in the chain (Authorizer), before the
// policy file, as kube-apiserver's --authorization-mode=Node,RBAC.
func (a *Access) SetNodeAuthorizer(nodes nodeAuthorizer) { a.nodes.Store(&nodes) }

// authorizeNode asks the Node authorizer, when there is one.
func (a *Access) authorizeNode(ctx context.Context, attrs authorizer.Attributes) (authorizer.Decision, string, error) {
	if nodes := a.nodes.Load(); nodes != nil {
		return (*nodes).Authorize(ctx, attrs)
	}
	return authorizer.DecisionNoOpinion, "", nil
}

// SetClusterAuthorizer puts cluster in the chain (Authorizer), after the
// Node authorizer and before the policy file: through the mirror, the
// cluster's own decisions on its ServiceAccounts, which the policy file
// cannot widen.
func (a *Access) SetClusterAuthorizer(cluster authorizer.Authorizer) { a.cluster.Store(&cluster) }

// authorizeCluster asks the cluster's authorizer, when there is one.
func (a *Access) authorizeCluster(ctx context.Context, attrs authorizer.Attributes) (authorizer.Decision, string, error) {
	if cluster := a.cluster.Load(); cluster != nil {
		return (*cluster).Authorize(ctx, attrs)
	}
	return authorizer.DecisionNoOpinion, "", nil
}

// Load loads both files; a file that does not load fails the start.
func Load(s config.Server) (*Access, error) {
	a := &Access{tokenFile: s.TokenAuthFile, policyFile: s.AuthorizationPolicyFile}
	return a, a.Reload()
}

// Reload reads both files again (on SIGHUP). When either does not load,
// the previous tokens and policy stay in force and the error says why.
func (a *Access) Reload() error {
	var tokens []tokenEntry
	if a.tokenFile != "" {
		var err error
		if tokens, err = loadTokens(a.tokenFile); err != nil {
			return fmt.Errorf("invalid --%s %q: %w", config.FlagTokenAuthFile, a.tokenFile, err)
		}
	}
	p := &policy{}
	if a.policyFile != "" {
		var err error
		if p, err = loadPolicy(a.policyFile); err != nil {
			return fmt.Errorf("invalid --%s %q: %w", config.FlagAuthorizationPolicyFile, a.policyFile, err)
		}
	}
	a.tokens.Store(&tokens)
	a.policy.Store(p)
	// A token the reload revoked stops working at once, not once its
	// cached authentication expires.
	a.mu.Lock()
	for _, c := range a.caches {
		c.reset()
	}
	a.mu.Unlock()
	klog.InfoS("Access control loaded", "tokens", len(tokens), "policyRules", len(p.Rules))
	return nil
}

// tokenEntry is one line of the token file. Only the token's SHA-256 is
// kept, so a token is neither logged nor kept in memory in clear.
type tokenEntry struct {
	digest [sha256.Size]byte
	user   *user.DefaultInfo
}

// loadTokens reads a token file.
func loadTokens(path string) ([]tokenEntry, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return parseTokens(data)
}

// parseTokens parses kube-apiserver's token file format:
// token,user,uid[,"group1,group2"], one per line.
func parseTokens(data []byte) ([]tokenEntry, error) {
	r := csv.NewReader(bytes.NewReader(data))
	r.FieldsPerRecord = -1
	r.TrimLeadingSpace = true
	r.Comment = '#'
	var out []tokenEntry
	seen := map[[sha256.Size]byte]bool{}
	for {
		rec, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		line, _ := r.FieldPos(0)
		if len(rec) < 3 || len(rec) > 4 {
			return nil, fmt.Errorf("line %d: want token,user,uid[,\"group1,group2\"], got %d fields", line, len(rec))
		}
		if rec[0] == "" || rec[1] == "" {
			return nil, fmt.Errorf("line %d: the token and the user name must not be empty", line)
		}
		digest := sha256.Sum256([]byte(rec[0]))
		if seen[digest] {
			return nil, fmt.Errorf("line %d: the token of user %q is used on an earlier line", line, rec[1])
		}
		seen[digest] = true
		u := &user.DefaultInfo{Name: rec[1], UID: rec[2]}
		if len(rec) == 4 {
			for g := range strings.SplitSeq(rec[3], ",") {
				if g = strings.TrimSpace(g); g != "" {
					u.Groups = append(u.Groups, g)
				}
			}
		}
		out = append(out, tokenEntry{digest: digest, user: u})
	}
	return out, nil
}

// authenticateToken compares the token's digest with every entry's in
// constant time, without stopping at a match, so the time taken says
// nothing about which tokens exist.
func (a *Access) authenticateToken(_ context.Context, token string) (*authenticator.Response, bool, error) {
	digest := sha256.Sum256([]byte(token))
	var found *user.DefaultInfo
	for _, e := range *a.tokens.Load() {
		if subtle.ConstantTimeCompare(digest[:], e.digest[:]) == 1 {
			found = e.user
		}
	}
	if found == nil {
		return nil, false, nil
	}
	return &authenticator.Response{User: found}, true, nil
}

// policy is the --authorization-policy-file: rules granting users and
// groups verbs on resources in namespaces. What no rule grants is denied.
type policy struct {
	Rules []policyRule `json:"rules"`
}

// policyRule grants Verbs to Users and Groups, on Resources in Namespaces
// or on NonResourceURLs. "*" matches anything in each list.
type policyRule struct {
	Users  []string `json:"users,omitempty"`
	Groups []string `json:"groups,omitempty"`
	Verbs  []string `json:"verbs"`
	// Resources are resource[.group][/subresource] names: "pods",
	// "pods/status", "leases.coordination.k8s.io".
	Resources []string `json:"resources,omitempty"`
	// Namespaces limit Resources; a cluster-scoped resource (nodes,
	// namespaces) only matches "*".
	Namespaces []string `json:"namespaces,omitempty"`
	// NonResourceURLs are paths such as /metrics; a trailing * matches a
	// prefix.
	NonResourceURLs []string `json:"nonResourceURLs,omitempty"`
}

func loadPolicy(path string) (*policy, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return parsePolicy(data)
}

// parsePolicy parses a policy file strictly: unknown fields and rules that
// could never match are errors, not silently ignored.
func parsePolicy(data []byte) (*policy, error) {
	js, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return nil, err
	}
	p := &policy{}
	strict, err := kjson.UnmarshalStrict(js, p)
	if err != nil {
		return nil, err
	}
	if len(strict) > 0 {
		return nil, errors.Join(strict...)
	}
	for i, r := range p.Rules {
		switch {
		case len(r.Users) == 0 && len(r.Groups) == 0:
			return nil, fmt.Errorf("rules[%d]: names no users and no groups", i)
		case len(r.Verbs) == 0:
			return nil, fmt.Errorf("rules[%d]: names no verbs", i)
		case len(r.Resources) == 0 && len(r.NonResourceURLs) == 0:
			return nil, fmt.Errorf("rules[%d]: names neither resources nor nonResourceURLs", i)
		case len(r.Resources) > 0 && len(r.Namespaces) == 0:
			return nil, fmt.Errorf("rules[%d]: resources need namespaces (\"*\" for all)", i)
		}
	}
	return p, nil
}

// authorize allows what a rule grants and has no opinion otherwise.
func (a *Access) authorize(_ context.Context, attrs authorizer.Attributes) (authorizer.Decision, string, error) {
	u := attrs.GetUser()
	if u == nil {
		return authorizer.DecisionNoOpinion, "", nil
	}
	for _, r := range a.policy.Load().Rules {
		if r.matches(u, attrs) {
			return authorizer.DecisionAllow, "", nil
		}
	}
	return authorizer.DecisionNoOpinion, fmt.Sprintf("no rule of --%s grants it", config.FlagAuthorizationPolicyFile), nil
}

// names reports whether the rule names u or one of its groups.
func (r policyRule) names(u user.Info) bool {
	who := matchAny(r.Users, u.GetName())
	for _, g := range u.GetGroups() {
		who = who || matchAny(r.Groups, g)
	}
	return who
}

func (r policyRule) matches(u user.Info, attrs authorizer.Attributes) bool {
	if !r.names(u) || !matchAny(r.Verbs, attrs.GetVerb()) {
		return false
	}
	if !attrs.IsResourceRequest() {
		return matchURL(r.NonResourceURLs, attrs.GetPath())
	}
	name := attrs.GetResource()
	if g := attrs.GetAPIGroup(); g != "" {
		name += "." + g
	}
	if sub := attrs.GetSubresource(); sub != "" {
		name += "/" + sub
	}
	if !matchAny(r.Resources, name) {
		return false
	}
	return slices.Contains(r.Namespaces, "*") || (attrs.GetNamespace() != "" && slices.Contains(r.Namespaces, attrs.GetNamespace()))
}

func matchAny(list []string, s string) bool {
	return slices.Contains(list, "*") || slices.Contains(list, s)
}
