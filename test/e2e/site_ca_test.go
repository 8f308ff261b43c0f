package e2e

import (
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kubestore/kubestore/config"
)

// TestSiteCARotation rotates the CA of a site of three (kubestore ca
// rotate, then ca finish): the members take the new CA while their etcd,
// which reads its trusted CAs only at its start, still trusts the
// previous one alone; peer links, writes and an admin kubeconfig of the
// previous CA keep working during the rotation and across a member's
// restart; the finish names the clients of the previous CA and is refused
// until forced; then the previous CA's client certificate is refused on
// every member, kube-root-ca.crt holds the new CA alone, the join token
// printed by the rotation is the only one that joins, and each member
// starts again by itself, one at a time, so that no etcd peer port still
// accepts a member certificate made with a copy of the previous CA's key;
// the members restarted on the new trust alone make the site again
// (k3s#8952).
func TestSiteCARotation(t *testing.T) {
	// Parallel: it waits more than it computes (leases, elections, polls),
	// with windows of tens of seconds (make test runs the waiting suites
	// side by side).
	t.Parallel()
	requireKubectl(t)
	a, b, c := newGateway(t, "gw-a"), newGateway(t, "gw-b"), newGateway(t, "gw-c")
	token := foundSite(t, a, b, c)
	oldKubeconfig := filepath.Join(t.TempDir(), "old.kubeconfig")
	data, err := os.ReadFile(b.p.kubeconfig)
	must(t, err)
	must(t, os.WriteFile(oldKubeconfig, data, 0o600))
	kubectlOld := func(g *siteGateway) (string, error) {
		out, err := exec.Command("kubectl", "--kubeconfig", oldKubeconfig, "--server", g.url(), "get", "namespace", "default", "--request-timeout=10s").CombinedOutput()
		return string(out), err
	}
	ca := func(g *siteGateway, args ...string) (string, error) {
		return g.kubestore(t, append([]string{"ca"}, args...)...)
	}
	// A copy of the CA's key, as a leaked pki/ holds it, makes a member's
	// peer certificate; every peer port accepts it before the rotation.
	forged := forgePeerClient(t, filepath.Join(a.dir, "pki"))
	for _, g := range []*siteGateway{a, b, c} {
		if err := peerGet(forged, g.peerPort); err != nil {
			t.Fatalf("a member certificate of the site's CA is refused on %s's peer port before the rotation: %v", g.name, err)
		}
	}

	out, err := ca(a, "rotate")
	if err != nil {
		t.Fatalf("ca rotate: %v\n%s", err, out)
	}
	if newToken := a.token(t); newToken == token || !strings.Contains(out, newToken) {
		t.Fatalf("ca rotate did not print the site's new join token %q:\n%s", newToken, out)
	}
	if !eventually(60*time.Second, func() bool {
		out, _ := ca(a, "status")
		return strings.Count(out, ": both,") == 3
	}) {
		out, _ := ca(a, "status")
		t.Fatalf("the members did not all take the new CA:\n%s", out)
	}
	for i, g := range []*siteGateway{a, b, c} {
		g.p.mustKubectl("create", "configmap", fmt.Sprintf("during-%d", i))
		if out, err := kubectlOld(g); err != nil {
			t.Errorf("the previous CA's admin kubeconfig fails on %s during the rotation: %v\n%s", g.name, err, out)
		}
	}
	// b's etcd starts again trusting both CAs, with its peers' etcd still
	// trusting the previous one alone.
	must(t, b.p.stop(30*time.Second))
	b.start(t, a.url(), token)
	c.p.mustKubectl("create", "configmap", "after-restart")
	b.p.mustKubectl("get", "configmap", "after-restart")
	if !eventually(30*time.Second, func() bool { return voters(a.memberList(t), "gw-a", "gw-b", "gw-c") }) {
		t.Fatalf("the site is not three reachable voters during the rotation:\n%s", a.memberList(t))
	}

	// b recorded the previous CA's client before its restart: it still
	// names it.
	out, err = ca(a, "finish")
	if err == nil || !strings.Contains(out, "kubestore-admin (on gw-b") {
		t.Fatalf("ca finish with a client of the previous CA: %v, want a refusal naming kubestore-admin on gw-b\n%s", err, out)
	}
	out, err = ca(a, "finish", "--force")
	if err != nil {
		t.Fatalf("ca finish --force: %v\n%s", err, out)
	}
	if !strings.Contains(out, "gw-a, gw-b, gw-c trust it until they start again") {
		t.Errorf("ca finish does not name the members whose etcd peer port still trusts the previous CA:\n%s", out)
	}
	for _, g := range []*siteGateway{a, b, c} {
		if !eventually(30*time.Second, func() bool {
			out, err := kubectlOld(g)
			return err != nil && strings.Contains(out, "Unauthorized")
		}) {
			out, err := kubectlOld(g)
			t.Errorf("the previous CA's client certificate is not refused on %s after the finish: %v\n%s", g.name, err, out)
		}
		// The members start again by themselves from the finish on, one
		// at a time: g may be down for a moment.
		var out string
		if !eventually(90*time.Second, func() bool {
			out, err = g.p.kubectl("create", "configmap", "finished-"+g.name)
			return err == nil || strings.Contains(out, "AlreadyExists")
		}) {
			t.Fatalf("kubectl create configmap finished-%s after the finish: %v\n%s", g.name, err, out)
		}
	}
	caPEM, err := os.ReadFile(filepath.Join(a.dir, "pki", "ca.crt"))
	must(t, err)
	if strings.Count(string(caPEM), "BEGIN CERTIFICATE") != 1 {
		t.Fatalf("ca.crt holds %d certificates after the finish, want the new CA alone", strings.Count(string(caPEM), "BEGIN CERTIFICATE"))
	}
	if !eventually(30*time.Second, func() bool {
		out, err := c.p.kubectl("get", "configmap", "kube-root-ca.crt", "-o", `jsonpath={.data.ca\.crt}`)
		return err == nil && strings.TrimSpace(out) == strings.TrimSpace(string(caPEM))
	}) {
		out, _ := c.p.kubectl("get", "configmap", "kube-root-ca.crt", "-o", `jsonpath={.data.ca\.crt}`)
		t.Errorf("kube-root-ca.crt is not the new CA alone:\n%s", out)
	}
	// The previous join secret admits no one, even with the new CA's hash.
	newToken := a.token(t)
	oldSecret := newToken[:strings.Index(newToken, "::")+2] + token[strings.Index(token, "::")+2:]
	d := newGateway(t, "gw-d")
	d.launch(t, a.url(), oldSecret)
	if err := d.p.wait(90 * time.Second); err == nil {
		t.Errorf("a gateway joined with the join secret of before the rotation\n%s", d.p.logs())
	}
	if r := row(a.memberList(t), "gw-d"); r != "" {
		t.Errorf("the site lists the refused joiner: %s", r)
	}
	// Each member starts again by itself, one at a time: then no peer
	// port takes the forged certificate.
	for _, g := range []*siteGateway{a, b, c} {
		if !eventually(3*time.Minute, func() bool { return peerGet(forged, g.peerPort) != nil }) {
			t.Fatalf("%s's etcd peer port still takes a member certificate of the previous CA after the finish\n%s", g.name, g.p.logs())
		}
		if !strings.Contains(g.p.logs(), "Stopping to start again") {
			t.Errorf("%s did not start again by itself", g.name)
		}
	}
	for _, g := range []*siteGateway{a, b, c} {
		g.waitServing(t)
	}
	c.p.mustKubectl("create", "configmap", "after-finish")
	a.p.mustKubectl("get", "configmap", "after-finish")
	if !eventually(30*time.Second, func() bool { return voters(a.memberList(t), "gw-a", "gw-b", "gw-c") }) {
		t.Fatalf("the site is not three reachable voters after the rotation:\n%s", a.memberList(t))
	}
}

