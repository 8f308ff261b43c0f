package server_test

import (
	"crypto/ecdsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/keyutil"

	"github.com/kubestore/kubestore/access"
	"github.com/kubestore/kubestore/config"
	"github.com/kubestore/kubestore/datadir"
	"github.com/kubestore/kubestore/site"
)

// startSiteMember starts the founding member gw-a of a site, its peer
// port on loopback.
func startSiteMember(t *testing.T) (*testServer, config.Config) {
	t.Helper()
	cfg := testConfig(t)
	cfg.Site = config.Site{MemberName: "gw-a", PeerAdvertiseAddress: "127.0.0.1", PeerBindAddress: "127.0.0.1", PeerPort: freePort(t)}
	// As kubestore serve readies a member before its etcd starts.
	if err := site.Prepare(t.Context(), cfg); err != nil {
		t.Fatal(err)
	}
	return startServer(t, cfg), cfg
}

// A join that names the peer URL of a live member is refused before any
// change: the member is not evicted, and the site still lists it.
func TestSiteJoinEvictsNothingAlive(t *testing.T) {
	ts, cfg := startSiteMember(t)
	secrets, err := access.ReadSiteSecrets(datadir.Dir(cfg.DataDir))
	if err != nil {
		t.Fatal(err)
	}
	hc, err := rest.HTTPClientFor(rest.AnonymousClientConfig(ts.rest))
	if err != nil {
		t.Fatal(err)
	}
	body := fmt.Sprintf(`{"name":"gw-x","peerURL":%q}`, cfg.Site.PeerURL())
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, ts.rest.Host+site.JoinPath, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+secrets.JoinSecret)
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	answer, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusConflict || !strings.Contains(string(answer), "gw-a") {
		t.Errorf("a join with the live member gw-a's peer URL: %d %s, want 409 naming gw-a", resp.StatusCode, answer)
	}
	list, err := ts.backend.Client().MemberList(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Members) != 1 || list.Members[0].Name != "gw-a" || list.Members[0].IsLearner {
		t.Errorf("the site after the refused join: %+v, want gw-a alone, a voter", list.Members)
	}
}

// The etcd peer port of a site's member admits the members alone: a
// kubelet's client certificate and a user's, both issued by the site's CA
// through CSRs, are refused at the TLS handshake; the member's own peer
// certificate is answered. A CSR for the members' subject is failed.
func TestSitePeerPortAdmitsMembersOnly(t *testing.T) {
	ts, cfg := startSiteMember(t)
	port := cfg.Site.PeerPort
	ctx := t.Context()
	csrs := ts.client.CertificatesV1().CertificateSigningRequests()

	type request struct {
		name, signer string
		subject      pkix.Name
		key          *ecdsa.PrivateKey
	}
	requests := []*request{
		{name: "alice", signer: certificatesv1.KubeAPIServerClientSignerName, subject: pkix.Name{CommonName: "alice"}},
		{name: "kubelet", signer: certificatesv1.KubeAPIServerClientKubeletSignerName, subject: pkix.Name{CommonName: "system:node:edge-b", Organization: []string{"system:nodes"}}},
		{name: "member", signer: certificatesv1.KubeAPIServerClientSignerName, subject: pkix.Name{CommonName: config.SiteMemberCommonName}},
	}
	for _, r := range requests {
		var pemCSR []byte
		pemCSR, r.key = newRequest(t, r.subject)
		usages := []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth}
		if _, err := csrs.Create(ctx, &certificatesv1.CertificateSigningRequest{ObjectMeta: metav1.ObjectMeta{Name: r.name},
			Spec: certificatesv1.CertificateSigningRequestSpec{Request: pemCSR, SignerName: r.signer, Usages: usages}}, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating %s: %v", r.name, err)
		}
		// The admin approves it, unless the approving controller did (a
		// kubelet's client certificate the admin asked for).
		eventually(t, 10*time.Second, "approving "+r.name, func() (bool, error) {
			c, err := csrs.Get(ctx, r.name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			for _, cond := range c.Status.Conditions {
				if cond.Type == certificatesv1.CertificateApproved {
					return true, nil
				}
			}
			c.Status.Conditions = append(c.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
				Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue, Reason: "AdminApproved", Message: "approved by the admin"})
			_, err = csrs.UpdateApproval(ctx, r.name, c, metav1.UpdateOptions{})
			return err == nil, err
		})
	}
	keys := map[string]*ecdsa.PrivateKey{}
	for _, r := range requests {
		keys[r.name] = r.key
	}
	issued := map[string][]byte{}
	eventually(t, 30*time.Second, "the requests issued or failed", func() (bool, error) {
		for _, r := range requests {
			c, err := csrs.Get(ctx, r.name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			failed := false
			for _, cond := range c.Status.Conditions {
				failed = failed || cond.Type == certificatesv1.CertificateFailed
			}
			if len(c.Status.Certificate) == 0 && !failed {
				return false, fmt.Errorf("%s neither issued nor failed", r.name)
			}
			if len(c.Status.Certificate) > 0 {
				issued[r.name] = c.Status.Certificate
			}
		}
		return true, nil
	})
	if _, ok := issued["member"]; ok {
		t.Errorf("the CSR signer issued a certificate with the members' subject %q", config.SiteMemberCommonName)
	}

	caPEM, err := os.ReadFile(filepath.Join(cfg.DataDir, "pki", "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(caPEM)
	peer := "https://127.0.0.1:" + strconv.Itoa(port)
	get := func(cert tls.Certificate, path string) (int, error) {
		c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
			RootCAs: roots, ServerName: "127.0.0.1", Certificates: []tls.Certificate{cert}}}}
		resp, err := c.Get(peer + path)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		io.Copy(io.Discard, resp.Body) //nolint:errcheck // the status is what counts
		return resp.StatusCode, nil
	}
	for _, name := range []string{"alice", "kubelet"} {
		keyPEM, err := keyutil.MarshalPrivateKeyToPEM(keys[name])
		if err != nil {
			t.Fatal(err)
		}
		cert, err := tls.X509KeyPair(issued[name], keyPEM)
		if err != nil {
			t.Fatalf("%s's certificate: %v", name, err)
		}
		for _, path := range []string{"/members", "/version", "/raft/probing"} {
			if code, err := get(cert, path); err == nil {
				t.Errorf("GET %s on the peer port with %s's certificate (issued by the site's CA): %d, want the handshake refused", path, name, code)
			}
		}
	}
	own, err := tls.LoadX509KeyPair(filepath.Join(cfg.DataDir, "pki", "peer.crt"), filepath.Join(cfg.DataDir, "pki", "peer.key"))
	if err != nil {
		t.Fatal(err)
	}
	if code, err := get(own, "/members"); err != nil || code != http.StatusOK {
		t.Errorf("GET /members on the peer port with the member's own peer certificate: %d %v, want 200", code, err)
	}
}
