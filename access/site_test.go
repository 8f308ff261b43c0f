package access

import (
	"bytes"
	"crypto/x509"
	"slices"
	"testing"
	"time"

	"github.com/kubestore/kubestore/config"
	"github.com/kubestore/kubestore/datadir"
)

// A site member's peer certificate authenticates both ways (etcd's peers
// dial each other), covers its name and address, and Renew replaces it
// in place when due, where etcd reads it at its next handshake.
func TestPeerCertificate(t *testing.T) {
	dir := datadir.Dir(t.TempDir())
	p := loadPKI(t, dir, "localhost")
	site := config.Site{MemberName: "gw-1", PeerAdvertiseAddress: "10.0.0.11", PeerPort: 2380}
	if err := p.Peer(site); err != nil {
		t.Fatal(err)
	}
	cert := parseCert(t, readFile(t, dir.PeerCert()))
	if !slices.Contains(cert.ExtKeyUsage, x509.ExtKeyUsageServerAuth) || !slices.Contains(cert.ExtKeyUsage, x509.ExtKeyUsageClientAuth) {
		t.Errorf("peer certificate usages %v, want server and client auth", cert.ExtKeyUsage)
	}
	if !slices.Contains(cert.DNSNames, "gw-1") || len(cert.IPAddresses) != 1 || cert.IPAddresses[0].String() != "10.0.0.11" {
		t.Errorf("peer certificate covers %v %v, want gw-1 and 10.0.0.11", cert.DNSNames, cert.IPAddresses)
	}
	if _, err := cert.Verify(x509.VerifyOptions{Roots: poolOf(p.caCert), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("the site's CA does not verify the peer certificate: %v", err)
	}

	// A certificate close to its end is replaced by the renewal.
	due := storeExpiring(t, p, p.peerTemplate(), renewBefore-time.Hour, dir.PeerCert(), dir.PeerKey())
	if err := p.Renew(); err != nil {
		t.Fatal(err)
	}
	renewed := readFile(t, dir.PeerCert())
	if bytes.Equal(renewed, due) || time.Until(parseCert(t, renewed).NotAfter) < renewBefore {
		t.Errorf("the due peer certificate was not renewed")
	}
}

// The token a member prints pins its CA, and the secrets a joiner
// installs make the same token on the joiner.
func TestSiteSecretsRoundTrip(t *testing.T) {
	founder := datadir.Dir(t.TempDir())
	loadPKI(t, founder, "localhost")
	token, err := JoinToken(founder)
	if err != nil {
		t.Fatal(err)
	}
	parsed, err := config.ParseJoinToken(token)
	if err != nil {
		t.Fatalf("token %q: %v", token, err)
	}
	secrets, err := ReadSiteSecrets(founder)
	if err != nil {
		t.Fatal(err)
	}
	if parsed.Secret != secrets.JoinSecret {
		t.Errorf("the token's secret is not the site's")
	}
	joiner := datadir.Dir(t.TempDir())
	loadPKI(t, joiner, "localhost") // its own CA, replaced by the site's
	if err := WriteSiteSecrets(joiner, secrets); err != nil {
		t.Fatal(err)
	}
	if again, err := JoinToken(joiner); err != nil || again != token {
		t.Errorf("the joiner's token %q (%v), want the founder's %q", again, err, token)
	}
	p := loadPKI(t, joiner, "localhost")
	if !bytes.Equal(p.CAPEM(), secrets.CACert) {
		t.Errorf("the joiner's PKI does not load the site's CA")
	}
	if err := servingCert(t, p).CheckSignatureFrom(p.caCert); err != nil {
		t.Errorf("the joiner's serving certificate is not the site CA's: %v", err)
	}
}

func poolOf(c *x509.Certificate) *x509.CertPool {
	pool := x509.NewCertPool()
	pool.AddCert(c)
	return pool
}
