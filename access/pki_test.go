package access

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apiserver/pkg/authentication/user"
	clientcmdv1 "k8s.io/client-go/tools/clientcmd/api/v1"
	"sigs.k8s.io/yaml"

	"github.com/kubestore/kubestore/config"
	"github.com/kubestore/kubestore/datadir"
)

func loadPKI(t *testing.T, dir datadir.Dir, hosts ...string) *PKI {
	t.Helper()
	p, err := LoadPKI(dir, hosts)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func parseCert(t *testing.T, certPEM []byte) *x509.Certificate {
	t.Helper()
	block, _ := pem.Decode(certPEM)
	if block == nil {
		t.Fatal("no PEM certificate")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

func servingCert(t *testing.T, p *PKI) *x509.Certificate {
	t.Helper()
	certPEM, _ := p.Serving().CurrentCertKeyContent()
	return parseCert(t, certPEM)
}

// The first load creates the CA and the serving certificate, readable by
// the owner only; the next load serves the same ones.
func TestLoadPKICreatesPrivateFilesAndReusesThem(t *testing.T) {
	dir := datadir.Dir(t.TempDir())
	p := loadPKI(t, dir, "localhost", "10.0.0.7")

	fi, err := os.Stat(dir.PKI())
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("pki directory: %v, mode %v; want 0700", err, fi.Mode().Perm())
	}
	files := map[string][]byte{}
	for _, name := range []string{"ca.crt", "ca.key", "serving.crt", "serving.key"} {
		path := filepath.Join(dir.PKI(), name)
		fi, err := os.Stat(path)
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("%s: %v, mode %v; want 0600", name, err, fi.Mode().Perm())
		}
		files[name] = readFile(t, path)
	}
	if !bytes.Equal(p.CAPEM(), files["ca.crt"]) {
		t.Error("CAPEM is not ca.crt")
	}
	ca := parseCert(t, files["ca.crt"])
	if !ca.IsCA || ca.Subject.CommonName != "kubestore-ca" {
		t.Errorf("CA %q IsCA=%v", ca.Subject.CommonName, ca.IsCA)
	}
	cert := servingCert(t, p)
	if err := cert.CheckSignatureFrom(ca); err != nil {
		t.Errorf("serving certificate not signed by the CA: %v", err)
	}
	if !slices.Equal(cert.DNSNames, []string{"localhost"}) || len(cert.IPAddresses) != 1 || cert.IPAddresses[0].String() != "10.0.0.7" {
		t.Errorf("serving certificate covers %v %v, want localhost and 10.0.0.7", cert.DNSNames, cert.IPAddresses)
	}
	if _, err := cert.Verify(x509.VerifyOptions{Roots: poolOf(ca), DNSName: "localhost", KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		t.Errorf("serving certificate does not verify for localhost: %v", err)
	}

	// Fewer hosts than the certificate covers: kept.
	again := loadPKI(t, dir, "localhost")
	if !bytes.Equal(again.CAPEM(), p.CAPEM()) || !servingCert(t, again).Equal(cert) {
		t.Error("a second load replaced the CA or the serving certificate")
	}
	for name, data := range files {
		if !bytes.Equal(readFile(t, filepath.Join(dir.PKI(), name)), data) {
			t.Errorf("a second load rewrote %s", name)
		}
	}
}

// A serving certificate is issued again when it no longer fits: a host
// was added, or the CA it was signed by is gone.
func TestLoadPKIReissuesServingCertificate(t *testing.T) {
	dir := datadir.Dir(t.TempDir())
	first := loadPKI(t, dir, "localhost")

	added := loadPKI(t, dir, "localhost", "gw.example")
	if !bytes.Equal(added.CAPEM(), first.CAPEM()) {
		t.Error("adding a host replaced the CA")
	}
	if cert := servingCert(t, added); !slices.Contains(cert.DNSNames, "gw.example") {
		t.Errorf("serving certificate covers %v after adding gw.example", cert.DNSNames)
	}

	for _, name := range []string{"ca.crt", "ca.key"} {
		if err := os.Remove(filepath.Join(dir.PKI(), name)); err != nil {
			t.Fatal(err)
		}
	}
	newCA := loadPKI(t, dir, "localhost")
	if bytes.Equal(newCA.CAPEM(), first.CAPEM()) {
		t.Fatal("the CA was not created again")
	}
	if err := servingCert(t, newCA).CheckSignatureFrom(parseCert(t, newCA.CAPEM())); err != nil {
		t.Errorf("serving certificate kept from the old CA: %v", err)
	}
}

type countListener struct{ n atomic.Int32 }

func (c *countListener) Enqueue() { c.n.Add(1) }

// Renew replaces a serving certificate that is within renewBefore of its
// expiry, tells the listeners, and keeps one that is not.
// storeExpiring stores, as certFile and keyFile, a certificate of tmpl
// signed by p's CA that expires in left, and returns it.
func storeExpiring(t *testing.T, p *PKI, tmpl *x509.Certificate, left time.Duration, certFile, keyFile string) []byte {
	t.Helper()
	tmpl.NotAfter = time.Now().Add(left)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.caCert, key.Public(), p.caKey)
	if err != nil {
		t.Fatal(err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	if err := writePair(certFile, keyFile, certPEM, key); err != nil {
		t.Fatal(err)
	}
	return certPEM
}

func TestRenew(t *testing.T) {
	for _, tc := range []struct {
		name     string
		left     time.Duration
		replaced bool
	}{
		{"due", renewBefore - time.Hour, true},
		{"not due", renewBefore + 24*time.Hour, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := datadir.Dir(t.TempDir())
			p := loadPKI(t, dir, "localhost")
			l := &countListener{}
			p.Serving().AddListener(l)

			certFile := filepath.Join(dir.PKI(), "serving.crt")
			stored := storeExpiring(t, p, p.servingTemplate(), tc.left, certFile, filepath.Join(dir.PKI(), "serving.key"))

			if err := p.Renew(); err != nil {
				t.Fatal(err)
			}
			served, _ := p.Serving().CurrentCertKeyContent()
			onDisk := readFile(t, certFile)
			if !bytes.Equal(served, onDisk) {
				t.Error("the served certificate is not the stored one")
			}
			if replaced := !bytes.Equal(onDisk, stored); replaced != tc.replaced {
				t.Fatalf("replaced %v, want %v", replaced, tc.replaced)
			}
			if left := time.Until(parseCert(t, served).NotAfter); left < renewBefore {
				t.Errorf("serving a certificate that expires in %v", left)
			}
			if l.n.Load() != 1 {
				t.Errorf("listeners told %d times, want once", l.n.Load())
			}

			// Nothing due: nothing changes, nobody is told.
			if err := p.Renew(); err != nil {
				t.Fatal(err)
			}
			if again, _ := p.Serving().CurrentCertKeyContent(); !bytes.Equal(again, served) || l.n.Load() != 1 {
				t.Errorf("a renewal with nothing due changed the certificate or told the listeners (%d)", l.n.Load())
			}
		})
	}
}

// The admin kubeconfig trusts the CA and holds a client certificate of the
// admin identity, owner-only; writing it again keeps the certificate.
func TestWriteKubeconfig(t *testing.T) {
	dir := datadir.Dir(t.TempDir())
	p := loadPKI(t, dir, "localhost")
	path := dir.Kubeconfig()
	const url = "https://127.0.0.1:6443"
	if err := p.WriteKubeconfig(path, url); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("kubeconfig: %v, mode %v; want 0600", err, fi.Mode().Perm())
	}
	first := readFile(t, path)
	var kc clientcmdv1.Config
	if err := yaml.Unmarshal(first, &kc); err != nil {
		t.Fatal(err)
	}
	if len(kc.Clusters) != 1 || len(kc.AuthInfos) != 1 || kc.CurrentContext != "kubestore" {
		t.Fatalf("kubeconfig has %d clusters, %d users, context %q", len(kc.Clusters), len(kc.AuthInfos), kc.CurrentContext)
	}
	cluster := kc.Clusters[0].Cluster
	if cluster.Server != url || !bytes.Equal(cluster.CertificateAuthorityData, p.CAPEM()) {
		t.Errorf("cluster %q does not trust the CA", cluster.Server)
	}
	cert := parseCert(t, kc.AuthInfos[0].AuthInfo.ClientCertificateData)
	if cert.Subject.CommonName != AdminUser || !slices.Equal(cert.Subject.Organization, []string{user.SystemPrivilegedGroup}) {
		t.Errorf("client certificate is %q %v", cert.Subject.CommonName, cert.Subject.Organization)
	}
	if _, err := cert.Verify(x509.VerifyOptions{Roots: poolOf(parseCert(t, p.CAPEM())), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("client certificate does not verify as a client: %v", err)
	}
	for _, name := range []string{"admin.crt", "admin.key"} {
		if fi, err := os.Stat(filepath.Join(dir.PKI(), name)); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v, want mode 0600", name, err)
		}
	}

	if err := p.WriteKubeconfig(path, url); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(readFile(t, path), first) {
		t.Error("writing the kubeconfig again changed it")
	}
}

func TestServingHosts(t *testing.T) {
	base := []string{"localhost", "kubestore", "127.0.0.1", "::1"}
	for _, tc := range []struct {
		name     string
		s        config.Server
		want     []string
		wantNot  string
		lastSANs []string
	}{
		{"every interface", config.Server{BindAddress: "0.0.0.0"}, base, "0.0.0.0", nil},
		{"one address", config.Server{BindAddress: "192.168.1.5"}, append(slices.Clone(base), "192.168.1.5"), "", nil},
		{"extra names last", config.Server{BindAddress: "::", TLSSANs: []string{"gw.example", "10.1.1.1"}}, base, "::", []string{"gw.example", "10.1.1.1"}},
		{"the Service default/kubernetes and its endpoint", config.Server{BindAddress: "0.0.0.0", ServiceClusterIPRange: "10.96.0.0/16", AdvertiseAddress: "192.0.2.10"},
			append(slices.Clone(base), "kubernetes.default.svc", "kubernetes.default.svc.cluster.local", "10.96.0.1", "192.0.2.10"), "0.0.0.0", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := ServingHosts(tc.s, config.Site{})
			for _, h := range tc.want {
				if !slices.Contains(got, h) {
					t.Errorf("%v lacks %s", got, h)
				}
			}
			if tc.wantNot != "" && slices.Contains(got, tc.wantNot) {
				t.Errorf("%v holds the unspecified address %s", got, tc.wantNot)
			}
			if n := len(tc.lastSANs); n > 0 && !slices.Equal(got[len(got)-n:], tc.lastSANs) {
				t.Errorf("%v does not end with %v", got, tc.lastSANs)
			}
		})
	}
}
