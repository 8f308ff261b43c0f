package serviceaccount

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubestore/kubestore/datadir"
)

// objects is a Lookup over fixed objects.
type objects struct {
	sas  map[string]*corev1.ServiceAccount
	pods map[string]*corev1.Pod
}

func (o objects) ServiceAccount(_ context.Context, ns, name string) (*corev1.ServiceAccount, error) {
	if sa, ok := o.sas[ns+"/"+name]; ok {
		return sa, nil
	}
	return nil, apierrors.NewNotFound(corev1.Resource("serviceaccounts"), name)
}

func (o objects) Pod(_ context.Context, ns, name string) (*corev1.Pod, error) {
	if p, ok := o.pods[ns+"/"+name]; ok {
		return p, nil
	}
	return nil, apierrors.NewNotFound(corev1.Resource("pods"), name)
}

func (o objects) Secret(context.Context, string, string) (*corev1.Secret, error) {
	return nil, apierrors.NewNotFound(corev1.Resource("secrets"), "")
}

const issuer = "https://kubestore.test"

func newKeys(t *testing.T) *Keys {
	t.Helper()
	k, err := LoadKeys(datadir.Dir(t.TempDir()), issuer, []byte("CA"))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// The key is created once, 0600, and loaded again unchanged.
func TestLoadKeys(t *testing.T) {
	dir := datadir.Dir(t.TempDir())
	a, err := LoadKeys(dir, issuer, nil)
	if err != nil {
		t.Fatal(err)
	}
	info, err := os.Stat(filepath.Join(dir.PKI(), KeyFile))
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v", err, info)
	}
	b, err := LoadKeys(dir, issuer, nil)
	if err != nil || b.kid != a.kid {
		t.Errorf("reloaded key id %q, want %q (%v)", b.kid, a.kid, err)
	}
	if err := os.WriteFile(filepath.Join(dir.PKI(), KeyFile), []byte("junk"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadKeys(dir, issuer, nil); err == nil || !strings.Contains(err.Error(), KeyFile) {
		t.Errorf("a corrupt key file: %v", err)
	}
}

// Tokens authenticate as upstream's ServiceAccount users while what they
// name exists, and not otherwise; tokens of other issuers are left to the
// other authenticators.
func TestTokenAuthentication(t *testing.T) {
	k := newKeys(t)
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "agent", UID: "sa-1"}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "pod-1"}}
	objs := objects{sas: map[string]*corev1.ServiceAccount{"ns/agent": sa}, pods: map[string]*corev1.Pod{"ns/p": pod}}
	issue := func(aud []string, d time.Duration, p *ref) string {
		tok, _, err := k.Issue(sa, aud, d, p, nil)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	other := newKeys(t)
	foreign, _, _ := other.Issue(sa, []string{issuer}, time.Hour, nil, nil)
	otherIssuer, _ := LoadKeys(datadir.Dir(t.TempDir()), "https://elsewhere", nil)
	elsewhere, _, _ := otherIssuer.Issue(sa, []string{"https://elsewhere"}, time.Hour, nil, nil)

	for _, tc := range []struct {
		name    string
		token   string
		objs    objects
		ok      bool
		wantErr bool
	}{
		{"valid", issue([]string{issuer}, time.Hour, nil), objs, true, false},
		{"bound to an existing pod", issue([]string{issuer}, time.Hour, &ref{Name: "p", UID: "pod-1"}), objs, true, false},
		{"bound to a pod since recreated", issue([]string{issuer}, time.Hour, &ref{Name: "p", UID: "pod-0"}), objs, false, true},
		{"other audience", issue([]string{"vault"}, time.Hour, nil), objs, false, true},
		{"expired", issue([]string{issuer}, -time.Minute, nil), objs, false, true},
		{"ServiceAccount deleted", issue([]string{issuer}, time.Hour, nil), objects{}, false, true},
		{"ServiceAccount recreated", issue([]string{issuer}, time.Hour, nil), objects{sas: map[string]*corev1.ServiceAccount{"ns/agent": {ObjectMeta: metav1.ObjectMeta{UID: "sa-2"}}}}, false, true},
		{"signed by an unpublished key", foreign, objs, false, true},
		{"another issuer's", elsewhere, objs, false, false},
		{"not a JWT", "0f1e2d3c", objs, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			auth := k.Authenticator(func() (Lookup, error) { return tc.objs, nil })
			resp, ok, err := auth.AuthenticateToken(t.Context(), tc.token)
			if ok != tc.ok || (err != nil) != tc.wantErr {
				t.Fatalf("ok %t err %v, want ok %t error %t", ok, err, tc.ok, tc.wantErr)
			}
			if ok {
				u := resp.User
				if u.GetName() != "system:serviceaccount:ns:agent" || u.GetUID() != "sa-1" ||
					strings.Join(u.GetGroups(), ",") != "system:serviceaccounts,system:serviceaccounts:ns" || !strings.HasPrefix(u.GetExtra()[extraCredential][0], "JTI=") {
					t.Errorf("user %+v", u)
				}
			}
		})
	}

	// The claims are upstream's.
	var c claims
	if _, _, err := jwt.NewParser().ParseUnverified(issue([]string{issuer}, time.Hour, &ref{Name: "p", UID: "pod-1"}), &c); err != nil {
		t.Fatal(err)
	}
	if c.Subject != "system:serviceaccount:ns:agent" || c.Kubernetes.Namespace != "ns" || c.Kubernetes.ServiceAccount.UID != "sa-1" ||
		c.Kubernetes.Pod == nil || c.Kubernetes.Pod.UID != "pod-1" || c.ID == "" || c.NotBefore == nil || c.IssuedAt == nil {
		t.Errorf("claims %+v", c)
	}
}

// The JWKS lists the signing key as a JWK a relying party can use.
func TestJWKS(t *testing.T) {
	k := newKeys(t)
	rec := httptest.NewRecorder()
	k.JWKSHandler().ServeHTTP(rec, httptest.NewRequest("GET", JWKSPath, nil))
	var set struct {
		Keys []map[string]string `json:"keys"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &set); err != nil || len(set.Keys) != 1 {
		t.Fatalf("JWKS %s: %v", rec.Body, err)
	}
	if key := set.Keys[0]; key["kid"] != k.kid || key["kty"] != "EC" || key["alg"] != "ES256" || len(key["x"]) != 43 || len(key["y"]) != 43 {
		t.Errorf("JWK %v", key)
	}
}
