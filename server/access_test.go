package server_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kubestore/kubestore/access"
	"github.com/kubestore/kubestore/config"
)

const (
	readerToken = "reader-token-0123456789"
	agentToken  = "node1-agent-token-0123456789"
)

// accessPolicy lets group "readers" read everything and the node agent of
// node1 read and write pods and configmaps in namespace node1 only.
const accessPolicy = `rules:
- groups: ["readers"]
  verbs: ["get", "list", "watch"]
  resources: ["*"]
  namespaces: ["*"]
- users: ["node1-agent"]
  verbs: ["get", "list", "watch", "create", "update", "patch", "delete"]
  resources: ["pods", "pods/status", "configmaps"]
  namespaces: ["node1"]
- groups: ["system:authenticated"]
  verbs: ["get"]
  nonResourceURLs: ["/api", "/api/*", "/apis", "/apis/*", "/version"]
`

func writeFile(t *testing.T, path, data string) string {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// tokenClient is a client of ts that authenticates with token only.
func tokenClient(t *testing.T, ts *testServer, token string) kubernetes.Interface {
	t.Helper()
	cfg := rest.AnonymousClientConfig(ts.rest)
	cfg.BearerToken = token
	return kubernetes.NewForConfigOrDie(cfg)
}

func wantStatus(t *testing.T, what string, err error, check func(error) bool, name string) {
	t.Helper()
	if !check(err) {
		t.Errorf("%s: got %v, want %s", what, err, name)
	}
}

// Without credentials a request is 401; a read-only identity cannot write;
// a node agent reads and writes only its namespace; SIGHUP's reload adds
// and revokes tokens and rules, and keeps the old ones when a file is bad.
func TestTokensAndPolicy(t *testing.T) {
	cfg := testConfig(t)
	tokens := writeFile(t, filepath.Join(t.TempDir(), "tokens.csv"),
		"# token,user,uid,groups\n"+readerToken+",reader,1001,\"readers,auditors\"\n"+agentToken+",node1-agent,1002\n")
	pol := writeFile(t, filepath.Join(t.TempDir(), "policy.yaml"), accessPolicy)
	cfg.Server.TokenAuthFile, cfg.Server.AuthorizationPolicyFile = tokens, pol
	ts := startServer(t, cfg)
	ctx := t.Context()
	for _, ns := range []string{"node1", "node2"} {
		if _, err := ts.client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	cm := func(name string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"k": "v"}}
	}

	// No credentials, a wrong token: 401; the health endpoints stay open.
	anon := kubernetes.NewForConfigOrDie(rest.AnonymousClientConfig(ts.rest))
	_, err := anon.CoreV1().ConfigMaps("node1").List(ctx, metav1.ListOptions{})
	wantStatus(t, "anonymous list", err, apierrors.IsUnauthorized, "401 Unauthorized")
	_, err = tokenClient(t, ts, "not-a-token").CoreV1().ConfigMaps("node1").List(ctx, metav1.ListOptions{})
	wantStatus(t, "unknown token", err, apierrors.IsUnauthorized, "401 Unauthorized")
	var code int
	anon.CoreV1().RESTClient().Get().AbsPath("/readyz").Do(ctx).StatusCode(&code)
	if code != http.StatusOK {
		t.Errorf("anonymous /readyz: %d, want 200", code)
	}

	// The reader reads everything and writes nothing.
	reader := tokenClient(t, ts, readerToken)
	if _, err := reader.CoreV1().ConfigMaps("").List(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("reader listing all configmaps: %v", err)
	}
	if _, err := reader.CoreV1().Nodes().List(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("reader listing nodes: %v", err)
	}
	_, err = reader.CoreV1().ConfigMaps("node1").Create(ctx, cm("by-reader"), metav1.CreateOptions{})
	wantStatus(t, "reader creating", err, apierrors.IsForbidden, "403 Forbidden")
	if err != nil && !strings.Contains(err.Error(), `User "reader" cannot create resource "configmaps"`) {
		t.Errorf("reader's 403 does not say who and what: %v", err)
	}
	if _, err := reader.Discovery().ServerVersion(); err != nil {
		t.Errorf("reader reading /version: %v", err)
	}

	// The node agent: its namespace only, and only what the rule names.
	agent := tokenClient(t, ts, agentToken)
	if _, err := agent.CoreV1().ConfigMaps("node1").Create(ctx, cm("by-agent"), metav1.CreateOptions{}); err != nil {
		t.Errorf("agent creating in its namespace: %v", err)
	}
	if _, err := agent.CoreV1().ConfigMaps("node1").List(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("agent listing its namespace: %v", err)
	}
	_, err = agent.CoreV1().ConfigMaps("node2").List(ctx, metav1.ListOptions{})
	wantStatus(t, "agent listing another namespace", err, apierrors.IsForbidden, "403 Forbidden")
	_, err = agent.CoreV1().ConfigMaps("").List(ctx, metav1.ListOptions{})
	wantStatus(t, "agent listing all namespaces", err, apierrors.IsForbidden, "403 Forbidden")
	_, err = agent.CoreV1().Secrets("node1").List(ctx, metav1.ListOptions{})
	wantStatus(t, "agent listing secrets", err, apierrors.IsForbidden, "403 Forbidden")
	_, err = agent.CoreV1().Namespaces().Get(ctx, "node1", metav1.GetOptions{})
	wantStatus(t, "agent reading a cluster-scoped resource", err, apierrors.IsForbidden, "403 Forbidden")

	// Reload: the reader's token is revoked, a writer's added, and the
	// agent gets node2 too.
	writeFile(t, tokens, agentToken+",node1-agent,1002\nwriter-token-0123456789,writer,1003,writers\n")
	writeFile(t, pol, strings.Replace(accessPolicy, `namespaces: ["node1"]`, `namespaces: ["node1", "node2"]`, 1)+
		"- groups: [\"writers\"]\n  verbs: [\"*\"]\n  resources: [\"configmaps\"]\n  namespaces: [\"*\"]\n")
	if err := ts.server.Reload(); err != nil {
		t.Fatalf("reload: %v", err)
	}
	_, err = reader.CoreV1().ConfigMaps("node1").List(ctx, metav1.ListOptions{})
	wantStatus(t, "revoked token", err, apierrors.IsUnauthorized, "401 Unauthorized")
	if _, err := agent.CoreV1().ConfigMaps("node2").List(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("agent listing node2 after the reload: %v", err)
	}
	if _, err := tokenClient(t, ts, "writer-token-0123456789").CoreV1().ConfigMaps("node2").Create(ctx, cm("by-writer"), metav1.CreateOptions{}); err != nil {
		t.Errorf("new writer token: %v", err)
	}

	// A policy file with a mistake is refused and the previous one stays.
	writeFile(t, pol, "rules:\n- users: [\"node1-agent\"]\n  verbs: [\"get\"]\n  resource: [\"pods\"]\n")
	if err := ts.server.Reload(); err == nil || !strings.Contains(err.Error(), config.FlagAuthorizationPolicyFile) {
		t.Errorf("reloading a bad policy: got %v, want an error naming --%s", err, config.FlagAuthorizationPolicyFile)
	}
	if _, err := agent.CoreV1().ConfigMaps("node2").List(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("agent after a refused reload: %v", err)
	}
}

