package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	certutil "k8s.io/client-go/util/cert"

	"github.com/kubestore/kubestore/tunnel"
)

// cloudTunnel is the cluster's side of the gateways' tunnels, as
// docs/node/tunnel.md sets it up: kube-apiserver's egress selector (the
// cluster egress, HTTP CONNECT over a unix socket) and its own kubelet
// client certificate, and `kubestore tunnel-endpoint` with its own
// ServiceAccount.
type cloudTunnel struct {
	dir, sock, egress                     string
	clusterCA, kubeletCert, kubeletKey    string
	endpointCert, endpointKey, endpointCA string
	port                                  int
	endpoint                              *process
}

// newCloudTunnel writes what kube-apiserver starts with; start runs the
// endpoint once the cluster serves.
func newCloudTunnel(t *testing.T) *cloudTunnel {
	t.Helper()
	ct := &cloudTunnel{dir: shortTempDir(t), port: freePort(t)}
	ct.sock, ct.egress = filepath.Join(ct.dir, "connect.sock"), filepath.Join(ct.dir, "egress.yaml")
	must(t, os.WriteFile(ct.egress, []byte(fmt.Sprintf(`apiVersion: apiserver.k8s.io/v1beta1
kind: EgressSelectorConfiguration
egressSelections:
- name: cluster
  connection:
    proxyProtocol: HTTPConnect
    transport:
      uds:
        udsName: %s
`, ct.sock)), 0o600))
	// The cluster's CA and kube-apiserver's kubelet client certificate
	// (kubeadm's apiserver-kubelet-client).
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	must(t, err)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "the cluster's CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, caKey.Public(), caKey)
	must(t, err)
	ca, err := x509.ParseCertificate(caDER)
	must(t, err)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	must(t, err)
	der, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{SerialNumber: big.NewInt(2),
		Subject:   pkix.Name{CommonName: "kube-apiserver-kubelet-client", Organization: []string{"system:masters"}},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}, ca, key.Public(), caKey)
	must(t, err)
	keyDER, err := x509.MarshalECPrivateKey(key)
	must(t, err)
	ct.clusterCA, ct.kubeletCert, ct.kubeletKey = filepath.Join(ct.dir, "ca.crt"), filepath.Join(ct.dir, "kubelet-client.crt"), filepath.Join(ct.dir, "kubelet-client.key")
	must(t, os.WriteFile(ct.clusterCA, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o600))
	must(t, os.WriteFile(ct.kubeletCert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600))
	must(t, os.WriteFile(ct.kubeletKey, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600))
	// The endpoint's serving certificate, which the gateway verifies
	// with --tunnel-ca-file.
	certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey("kubestore-tunnel", []net.IP{net.ParseIP("127.0.0.1")}, nil)
	must(t, err)
	ct.endpointCert, ct.endpointKey, ct.endpointCA = filepath.Join(ct.dir, "tls.crt"), filepath.Join(ct.dir, "tls.key"), filepath.Join(ct.dir, "tls-ca.crt")
	must(t, os.WriteFile(ct.endpointCert, certPEM, 0o600))
	must(t, os.WriteFile(ct.endpointKey, keyPEM, 0o600))
	must(t, os.WriteFile(ct.endpointCA, certPEM, 0o600))
	return ct
}

// apiserverArgs are kube-apiserver's flags for the tunnel, and the
// preferred address types kubeadm sets: the node proxy refuses a
// Hostname the control plane cannot resolve, as a gateway's is not.
func (ct *cloudTunnel) apiserverArgs() []string {
	return []string{"--egress-selector-config-file", ct.egress, "--kubelet-client-certificate", ct.kubeletCert, "--kubelet-client-key", ct.kubeletKey,
		"--kubelet-preferred-address-types", "InternalIP,ExternalIP,Hostname"}
}

// start runs the endpoint with its ServiceAccount's token
// (docs/node/tunnel-endpoint-rbac.yaml), and lets the ServiceAccount
// kube-system/gateway create nodes/tunnel of node only.
func (ct *cloudTunnel) start(t *testing.T, c *cluster, kubectl func(args ...string) string, gateway, node string) {
	t.Helper()
	kubectl("apply", "-f", "../../docs/node/tunnel-endpoint-rbac.yaml")
	rbac := filepath.Join(ct.dir, "gateway-tunnel.yaml")
	must(t, os.WriteFile(rbac, []byte(gatewayTunnelRBAC(gateway, node)), 0o600))
	kubectl("apply", "-f", rbac)
	token := strings.TrimSpace(kubectl("create", "token", "--namespace", "kube-system", "kubestore-tunnel-endpoint", "--duration", "24h"))
	kc := filepath.Join(ct.dir, "endpoint.kubeconfig")
	writeTokenKubeconfig(t, c.url, token, kc)
	ct.endpoint = run(t, "tunnel-endpoint", binary(t), "tunnel-endpoint", "--kubeconfig", kc, "--bind-address", "127.0.0.1",
		"--secure-port", strconv.Itoa(ct.port), "--tls-cert-file", ct.endpointCert, "--tls-private-key-file", ct.endpointKey,
		"--connect-socket", ct.sock, "--v", "2")
	if !eventually(30*time.Second, func() bool { _, err := ct.connects(); return err == nil }) {
		t.Fatal("the tunnel endpoint did not serve in 30 s")
	}
}

