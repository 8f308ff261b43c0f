package e2e

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"encoding/base64"
	"encoding/json"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ServiceAccounts as a cluster gives them, driven with kubectl: a default
// ServiceAccount and kube-root-ca.crt in every namespace, kept present;
// kubectl create token; the token as a bearer token, authorized by the
// policy file through its user or group, verifiable offline with the
// served JWKS, and refused once the ServiceAccount is deleted; a pod
// naming a missing ServiceAccount refused.
func TestServiceAccounts(t *testing.T) {
	requireKubectl(t)
	dir := shortTempDir(t)
	policy := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(policy, []byte("rules: []\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := start(t, filepath.Join(dir, "data"), "--authorization-policy-file", policy)
	p.mustKubectl("create", "namespace", "apps")
	present := func(args ...string) bool {
		_, err := p.kubectl(append([]string{"get", "-n", "apps"}, args...)...)
		return err == nil
	}
	if !eventually(10*time.Second, func() bool { return present("serviceaccount", "default") && present("configmap", "kube-root-ca.crt") }) {
		t.Fatal("no default ServiceAccount and kube-root-ca.crt in a new namespace")
	}
	ca, err := os.ReadFile(filepath.Join(dir, "data", "pki", "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	if got := p.mustKubectl("get", "configmap", "kube-root-ca.crt", "-n", "apps", "-o", `jsonpath={.data.ca\.crt}`); got != string(ca) {
		t.Errorf("kube-root-ca.crt holds %q, want the CA of pki/ca.crt", got)
	}
	p.mustKubectl("delete", "configmap", "kube-root-ca.crt", "-n", "apps")
	p.mustKubectl("patch", "serviceaccount", "default", "-n", "apps", "--type=merge", "-p", `{"metadata":{"labels":{"edited":"yes"}}}`)
	if !eventually(10*time.Second, func() bool { return present("configmap", "kube-root-ca.crt") }) {
		t.Error("kube-root-ca.crt was not recreated")
	}

	token := strings.TrimSpace(p.mustKubectl("create", "token", "default", "-n", "apps", "--duration=15m"))
	as := func(args ...string) (string, error) {
		return p.kubectl(append([]string{"--kubeconfig=/dev/null", "--server=" + p.server(), "--insecure-skip-tls-verify", "--token=" + token}, args...)...)
	}
	out, err := as("auth", "whoami", "-o", "jsonpath={.status.userInfo.username} {.status.userInfo.groups}")
	if err != nil || out != `system:serviceaccount:apps:default ["system:serviceaccounts","system:serviceaccounts:apps","system:authenticated"]` {
		t.Fatalf("whoami with the token: %v %q", err, out)
	}
	if out, err := as("get", "configmaps", "-n", "apps"); err == nil || !strings.Contains(out, "Forbidden") {
		t.Errorf("listing without a policy rule: %v %s", err, out)
	}
	grant := func(rule string) {
		t.Helper()
		if err := os.WriteFile(policy, []byte("rules:\n"+rule), 0o600); err != nil {
			t.Fatal(err)
		}
		before := strings.Count(p.logs(), "SIGHUP: reloaded")
		p.cmd.Process.Signal(syscall.SIGHUP)
		if !eventually(10*time.Second, func() bool { return strings.Count(p.logs(), "SIGHUP: reloaded") > before }) {
			t.Fatal("the policy was not reloaded")
		}
	}
	grant("- users: [\"system:serviceaccount:apps:default\"]\n  verbs: [list]\n  resources: [configmaps]\n  namespaces: [apps]\n")
	if out, err := as("get", "configmaps", "-n", "apps", "-o", "name"); err != nil || !strings.Contains(out, "kube-root-ca.crt") {
		t.Errorf("listing once the policy grants the user: %v %s", err, out)
	}
	grant("- groups: [\"system:serviceaccounts:apps\"]\n  verbs: [get]\n  resources: [configmaps]\n  namespaces: [apps]\n")
	if out, err := as("get", "configmap", "kube-root-ca.crt", "-n", "apps", "-o", "name"); err != nil {
		t.Errorf("reading once the policy grants the group: %v %s", err, out)
	}

	// A relying party verifies the token offline with the JWKS, which
	// ServiceAccounts may read (upstream's service-account-issuer-discovery).
	jwks, err := as("get", "--raw", "/openid/v1/jwks")
	if err != nil {
		t.Fatalf("reading the JWKS with the token: %v %s", err, jwks)
	}
	discovery := p.mustKubectl("get", "--raw", "/.well-known/openid-configuration")
	var doc struct {
		Issuer  string `json:"issuer"`
		JWKSURI string `json:"jwks_uri"`
	}
	if err := json.Unmarshal([]byte(discovery), &doc); err != nil || doc.Issuer != "https://kubernetes.default.svc.cluster.local" || !strings.HasSuffix(doc.JWKSURI, "/openid/v1/jwks") {
		t.Errorf("discovery document: %v %s", err, discovery)
	}
	claims := verifyOffline(t, token, jwks, doc.Issuer)
	if claims["sub"] != "system:serviceaccount:apps:default" {
		t.Errorf("claims: %v", claims)
	}

	// Pods: a missing ServiceAccount is refused, none named runs as default.
	out, err = p.kubectl("run", "lost", "-n", "apps", "--image=busybox", `--overrides={"spec":{"serviceAccountName":"nobody"}}`)
	if err == nil || !strings.Contains(out, "Forbidden") || !strings.Contains(out, `serviceaccounts "nobody" not found`) {
		t.Errorf("a pod naming a missing ServiceAccount: %v %s", err, out)
	}
	if out := p.mustKubectl("run", "agent", "-n", "apps", "--image=busybox", "-o", "jsonpath={.spec.serviceAccountName}"); out != "default" {
		t.Errorf("a pod naming none runs as %q", out)
	}
	// A token bound to the pod dies with it.
	bound := strings.TrimSpace(p.mustKubectl("create", "token", "default", "-n", "apps", "--bound-object-kind=Pod", "--bound-object-name=agent"))
	boundAs := func() error {
		_, err := p.kubectl("--kubeconfig=/dev/null", "--server="+p.server(), "--insecure-skip-tls-verify", "--token="+bound, "auth", "whoami")
		return err
	}
	if err := boundAs(); err != nil {
		t.Errorf("a pod-bound token: %v", err)
	}
	p.mustKubectl("delete", "pod", "agent", "-n", "apps", "--grace-period=0", "--force")
	if !eventually(10*time.Second, func() bool { return boundAs() != nil }) {
		t.Error("a token bound to a deleted pod still authenticates")
	}
	if out, err := p.kubectl("create", "token", "default", "-n", "apps", "--duration=1m"); err == nil || !strings.Contains(out, "spec.expirationSeconds") {
		t.Errorf("a one-minute token: %v %s", err, out)
	}

	// Deleting the ServiceAccount invalidates its tokens; the controller
	// makes a new default one, whose uid the old tokens do not carry.
	p.mustKubectl("delete", "serviceaccount", "default", "-n", "apps")
	if !eventually(10*time.Second, func() bool { _, err := as("auth", "whoami"); return err != nil }) {
		t.Error("the token of a deleted ServiceAccount still authenticates")
	}
	if !eventually(10*time.Second, func() bool { return present("serviceaccount", "default") }) {
		t.Error("the default ServiceAccount was not recreated")
	}
}

// verifyOffline checks token against the JWKS as a relying party would,
// and returns its claims.
func verifyOffline(t *testing.T, token, jwks, issuer string) jwt.MapClaims {
	t.Helper()
	var set struct {
		Keys []struct{ Kid, Kty, Crv, X, Y string } `json:"keys"`
	}
	if err := json.Unmarshal([]byte(jwks), &set); err != nil || len(set.Keys) == 0 {
		t.Fatalf("JWKS %s: %v", jwks, err)
	}
	claims := jwt.MapClaims{}
	_, err := jwt.ParseWithClaims(token, claims, func(tok *jwt.Token) (any, error) {
		for _, k := range set.Keys {
			if k.Kid != tok.Header["kid"] || k.Kty != "EC" || k.Crv != "P-256" {
				continue
			}
			x, _ := base64.RawURLEncoding.DecodeString(k.X)
			y, _ := base64.RawURLEncoding.DecodeString(k.Y)
			return &ecdsa.PublicKey{Curve: elliptic.P256(), X: new(big.Int).SetBytes(x), Y: new(big.Int).SetBytes(y)}, nil
		}
		return nil, jwt.ErrTokenUnverifiable
	}, jwt.WithIssuer(issuer), jwt.WithAudience(issuer), jwt.WithExpirationRequired())
	if err != nil {
		t.Fatalf("the token does not verify against the JWKS: %v", err)
	}
	return claims
}

// Two kubestores on one etcd: a token issued by one authenticates on the
// other, and both publish one kube-root-ca.crt holding both CAs, which
// stops changing.
func TestServiceAccountsTwoProcessesOneEtcd(t *testing.T) {
	requireKubectl(t)
	dir := shortTempDir(t)
	a := start(t, filepath.Join(dir, "a"))
	b := start(t, filepath.Join(dir, "b"), "--etcd-servers", "unix://"+filepath.Join(a.dataDir, "etcd", "etcd.sock"))
	a.mustKubectl("create", "namespace", "shared")
	if !eventually(10*time.Second, func() bool {
		_, err := a.kubectl("get", "serviceaccount", "default", "-n", "shared")
		return err == nil
	}) {
		t.Fatal("no default ServiceAccount")
	}
	token := strings.TrimSpace(a.mustKubectl("create", "token", "default", "-n", "shared"))
	// b learns a's key when it starts after a, or at its next refresh.
	req, _ := http.NewRequest(http.MethodGet, b.server()+"/api", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := anonymous.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("a token of a on b: %d", resp.StatusCode)
	}
	caA, _ := os.ReadFile(filepath.Join(a.dataDir, "pki", "ca.crt"))
	caB, _ := os.ReadFile(filepath.Join(b.dataDir, "pki", "ca.crt"))
	c := a.clientset()
	var bundle string
	if !eventually(90*time.Second, func() bool {
		cm, err := c.CoreV1().ConfigMaps("shared").Get(t.Context(), "kube-root-ca.crt", metav1.GetOptions{})
		if err != nil {
			return false
		}
		bundle = cm.Data["ca.crt"]
		return strings.Contains(bundle, string(caA)) && strings.Contains(bundle, string(caB))
	}) {
		t.Fatalf("kube-root-ca.crt does not hold both CAs: %q", bundle)
	}
	cm, _ := c.CoreV1().ConfigMaps("shared").Get(t.Context(), "kube-root-ca.crt", metav1.GetOptions{})
	time.Sleep(3 * time.Second)
	again, _ := c.CoreV1().ConfigMaps("shared").Get(t.Context(), "kube-root-ca.crt", metav1.GetOptions{})
	if again.ResourceVersion != cm.ResourceVersion {
		t.Errorf("kube-root-ca.crt keeps changing (%s, then %s)", cm.ResourceVersion, again.ResourceVersion)
	}
	l, _ := c.CoreV1().ServiceAccounts("shared").List(t.Context(), metav1.ListOptions{})
	if len(l.Items) != 1 {
		t.Errorf("%d ServiceAccounts in the namespace, want the one default", len(l.Items))
	}
}
