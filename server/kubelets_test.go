package server_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/kubestore/kubestore/datadir"
)

// kubeletEndpoint is an HTTPS endpoint on loopback in the kubelet's
// place: it answers the kubelet API's paths the tests use (containerLogs,
// healthz) and records who asked what. The real kubelet behind the same
// subresources is test/e2e's TestRealNode; this one pins what kubestore
// sends: the path, the query, its client certificate.
type kubeletEndpoint struct {
	srv  *httptest.Server
	mu   sync.Mutex
	seen []string // "CN path?query"
}

// serveKubelet starts a kubeletEndpoint whose serving certificate the CA
// of ts's data directory signed (as its signer signs a kubelet-serving
// CSR), or itself when selfSigned (a kubelet without serverTLSBootstrap).
// It asks for a client certificate of that CA.
func serveKubelet(t *testing.T, ts *testServer, selfSigned bool) *kubeletEndpoint {
	t.Helper()
	pki := datadir.Dir(ts.cfg.DataDir).PKI()
	ca, err := tls.LoadX509KeyPair(filepath.Join(pki, "ca.crt"), filepath.Join(pki, "ca.key"))
	if err != nil {
		t.Fatal(err)
	}
	caCert, err := x509.ParseCertificate(ca.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: "system:node:edge-1", Organization: []string{"system:nodes"}},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
	}
	parent, signer := caCert, ca.PrivateKey
	if selfSigned {
		tmpl.Subject, tmpl.Issuer = pkix.Name{CommonName: "edge-1@1733464000"}, pkix.Name{CommonName: "edge-1-ca@1733464000"}
		parent, signer = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, key.Public(), signer)
	if err != nil {
		t.Fatal(err)
	}
	k := &kubeletEndpoint{}
	k.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cn := "none"
		if len(r.TLS.PeerCertificates) > 0 {
			cn = r.TLS.PeerCertificates[0].Subject.CommonName
		}
		k.mu.Lock()
		k.seen = append(k.seen, cn+" "+r.URL.RequestURI())
		k.mu.Unlock()
		switch {
		case strings.HasPrefix(r.URL.Path, "/containerLogs/"):
			w.Write([]byte("line 1\nline 2\n"))
		case r.URL.Path == "/healthz":
			w.Write([]byte("ok"))
		default:
			http.NotFound(w, r)
		}
	}))
	clientCAs := x509.NewCertPool()
	clientCAs.AddCert(caCert)
	k.srv.TLS = &tls.Config{
		Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}},
		ClientAuth:   tls.RequireAndVerifyClientCert, ClientCAs: clientCAs,
	}
	k.srv.StartTLS()
	t.Cleanup(k.srv.Close)
	return k
}

func (k *kubeletEndpoint) port() int32 {
	_, port, _ := net.SplitHostPort(k.srv.Listener.Addr().String())
	n, _ := strconv.Atoi(port)
	return int32(n)
}

func (k *kubeletEndpoint) requests() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]string(nil), k.seen...)
}

