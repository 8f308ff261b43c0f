package e2e

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// upstreamBinDir is where make upstream-bins builds the upstream binaries
// the node-agent tests run, from k8s.io/kubernetes and etcd at the
// versions kubestore pins (test/upstream/go.mod): kubemark (the hollow
// node: the kubelet's and kube-proxy's real code on a fake runtime),
// kube-apiserver, kube-controller-manager and etcd.
const upstreamBinDirEnv = "KUBESTORE_UPSTREAM_BIN_DIR"

// upstreamBinary is the path of an upstream binary; without
// KUBESTORE_UPSTREAM_BIN_DIR the test skips: make test does not build
// them, make release-check (make node-agents) does and sets it.
func upstreamBinary(t *testing.T, name string) string {
	t.Helper()
	dir := os.Getenv(upstreamBinDirEnv)
	if dir == "" {
		t.Skipf("%s is not set: make upstream-bins builds kubemark, kube-apiserver, kube-controller-manager and etcd, make node-agents runs this", upstreamBinDirEnv)
	}
	path := filepath.Join(dir, name)
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("%s: %v (make upstream-bins builds it)", path, err)
	}
	return path
}

// run starts bin with args; it is killed when the test ends, and the last
// 8 KiB of its output logged if the test failed.
func run(t *testing.T, name, bin string, args ...string) *process {
	t.Helper()
	cmd := exec.Command(bin, args...)
	out := &lockedWriter{w: &bytes.Buffer{}}
	cmd.Stdout, cmd.Stderr = out, out
	// The hollow kubelet writes its pods' files under the temp dir.
	cmd.Env = append(os.Environ(), "TMPDIR="+t.TempDir())
	return startProcess(t, t, name, cmd, out, 8<<10)
}

// cluster is a real Kubernetes control plane on loopback: etcd,
// kube-apiserver and kube-controller-manager running the controllers a
// node's life depends on (node-lifecycle: NotReady, taints and pod
// readiness when a node stops reporting; serviceaccount: the default
// ServiceAccount pods need; attach-detach: the Node's volumesAttached).
type cluster struct {
	dir        string
	url        string
	kubeconfig string
	token      string
	cs         kubernetes.Interface
	rest       *rest.Config
	apiserver  *process
}

// clusterToken is the admin's bearer token on the cluster.
const clusterToken = "cluster-admin-token-0123456789"

func startCluster(t *testing.T, apiserverArgs ...string) *cluster {
	t.Helper()
	return startClusterWith(t, clusterControllers, apiserverArgs...)
}

// clusterControllers are the kube-controller-manager controllers of
// startCluster.
const clusterControllers = "nodelifecycle,serviceaccount,attachdetach"

