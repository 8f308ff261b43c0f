package access

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	osuser "os/user"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	clientcmdv1 "k8s.io/client-go/tools/clientcmd/api/v1"
	"sigs.k8s.io/yaml"

	"github.com/kubestore/kubestore/config"
	"github.com/kubestore/kubestore/datadir"
)

var (
	admin = &user.DefaultInfo{Name: AdminUser, Groups: []string{user.SystemPrivilegedGroup}}
	alice = &user.DefaultInfo{Name: "alice", Groups: []string{"readers", user.AllAuthenticated}}
	anon  = &user.DefaultInfo{Name: user.Anonymous, Groups: []string{user.AllUnauthenticated}}
)

func resource(u user.Info, verb, ns, res string) authorizer.AttributesRecord {
	return authorizer.AttributesRecord{User: u, Verb: verb, Namespace: ns, Resource: res, ResourceRequest: true}
}

func nonResource(u user.Info, verb, path string) authorizer.AttributesRecord {
	return authorizer.AttributesRecord{User: u, Verb: verb, Path: path}
}

const adminOnly = "only the kubestore admin identity is authorized"

func TestAuthorizeAdmin(t *testing.T) {
	for _, tc := range []struct {
		name  string
		attrs authorizer.AttributesRecord
		want  authorizer.Decision
	}{
		{"admin group writes anything", resource(admin, "delete", "kube-system", "secrets"), authorizer.DecisionAllow},
		{"admin group reads any path", nonResource(admin, "get", "/metrics"), authorizer.DecisionAllow},
		{"anonymous readyz", nonResource(anon, "get", "/readyz"), authorizer.DecisionAllow},
		{"no user livez", nonResource(nil, "get", "/livez"), authorizer.DecisionAllow},
		{"one health check", nonResource(anon, "get", "/healthz/etcd"), authorizer.DecisionAllow},
		{"health path as a prefix only", nonResource(anon, "get", "/readyzx"), authorizer.DecisionNoOpinion},
		{"health path written to", nonResource(anon, "post", "/healthz"), authorizer.DecisionNoOpinion},
		{"other paths", nonResource(alice, "get", "/metrics"), authorizer.DecisionNoOpinion},
		{"other users' resources", resource(alice, "get", "default", "pods"), authorizer.DecisionNoOpinion},
		{"masters as a user name is not the group", resource(&user.DefaultInfo{Name: user.SystemPrivilegedGroup}, "get", "default", "pods"), authorizer.DecisionNoOpinion},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, reason, err := authorizeAdmin(t.Context(), tc.attrs)
			if err != nil || d != tc.want {
				t.Fatalf("got %v %q %v, want %v", d, reason, err, tc.want)
			}
			if d == authorizer.DecisionNoOpinion && reason != adminOnly {
				t.Errorf("reason %q, want %q", reason, adminOnly)
			}
		})
	}
}

func TestFirstOpinion(t *testing.T) {
	decide := func(d authorizer.Decision, reason string, err error) authorizer.AuthorizerFunc {
		return func(context.Context, authorizer.Attributes) (authorizer.Decision, string, error) {
			return d, reason, err
		}
	}
	never := func(context.Context, authorizer.Attributes) (authorizer.Decision, string, error) {
		t.Error("asked after a decision")
		return authorizer.DecisionAllow, "", nil
	}
	boom := errors.New("boom")
	for _, tc := range []struct {
		name       string
		chain      []authorizer.AuthorizerFunc
		want       authorizer.Decision
		wantReason string
		wantErr    error
	}{
		{"none", nil, authorizer.DecisionNoOpinion, "", nil},
		{"reasons of all are joined", []authorizer.AuthorizerFunc{
			decide(authorizer.DecisionNoOpinion, "a", nil), decide(authorizer.DecisionNoOpinion, "", nil), decide(authorizer.DecisionNoOpinion, "b", nil),
		}, authorizer.DecisionNoOpinion, "a; b", nil},
		{"a later allow", []authorizer.AuthorizerFunc{
			decide(authorizer.DecisionNoOpinion, "a", nil), decide(authorizer.DecisionAllow, "ok", nil),
		}, authorizer.DecisionAllow, "ok", nil},
		{"a deny stops", []authorizer.AuthorizerFunc{
			decide(authorizer.DecisionDeny, "no", nil), never,
		}, authorizer.DecisionDeny, "no", nil},
		{"an error stops", []authorizer.AuthorizerFunc{
			decide(authorizer.DecisionNoOpinion, "", boom), never,
		}, authorizer.DecisionNoOpinion, "", boom},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, reason, err := firstOpinion(tc.chain...).Authorize(t.Context(), nonResource(alice, "get", "/"))
			if d != tc.want || reason != tc.wantReason || !errors.Is(err, tc.wantErr) {
				t.Errorf("got %v %q %v, want %v %q %v", d, reason, err, tc.want, tc.wantReason, tc.wantErr)
			}
		})
	}
}