// registerNode creates the Node name with its kubelet at addresses and
// port, as the kubelet reports them.
func registerNode(t *testing.T, c kubernetes.Interface, name string, port int32, addresses ...corev1.NodeAddress) {
	t.Helper()
	n, err := c.CoreV1().Nodes().Create(t.Context(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n.Status.Addresses = addresses
	n.Status.DaemonEndpoints.KubeletEndpoint.Port = port
	if _, err := c.CoreV1().Nodes().UpdateStatus(t.Context(), n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// pods/log and nodes/proxy reach the kubelet at the address and port its
// Node reports, with kubestore's kubelet client certificate, and verify
// the kubelet's serving certificate against kubestore's CA; what cannot
// reach a kubelet is answered with kube-apiserver's status codes.
func TestKubeletSubresources(t *testing.T) {
	ts := startServer(t, testConfig(t))
	ctx := t.Context()
	kubelet := serveKubelet(t, ts, false)
	selfSigned := serveKubelet(t, ts, true)
	loopback := corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "127.0.0.1"}
	registerNode(t, ts.client, "edge-1", kubelet.port(), corev1.NodeAddress{Type: corev1.NodeHostName, Address: "edge-1.invalid"}, loopback)
	registerNode(t, ts.client, "self-signed", selfSigned.port(), loopback)
	registerNode(t, ts.client, "no-address", 10250)
	client := ts.client
	pods := client.CoreV1().Pods("default")
	for _, p := range []struct {
		name, node string
		containers []string
	}{{"web", "edge-1", []string{"app"}}, {"two", "edge-1", []string{"a", "b"}}, {"waiting", "", []string{"app"}},
		{"self", "self-signed", []string{"app"}}, {"bare", "no-address", []string{"app"}}} {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: p.name}, Spec: corev1.PodSpec{NodeName: p.node}}
		for _, c := range p.containers {
			pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: c, Image: "app"})
		}
		if _, err := pods.Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	logs, err := pods.GetLogs("web", &corev1.PodLogOptions{TailLines: ptr.To[int64](2), Timestamps: true}).DoRaw(ctx)
	if err != nil || string(logs) != "line 1\nline 2\n" {
		t.Errorf("kubectl logs web: %q, %v", logs, err)
	}
	healthz, err := ts.client.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes/edge-1/proxy/healthz").DoRaw(ctx)
	if err != nil || string(healthz) != "ok" {
		t.Errorf("nodes/edge-1/proxy/healthz: %q, %v", healthz, err)
	}
	want := []string{
		"kube-apiserver-kubelet-client /containerLogs/default/web/app?tailLines=2&timestamps=true",
		"kube-apiserver-kubelet-client /healthz",
	}
	if got := kubelet.requests(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("the kubelet was asked\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	for _, tc := range []struct {
		name    string
		do      func() error
		code    int32
		message string
	}{
		{"log of an unknown pod", func() error { return pods.GetLogs("nope", &corev1.PodLogOptions{}).Do(ctx).Error() },
			404, `pods "nope" not found`},
		{"log of a pod of two containers, none named", func() error { return pods.GetLogs("two", &corev1.PodLogOptions{}).Do(ctx).Error() },
			400, "a container name must be specified for pod two, choose one of: [a b]"},
		{"log of an unknown container", func() error {
			return pods.GetLogs("web", &corev1.PodLogOptions{Container: "nope"}).Do(ctx).Error()
		}, 400, "container nope is not valid for pod web"},
		{"log with a negative tailLines", func() error {
			return pods.GetLogs("web", &corev1.PodLogOptions{TailLines: ptr.To[int64](-1)}).Do(ctx).Error()
		}, 422, "tailLines: Invalid value: -1"},
		{"exec into a pod on no node", func() error { return execPost(t, client, "waiting") }, 400, "pod waiting does not have a host assigned"},
		{"exec into an unknown container", func() error { return execPost(t, client, "web", "container=nope") }, 400, "container nope is not valid for pod web"},
		{"log of a pod on a node without an address", func() error { return pods.GetLogs("bare", &corev1.PodLogOptions{}).Do(ctx).Error() },
			500, "no preferred addresses found; known addresses: []"},
		{"a kubelet that serves a certificate it signed itself", func() error {
			return pods.GetLogs("self", &corev1.PodLogOptions{}).Do(ctx).Error()
		}, 500, "serverTLSBootstrap: true"},
		{"nodes/proxy to another port", func() error {
			return client.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes/edge-1:22/proxy/").Do(ctx).Error()
		}, 400, "proxies to the kubelet's port"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.do()
			status, ok := err.(apierrors.APIStatus)
			if !ok {
				t.Fatalf("%v (%T), want a Status", err, err)
			}
			if s := status.Status(); s.Code != tc.code || !strings.Contains(s.Message, tc.message) {
				t.Errorf("%d %q, want %d and %q", s.Code, s.Message, tc.code, tc.message)
			}
		})
	}
	if logs, err := pods.GetLogs("waiting", &corev1.PodLogOptions{}).DoRaw(ctx); err != nil || len(logs) != 0 {
		t.Errorf("log of a pod on no node: %q, %v; want empty, as kube-apiserver", logs, err)
	}

	// Authorization as upstream's: exec is create on pods/exec, which no
	// kubelet has, not even on its own node's pods.
	for _, node := range []string{"edge-1", "edge-2"} {
		if err := execPost(t, kubeletClient(t, ts, node), "web"); !apierrors.IsForbidden(err) {
			t.Errorf("the kubelet of %s execs into web: %v, want 403", node, err)
		}
	}
}

// execPost is POST pods/<name>/exec, without the upgrade: what the API
// answers before it would connect.
func execPost(t *testing.T, c kubernetes.Interface, pod string, params ...string) error {
	t.Helper()
	req := c.CoreV1().RESTClient().Post().Namespace("default").Resource("pods").Name(pod).SubResource("exec").
		Param("command", "true").Param("stdout", "true")
	for _, p := range params {
		k, v, _ := strings.Cut(p, "=")
		req = req.Param(k, v)
	}
	return req.Do(t.Context()).Error()
}