// A token, policy or encryption file that does not load fails the start
// with an error naming the flag.
func TestBadAccessFilesFailStart(t *testing.T) {
	for _, tc := range []struct {
		flag string
		set  func(*config.Config, string)
		data string
	}{
		{config.FlagTokenAuthFile, func(c *config.Config, p string) { c.Server.TokenAuthFile = p }, "token-only\n"},
		{config.FlagAuthorizationPolicyFile, func(c *config.Config, p string) { c.Server.AuthorizationPolicyFile = p }, "rules:\n- verbs: [get]\n  resources: [pods]\n  namespaces: ['*']\n"},
		{config.FlagEncryptionProviderConfig, func(c *config.Config, p string) { c.Server.EncryptionProviderConfig = p },
			"apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\nresources:\n- resources: [secrets]\n  providers:\n  - kms: {name: plugin, endpoint: unix:///kms.sock}\n"},
	} {
		t.Run(tc.flag, func(t *testing.T) {
			cfg := testConfig(t)
			tc.set(&cfg, writeFile(t, filepath.Join(t.TempDir(), "file"), tc.data))
			backend := openBackend(t, cfg)
			_, err := newServer(complete(t, cfg), backend)
			if err == nil || !strings.Contains(err.Error(), "--"+tc.flag) {
				t.Fatalf("got %v, want an error naming --%s", err, tc.flag)
			}
			t.Log(err)
		})
	}
}