// gatewayTunnelRBAC is docs/node/tunnel.md's per-gateway rule: the
// gateway's ServiceAccount may serve its own node's tunnel, and no other.
func gatewayTunnelRBAC(gateway, node string) string {
	return fmt.Sprintf(`apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: kubestore-tunnel-%[2]s
rules:
- apiGroups: [""]
  resources: [nodes/tunnel]
  resourceNames: [%[2]s]
  verbs: [create]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: kubestore-tunnel-%[2]s
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: kubestore-tunnel-%[2]s
subjects:
- kind: ServiceAccount
  namespace: kube-system
  name: %[1]s
`, gateway, node)
}

var connectsAnswered = regexp.MustCompile(`(?m)^kubestore_tunnel_connects_total\{code="200"\} (\d+)$`)

// connects is how many of kube-apiserver's connections the endpoint
// carried, from its /metrics.
func (ct *cloudTunnel) connects() (int, error) {
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	res, err := hc.Get(fmt.Sprintf("https://127.0.0.1:%d/metrics", ct.port))
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		return 0, err
	}
	m := connectsAnswered.FindSubmatch(body)
	if m == nil {
		return 0, nil
	}
	return strconv.Atoi(string(m[1]))
}

// checkFromTheCloud is the operator's view from the cluster: logs, exec
// and the node proxy through kube-apiserver reach the gateway's kubelet,
// each through the tunnel (the endpoint counts them).
func checkFromTheCloud(t *testing.T, ct *cloudTunnel, kubeconfig, node, app string) {
	t.Helper()
	before, err := ct.connects()
	must(t, err)
	kubectl := func(args ...string) (string, error) {
		out, err := runCommand(60*time.Second, "kubectl", append([]string{"--kubeconfig", kubeconfig}, args...)...)
		return out, err
	}
	var out string
	if !eventually(30*time.Second, func() bool {
		out, err = kubectl("logs", "-n", appsNS, app)
		return err == nil && strings.Contains(out, "env WORKLOAD_PASSWORD="+appPassword)
	}) {
		t.Errorf("from the cloud, kubectl logs app: %v\n%s", err, out)
	}
	if out, err := kubectl("exec", "-n", appsNS, app, "--", "/workload", "cat", "0"); err != nil {
		t.Errorf("from the cloud, kubectl exec app: %v\n%s", err, out)
	}
	if out, err := kubectl("get", "--raw", "/api/v1/nodes/"+node+"/proxy/healthz"); err != nil || out != "ok" {
		t.Errorf("from the cloud, the node proxy's healthz: %v\n%s", err, out)
	}
	after, err := ct.connects()
	must(t, err)
	// exec's own connection at least: kube-apiserver keeps its HTTP/2
	// connection to the kubelet for logs and the node proxy. That it
	// takes no other way is checkCloudDown's.
	if after-before < 1 {
		t.Errorf("the endpoint carried no connection for the cloud's logs, exec and node proxy")
	}
	t.Logf("from the cloud: logs, exec and the node proxy through the tunnel (%d connections carried)", after-before)
}

// checkCloudDown: with the gateway's tunnel down (its link hung, or
// refused), the cloud's kubectl exec (a connection of its own) fails
// within seconds, its error saying want (naming the node).
func checkCloudDown(t *testing.T, kubeconfig, app, want string, within time.Duration) {
	t.Helper()
	start := time.Now()
	out, err := runCommand(time.Minute, "kubectl", "--kubeconfig", kubeconfig, "exec", "-n", appsNS, app, "--", "/workload", "cat", "0")
	d := time.Since(start)
	if err == nil || !strings.Contains(out, want) {
		t.Errorf("from the cloud, offline, kubectl exec app: %v, want an error saying %q:\n%s", err, want, out)
	}
	if d > within {
		t.Errorf("from the cloud, offline, kubectl exec failed after %s, want within %s", d.Round(100*time.Millisecond), within)
	}
	t.Logf("from the cloud, offline: kubectl exec failed after %s: %s", d.Round(100*time.Millisecond), strings.TrimSpace(out))
}

// cloudReachesNode sends, from now on, the time until the cluster's node
// proxy of node answers through the tunnel (every 200 ms), or -1 after a
// minute.
func cloudReachesNode(kubeconfig, node string) <-chan time.Duration {
	back := make(chan time.Duration, 1)
	start := time.Now()
	go func() {
		for time.Since(start) < time.Minute {
			if out, err := runCommand(10*time.Second, "kubectl", "--kubeconfig", kubeconfig, "get", "--raw", "/api/v1/nodes/"+node+"/proxy/healthz"); err == nil && out == "ok" {
				back <- time.Since(start)
				return
			}
			time.Sleep(200 * time.Millisecond)
		}
		back <- -1
	}()
	return back
}