// startClusterWith is startCluster with kube-controller-manager running
// controllers (its --controllers).
func startClusterWith(t *testing.T, controllers string, apiserverArgs ...string) *cluster {
	t.Helper()
	etcdBin := upstreamBinary(t, "etcd")
	apiserverBin := upstreamBinary(t, "kube-apiserver")
	kcmBin := upstreamBinary(t, "kube-controller-manager")
	dir := shortTempDir(t)
	ports := freePorts(t, 3)
	client, peer, secure := fmt.Sprintf("http://127.0.0.1:%d", ports[0]), fmt.Sprintf("http://127.0.0.1:%d", ports[1]), ports[2]
	run(t, "etcd", etcdBin, "--data-dir", filepath.Join(dir, "etcd"), "--listen-client-urls", client, "--advertise-client-urls", client,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer, "--initial-cluster", "default="+peer, "--log-level", "warn")

	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	must(t, err)
	der, err := x509.MarshalECPrivateKey(key)
	must(t, err)
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	must(t, err)
	saKey, saPub, tokens := filepath.Join(dir, "sa.key"), filepath.Join(dir, "sa.pub"), filepath.Join(dir, "tokens.csv")
	must(t, os.WriteFile(saKey, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), 0o600))
	must(t, os.WriteFile(saPub, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}), 0o600))
	must(t, os.WriteFile(tokens, []byte(clusterToken+",admin,admin-uid,system:masters\n"), 0o600))
	args := []string{
		"--etcd-servers", client, "--bind-address", "127.0.0.1", "--secure-port", strconv.Itoa(secure),
		// Loopback only: the endpoint reconciler refuses a loopback
		// address for the kubernetes Service, which nothing here uses.
		"--advertise-address", "127.0.0.1", "--endpoint-reconciler-type", "none",
		"--cert-dir", filepath.Join(dir, "certs"), "--token-auth-file", tokens, "--authorization-mode", "RBAC",
		"--service-account-issuer", "https://kubernetes.default.svc", "--service-account-key-file", saPub,
		"--service-account-signing-key-file", saKey, "--service-cluster-ip-range", "10.96.0.0/24",
	}
	c := &cluster{dir: dir, url: fmt.Sprintf("https://127.0.0.1:%d", secure), token: clusterToken}
	c.apiserver = run(t, "kube-apiserver", apiserverBin, append(args, apiserverArgs...)...)
	c.kubeconfig = filepath.Join(dir, "admin.kubeconfig")
	writeTokenKubeconfig(t, c.url, c.token, c.kubeconfig)
	c.rest = restConfigOf(t, c.kubeconfig)
	c.cs = kubernetes.NewForConfigOrDie(c.rest)
	if !eventually(90*time.Second, func() bool {
		if c.apiserver.hasExited() {
			return true
		}
		body, err := c.cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(t.Context())
		return err == nil && string(body) == "ok"
	}) || c.apiserver.hasExited() {
		t.Fatalf("kube-apiserver not ready in 90 s:\n%s", tail(c.apiserver.logs(), 8<<10))
	}
	run(t, "kube-controller-manager", kcmBin, "--kubeconfig", c.kubeconfig, "--controllers", controllers,
		"--leader-elect=false", "--bind-address", "127.0.0.1", "--secure-port", "0", "--use-service-account-credentials=false")
	if !eventually(60*time.Second, func() bool {
		_, err := c.cs.CoreV1().ServiceAccounts("default").Get(t.Context(), "default", metav1.GetOptions{})
		return err == nil
	}) {
		t.Fatal("kube-controller-manager made no default ServiceAccount in 60 s")
	}
	return c
}

