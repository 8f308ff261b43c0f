package access

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	x509request "k8s.io/apiserver/pkg/authentication/request/x509"

	"github.com/kubestore/kubestore/config"
	"github.com/kubestore/kubestore/datadir"
)

// A rotation of the CA: the member takes the new CA while trusting both;
// its leaves verify against either CA alone (the cross certificate), so
// that a peer whose etcd trusts only the previous CA still accepts them;
// client certificates of both authenticate, and those of the previous CA
// are named; a restart in the middle, or a cut between the writes of a
// step, loads the same state; the finish refuses the previous CA's
// clients; a member that missed the first step takes both at once.
func TestCARotation(t *testing.T) {
	dir := datadir.Dir(t.TempDir())
	p := loadPKI(t, dir, "localhost")
	if err := p.Peer(config.Site{MemberName: "gw-1", PeerAdvertiseAddress: "10.0.0.11", PeerPort: 2380}); err != nil {
		t.Fatal(err)
	}
	before, err := ReadSiteSecrets(dir)
	if err != nil {
		t.Fatal(err)
	}
	oldCA, _, _ := p.CA()
	oldAdmin := issuedAdminCert(t, p)
	// A copy of pki/ leaked before the rotation; a member that will be
	// down from the prepare to the finish.
	leak, late := datadir.Dir(t.TempDir()), datadir.Dir(t.TempDir())
	for _, d := range []datadir.Dir{leak, late} {
		if err := WriteSiteSecrets(d, before); err != nil {
			t.Fatal(err)
		}
	}

	name, prep, err := PrepareRotation(dir, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if name != RotationName(oldCA.Raw) || prep.Phase != PhasePrepare {
		t.Fatalf("rotation %s in phase %s, want %s in phase prepare", name, prep.Phase, RotationName(oldCA.Raw))
	}
	apply(t, p, dir, prep, false)
	rot, token, err := NewRotation(dir, prep, map[string][]byte{"gw-1": sealKey(t, dir), "gw-late": sealKey(t, late)})
	if err != nil {
		t.Fatal(err)
	}
	next, err := rot.Certificate()
	if err != nil {
		t.Fatal(err)
	}
	secrets, err := openRotation(dir, rot, "gw-1", next)
	if err != nil {
		t.Fatal(err)
	}
	// What a leak before the rotation holds opens none of it, and what was
	// sealed for one member opens for no other name.
	if _, err := openRotation(leak, rot, "gw-1", next); err == nil {
		t.Error("a copy of pki/ from before the rotation opens the new CA's key")
	}
	swapped := rot
	swapped.Sealed = map[string][]byte{"gw-1": rot.Sealed["gw-late"]}
	if _, err := openRotation(late, swapped, "gw-1", next); err == nil {
		t.Error("secrets sealed for one member open under another member's name")
	}
	if err := keyMatches(secrets.CAKey, oldCA); err == nil {
		t.Error("the new CA's key matches the previous CA's certificate")
	}
	apply(t, p, dir, rot, true)
	apply(t, p, dir, rot, false)
	if got, err := JoinToken(dir); err != nil || got != token {
		t.Errorf("the join token after the rotation is %q (%v), want the new one %q", got, err, token)
	}
	if old := config.FormatJoinToken(pemBlock(before.CACert), before.JoinSecret); token == old {
		t.Error("the rotation kept the join token")
	}
	if _, err := os.Stat(filepath.Join(dir.PKI(), sealKeyFile)); !os.IsNotExist(err) {
		t.Errorf("the seal key stays after the step was taken: %v", err)
	}
	newCA, _, chain := p.CA()
	if newCA.Equal(oldCA) || len(chain) == 0 || !bytes.Equal(p.Previous(), oldCA.Raw) {
		t.Fatal("the new CA does not sign, with its cross certificate, while the previous one stays trusted")
	}
	if _, _, err := PrepareRotation(dir, time.Now()); err == nil {
		t.Error("a second rotation began while one is under way")
	}
	serving, _ := p.Serving().CurrentCertKeyContent()
	for _, root := range []*x509.Certificate{oldCA, newCA} {
		verifyChain(t, "the serving certificate", serving, root, x509.ExtKeyUsageServerAuth)
		verifyChain(t, "the peer certificate", readFile(t, dir.PeerCert()), root, x509.ExtKeyUsageClientAuth)
	}
	newAdmin := issuedAdminCert(t, p)
	auth := x509request.NewDynamic(p.ClientCA().VerifyOptions, x509request.CommonNameUserConversion)
	observedAuth := observed(auth, p.clientCA)
	for what, cert := range map[string][]byte{"previous": oldAdmin, "new": newAdmin} {
		if _, ok, err := observedAuth.AuthenticateRequest(withClientCert(t, cert)); !ok {
			t.Errorf("the %s CA's client certificate does not authenticate during the rotation: %v", what, err)
		}
	}
	clients := p.PreviousCAClients()
	if len(clients) != 1 || clients[AdminUser].IsZero() {
		t.Errorf("clients of the previous CA %v, want %s", clients, AdminUser)
	}

	// A restart in the middle loads the same state; so does a cut after
	// the new key was written and before ca.crt was put in order.
	// The clients it recorded are remembered.
	again := loadPKI(t, dir, "localhost")
	if !bytes.Equal(again.Signing(), newCA.Raw) || !bytes.Equal(again.Previous(), oldCA.Raw) {
		t.Error("a restart during the rotation does not sign with the new CA and trust the previous one")
	}
	again.RememberPreviousCAClients(clients)
	if got := again.PreviousCAClients(); !got[AdminUser].Equal(clients[AdminUser]) {
		t.Errorf("clients of the previous CA after a restart %v, want %v", got, clients)
	}
	cut := datadir.Dir(t.TempDir())
	if err := WriteSiteSecrets(cut, before); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(cut.PKI(), "ca.crt"), append(certPEM(oldCA.Raw), rot.CACert...))
	writeFile(t, filepath.Join(cut.PKI(), "ca.key"), secrets.CAKey)
	if c := loadPKI(t, cut, "localhost"); !bytes.Equal(c.Signing(), newCA.Raw) || !bytes.Equal(c.Previous(), oldCA.Raw) {
		t.Error("a step cut after its key was written does not load as the new CA trusting both")
	}

	rot.Phase = PhaseFinished
	apply(t, p, dir, rot, true)
	if p.Previous() != nil {
		t.Fatal("the previous CA is still trusted after the finish")
	}
	if _, ok, _ := auth.AuthenticateRequest(withClientCert(t, oldAdmin)); ok {
		t.Error("a client certificate of the previous CA authenticates after the finish")
	}
	if _, ok, err := auth.AuthenticateRequest(withClientCert(t, newAdmin)); !ok {
		t.Errorf("a client certificate of the new CA does not authenticate after the finish: %v", err)
	}
	serving, _ = p.Serving().CurrentCertKeyContent()
	verifyChain(t, "the serving certificate after the finish", serving, oldCA, x509.ExtKeyUsageServerAuth)

	// A member down from the prepare to the finish takes both steps at
	// once.
	l := loadPKI(t, late, "localhost")
	lateApply(t, l, late, rot)
	if !bytes.Equal(l.Signing(), newCA.Raw) || l.Previous() != nil {
		t.Error("a member that missed the rotation does not take the new CA alone")
	}
}

