package server_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/certificate/csr"
	"k8s.io/client-go/util/keyutil"

	"github.com/kubestore/kubestore/access"
	"github.com/kubestore/kubestore/certificates"
	"github.com/kubestore/kubestore/datadir"
)

const nodeToken = "edge1-bootstrap-token-0123456789"

// nodePolicy is what a kubelet needs for its certificates, and what makes
// its own client certificate requests approved (upstream's
// system:certificates.k8s.io:certificatesigningrequests:selfnodeclient
// role as kubeadm binds it to system:nodes). A node may also try to
// approve, which the signer's "approve" verb still refuses.
const nodePolicy = `rules:
- groups: ["system:nodes"]
  verbs: ["create", "get", "list", "watch"]
  resources: ["certificatesigningrequests.certificates.k8s.io"]
  namespaces: ["*"]
- groups: ["system:nodes"]
  verbs: ["create"]
  resources: ["certificatesigningrequests.certificates.k8s.io/selfnodeclient"]
  namespaces: ["*"]
- groups: ["system:nodes"]
  verbs: ["update"]
  resources: ["certificatesigningrequests.certificates.k8s.io/approval"]
  namespaces: ["*"]
`

// startCertificatesServer serves with a node token of system:node:edge1
// and nodePolicy.
func startCertificatesServer(t *testing.T) *testServer {
	t.Helper()
	cfg := testConfig(t)
	cfg.Server.TokenAuthFile = writeFile(t, filepath.Join(t.TempDir(), "tokens.csv"), nodeToken+",system:node:edge1,edge1-uid,\"system:nodes\"\n")
	cfg.Server.AuthorizationPolicyFile = writeFile(t, filepath.Join(t.TempDir(), "policy.yaml"), nodePolicy)
	return startServer(t, cfg)
}

// newRequest is a PEM PKCS#10 request for subject and its key.
func newRequest(t *testing.T, subject pkix.Name, dnsNames ...string) ([]byte, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	data, err := certutil.MakeCSR(key, &subject, dnsNames, nil)
	if err != nil {
		t.Fatal(err)
	}
	return data, key
}

// whoAmI is the identity a client certificate and key log in as.
func whoAmI(t *testing.T, ts *testServer, certPEM []byte, key *ecdsa.PrivateKey) authenticationv1.UserInfo {
	t.Helper()
	keyPEM, err := keyutil.MarshalPrivateKeyToPEM(key)
	if err != nil {
		t.Fatal(err)
	}
	cfg := rest.AnonymousClientConfig(ts.rest)
	cfg.CertData, cfg.KeyData = certPEM, keyPEM
	review, err := kubernetes.NewForConfigOrDie(cfg).AuthenticationV1().SelfSubjectReviews().Create(t.Context(), &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("logging in with the issued certificate: %v", err)
	}
	return review.Status.UserInfo
}