// Secrets are stored encrypted with the generated key (etcd holds no
// plaintext), configmaps are not, and a restart reads them back.
func TestSecretsEncryptedAtRest(t *testing.T) {
	cfg := testConfig(t)
	ts := startServer(t, cfg)
	ctx := t.Context()
	const plain = "correct-horse-battery-staple"
	if _, err := ts.client.CoreV1().Secrets("default").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s"},
		StringData: map[string]string{"password": plain}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := ts.client.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c"},
		Data: map[string]string{"setting": plain}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	raw := func(key string) []byte {
		t.Helper()
		resp, err := ts.backend.Client().Get(ctx, key)
		if err != nil || len(resp.Kvs) != 1 {
			t.Fatalf("reading %s from etcd: %v (%d keys)", key, err, len(resp.Kvs))
		}
		return resp.Kvs[0].Value
	}
	sec := raw("/registry/secrets/default/s")
	if !bytes.HasPrefix(sec, []byte("k8s:enc:secretbox:v1:key1:")) {
		t.Errorf("stored secret starts with %q, want the secretbox provider's prefix", sec[:min(len(sec), 32)])
	}
	if bytes.Contains(sec, []byte(plain)) || bytes.Contains(sec, []byte(base64.StdEncoding.EncodeToString([]byte(plain)))) {
		t.Errorf("etcd holds the secret's value in clear")
	}
	if !bytes.Contains(raw("/registry/configmaps/default/c"), []byte(plain)) {
		t.Errorf("the configmap is not stored as it is; is everything encrypted?")
	}
	keyFile := filepath.Join(cfg.DataDir, "pki", access.EncryptionConfigFile)
	if fi, err := os.Stat(keyFile); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("generated key file %s: %v, mode %v; want mode 0600", keyFile, err, fi.Mode())
	}

	ts.stop()
	ts = startServer(t, cfg)
	got, err := ts.client.CoreV1().Secrets("default").Get(ctx, "s", metav1.GetOptions{})
	if err != nil || string(got.Data["password"]) != plain {
		t.Fatalf("secret after restart: %v, %q", err, got.Data["password"])
	}
}

// A user-supplied configuration with a second, aesgcm key first: new
// writes use aesgcm, secrets written under the old secretbox key still
// read — the first step of a key rotation.
func TestEncryptionKeyRotation(t *testing.T) {
	cfg := testConfig(t)
	ts := startServer(t, cfg)
	ctx := t.Context()
	if _, err := ts.client.CoreV1().Secrets("default").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "old"},
		StringData: map[string]string{"k": "v1"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ts.stop()

	generated, err := os.ReadFile(filepath.Join(cfg.DataDir, "pki", access.EncryptionConfigFile))
	if err != nil {
		t.Fatal(err)
	}
	aesKey := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, 32))
	rotated := strings.Replace(string(generated), "  providers:\n", "  providers:\n  - aesgcm:\n      keys:\n      - name: key2\n        secret: "+aesKey+"\n", 1)
	cfg.Server.EncryptionProviderConfig = writeFile(t, filepath.Join(t.TempDir(), "encryption.yaml"), rotated)
	ts = startServer(t, cfg)
	if got, err := ts.client.CoreV1().Secrets("default").Get(ctx, "old", metav1.GetOptions{}); err != nil || string(got.Data["k"]) != "v1" {
		t.Fatalf("old secret after adding a key: %v", err)
	}
	if _, err := ts.client.CoreV1().Secrets("default").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "new"},
		StringData: map[string]string{"k": "v2"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	resp, err := ts.backend.Client().Get(ctx, "/registry/secrets/default/new")
	if err != nil || len(resp.Kvs) != 1 || !bytes.HasPrefix(resp.Kvs[0].Value, []byte("k8s:enc:aesgcm:v1:key2:")) {
		t.Fatalf("new secret not written with the new first key: %v", err)
	}
}

