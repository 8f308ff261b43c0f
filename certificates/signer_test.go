package certificates

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"net"
	"reflect"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	certificatesv1client "k8s.io/client-go/kubernetes/typed/certificates/v1"
)

// fakeCSRs records the writes of a controller; err, when set, is what
// every write returns. The other methods are not called (nil interface).
type fakeCSRs struct {
	certificatesv1client.CertificateSigningRequestInterface
	actions []string // "status" or "approval"
	written []*certificatesv1.CertificateSigningRequest
	err     error
}

func (f *fakeCSRs) UpdateStatus(_ context.Context, csr *certificatesv1.CertificateSigningRequest, _ metav1.UpdateOptions) (*certificatesv1.CertificateSigningRequest, error) {
	f.actions = append(f.actions, "status")
	f.written = append(f.written, csr.DeepCopy())
	return csr, f.err
}

func (f *fakeCSRs) UpdateApproval(_ context.Context, _ string, csr *certificatesv1.CertificateSigningRequest, _ metav1.UpdateOptions) (*certificatesv1.CertificateSigningRequest, error) {
	f.actions = append(f.actions, "approval")
	f.written = append(f.written, csr.DeepCopy())
	return csr, f.err
}

// csrBuilder is upstream's test builder of a request.
type csrBuilder struct {
	cn         string
	dnsNames   []string
	ips        []net.IP
	org        []string
	signerName string
	requestor  string
	approved   bool
	failed     bool
	usages     []certificatesv1.KeyUsage
}

func makeTestCSR(t *testing.T, b csrBuilder) *certificatesv1.CertificateSigningRequest {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: b.cn, Organization: b.org},
		DNSNames: b.dnsNames, IPAddresses: b.ips}, key)
	if err != nil {
		t.Fatal(err)
	}
	csr := &certificatesv1.CertificateSigningRequest{ObjectMeta: metav1.ObjectMeta{Name: "csr", ResourceVersion: "7"}, Spec: certificatesv1.CertificateSigningRequestSpec{
		Request: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}), Usages: b.usages, SignerName: b.signerName, Username: b.requestor}}
	if b.approved {
		csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{Type: certificatesv1.CertificateApproved})
	}
	if b.failed {
		csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{Type: certificatesv1.CertificateFailed})
	}
	return csr
}