func parseCertificate(t *testing.T, data []byte) *x509.Certificate {
	t.Helper()
	block, _ := pem.Decode(data)
	if block == nil {
		t.Fatalf("no PEM certificate: %q", data)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

// A kubelet bootstraps its client certificate as kubelet does (client-go's
// util/certificate/csr): it asks as system:node:edge1, the approving
// controller approves it (the node may create selfnodeclient), the signing
// controller issues it with kubestore's CA for the hour asked, and the
// certificate logs in as system:node:edge1 in system:nodes.
func TestKubeletClientCertificate(t *testing.T) {
	ts := startCertificatesServer(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	node := tokenClient(t, ts, nodeToken)
	request, key := newRequest(t, pkix.Name{CommonName: "system:node:edge1", Organization: []string{"system:nodes"}})
	hour := time.Hour
	name, uid, err := csr.RequestCertificateWithContext(ctx, node, request, "", certificatesv1.KubeAPIServerClientKubeletSignerName, &hour,
		[]certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth}, key)
	if err != nil {
		t.Fatalf("requesting the certificate: %v", err)
	}
	asked := time.Now()
	certPEM, err := csr.WaitForCertificate(ctx, node, name, uid)
	if err != nil {
		t.Fatalf("waiting for the certificate: %v", err)
	}

	got, err := ts.client.CertificatesV1().CertificateSigningRequests().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Spec.Username != "system:node:edge1" || got.Spec.UID != "edge1-uid" || !slices.Contains(got.Spec.Groups, "system:nodes") {
		t.Errorf("requestor %q %q %v, want the node's", got.Spec.Username, got.Spec.UID, got.Spec.Groups)
	}
	if c := got.Status.Conditions; len(c) != 1 || c[0].Type != certificatesv1.CertificateApproved || c[0].Reason != "AutoApproved" ||
		c[0].LastUpdateTime.IsZero() {
		t.Errorf("conditions %+v, want one AutoApproved stamped", c)
	}
	cert := parseCertificate(t, certPEM)
	caCert, _, _ := loadPKI(t, ts).CA()
	if err := cert.CheckSignatureFrom(caCert); err != nil {
		t.Errorf("not issued by kubestore's CA: %v", err)
	}
	// An hour, backdated five minutes (the signer's policy).
	if d := cert.NotAfter.Sub(asked); d < 59*time.Minute || d > 61*time.Minute || cert.NotAfter.Sub(cert.NotBefore) != 65*time.Minute {
		t.Errorf("valid %v to %v, want an hour from the request", cert.NotBefore, cert.NotAfter)
	}
	if u := whoAmI(t, ts, certPEM, key); u.Username != "system:node:edge1" || !slices.Contains(u.Groups, "system:nodes") {
		t.Errorf("the certificate logs in as %q %v, want system:node:edge1 in system:nodes", u.Username, u.Groups)
	}
	if _, err := node.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{FieldSelector: "spec.signerName=" + certificatesv1.KubeAPIServerClientKubeletSignerName}); err != nil {
		t.Errorf("list by signer: %v", err)
	}
}

// The admin approves what no controller approves: a client certificate
// for an agent and a kubelet's serving certificate, through the approval
// subresource; a node may not approve (no "approve" on the signer), and
// no one may ask for a system:masters client certificate.
func TestCertificateApprovedByAdmin(t *testing.T) {
	ts := startCertificatesServer(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	admin, node := ts.client.CertificatesV1().CertificateSigningRequests(), tokenClient(t, ts, nodeToken).CertificatesV1().CertificateSigningRequests()

	masters, _ := newRequest(t, pkix.Name{CommonName: "root", Organization: []string{"system:masters"}})
	_, err := admin.Create(ctx, &certificatesv1.CertificateSigningRequest{ObjectMeta: metav1.ObjectMeta{Name: "masters"}, Spec: certificatesv1.CertificateSigningRequestSpec{
		Request: masters, SignerName: certificatesv1.KubeAPIServerClientSignerName, Usages: []certificatesv1.KeyUsage{certificatesv1.UsageClientAuth}}}, metav1.CreateOptions{})
	wantStatus(t, "a system:masters client certificate", err, apierrors.IsForbidden, "403 Forbidden")

	agentRequest, agentKey := newRequest(t, pkix.Name{CommonName: "agent", Organization: []string{"agents"}})
	servingRequest, _ := newRequest(t, pkix.Name{CommonName: "system:node:edge1", Organization: []string{"system:nodes"}}, "edge1.local")
	for _, c := range []*certificatesv1.CertificateSigningRequest{
		{ObjectMeta: metav1.ObjectMeta{Name: "agent"}, Spec: certificatesv1.CertificateSigningRequestSpec{Request: agentRequest,
			SignerName: certificatesv1.KubeAPIServerClientSignerName, Usages: []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "serving"}, Spec: certificatesv1.CertificateSigningRequestSpec{Request: servingRequest,
			SignerName: certificatesv1.KubeletServingSignerName, Usages: []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageServerAuth}}},
	} {
		// The node asks, as a kubelet asks for its serving certificate.
		created, err := node.Create(ctx, c, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("creating %s: %v", c.Name, err)
		}
		// No controller approves these; the node may not either.
		created.Status.Conditions = append(created.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
			Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue, Reason: "Self", Message: "approving myself"})
		_, err = node.UpdateApproval(ctx, c.Name, created, metav1.UpdateOptions{})
		wantStatus(t, "a node approving its "+c.Name+" request", err, apierrors.IsForbidden, "403 Forbidden")
		created.Status.Conditions[0].Reason, created.Status.Conditions[0].Message = "AdminApproved", "approved by the admin"
		if _, err := admin.UpdateApproval(ctx, c.Name, created, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("the admin approving %s: %v", c.Name, err)
		}
	}
	issued := func(name string) []byte {
		var cert []byte
		eventually(t, 30*time.Second, name+" issued", func() (bool, error) {
			c, err := admin.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			cert = c.Status.Certificate
			return len(cert) > 0, nil
		})
		return cert
	}
	if u := whoAmI(t, ts, issued("agent"), agentKey); u.Username != "agent" || !slices.Contains(u.Groups, "agents") {
		t.Errorf("the agent's certificate logs in as %q %v", u.Username, u.Groups)
	}
	serving := parseCertificate(t, issued("serving"))
	if !slices.Equal(serving.DNSNames, []string{"edge1.local"}) || !slices.Equal(serving.ExtKeyUsage, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}) ||
		serving.NotAfter.Sub(serving.NotBefore) < 364*24*time.Hour {
		t.Errorf("serving certificate for %v, usages %v, valid %v to %v; want a year for edge1.local", serving.DNSNames, serving.ExtKeyUsage, serving.NotBefore, serving.NotAfter)
	}
	// Nobody changes an issued certificate, the admin included.
	c, err := admin.Get(ctx, "agent", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c.Status.Certificate = issued("serving")
	_, err = admin.UpdateStatus(ctx, c, metav1.UpdateOptions{})
	wantStatus(t, "replacing an issued certificate", err, apierrors.IsInvalid, "422 Invalid")
}