// writeTokenKubeconfig writes a kubeconfig for server with a bearer token,
// trusting any certificate (the servers here are on loopback and make
// their own).
func writeTokenKubeconfig(t *testing.T, server, token, path string) {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["c"] = &clientcmdapi.Cluster{Server: server, InsecureSkipTLSVerify: true}
	kc.AuthInfos["u"] = &clientcmdapi.AuthInfo{Token: token}
	kc.Contexts["c"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u"}
	kc.CurrentContext = "c"
	must(t, clientcmd.WriteToFile(*kc, path))
}

// hollowNode is kubemark's hollow node of one name: the kubelet (and
// optionally kube-proxy) of k8s.io/kubernetes on a fake container runtime,
// talking to the API of its kubeconfig.
type hollowNode struct {
	t          *testing.T
	bin        string
	name       string
	kubeconfig string
	// proxyKubeconfig is kube-proxy's, when not the kubelet's (a kubelet's
	// node identity is not kube-proxy's).
	proxyKubeconfig string
	ports           []int
	kubelet         *process
	proxy           *process
}

// gatewayIdentity gives node's gateway its identity on c, as the README
// says: the ClusterRole of docs/node/gateway-rbac.yaml (applied again, it
// is unchanged), a ServiceAccount gateway-<node> of kube-system bound to
// it, and a token of it, which it returns.
func gatewayIdentity(t *testing.T, c *cluster, node string) string {
	t.Helper()
	kubectl := func(args ...string) string {
		t.Helper()
		return mustRun(t, "kubectl", append([]string{"--kubeconfig", c.kubeconfig}, args...)...)
	}
	kubectl("apply", "-f", "../../docs/node/gateway-rbac.yaml")
	kubectl("create", "serviceaccount", "--namespace", "kube-system", "gateway-"+node)
	kubectl("create", "clusterrolebinding", "gateway-"+node, "--clusterrole", "kubestore-gateway", "--serviceaccount", "kube-system:gateway-"+node)
	return strings.TrimSpace(kubectl("create", "token", "--namespace", "kube-system", "gateway-"+node, "--duration", "24h"))
}

func newHollowNode(t *testing.T, name, kubeconfig string) *hollowNode {
	t.Helper()
	return &hollowNode{t: t, bin: upstreamBinary(t, "kubemark"), name: name, kubeconfig: kubeconfig, ports: freePorts(t, 2)}
}

// startKubelet starts (or starts again) the hollow kubelet.
func (h *hollowNode) startKubelet() {
	h.t.Helper()
	if h.kubelet != nil {
		h.kubelet.kill()
	}
	h.kubelet = run(h.t, "hollow kubelet "+h.name, h.bin, "--morph", "kubelet", "--name", h.name, "--kubeconfig", h.kubeconfig,
		"--kubelet-port", strconv.Itoa(h.ports[0]), "--kubelet-read-only-port", strconv.Itoa(h.ports[1]),
		"--use-host-image-service=false", "--v", "2")
}

// startProxy starts the hollow kube-proxy.
func (h *hollowNode) startProxy() {
	h.t.Helper()
	kubeconfig := h.kubeconfig
	if h.proxyKubeconfig != "" {
		kubeconfig = h.proxyKubeconfig
	}
	h.proxy = run(h.t, "hollow kube-proxy "+h.name, h.bin, "--morph", "proxy", "--name", h.name, "--kubeconfig", kubeconfig, "--v", "2")
}

// notFound are the requests an agent's log says the API did not serve:
// "the server could not find the requested resource (GET /apis/...)".
func notFound(out string) []string {
	seen := map[string]bool{}
	var list []string
	for _, line := range strings.Split(out, "\n") {
		_, rest, ok := strings.Cut(line, "could not find the requested resource (")
		if !ok {
			continue
		}
		req, _, _ := strings.Cut(rest, ")")
		if !seen[req] {
			seen[req] = true
			list = append(list, req)
		}
	}
	return list
}

// coreDNS is CoreDNS serving the cluster.local zone from the API of a
// kubeconfig, on a loopback port.
type coreDNS struct {
	p    *process
	addr string
}

func startCoreDNS(t *testing.T, kubeconfig string) *coreDNS {
	t.Helper()
	bin := upstreamBinary(t, "coredns")
	ports := freePorts(t, 2)
	d := &coreDNS{addr: fmt.Sprintf("127.0.0.1:%d", ports[0])}
	corefile := filepath.Join(t.TempDir(), "Corefile")
	must(t, os.WriteFile(corefile, []byte(fmt.Sprintf(`.:%d {
    bind 127.0.0.1
    errors
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        kubeconfig %s
        pods verified
        fallthrough in-addr.arpa ip6.arpa
    }
    ready 127.0.0.1:%d
}
`, ports[0], kubeconfig, ports[1])), 0o600))
	d.p = run(t, "coredns", bin, "-conf", corefile)
	ready := fmt.Sprintf("http://127.0.0.1:%d/ready", ports[1])
	if !eventually(60*time.Second, func() bool {
		resp, err := http.Get(ready) //nolint:noctx // a loopback probe
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}) {
		t.Fatalf("CoreDNS not ready in 60 s:\n%s", d.p.logs())
	}
	return d
}

// resolve asks CoreDNS for name's addresses.
func (d *coreDNS) resolve(t *testing.T, name string) ([]string, error) {
	t.Helper()
	r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, d.addr)
	}}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	return r.LookupHost(ctx, name)
}

// errors are the lines CoreDNS logged at error level.
func (d *coreDNS) errors() []string {
	var out []string
	for _, line := range strings.Split(d.p.logs(), "\n") {
		if strings.Contains(line, "[ERROR]") {
			out = append(out, line)
		}
	}
	return out
}