// TestSigner in k8s.io/kubernetes pkg/controller/certificates/signer/
// signer_test.go: a kubelet's request signed for the requested usages, for
// at most the TTL, backdated five minutes. The CA is made here, not read
// from upstream's testdata key.
func TestSigner(t *testing.T) {
	now := time.Now().UTC().Truncate(time.Second)
	ca := newTestCA(t, now)
	s, err := newSigner(certificatesv1.KubeletServingSignerName, ca, nil, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	csr := makeTestCSR(t, csrBuilder{cn: "system:node:k-a-node-s36b", org: []string{"system:nodes"}})
	x509cr, err := parseRequest(csr)
	if err != nil {
		t.Fatal(err)
	}
	threeHours := int32(3 * 3600) // more than the TTL: ignored
	data, err := s.sign(x509cr, []certificatesv1.KeyUsage{certificatesv1.UsageSigning, certificatesv1.UsageKeyEncipherment,
		certificatesv1.UsageServerAuth, certificatesv1.UsageClientAuth}, &threeHours, func() time.Time { return now })
	if err != nil {
		t.Fatal(err)
	}
	block, rest := pem.Decode(data)
	if block == nil || len(rest) != 0 {
		t.Fatalf("not one PEM certificate: %q", data)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	type summary struct {
		CN             string
		O              []string
		KeyUsage       x509.KeyUsage
		ExtKeyUsage    []x509.ExtKeyUsage
		Basic, IsCA    bool
		From, Until    time.Time
		PublicKey, Sig string
	}
	got := summary{cert.Subject.CommonName, cert.Subject.Organization, cert.KeyUsage, cert.ExtKeyUsage, cert.BasicConstraintsValid, cert.IsCA,
		cert.NotBefore.UTC(), cert.NotAfter.UTC(), cert.PublicKeyAlgorithm.String(), cert.SignatureAlgorithm.String()}
	want := summary{"system:node:k-a-node-s36b", []string{"system:nodes"}, x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		[]x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}, true, false,
		now.Add(-5 * time.Minute), now.Add(time.Hour), "ECDSA", "ECDSA-SHA256"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("certificate %+v, want %+v", got, want)
	}
}

func parseRequest(csr *certificatesv1.CertificateSigningRequest) (*x509.CertificateRequest, error) {
	block, _ := pem.Decode(csr.Spec.Request)
	return x509.ParseCertificateRequest(block.Bytes)
}

// The cases of TestHandle in signer_test.go: which requests each signer
// issues, fails, or leaves alone. kubestore has no legacy-unknown signer:
// upstream's case signing it is here one that cannot be built.
func TestSignerHandle(t *testing.T) {
	issued := func(t *testing.T, f *fakeCSRs) {
		if len(f.actions) != 1 || len(f.written[0].Status.Certificate) == 0 {
			t.Errorf("want one status update with a certificate, got %v", f.actions)
		}
	}
	failed := func(t *testing.T, f *fakeCSRs) {
		if len(f.actions) != 1 || len(f.written[0].Status.Certificate) != 0 || !hasTrueCondition(f.written[0], certificatesv1.CertificateFailed) {
			t.Errorf("want one status update with Failed and no certificate, got %v", f.actions)
		}
	}
	nothing := func(t *testing.T, f *fakeCSRs) {
		if len(f.actions) != 0 {
			t.Errorf("want no action, got %v", f.actions)
		}
	}
	client := certificatesv1.KubeAPIServerClientSignerName
	kubelet := certificatesv1.KubeAPIServerClientKubeletSignerName
	serving := certificatesv1.KubeletServingSignerName
	u := func(us ...certificatesv1.KeyUsage) []certificatesv1.KeyUsage { return us }
	tests := []struct {
		name            string
		b               csrBuilder
		constructionErr bool
		verify          func(*testing.T, *fakeCSRs)
	}{
		{name: "should sign if signerName is kubernetes.io/kube-apiserver-client", b: csrBuilder{signerName: client, cn: "hello-world", org: []string{"some-org"},
			usages: u(certificatesv1.UsageClientAuth, certificatesv1.UsageDigitalSignature, certificatesv1.UsageKeyEncipherment), approved: true}, verify: issued},
		{name: "should sign without key encipherment if signerName is kubernetes.io/kube-apiserver-client", b: csrBuilder{signerName: client, cn: "hello-world",
			org: []string{"some-org"}, usages: u(certificatesv1.UsageClientAuth, certificatesv1.UsageDigitalSignature), approved: true}, verify: issued},
		{name: "should refuse to sign if signerName is kubernetes.io/kube-apiserver-client and contains an unexpected usage", b: csrBuilder{signerName: client,
			cn: "hello-world", org: []string{"some-org"}, usages: u(certificatesv1.UsageServerAuth, certificatesv1.UsageClientAuth, certificatesv1.UsageDigitalSignature,
				certificatesv1.UsageKeyEncipherment), approved: true}, verify: failed},
		{name: "should sign if signerName is kubernetes.io/kube-apiserver-client-kubelet", b: csrBuilder{signerName: kubelet, cn: "system:node:hello-world",
			org: []string{"system:nodes"}, usages: u(certificatesv1.UsageClientAuth, certificatesv1.UsageDigitalSignature, certificatesv1.UsageKeyEncipherment), approved: true}, verify: issued},
		{name: "should sign without usage key encipherment if signerName is kubernetes.io/kube-apiserver-client-kubelet", b: csrBuilder{signerName: kubelet,
			cn: "system:node:hello-world", org: []string{"system:nodes"}, usages: u(certificatesv1.UsageClientAuth, certificatesv1.UsageDigitalSignature), approved: true}, verify: issued},
		{name: "should not sign kubernetes.io/legacy-unknown", b: csrBuilder{signerName: "kubernetes.io/legacy-unknown", approved: true}, constructionErr: true},
		{name: "should sign if signerName is kubernetes.io/kubelet-serving", b: csrBuilder{signerName: serving, cn: "system:node:testnode", org: []string{"system:nodes"},
			usages: u(certificatesv1.UsageServerAuth, certificatesv1.UsageDigitalSignature, certificatesv1.UsageKeyEncipherment), dnsNames: []string{"example.com"}, approved: true}, verify: issued},
		{name: "should sign without usage key encipherment if signerName is kubernetes.io/kubelet-serving", b: csrBuilder{signerName: serving, cn: "system:node:testnode",
			org: []string{"system:nodes"}, usages: u(certificatesv1.UsageServerAuth, certificatesv1.UsageDigitalSignature), dnsNames: []string{"example.com"}, approved: true}, verify: issued},
		{name: "should do nothing if failed", b: csrBuilder{signerName: serving, cn: "system:node:testnode", org: []string{"system:nodes"},
			usages: u(certificatesv1.UsageServerAuth, certificatesv1.UsageDigitalSignature, certificatesv1.UsageKeyEncipherment), dnsNames: []string{"example.com"},
			approved: true, failed: true}, verify: nothing},
		{name: "should do nothing if an unrecognised signerName is used", b: csrBuilder{signerName: "kubernetes.io/not-recognised", approved: true}, constructionErr: true},
		{name: "should do nothing if not approved", b: csrBuilder{signerName: serving}, verify: nothing},
		{name: "should do nothing if signerName does not start with kubernetes.io", b: csrBuilder{signerName: "example.com/sample-name", approved: true}, constructionErr: true},
		// Not upstream's: the kubelet rules, each refused with Failed.
		{name: "kubelet client certificate of another group", b: csrBuilder{signerName: kubelet, cn: "system:node:a", org: []string{"system:masters"},
			usages: u(certificatesv1.UsageClientAuth, certificatesv1.UsageDigitalSignature), approved: true}, verify: failed},
		{name: "kubelet client certificate with an IP", b: csrBuilder{signerName: kubelet, cn: "system:node:a", org: []string{"system:nodes"}, ips: []net.IP{net.IPv4(10, 0, 0, 1)},
			usages: u(certificatesv1.UsageClientAuth, certificatesv1.UsageDigitalSignature), approved: true}, verify: failed},
		{name: "kubelet serving certificate without a SAN", b: csrBuilder{signerName: serving, cn: "system:node:a", org: []string{"system:nodes"},
			usages: u(certificatesv1.UsageServerAuth, certificatesv1.UsageDigitalSignature), approved: true}, verify: failed},
		{name: "kubelet serving certificate for client auth", b: csrBuilder{signerName: serving, cn: "system:node:a", org: []string{"system:nodes"}, dnsNames: []string{"a"},
			usages: u(certificatesv1.UsageClientAuth, certificatesv1.UsageDigitalSignature), approved: true}, verify: failed},
		{name: "another signer's request", b: csrBuilder{signerName: client, cn: "x", usages: u(certificatesv1.UsageClientAuth), approved: true}, verify: nothing},
	}
	ca := newTestCA(t, time.Now())
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeCSRs{}
			signerName := tt.b.signerName
			if tt.name == "another signer's request" {
				signerName = serving
			}
			s, err := newSigner(signerName, ca, f, time.Hour)
			switch {
			case tt.constructionErr && err == nil:
				t.Fatal("built a signer")
			case tt.constructionErr:
				return
			case err != nil:
				t.Fatal(err)
			}
			if err := s.handle(t.Context(), makeTestCSR(t, tt.b)); err != nil {
				t.Errorf("handle: %v", err)
			}
			tt.verify(t, f)
		})
	}
}

// Test_signer_duration in signer_test.go.
func TestSignerDuration(t *testing.T) {
	seconds := func(d time.Duration) *int32 { s := int32(d / time.Second); return &s }
	tests := []struct {
		name      string
		requested *int32
		want      time.Duration
	}{
		{"can request shorter duration than TTL", seconds(30 * time.Minute), 30 * time.Minute},
		{"cannot request longer duration than TTL", seconds(3 * time.Hour), time.Hour},
		{"cannot request negative duration", seconds(-time.Minute), 10 * time.Minute},
		{"cannot request duration less than 10 mins", seconds(10*time.Minute - time.Second), 10 * time.Minute},
		{"can request duration of exactly 10 mins", seconds(10 * time.Minute), 10 * time.Minute},
		{"can request duration equal to the default", seconds(time.Hour), time.Hour},
		{"can choose not to request a duration to get the default", nil, time.Hour},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := (&signer{certTTL: time.Hour}).duration(tt.requested); got != tt.want {
				t.Errorf("duration() = %v, want %v", got, tt.want)
			}
		})
	}
	if DefaultDuration != 8760*time.Hour {
		t.Errorf("default duration %v, kube-controller-manager's --cluster-signing-duration is 8760h", DefaultDuration)
	}
}
