package serviceaccount

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/user"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"

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
	// The issuing member's clock ahead of the checking one's.
	ahead := func(d time.Duration) string {
		tok, _, err := k.issueAt(time.Now().Add(d), sa, []string{issuer}, time.Hour, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	// A pod in its graceful termination: its deletionTimestamp is when
	// the grace ends.
	withPod := func(deletion time.Time) objects {
		p := pod.DeepCopy()
		p.DeletionTimestamp = &metav1.Time{Time: deletion}
		return objects{sas: objs.sas, pods: map[string]*corev1.Pod{"ns/p": p}}
	}
	deletedSA := func(deletion time.Time) objects {
		s := sa.DeepCopy()
		s.DeletionTimestamp = &metav1.Time{Time: deletion}
		return objects{sas: map[string]*corev1.ServiceAccount{"ns/agent": s}, pods: objs.pods}
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
		{"expired", issue([]string{issuer}, -2*time.Minute, nil), objs, false, true},
		{"expired within the 60 s leeway", issue([]string{issuer}, -30*time.Second, nil), objs, true, false},
		{"issued by a clock 5 s ahead", ahead(5 * time.Second), objs, true, false},
		{"issued by a clock 2 min ahead", ahead(2 * time.Minute), objs, false, true},
		{"bound to a pod in its 30 s graceful termination", issue([]string{issuer}, time.Hour, &ref{Name: "p", UID: "pod-1"}), withPod(time.Now().Add(30 * time.Second)), true, false},
		{"bound to a pod deleted 30 s ago", issue([]string{issuer}, time.Hour, &ref{Name: "p", UID: "pod-1"}), withPod(time.Now().Add(-30 * time.Second)), true, false},
		{"bound to a pod deleted 2 min ago", issue([]string{issuer}, time.Hour, &ref{Name: "p", UID: "pod-1"}), withPod(time.Now().Add(-2 * time.Minute)), false, true},
		{"ServiceAccount being deleted", issue([]string{issuer}, time.Hour, nil), deletedSA(time.Now()), true, false},
		{"ServiceAccount deleted 2 min ago", issue([]string{issuer}, time.Hour, nil), deletedSA(time.Now().Add(-2 * time.Minute)), false, true},
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
					strings.Join(u.GetGroups(), ",") != "system:serviceaccounts,system:serviceaccounts:ns" || !strings.HasPrefix(u.GetExtra()[user.CredentialIDKey][0], "JTI=") {
					t.Errorf("user %+v", u)
				}
			}
		})
	}

}