// The admin rule comes before the policy file; what neither allows gets
// both reasons.
func TestAuthorizer(t *testing.T) {
	dir := t.TempDir()
	pol := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(pol, []byte("rules:\n- users: [alice]\n  verbs: [get]\n  resources: [pods]\n  namespaces: [default]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	a, err := Load(config.Server{AuthorizationPolicyFile: pol})
	if err != nil {
		t.Fatal(err)
	}
	az := a.Authorizer()
	for _, tc := range []struct {
		name       string
		attrs      authorizer.AttributesRecord
		want       authorizer.Decision
		wantReason string
	}{
		{"admin", resource(admin, "delete", "default", "pods"), authorizer.DecisionAllow, ""},
		{"granted by the policy", resource(alice, "get", "default", "pods"), authorizer.DecisionAllow, ""},
		{"health without a rule", nonResource(anon, "get", "/readyz"), authorizer.DecisionAllow, ""},
		{"granted by neither", resource(alice, "delete", "default", "pods"), authorizer.DecisionNoOpinion,
			adminOnly + "; no rule of --" + config.FlagAuthorizationPolicyFile + " grants it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, reason, err := az.Authorize(t.Context(), tc.attrs)
			if err != nil || d != tc.want || reason != tc.wantReason {
				t.Errorf("got %v %q %v, want %v %q", d, reason, err, tc.want, tc.wantReason)
			}
		})
	}
}

// adminCert is the client certificate WriteKubeconfig puts in the admin
// kubeconfig.
func adminCert(t *testing.T, p *PKI) *x509.Certificate {
	t.Helper()
	path := filepath.Join(t.TempDir(), "admin.kubeconfig")
	if err := p.WriteKubeconfig(path, "https://127.0.0.1:6443"); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var kc clientcmdv1.Config
	if err := yaml.Unmarshal(data, &kc); err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(kc.AuthInfos[0].AuthInfo.ClientCertificateData)
	if block == nil {
		t.Fatal("no client certificate in the kubeconfig")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

func TestAuthenticator(t *testing.T) {
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens.csv")
	if err := os.WriteFile(tokens, []byte("alice-token,alice,1001,\"readers\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	a, err := Load(config.Server{TokenAuthFile: tokens})
	if err != nil {
		t.Fatal(err)
	}
	p, err := LoadPKI(datadir.Dir(dir), []string{"localhost"})
	if err != nil {
		t.Fatal(err)
	}
	authn := a.Authenticator(p.ClientCA())
	cert := adminCert(t, p)

	// A certificate of another CA, with the admin's name and group.
	other, err := LoadPKI(datadir.Dir(t.TempDir()), []string{"localhost"})
	if err != nil {
		t.Fatal(err)
	}
	forged := adminCert(t, other)

	withCert := func(c *x509.Certificate) func(*http.Request) {
		return func(r *http.Request) { r.TLS = &tls.ConnectionState{PeerCertificates: []*x509.Certificate{c}} }
	}
	withToken := func(tok string) func(*http.Request) {
		return func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+tok) }
	}
	for _, tc := range []struct {
		name       string
		path       string
		with       func(*http.Request)
		wantUser   string
		wantGroups []string
	}{
		{"token", "/api", withToken("alice-token"), "alice", []string{"readers", user.AllAuthenticated}},
		{"unknown token", "/api", withToken("mallory-token"), "", nil},
		{"admin certificate", "/api", withCert(cert), AdminUser, []string{user.SystemPrivilegedGroup, user.AllAuthenticated}},
		{"certificate of another CA", "/api", withCert(forged), "", nil},
		{"nothing, health", "/readyz", nil, user.Anonymous, []string{user.AllUnauthenticated}},
		{"nothing, elsewhere", "/api", nil, "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodGet, tc.path, nil)
			if tc.with != nil {
				tc.with(req)
			}
			resp, ok, _ := authn.AuthenticateRequest(req)
			if tc.wantUser == "" {
				if ok {
					t.Fatalf("authenticated as %v, want not authenticated", resp.User)
				}
				return
			}
			if !ok {
				t.Fatalf("not authenticated, want %s", tc.wantUser)
			}
			if resp.User.GetName() != tc.wantUser || !slices.Equal(resp.User.GetGroups(), tc.wantGroups) {
				t.Errorf("got %s %v, want %s %v", resp.User.GetName(), resp.User.GetGroups(), tc.wantUser, tc.wantGroups)
			}
		})
	}
}

// A unix-socket peer is authenticated by the uid the kernel reports for
// it: root is the admin, anyone else unix:<login> in unix-gid:<gid>.
func TestAuthenticatePeer(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("peer credentials are read on Linux only")
	}
	a, err := Load(config.Server{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := LoadPKI(datadir.Dir(t.TempDir()), []string{"localhost"})
	if err != nil {
		t.Fatal(err)
	}
	authn := a.Authenticator(p.ClientCA())

	ln, err := net.Listen("unix", filepath.Join(t.TempDir(), "s"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err := net.Dial("unix", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	conn, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()

	req := httptest.NewRequest(http.MethodGet, "/api", nil)
	resp, ok, err := authn.AuthenticateRequest(req.WithContext(PeerConnContext(t.Context(), conn)))
	if !ok || err != nil {
		t.Fatalf("peer not authenticated: %v", err)
	}
	u := resp.User
	if os.Geteuid() == 0 {
		if u.GetName() != AdminUser || !slices.Contains(u.GetGroups(), user.SystemPrivilegedGroup) {
			t.Errorf("root peer is %s %v, want the admin", u.GetName(), u.GetGroups())
		}
		return
	}
	uid, gid := strconv.Itoa(os.Geteuid()), strconv.Itoa(os.Getegid())
	if name := u.GetName(); !strings.HasPrefix(name, UnixUserPrefix) || name == UnixUserPrefix {
		t.Errorf("peer name %q, want %s<login>", name, UnixUserPrefix)
	}
	if u.GetUID() != uid || !slices.Contains(u.GetGroups(), "unix-gid:"+gid) || slices.Contains(u.GetGroups(), user.SystemPrivilegedGroup) {
		t.Errorf("peer is uid %s groups %v, want uid %s in unix-gid:%s", u.GetUID(), u.GetGroups(), uid, gid)
	}
}

// A connection that is not a unix socket carries no peer credentials, so
// it is not mistaken for root.
func TestPeerConnContextOtherConn(t *testing.T) {
	c1, c2 := net.Pipe()
	defer c1.Close()
	defer c2.Close()
	if ctx := PeerConnContext(t.Context(), c1); ctx.Value(peerCredKey{}) != nil {
		t.Errorf("credentials recorded for a %T", c1)
	}
}

func TestAuthenticatePeerNames(t *testing.T) {
	nobody := "65534"
	if u, err := osuser.LookupId(nobody); err == nil {
		nobody = u.Username
	}
	if _, err := osuser.LookupId("4242"); err == nil {
		t.Skip("uid 4242 has a login here")
	}
	for _, tc := range []struct {
		name       string
		cred       peerCred
		wantUser   string
		wantUID    string
		wantGroups []string
	}{
		{"root is the admin", peerCred{uid: 0, gid: 0}, AdminUser, "", []string{user.SystemPrivilegedGroup}},
		{"a login", peerCred{uid: 65534, gid: 65534}, UnixUserPrefix + nobody, "65534", []string{"unix-gid:65534"}},
		{"no login", peerCred{uid: 4242, gid: 100}, UnixUserPrefix + "4242", "4242", []string{"unix-gid:100"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodGet, "/api", nil)
			req = req.WithContext(context.WithValue(t.Context(), peerCredKey{}, tc.cred))
			resp, ok, err := authenticatePeer.AuthenticateRequest(req)
			if !ok || err != nil {
				t.Fatalf("not authenticated: %v", err)
			}
			u := resp.User
			if u.GetName() != tc.wantUser || u.GetUID() != tc.wantUID || !slices.Equal(u.GetGroups(), tc.wantGroups) {
				t.Errorf("got %q uid %q %v, want %q uid %q %v", u.GetName(), u.GetUID(), u.GetGroups(), tc.wantUser, tc.wantUID, tc.wantGroups)
			}
		})
	}
	// A request that did not come through the socket is not a peer.
	if _, ok, _ := authenticatePeer.AuthenticateRequest(httptest.NewRequest(http.MethodGet, "/api", nil)); ok {
		t.Error("a request without peer credentials was authenticated as a peer")
	}
}
