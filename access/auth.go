package access

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"k8s.io/apiserver/pkg/apis/apiserver"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/group"
	"k8s.io/apiserver/pkg/authentication/request/anonymous"
	"k8s.io/apiserver/pkg/authentication/request/bearertoken"
	"k8s.io/apiserver/pkg/authentication/request/union"
	"k8s.io/apiserver/pkg/authentication/request/x509"
	tokencache "k8s.io/apiserver/pkg/authentication/token/cache"
	tokenunion "k8s.io/apiserver/pkg/authentication/token/union"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
)

// healthPaths may be probed without credentials (kube-apiserver's
// anonymous authentication restricted to these endpoints), so that a
// supervisor or a benchmark can wait for /readyz.
var healthPaths = []string{"/healthz", "/livez", "/readyz"}

// Authenticator accepts, in order, unix-socket peers by their uid (see
// PeerConnContext), client certificates clientCA verifies (a chain is
// verified again after certCacheTTL, or at once when the bundle
// changes), the bearer tokens of --token-auth-file and those of the
// tokens authenticators (ServiceAccount tokens); requests with none of
// them are anonymous on the health endpoints and 401 everywhere else.
func (a *Access) Authenticator(clientCA dynamiccertificates.CAContentProvider, tokens ...authenticator.Token) authenticator.Request {
	conditions := make([]apiserver.AnonymousAuthCondition, 0, len(healthPaths))
	for _, p := range healthPaths {
		conditions = append(conditions, apiserver.AnonymousAuthCondition{Path: p})
	}
	var certs authenticator.Request = newCertCache(x509.NewDynamic(clientCA.VerifyOptions, x509.CommonNameUserConversion), clientCA.VerifyOptions)
	if ca, ok := clientCA.(*caProvider); ok {
		certs = observed(certs, ca)
	}
	return group.NewAuthenticatedGroupAdder(union.New(authenticatePeer, certs, a.bearer(nil, tokens), anonymous.NewAuthenticator(conditions)))
}

// observed tells ca who authenticated with which client certificate: the
// users of a previous CA's certificates are named before a rotation's
// finish refuses them (PKI.PreviousCAClients).
func observed(certs authenticator.Request, ca *caProvider) authenticator.Request {
	return authenticator.RequestFunc(func(req *http.Request) (*authenticator.Response, bool, error) {
		resp, ok, err := certs.AuthenticateRequest(req)
		if ok && req.TLS != nil && len(req.TLS.PeerCertificates) > 0 {
			ca.observe(req.TLS.PeerCertificates[0], resp.User.GetName())
		}
		return resp, ok, err
	})
}

// TokenAuthenticator accepts the bearer tokens Authenticator accepts, and
// nothing else: what a TokenReview asks about. It authenticates for the
// audiences in the request's context, else for apiAudiences (as
// kube-apiserver's --api-audiences), which are also what the tokens of
// --token-auth-file, which name none, are good for.
func (a *Access) TokenAuthenticator(apiAudiences []string, tokens ...authenticator.Token) authenticator.Request {
	bearer := group.NewAuthenticatedGroupAdder(a.bearer(apiAudiences, tokens))
	return authenticator.RequestFunc(func(req *http.Request) (*authenticator.Response, bool, error) {
		if _, ok := authenticator.AudiencesFrom(req.Context()); !ok {
			req = req.WithContext(authenticator.WithAudiences(req.Context(), apiAudiences))
		}
		return bearer.AuthenticateRequest(req)
	})
}

// tokenCacheTTL is how long a token that authenticated is taken as
// authenticated again without asking its authenticator, kube-apiserver's
// --token-success-cache-ttl: a ServiceAccount token is then not verified
// and looked up on every request, and a token revoked (its ServiceAccount
// or bound pod deleted, the token file reloaded) may still pass for as
// long. Failures are not cached (--token-failure-cache-ttl 0).
const tokenCacheTTL = 10 * time.Second

func (a *Access) bearer(apiAudiences []string, tokens []authenticator.Token) authenticator.Request {
	file := authenticator.Token(authenticator.TokenFunc(a.authenticateToken))
	if len(apiAudiences) > 0 {
		file = authenticator.WrapAudienceAgnosticToken(apiAudiences, file)
	}
	c := &tokenCache{next: tokenunion.New(append([]authenticator.Token{file}, tokens...)...)}
	c.reset()
	a.mu.Lock()
	a.caches = append(a.caches, c)
	a.mu.Unlock()
	return bearertoken.New(c)
}

// tokenCache caches what next authenticates, for tokenCacheTTL; reset
// empties it.
type tokenCache struct {
	next  authenticator.Token
	cache atomic.Pointer[authenticator.Token]
}

func (c *tokenCache) reset() {
	t := tokencache.New(c.next, true, tokenCacheTTL, 0)
	c.cache.Store(&t)
}

func (c *tokenCache) AuthenticateToken(ctx context.Context, token string) (*authenticator.Response, bool, error) {
	return (*c.cache.Load()).AuthenticateToken(ctx, token)
}

// Authorizer allows the admin identity and the health endpoints
// (authorizeAdmin), every authenticated user discovery and the self
// reviews (authorizeBasicUser), a kubelet what upstream's Node authorizer
// allows it (SetNodeAuthorizer), a mirrored cluster's ServiceAccount what
// the cluster allows it (SetClusterAuthorizer), then what the policy of
// --authorization-policy-file grants. RulesFor lists the same rules but
// the cluster's, which it does not know.
func (a *Access) Authorizer() authorizer.Authorizer {
	return firstOpinion(authorizeAdmin, authorizeBasicUser, a.authorizeNode, a.authorizeCluster, a.authorize)
}

var _ authorizer.RuleResolver = (*Access)(nil)

// authorizeAdmin allows the admin identity (group system:masters, as the
// generated admin certificate and the loopback client carry) everything,
// and anyone the health endpoints; it has no opinion on the rest, which
// the policy file may then allow.
func authorizeAdmin(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	if u := a.GetUser(); u != nil && slices.Contains(u.GetGroups(), user.SystemPrivilegedGroup) {
		return authorizer.DecisionAllow, "", nil
	}
	if !a.IsResourceRequest() && a.GetVerb() == "get" && isHealthPath(a.GetPath()) {
		return authorizer.DecisionAllow, "", nil
	}
	return authorizer.DecisionNoOpinion, "only the kubestore admin identity is authorized", nil
}

func isHealthPath(p string) bool {
	for _, h := range healthPaths {
		if p == h || strings.HasPrefix(p, h+"/") {
			return true
		}
	}
	return false
}

// firstOpinion asks each authorizer in turn and returns the first decision
// that is not "no opinion"; the reasons of the others are kept so a 403
// says why.
func firstOpinion(authorizers ...authorizer.AuthorizerFunc) authorizer.Authorizer {
	return authorizer.AuthorizerFunc(func(ctx context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
		var reasons []string
		for _, az := range authorizers {
			d, reason, err := az(ctx, a)
			if err != nil || d != authorizer.DecisionNoOpinion {
				return d, reason, err
			}
			if reason != "" {
				reasons = append(reasons, reason)
			}
		}
		return authorizer.DecisionNoOpinion, strings.Join(reasons, "; "), nil
	})
}