// loadPKI is the server's PKI, read from its data directory.
func loadPKI(t *testing.T, ts *testServer) *access.PKI {
	t.Helper()
	pki, err := access.LoadPKI(datadir.Dir(ts.cfg.DataDir), access.ServingHosts(ts.cfg.Server, ts.cfg.Site))
	if err != nil {
		t.Fatal(err)
	}
	return pki
}

// Three signers on one server, as several kubestores on one etcd sharing a
// CA: every approved request gets one certificate, which never changes
// (the losers of a race get a conflict, read the request again and find
// it issued).
func TestCertificateSeveralSigners(t *testing.T) {
	ts := startCertificatesServer(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	pki := loadPKI(t, ts)
	signers, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer stop()
	for range 2 {
		wg.Go(func() {
			if err := certificates.Run(signers, ts.rest, certificates.Options{CA: pki.CA}); err != nil {
				t.Errorf("signer: %v", err)
			}
		})
	}

	admin := ts.client.CertificatesV1().CertificateSigningRequests()
	w, err := admin.Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	const n = 20
	for i := range n {
		request, _ := newRequest(t, pkix.Name{CommonName: fmt.Sprintf("agent-%d", i)})
		c, err := admin.Create(ctx, &certificatesv1.CertificateSigningRequest{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("agent-%d", i)},
			Spec: certificatesv1.CertificateSigningRequestSpec{Request: request, SignerName: certificatesv1.KubeAPIServerClientSignerName,
				Usages: []certificatesv1.KeyUsage{certificatesv1.UsageClientAuth}}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		c.Status.Conditions = []certificatesv1.CertificateSigningRequestCondition{{Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue, Reason: "Test"}}
		if _, err := admin.UpdateApproval(ctx, c.Name, c, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// Every certificate each request was seen with, in the watch.
	seen := map[string][]string{}
	for len(seen) < n {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatal("watch ended")
			}
			c, isCSR := ev.Object.(*certificatesv1.CertificateSigningRequest)
			if !isCSR || ev.Type != watch.Modified || len(c.Status.Certificate) == 0 {
				continue
			}
			if !slices.Contains(seen[c.Name], string(c.Status.Certificate)) {
				seen[c.Name] = append(seen[c.Name], string(c.Status.Certificate))
			}
		case <-ctx.Done():
			t.Fatalf("%d of %d requests issued", len(seen), n)
		}
	}
	// A moment for a late signer's write, then every request once more.
	time.Sleep(time.Second)
	list, err := admin.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range list.Items {
		if certs := seen[c.Name]; len(certs) != 1 || certs[0] != string(c.Status.Certificate) {
			t.Errorf("%s: %d certificates seen, or the one stored changed", c.Name, len(certs))
		}
	}
}