// forgePeerClient is a client presenting a member's peer certificate
// (the members' subject) made with the CA key in pkiDir, as one who copied
// it could.
func forgePeerClient(t *testing.T, pkiDir string) *http.Client {
	t.Helper()
	c, err := forgedPeer(pkiDir)
	must(t, err)
	return c
}

// forgedPeer is forgePeerClient, returning its failure.
func forgedPeer(pkiDir string) (*http.Client, error) {
	ca, err := tls.LoadX509KeyPair(filepath.Join(pkiDir, "ca.crt"), filepath.Join(pkiDir, "ca.key"))
	if err != nil {
		return nil, err
	}
	caCert, err := x509.ParseCertificate(ca.Certificate[0])
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: config.SiteMemberCommonName},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth, x509.ExtKeyUsageServerAuth}, IPAddresses: []net.IP{net.IPv6loopback, net.ParseIP("127.0.0.1")}} // etcd checks a client's SANs against its address
	// The leaf's key is the CA's own: whatever it is, only a holder of the
	// CA's key could sign it.
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, caCert.PublicKey, ca.PrivateKey)
	if err != nil {
		return nil, err
	}
	cert := tls.Certificate{Certificate: [][]byte{der}, PrivateKey: ca.PrivateKey}
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true,
		TLSClientConfig: &tls.Config{Certificates: []tls.Certificate{cert}, InsecureSkipVerify: true}}}, nil //nolint:gosec // the server is not the question
}