// compareExec times one `kubectl exec` at a time, alternating the
// gateway's kubeconfig and the cluster's (through kube-apiserver and the
// tunnel), and logs the medians side by side.
func compareExec(t *testing.T, gateway, cloud, app string) {
	t.Helper()
	const rounds = 10
	var took [2][]time.Duration
	for i := range 2 * rounds {
		kc := []string{gateway, cloud}[i%2]
		start := time.Now()
		if out, err := runCommand(time.Minute, "kubectl", "--kubeconfig", kc, "exec", "-n", appsNS, app, "--", "/workload", "cat", "0"); err != nil {
			t.Errorf("kubectl exec (%s): %v\n%s", []string{"gateway", "cloud"}[i%2], err, out)
			return
		}
		took[i%2] = append(took[i%2], time.Since(start))
	}
	for i := range took {
		slices.Sort(took[i])
	}
	g, c := took[0][rounds/2], took[1][rounds/2]
	t.Logf("kubectl exec, one at a time, median of %d: on the gateway %s, from the cloud through the tunnel %s (%.2fx, +%s)",
		rounds, g.Round(time.Millisecond), c.Round(time.Millisecond), float64(c)/float64(g), (c - g).Round(time.Millisecond))
}

// runCommand runs name with args for at most timeout: its output and
// error.
func runCommand(timeout time.Duration, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	return string(out), err
}

// mustRead is the content of path.
func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	must(t, err)
	return data
}

// checkTunnelClaims: with the cluster's own RBAC and Nodes, a gateway's
// credentials naming another node get no tunnel, and a second gateway
// (authorized for its own node) whose Node claims the first node's
// address makes the cluster refuse that address to both, until the claim
// goes.
func checkTunnelClaims(t *testing.T, ct *cloudTunnel, c *cluster, kubectl func(args ...string) string, gatewayToken, node, app string) {
	t.Helper()
	ctx := t.Context()
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(mustRead(t, ct.endpointCA))
	endpoint := fmt.Sprintf("https://127.0.0.1:%d", ct.port)
	run := func(cl *tunnel.Client) {
		cctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { cl.Run(cctx); close(done) }()
		t.Cleanup(func() { cancel(); <-done })
	}
	thief := &tunnel.Client{Endpoint: endpoint, TLS: &tls.Config{RootCAs: roots}, NodeName: "gateway-9", Token: gatewayToken,
		Node: func(context.Context) (*corev1.Node, error) { return nil, fmt.Errorf("not a node") }}
	run(thief)
	const other = "gateway-3"
	kubectl("create", "serviceaccount", "--namespace", "kube-system", "gateway-"+other)
	rbac := filepath.Join(ct.dir, "gateway-3-tunnel.yaml")
	must(t, os.WriteFile(rbac, []byte(gatewayTunnelRBAC("gateway-"+other, other)), 0o600))
	kubectl("apply", "-f", rbac)
	otherToken := strings.TrimSpace(kubectl("create", "token", "--namespace", "kube-system", "gateway-"+other))
	n, err := c.cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	must(t, err)
	_, err = c.cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: other}}, metav1.CreateOptions{})
	must(t, err)
	// A patch: the cluster's controllers write the new Node too.
	_, err = c.cs.CoreV1().Nodes().Patch(ctx, other, types.StrategicMergePatchType,
		[]byte(fmt.Sprintf(`{"status":{"addresses":[{"type":"InternalIP","address":%q}]}}`, n.Status.Addresses[0].Address)), metav1.PatchOptions{}, "status")
	must(t, err)
	second := &tunnel.Client{Endpoint: endpoint, TLS: &tls.Config{RootCAs: roots}, NodeName: other, Token: otherToken,
		Node: func(ctx context.Context) (*corev1.Node, error) {
			return c.cs.CoreV1().Nodes().Get(ctx, other, metav1.GetOptions{})
		}}
	run(second)
	// exec: a connection of its own (kube-apiserver keeps its HTTP/2
	// connection for logs, opened while the address was gateway-2's
	// alone).
	exec := func() (string, error) {
		return runCommand(30*time.Second, "kubectl", "--kubeconfig", c.kubeconfig, "exec", "-n", appsNS, app, "--", "/workload", "cat", "0")
	}
	var out string
	if !eventually(30*time.Second, func() bool {
		out, err = exec()
		return err != nil && strings.Contains(out, "is claimed by nodes "+node+", "+other) && second.Status().Connected
	}) {
		t.Errorf("from the cloud, with %s claiming %s's address and connected (%+v): %v\n%s", other, node, second.Status(), err, out)
	}
	if st := thief.Status(); st.Connected || !strings.Contains(st.LastError, "may not create nodes/tunnel") {
		t.Errorf("%s's gateway credentials naming gateway-9: %+v, want refused by the cluster's RBAC", node, st)
	}
	must(t, c.cs.CoreV1().Nodes().Delete(ctx, other, metav1.DeleteOptions{}))
	if !eventually(30*time.Second, func() bool {
		out, err = exec()
		return err == nil
	}) {
		t.Errorf("from the cloud, after the claim went: %v\n%s", err, out)
	}
}