func sealKey(t *testing.T, dir datadir.Dir) []byte {
	t.Helper()
	k, err := SealKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func apply(t *testing.T, p *PKI, dir datadir.Dir, rot Rotation, want bool) {
	t.Helper()
	applyAs(t, p, dir, rot, "gw-1", want)
}

func lateApply(t *testing.T, p *PKI, dir datadir.Dir, rot Rotation) {
	t.Helper()
	applyAs(t, p, dir, rot, "gw-late", true)
}

func applyAs(t *testing.T, p *PKI, dir datadir.Dir, rot Rotation, member string, want bool) {
	t.Helper()
	changed, err := p.ApplyRotation(dir, rot, member)
	if err != nil || changed != want {
		t.Fatalf("ApplyRotation(%s) = %v, %v; want %v", rot.Phase, changed, err, want)
	}
	if err := p.Renew(); err != nil {
		t.Fatal(err)
	}
}

// issuedAdminCert is the admin client certificate p issues now, with its chain.
func issuedAdminCert(t *testing.T, p *PKI) []byte {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	certPEM, _, err := p.leaf("admin", p.adminTemplate)
	if err != nil {
		t.Fatal(err)
	}
	return certPEM
}

// verifyChain verifies the leaf of chainPEM, with the rest of it as
// intermediates, against root alone.
func verifyChain(t *testing.T, what string, chainPEM []byte, root *x509.Certificate, usage x509.ExtKeyUsage) {
	t.Helper()
	ders := pemCerts(chainPEM)
	leaf := parseCert(t, chainPEM)
	inter := x509.NewCertPool()
	for _, der := range ders[1:] {
		c, err := x509.ParseCertificate(der)
		if err != nil {
			t.Fatal(err)
		}
		inter.AddCert(c)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: poolOf(root), Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{usage}}); err != nil {
		t.Errorf("%s does not verify against %s alone: %v", what, root.Subject.CommonName, err)
	}
}

// withClientCert is a request presenting the client certificate chain.
func withClientCert(t *testing.T, chainPEM []byte) *http.Request {
	t.Helper()
	r, err := http.NewRequest(http.MethodGet, "https://localhost/api", nil)
	if err != nil {
		t.Fatal(err)
	}
	var certs []*x509.Certificate
	for _, der := range pemCerts(chainPEM) {
		c, err := x509.ParseCertificate(der)
		if err != nil {
			t.Fatal(err)
		}
		certs = append(certs, c)
	}
	r.TLS = &tls.ConnectionState{PeerCertificates: certs}
	return r
}

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}
