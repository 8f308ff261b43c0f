package server_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/apis/apiserver"
	"k8s.io/apiserver/pkg/server/egressselector"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	certutil "k8s.io/client-go/util/cert"

	"github.com/kubestore/kubestore/datadir"
	"github.com/kubestore/kubestore/tunnel"
)

// The cloud reaches a gateway's kubelet through the tunnel the gateway
// opened: kube-apiserver's own egress dialer (HTTP CONNECT over the
// endpoint's unix socket) gets the kubelet of the node whose Node owns the
// address, through that node's gateway only. Gateway A is a kubestore
// with a tunnel to each of two endpoints (as beside each kube-apiserver of
// an HA control plane), mirroring the cluster as its node (the node's client certificate, its
// Node registered by its kubelet through the gateway); gateway B is the
// tunnel's client alone, with a ServiceAccount token the cluster lets
// create nodes/tunnel. What cannot be carried is
// refused at once, with a reason kube-apiserver passes on.
func TestTunnelCarriesTheClustersConnectionsToItsNode(t *testing.T) {
	ctx := t.Context()
	// The cluster lets gateway-b's ServiceAccount create nodes/tunnel
	// (kubestore's policy file has no resourceNames: a cluster's RBAC
	// names the node, as docs/node/tunnel.md shows); gateway-c has no
	// such grant.
	clusterCfg := testConfig(t)
	clusterCfg.Server.AuthorizationPolicyFile = writeFile(t, filepath.Join(t.TempDir(), "policy.yaml"),
		"rules:\n- users: ['system:serviceaccount:kube-system:gateway-b']\n  verbs: [create]\n  resources: [nodes/tunnel]\n  namespaces: ['*']\n")
	cluster := startServer(t, clusterCfg)
	kubeletA, kubeletB := fakeKubelet(t, "127.0.0.2", "edge-a"), fakeKubelet(t, "127.0.0.3", "edge-b")

	// Two endpoints, as beside each kube-apiserver of an HA control
	// plane, with one serving certificate and the cluster's client CA.
	dir, err := os.MkdirTemp("", "tunnel")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey("tunnel.test", []net.IP{net.ParseIP("127.0.0.1")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile, caFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"), filepath.Join(dir, "endpoint-ca.crt")
	for f, data := range map[string][]byte{certFile: certPEM, keyFile: keyPEM, caFile: certPEM} {
		if err := os.WriteFile(f, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	startEndpoint := func(sock string) string {
		ready := make(chan net.Addr, 1)
		ectx, stop := context.WithCancel(ctx)
		served := make(chan error, 1)
		go func() {
			served <- tunnel.ServeEndpoint(ectx, tunnel.EndpointOptions{Kubeconfig: cluster.server.Kubeconfig(), BindAddress: "127.0.0.1",
				TLSCertFile: certFile, TLSPrivateKeyFile: keyFile, ClientCAFile: filepath.Join(datadir.Dir(cluster.cfg.DataDir).PKI(), "ca.crt"),
				ConnectSocket: sock, Ready: func(a net.Addr) { ready <- a }})
		}()
		t.Cleanup(func() {
			stop()
			if err := <-served; err != nil {
				t.Errorf("the endpoint stopped with %v", err)
			}
		})
		select {
		case a := <-ready:
			return "https://" + a.String()
		case err := <-served:
			t.Fatalf("the endpoint did not start: %v", err)
		}
		return ""
	}
	sock, sock2 := filepath.Join(dir, "connect.sock"), filepath.Join(dir, "connect-2.sock")
	endpoint, endpoint2 := startEndpoint(sock), startEndpoint(sock2)

	// Gateway A: the node's certificate from the cluster's signer is its
	// mirror's credential, and so its tunnel's.
	cfgA := edgeConfig(t, cluster, cluster.rest.Host, "edge-a")
	writeKubeconfig(t, cfgA.Mirror.UpstreamKubeconfig, kubeletConfig(t, cluster, "edge-a"))
	cfgA.Mirror.TunnelEndpoints, cfgA.Mirror.TunnelCAFile = []string{endpoint, endpoint2}, caFile
	gatewayA := startServer(t, cfgA)
	registerNode(t, kubeletClient(t, gatewayA, "edge-a"), "edge-a", kubeletA.port,
		corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "127.0.0.2"}, corev1.NodeAddress{Type: corev1.NodeHostName, Address: "edge-a"})

	// Gateway B: a ServiceAccount the cluster allows nodes/tunnel.
	token := gatewayToken(t, cluster, "gateway-b")
	registerNode(t, kubeletClient(t, cluster, "edge-b"), "edge-b", kubeletB.port, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "127.0.0.3"})
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(certPEM)
	nodeOf := func(name string) func(context.Context) (*corev1.Node, error) {
		return func(ctx context.Context) (*corev1.Node, error) {
			return cluster.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		}
	}
	runClient := func(c *tunnel.Client) context.CancelFunc {
		cctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { c.Run(cctx); close(done) }()
		t.Cleanup(func() { cancel(); <-done })
		return func() { cancel(); <-done }
	}
	gatewayB := &tunnel.Client{Endpoint: endpoint, TLS: &tls.Config{RootCAs: roots}, NodeName: "edge-b", Token: token, Node: nodeOf("edge-b")}
	stopB := runClient(gatewayB)
	// Credentials the cluster does not authorize for a node's tunnel are
	// refused.
	thief := &tunnel.Client{Endpoint: endpoint, TLS: &tls.Config{RootCAs: roots}, NodeName: "edge-a", Token: gatewayToken(t, cluster, "gateway-c"), Node: nodeOf("edge-a")}
	runClient(thief)

	// kube-apiserver's GET of a kubelet's healthz, through an endpoint.
	getThrough := func(sock, dest string) (string, error) {
		dial := egressDialer(t, sock)
		hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true, DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return dial(ctx, "tcp", dest)
		}}}
		res, err := hc.Get("http://" + dest + "/healthz")
		if err != nil {
			return "", err
		}
		defer res.Body.Close()
		body, err := io.ReadAll(res.Body)
		return string(body), err
	}
	get := func(dest string) (string, error) { return getThrough(sock, dest) }
	addrA, addrB := fmt.Sprintf("127.0.0.2:%d", kubeletA.port), fmt.Sprintf("127.0.0.3:%d", kubeletB.port)
	eventually(t, 30*time.Second, "edge-a's kubelet through its gateway's tunnel", func() (bool, error) {
		body, err := get(addrA)
		return body == "kubelet edge-a", fmt.Errorf("%q, %v", body, err)
	})
	// Through the other kube-apiserver's endpoint too: the gateway keeps
	// a tunnel to each.
	eventually(t, 30*time.Second, "edge-a's kubelet through its tunnel to the second endpoint", func() (bool, error) {
		body, err := getThrough(sock2, addrA)
		return body == "kubelet edge-a", fmt.Errorf("%q, %v", body, err)
	})
	eventually(t, 30*time.Second, "edge-b's kubelet through its gateway's tunnel", func() (bool, error) {
		body, err := get(addrB)
		return body == "kubelet edge-b", fmt.Errorf("%q, %v", body, err)
	})
	eventually(t, 10*time.Second, "credentials not authorized for edge-a's tunnel refused by the cluster's authorization", func() (bool, error) {
		st := thief.Status()
		return strings.Contains(st.LastError, "403 Forbidden: system:serviceaccount:kube-system:gateway-c may not create nodes/tunnel") && !st.Connected, fmt.Errorf("%+v", st)
	})
	eventually(t, 10*time.Second, "gateway A's tunnels in its /mirrorz", func() (bool, error) {
		_, body, err := gatewayA.get("/mirrorz?verbose")
		return err == nil && strings.Contains(body, "tunnel "+endpoint+" connected=true") && strings.Contains(body, "tunnel "+endpoint2+" connected=true"),
			fmt.Errorf("%s %v", body, err)
	})
	// The metrics are the process's: the second endpoint's tunnel is
	// gateway A's alone here (the others' clients, in this process too,
	// use the first).
	want := fmt.Sprintf("kubestore_tunnel_connected{endpoint=%q} 1", endpoint2)
	eventually(t, 10*time.Second, "gateway A's tunnel to the second endpoint in its metrics", func() (bool, error) {
		_, body, err := gatewayA.get("/metrics")
		return err == nil && strings.Contains(body, want), fmt.Errorf("no %s (%v)", want, err)
	})

	refused := func(dest, want string) {
		t.Helper()
		start := time.Now()
		_, err := get(dest)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("connecting to %s: %v, want an error naming %q", dest, err, want)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("connecting to %s failed after %s, want at once", dest, d)
		}
	}
	// An address no Node has is nobody's.
	refused("127.0.0.9:10250", "404 no node has the address 127.0.0.9")
	// Edge-a's address at another port is not its kubelet: the gateway
	// refuses it.
	refused(fmt.Sprintf("127.0.0.2:%d", kubeletA.port+1), "is not node edge-a's kubelet port")
	// Node edge-b claims edge-a's address too (its kubelet may write its
	// own status): neither gets it.
	n, err := cluster.client.CoreV1().Nodes().Get(ctx, "edge-b", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: "127.0.0.2"})
	if _, err := kubeletClient(t, cluster, "edge-b").CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "an address two nodes claim refused", func() (bool, error) {
		_, err := get(addrA)
		return err != nil && strings.Contains(err.Error(), "409 the address 127.0.0.2 is claimed by nodes edge-a, edge-b"), err
	})
	// Gateway B gone: its node's connections fail at once, naming the
	// tunnel, and work again once it is back.
	stopB()
	eventually(t, 10*time.Second, "edge-b's connections refused without its tunnel", func() (bool, error) {
		_, err := get(addrB)
		return err != nil && strings.Contains(err.Error(), "503 no tunnel from node edge-b"), err
	})
	refused(addrB, "503 no tunnel from node edge-b")
	runClient(&tunnel.Client{Endpoint: endpoint, TLS: &tls.Config{RootCAs: roots}, NodeName: "edge-b", Token: token, Node: nodeOf("edge-b")})
	eventually(t, 10*time.Second, "edge-b's kubelet through its new tunnel", func() (bool, error) {
		body, err := get(addrB)
		return body == "kubelet edge-b", fmt.Errorf("%q, %v", body, err)
	})
}