// The claims are upstream's: the private claims as upstream's TestClaims
// (k8s.io/kubernetes pkg/serviceaccount/claims_test.go) wants them for a
// token bound to a pod and to a secret, byte for byte, and the registered
// claims by the names go-jose gives them.
func TestClaimsAsUpstream(t *testing.T) {
	k := newKeys(t)
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "myns", Name: "mysvcacct", UID: "mysvcacct-uid"}}
	for _, tc := range []struct {
		name        string
		pod, secret *ref
		want        string
	}{
		{"pod", &ref{Name: "mypod", UID: "mypod-uid"}, nil,
			`{"namespace":"myns","serviceaccount":{"name":"mysvcacct","uid":"mysvcacct-uid"},"pod":{"name":"mypod","uid":"mypod-uid"}}`},
		{"secret", nil, &ref{Name: "mysecret", UID: "mysecret-uid"},
			`{"namespace":"myns","serviceaccount":{"name":"mysvcacct","uid":"mysvcacct-uid"},"secret":{"name":"mysecret","uid":"mysecret-uid"}}`},
		{"unbound", nil, nil, `{"namespace":"myns","serviceaccount":{"name":"mysvcacct","uid":"mysvcacct-uid"}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tok, _, err := k.Issue(sa, []string{issuer}, time.Hour, tc.pod, tc.secret)
			if err != nil {
				t.Fatal(err)
			}
			parts := strings.Split(tok, ".")
			payload, err := base64.RawURLEncoding.DecodeString(parts[1])
			if err != nil {
				t.Fatal(err)
			}
			var fields map[string]json.RawMessage
			if err := json.Unmarshal(payload, &fields); err != nil {
				t.Fatal(err)
			}
			if got := string(fields["kubernetes.io"]); got != tc.want {
				t.Errorf("private claims\n got %s\nwant %s", got, tc.want)
			}
			var names []string
			for name := range fields {
				names = append(names, name)
			}
			sort.Strings(names)
			if got := strings.Join(names, ","); got != "aud,exp,iat,iss,jti,kubernetes.io,nbf,sub" {
				t.Errorf("claims %s, want upstream's aud,exp,iat,iss,jti,kubernetes.io,nbf,sub", got)
			}
			if sub := string(fields["sub"]); sub != `"system:serviceaccount:myns:mysvcacct"` {
				t.Errorf("sub %s", sub)
			}
		})
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
	// As kube-apiserver: a client that accepts only JSON gets 406.
	for accept, want := range map[string]int{"application/json": http.StatusNotAcceptable, "application/jwk-set+json, application/json": http.StatusOK, "*/*": http.StatusOK} {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("GET", JWKSPath, nil)
		req.Header.Set("Accept", accept)
		k.JWKSHandler().ServeHTTP(rec, req)
		if rec.Code != want {
			t.Errorf("JWKS accepting %q: %d, want %d", accept, rec.Code, want)
		}
	}
}

// TokenRequest as upstream's (pkg/registry/core/serviceaccount/storage/
// token.go): a token is bound only to a pod that runs as its
// ServiceAccount, the body names the ServiceAccount only as the URL does,
// and a uid it names must be the ServiceAccount's.
func TestTokenRequestChecks(t *testing.T) {
	k := newKeys(t)
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "agent", UID: "sa-1"}}
	own := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "own", UID: "pod-1"}, Spec: corev1.PodSpec{ServiceAccountName: "agent"}}
	other := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "other", UID: "pod-2"}, Spec: corev1.PodSpec{ServiceAccountName: "admin"}}
	objs := objects{sas: map[string]*corev1.ServiceAccount{"ns/agent": sa}, pods: map[string]*corev1.Pod{"ns/own": own, "ns/other": other}}
	r := NewTokenREST(k, func() (Lookup, error) { return objs, nil })
	ctx := genericapirequest.WithNamespace(t.Context(), "ns")
	bound := func(pod string) authenticationv1.TokenRequestSpec {
		return authenticationv1.TokenRequestSpec{BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod}}
	}
	for _, tc := range []struct {
		name  string
		req   *authenticationv1.TokenRequest
		check func(error) bool
		msg   string
	}{
		{"bound to its own pod", &authenticationv1.TokenRequest{Spec: bound("own")}, func(err error) bool { return err == nil }, ""},
		{"bound to a pod of another ServiceAccount", &authenticationv1.TokenRequest{Spec: bound("other")}, apierrors.IsBadRequest,
			`cannot bind token for serviceaccount "agent" to pod running with different serviceaccount name.`},
		{"bound to a missing pod", &authenticationv1.TokenRequest{Spec: bound("gone")}, apierrors.IsNotFound, `pods "gone" not found`},
		{"another name in the body", &authenticationv1.TokenRequest{ObjectMeta: metav1.ObjectMeta{Name: "admin"}}, apierrors.IsInvalid,
			"metadata.name: Invalid value: \"admin\": must match the service account name if specified"},
		{"another namespace in the body", &authenticationv1.TokenRequest{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system"}}, apierrors.IsInvalid,
			"metadata.namespace: Invalid value: \"kube-system\": must match the service account namespace if specified"},
		{"another uid", &authenticationv1.TokenRequest{ObjectMeta: metav1.ObjectMeta{UID: "sa-0"}}, apierrors.IsConflict,
			"the UID in the token request (sa-0) does not match the UID of the service account (sa-1)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := r.Create(ctx, "agent", tc.req, nil, &metav1.CreateOptions{})
			if !tc.check(err) || (err != nil && !strings.Contains(err.Error(), tc.msg)) {
				t.Fatalf("got %v, want %s", err, tc.msg)
			}
			if err == nil {
				tr := out.(*authenticationv1.TokenRequest)
				if tr.Name != "agent" || tr.Namespace != "ns" || tr.UID != "sa-1" || tr.Status.Token == "" {
					t.Errorf("answer %s/%s uid %s token %t, want the ServiceAccount's metadata and a token", tr.Namespace, tr.Name, tr.UID, tr.Status.Token != "")
				}
			}
		})
	}
}