// socketClient talks HTTP to the unix socket at path.
func socketClient(path string) *http.Client {
	return &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", path)
	}}}
}

func socketRequest(c *http.Client, method, path, body string) (int, string, error) {
	req, err := http.NewRequest(method, "http://kubestore"+path, strings.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// socketHelperEnv makes this test binary, re-executed under another uid,
// a unix-socket client: "socket method path body".
const socketHelperEnv = "KUBESTORE_TEST_SOCKET_REQUEST"

func TestMain(m *testing.M) {
	if req := os.Getenv(socketHelperEnv); req != "" {
		parts := strings.SplitN(req, " ", 4)
		code, body, err := socketRequest(socketClient(parts[0]), parts[1], parts[2], parts[3])
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		fmt.Printf("%d %s", code, body)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// The unix socket is mode 0660 in its group; its peers are authenticated
// by their uid: root is the admin, another uid is unix:<login> and gets
// what the policy grants it.
func TestUnixSocketPeers(t *testing.T) {
	cfg := testConfig(t)
	cfg.Server.UnixSocket = filepath.Join(cfg.DataDir, "api.sock")
	const nobody = 65534
	root := os.Geteuid() == 0
	if root {
		cfg.Server.UnixSocketGroup = fmt.Sprint(nobody)
	}
	cfg.Server.AuthorizationPolicyFile = writeFile(t, filepath.Join(t.TempDir(), "policy.yaml"), fmt.Sprintf(`rules:
- groups: ["unix-gid:%d"]
  verbs: ["get", "list"]
  resources: ["configmaps"]
  namespaces: ["default"]
`, map[bool]int{true: nobody, false: os.Getegid()}[root]))
	startServer(t, cfg)

	fi, err := os.Stat(cfg.Server.UnixSocket)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o660 {
		t.Errorf("socket mode %v, want 0660", fi.Mode().Perm())
	}
	const list = "/api/v1/namespaces/default/configmaps"
	const create = `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"via-socket"}}`
	if !root {
		c := socketClient(cfg.Server.UnixSocket)
		if code, body, err := socketRequest(c, http.MethodGet, list, ""); err != nil || code != http.StatusOK {
			t.Errorf("own uid listing: %d %s %v", code, body, err)
		}
		if code, body, _ := socketRequest(c, http.MethodPost, list, create); code != http.StatusForbidden || !strings.Contains(body, access.UnixUserPrefix) {
			t.Errorf("own uid creating: %d %s, want 403 naming the unix: user", code, body)
		}
		return
	}
	if st := fi.Sys().(*syscall.Stat_t); st.Gid != nobody {
		t.Errorf("socket group %d, want %d", st.Gid, nobody)
	}

	// Root is the admin.
	c := socketClient(cfg.Server.UnixSocket)
	if code, body, err := socketRequest(c, http.MethodPost, list, create); err != nil || code != http.StatusCreated {
		t.Fatalf("root creating through the socket: %d %s %v", code, body, err)
	}

	// Another uid: this test binary, copied where that uid can run it.
	dir := t.TempDir()
	for d := dir; d != "/" && d != os.TempDir(); d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	helper := filepath.Join(dir, "client")
	if err := os.WriteFile(helper, data, 0o755); err != nil {
		t.Fatal(err)
	}
	for d := cfg.DataDir; d != "/" && d != os.TempDir(); d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	as := func(uid, gid uint32, method, path, body string) string {
		cmd := exec.Command(helper)
		cmd.Env = []string{socketHelperEnv + "=" + strings.Join([]string{cfg.Server.UnixSocket, method, path, body}, " ")}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: gid}}
		out, err := cmd.CombinedOutput()
		if err != nil {
			return fmt.Sprintf("error %v: %s", err, out)
		}
		return string(out)
	}
	if out := as(nobody, nobody, http.MethodGet, list, ""); !strings.HasPrefix(out, "200 ") || !strings.Contains(out, "via-socket") {
		t.Errorf("uid %d listing: %s", nobody, out)
	}
	if out := as(nobody, nobody, http.MethodPost, list, create); !strings.HasPrefix(out, "403 ") || !strings.Contains(out, access.UnixUserPrefix) {
		t.Errorf("uid %d creating: %s, want 403 naming the unix: user", nobody, out)
	}
	// A uid outside the socket's group cannot connect at all.
	if out := as(4242, 4242, http.MethodGet, list, ""); !strings.Contains(out, "permission denied") {
		t.Errorf("uid 4242 outside the group: %s, want permission denied", out)
	}
}

// A TokenReview says who a bearer token is, as kube-apiserver's does (a
// kubelet asks it about the tokens on its own port): a token of
// --token-auth-file and a ServiceAccount token for the API are
// authenticated; a ServiceAccount token for another audience only when
// the review asks for that audience; an unknown token is not; a review
// without a token is a bad request.
func TestTokenReview(t *testing.T) {
	cfg := testConfig(t)
	cfg.Server.TokenAuthFile = writeFile(t, filepath.Join(t.TempDir(), "tokens.csv"), readerToken+",reader,1001,\"readers\"\n")
	ts := startServer(t, cfg)
	ctx := t.Context()
	if _, err := ts.client.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "agent"}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	token := func(audiences ...string) string {
		tr, err := ts.client.CoreV1().ServiceAccounts("default").CreateToken(ctx, "agent",
			&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{Audiences: audiences}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return tr.Status.Token
	}
	issuer := cfg.Server.ServiceAccountIssuer
	for _, tc := range []struct {
		name      string
		token     string
		audiences []string
		user      string
		want      []string // the audiences reported; nil when not authenticated
	}{
		{"token file", readerToken, nil, "reader", []string{issuer}},
		{"service account, the API's audience", token(), nil, "system:serviceaccount:default:agent", []string{issuer}},
		{"service account for vault, asked for vault", token("vault"), []string{"vault"}, "system:serviceaccount:default:agent", []string{"vault"}},
		{"service account for vault, asked for the API", token("vault"), nil, "", nil},
		{"unknown token", "not-a-token-0123456789", nil, "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			review, err := ts.client.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{
				Spec: authenticationv1.TokenReviewSpec{Token: tc.token, Audiences: tc.audiences}}, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			st := review.Status
			if st.Authenticated != (tc.want != nil) || st.User.Username != tc.user || strings.Join(st.Audiences, ",") != strings.Join(tc.want, ",") {
				t.Errorf("status %+v, want authenticated=%v user %q audiences %v", st, tc.want != nil, tc.user, tc.want)
			}
		})
	}
	_, err := ts.client.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{}, metav1.CreateOptions{})
	wantStatus(t, "a review without a token", err, apierrors.IsBadRequest, "400 Bad Request")
}