// peerGet asks the etcd peer port for its members, as a member would.
func peerGet(c *http.Client, port int) error {
	res, err := c.Get("https://127.0.0.1:" + strconv.Itoa(port) + "/members")
	if err != nil {
		return err
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("HTTP %d", res.StatusCode)
	}
	return nil
}

// TestSiteCARotationRightAfterAJoin rotates the CA of a site of two at
// once after the second gateway joined, with the commands as the README
// writes them (--data-dir alone: the member's name and its site are its
// etcd's, not the command's flags; issue 48): the joined member takes the
// new CA as well, and after the finish no peer port accepts a member
// certificate made with the previous CA's key.
func TestSiteCARotationRightAfterAJoin(t *testing.T) {
	t.Parallel()
	a, b := newGateway(t, "gw-a"), newGateway(t, "gw-b")
	foundSite(t, a, b)
	forged := forgePeerClient(t, filepath.Join(a.dir, "pki"))
	ca := func(args ...string) (string, error) {
		out, err := exec.Command(a.release(t), append(append([]string{"ca"}, args...), "--data-dir", a.dir)...).CombinedOutput()
		return string(out), err
	}
	out, err := ca("rotate")
	if err != nil {
		t.Fatalf("ca rotate --data-dir: %v\n%s", err, out)
	}
	if !eventually(60*time.Second, func() bool {
		out, _ := ca("status")
		return strings.Count(out, ": both,") == 2 && strings.Contains(out, "member gw-a: both,") && strings.Contains(out, "member gw-b: both,")
	}) {
		out, _ := ca("status")
		t.Fatalf("ca status --data-dir does not list both members as having taken the new CA:\n%s\ngw-b:\n%s", out, b.p.logs())
	}
	if out, err := ca("finish"); err != nil {
		t.Fatalf("ca finish --data-dir: %v\n%s", err, out)
	}
	// Each member starts again by itself to drop the previous CA from its
	// peer port; once both serve again, neither port takes the forged
	// certificate (an error now is the handshake's refusal, not a member
	// that is down).
	for _, g := range []*siteGateway{a, b} {
		if !eventually(2*time.Minute, func() bool { return strings.Contains(g.p.logs(), "Stopping to start again") }) {
			t.Fatalf("%s did not start again by itself after the finish\n%s", g.name, g.p.logs())
		}
	}
	for _, g := range []*siteGateway{a, b} {
		g.waitServing(t)
		if !eventually(30*time.Second, func() bool {
			err := peerGet(forged, g.peerPort)
			return err != nil && !errors.Is(err, syscall.ECONNREFUSED)
		}) {
			t.Errorf("%s's etcd peer port still takes a member certificate of the previous CA after the finish: %v", g.name, peerGet(forged, g.peerPort))
		}
		if strings.Contains(g.p.logs(), "holds no secrets sealed") {
			t.Errorf("%s could not open the rotation:\n%s", g.name, g.p.logs())
		}
	}
	b.p.mustKubectl("create", "configmap", "after-finish")
	a.p.mustKubectl("get", "configmap", "after-finish")
}