// fakeKubelet is a plain HTTP server on host standing for node's kubelet:
// the tunnel carries bytes, and what they say is the kubelets package's
// (TestKubeletSubresources) and TestRealNode's.
type kubeletAt struct{ port int32 }

func fakeKubelet(t *testing.T, host, node string) kubeletAt {
	t.Helper()
	l, err := net.Listen("tcp", host+":0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "kubelet "+node) })}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return kubeletAt{port: int32(l.Addr().(*net.TCPAddr).Port)}
}

// egressDialer is kube-apiserver's dialer for its cluster egress: HTTP
// CONNECT over the unix socket sock (its --egress-selector-config-file).
func egressDialer(t *testing.T, sock string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	t.Helper()
	sel, err := egressselector.NewEgressSelector(&apiserver.EgressSelectorConfiguration{EgressSelections: []apiserver.EgressSelection{{
		Name: "cluster", Connection: apiserver.Connection{ProxyProtocol: apiserver.ProtocolHTTPConnect,
			Transport: &apiserver.Transport{UDS: &apiserver.UDSTransport{UDSName: sock}}},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	dial, err := sel.Lookup(egressselector.Cluster.AsNetworkContext())
	if err != nil {
		t.Fatal(err)
	}
	return dial
}

// gatewayToken is a token of the ServiceAccount kube-system/name.
func gatewayToken(t *testing.T, ts *testServer, name string) string {
	t.Helper()
	ctx := t.Context()
	if _, err := ts.client.CoreV1().ServiceAccounts("kube-system").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tr, err := ts.client.CoreV1().ServiceAccounts("kube-system").CreateToken(ctx, name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

// writeKubeconfig writes cfg's server, CA and client certificate to path.
func writeKubeconfig(t *testing.T, path string, cfg *rest.Config) {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["c"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData, InsecureSkipTLSVerify: cfg.Insecure}
	kc.AuthInfos["u"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData}
	kc.Contexts["c"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u"}
	kc.CurrentContext = "c"
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
}
