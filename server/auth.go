package server

import (
	"context"
	"slices"
	"strings"

	"k8s.io/apiserver/pkg/apis/apiserver"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/group"
	"k8s.io/apiserver/pkg/authentication/request/anonymous"
	"k8s.io/apiserver/pkg/authentication/request/union"
	"k8s.io/apiserver/pkg/authentication/request/x509"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
)

// healthPaths may be probed without credentials (kube-apiserver's
// anonymous authentication restricted to these endpoints), so that a
// supervisor or a benchmark can wait for /readyz.
var healthPaths = []string{"/healthz", "/livez", "/readyz"}

// newAuthenticator accepts client certificates signed by the data
// directory's CA; requests without one are anonymous on the health
// endpoints and 401 everywhere else.
func newAuthenticator(clientCA dynamiccertificates.CAContentProvider) authenticator.Request {
	conditions := make([]apiserver.AnonymousAuthCondition, 0, len(healthPaths))
	for _, p := range healthPaths {
		conditions = append(conditions, apiserver.AnonymousAuthCondition{Path: p})
	}
	certs := x509.NewDynamic(clientCA.VerifyOptions, x509.CommonNameUserConversion)
	return group.NewAuthenticatedGroupAdder(union.New(certs, anonymous.NewAuthenticator(conditions)))
}

// authorizeAdmin allows the admin identity (group system:masters, as the
// generated admin certificate and the loopback client carry) everything,
// and anyone the health endpoints; it has no opinion on the rest, which is
// then forbidden.
// adminAuthorizer is authorizeAdmin as an authorizer.Authorizer.
var adminAuthorizer authorizer.Authorizer = authorizer.AuthorizerFunc(authorizeAdmin)

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
