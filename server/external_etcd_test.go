package server_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubestore/kubestore/cacher"
	"github.com/kubestore/kubestore/config"
)

// externalEtcd is a second etcd server, started on its own in the test and
// reached only over TLS on a loopback port with client certificates, as a
// cluster kubestore fronts with --etcd-servers.
type externalEtcd struct {
	url                       string
	caFile, certFile, keyFile string
}

func startExternalEtcd(t *testing.T) externalEtcd {
	t.Helper()
	dir := t.TempDir()
	pki := newTestPKI(t, dir)

	u := url.URL{Scheme: "https", Host: "127.0.0.1:" + strconv.Itoa(freePort(t))}

	ec := embed.NewConfig()
	ec.Name = "external"
	ec.Dir = filepath.Join(dir, "data")
	ec.ListenClientUrls = []url.URL{u}
	ec.AdvertiseClientUrls = []url.URL{u}
	ec.ListenPeerUrls = nil
	ec.InitialCluster = ec.InitialClusterFromName(ec.Name)
	ec.ClientTLSInfo.CertFile = pki.serverCert
	ec.ClientTLSInfo.KeyFile = pki.serverKey
	ec.ClientTLSInfo.TrustedCAFile = pki.ca
	ec.ClientTLSInfo.ClientCertAuth = true
	ec.LogLevel = "error"
	ec.WatchProgressNotifyInterval = 5 * time.Second
	e, err := embed.StartEtcd(ec)
	if err != nil {
		t.Fatalf("starting external etcd: %v", err)
	}
	t.Cleanup(e.Close)
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(60 * time.Second):
		t.Fatal("external etcd not ready")
	}
	return externalEtcd{url: u.String(), caFile: pki.ca, certFile: pki.clientCert, keyFile: pki.clientKey}
}

func (e externalEtcd) configure(cfg *config.Config) {
	cfg.Etcd.Servers = []string{e.url}
	cfg.Etcd.CAFile, cfg.Etcd.CertFile, cfg.Etcd.KeyFile = e.caFile, e.certFile, e.keyFile
}

// With --etcd-servers kubestore starts no etcd of its own and is a
// stateless front of the external cluster: the list/watch semantics, an
// informer, namespace lifecycle and a restart all behave as embedded.
func TestExternalEtcd(t *testing.T) {
	ext := startExternalEtcd(t)
	cfg := testConfig(t)
	ext.configure(&cfg)
	ts := startServer(t, cfg)

	if _, err := os.Stat(filepath.Join(cfg.DataDir, "etcd")); !os.IsNotExist(err) {
		t.Errorf("an embedded etcd directory exists with --etcd-servers: %v", err)
	}
	if got := ts.backend.Endpoints(); len(got) != 1 || got[0] != ext.url {
		t.Errorf("storage endpoints %v, want [%s]", got, ext.url)
	}

	t.Run("list and watch semantics", func(t *testing.T) {
		checkListWatchSemantics(t, newSubject(t, ts, "configmaps", "ConfigMap", true))
	})
	t.Run("informer", func(t *testing.T) { checkInformer(t, ts, true) })
	t.Run("namespace deletion", func(t *testing.T) {
		ctx := t.Context()
		if _, err := ts.client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ext-doomed"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := ts.client.CoreV1().ConfigMaps("ext-doomed").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := ts.client.CoreV1().Namespaces().Delete(ctx, "ext-doomed", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, 30*time.Second, "namespace deleted", func() (bool, error) {
			_, err := ts.client.CoreV1().Namespaces().Get(ctx, "ext-doomed", metav1.GetOptions{})
			return apierrors.IsNotFound(err), err
		})
	})

	// A second kubestore on a fresh data dir sees the same objects: the
	// state lives in etcd only.
	t.Run("state lives in etcd", func(t *testing.T) {
		other := testConfig(t)
		ext.configure(&other)
		ts2 := startServer(t, other)
		cm, err := ts2.client.CoreV1().ConfigMaps("informer").Get(t.Context(), "live", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("second front end does not see the first one's object: %v", err)
		}
		if _, err := ts.client.CoreV1().ConfigMaps("informer").Patch(t.Context(), "live", "application/merge-patch+json",
			[]byte(`{"data":{"from":"first"}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, 10*time.Second, "second front end's cache follows the first one's write", func() (bool, error) {
			got, err := ts2.client.CoreV1().ConfigMaps("informer").Get(t.Context(), "live", metav1.GetOptions{ResourceVersion: "0"})
			return err == nil && got.Data["from"] == "first" && got.ResourceVersion != cm.ResourceVersion, err
		})
	})
}

// A missing external etcd fails the start within --etcd-start-timeout with
// an error naming the endpoint.
func TestExternalEtcdUnreachable(t *testing.T) {
	cfg := testConfig(t)
	addr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	cfg.Etcd.Servers = []string{"http://" + addr}
	cfg.Etcd.StartTimeout = config.Duration{Duration: 2 * time.Second}
	start := time.Now()
	b, err := cacher.Open(t.Context(), complete(t, cfg))
	if err == nil {
		b.Close()
		t.Fatal("started without etcd")
	}
	if elapsed := time.Since(start); elapsed > 15*time.Second {
		t.Errorf("gave up after %s, want about --etcd-start-timeout", elapsed)
	}
	if !strings.Contains(err.Error(), addr) || !strings.Contains(err.Error(), "--etcd-start-timeout") {
		t.Errorf("error %q does not name the endpoint and the flag", err)
	}
}

type testPKI struct {
	ca, serverCert, serverKey, clientCert, clientKey string
}

// newTestPKI writes a CA, a server certificate for 127.0.0.1 and a client
// certificate, all signed by the CA.
func newTestPKI(t *testing.T, dir string) testPKI {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, caKey.Public(), caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	p := testPKI{ca: filepath.Join(dir, "ca.crt")}
	writePEM(t, p.ca, "CERTIFICATE", caDER)
	issue := func(name string, serial int64, usage x509.ExtKeyUsage, ips []net.IP) (string, string) {
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage}, IPAddresses: ips}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, key.Public(), caKey)
		if err != nil {
			t.Fatal(err)
		}
		keyDER, _ := x509.MarshalPKCS8PrivateKey(key)
		certFile, keyFile := filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
		writePEM(t, certFile, "CERTIFICATE", der)
		writePEM(t, keyFile, "PRIVATE KEY", keyDER)
		return certFile, keyFile
	}
	p.serverCert, p.serverKey = issue("server", 2, x509.ExtKeyUsageServerAuth, []net.IP{net.ParseIP("127.0.0.1")})
	p.clientCert, p.clientKey = issue("client", 3, x509.ExtKeyUsageClientAuth, nil)
	return p
}

func writePEM(t *testing.T, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}