// ServiceAccount tokens are verified once per kube-apiserver's cache
// window (10 s): fifty requests with one token cost one lookup of the
// ServiceAccount, not fifty; a token whose ServiceAccount is deleted stops
// working at the latest when its cached authentication expires.
func TestServiceAccountTokenCache(t *testing.T) {
	ts := startServer(t, testConfig(t))
	ctx := t.Context()
	sas := ts.client.CoreV1().ServiceAccounts("default")
	if _, err := sas.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "cached"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tr, err := sas.CreateToken(ctx, "cached", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c := tokenClient(t, ts, tr.Status.Token)
	lookups := func() float64 {
		return ts.metric("apiserver_request_total", map[string]string{"verb": "GET", "resource": "serviceaccounts", "code": "200"})
	}
	before := lookups()
	for range 50 {
		if _, err := c.Discovery().ServerVersion(); err != nil {
			t.Fatal(err)
		}
	}
	got := lookups() - before
	t.Logf("50 requests with one ServiceAccount token: %v lookups of the ServiceAccount", got)
	if got > 2 {
		t.Errorf("50 requests with one token looked the ServiceAccount up %v times, want at most once per cache window", got)
	}
	if err := sas.Delete(ctx, "cached", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	deleted := time.Now()
	eventually(t, 15*time.Second, "the token of a deleted ServiceAccount refused", func() (bool, error) {
		_, err := c.Discovery().ServerVersion()
		return apierrors.IsUnauthorized(err), err
	})
	t.Logf("the token of a deleted ServiceAccount was refused %s after the delete", time.Since(deleted).Round(100*time.Millisecond))
}
