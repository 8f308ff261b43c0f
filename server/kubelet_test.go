package server_test

import (
	"crypto/x509/pkix"
	"fmt"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/keyutil"
	"k8s.io/client-go/util/retry"
)

// kubeletClient is a client of ts as node's kubelet on a certificate of
// its own (system:node:<node> in system:nodes), as an operator provisions
// a kubelet by hand: a CSR to kubernetes.io/kube-apiserver-client-kubelet,
// approved by the admin and issued by ts's signer. It talks protobuf, as
// the kubelet does (its --kube-api-content-type). The mirror's promises
// are the kubelet's: a test that writes as the admin proves them for the
// admin only.
func kubeletClient(t *testing.T, ts *testServer, node string) kubernetes.Interface {
	t.Helper()
	return kubernetes.NewForConfigOrDie(kubeletConfig(t, ts, node))
}

// kubeletConfig is the client configuration of kubeletClient: the node's
// client certificate from ts's signer.
func kubeletConfig(t *testing.T, ts *testServer, node string) *rest.Config {
	t.Helper()
	request, key := newRequest(t, pkix.Name{CommonName: "system:node:" + node, Organization: []string{"system:nodes"}})
	name := fmt.Sprintf("kubelet-%s-%d", node, time.Now().UnixNano())
	csrs := ts.client.CertificatesV1().CertificateSigningRequests()
	if _, err := csrs.Create(t.Context(), &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: certificatesv1.CertificateSigningRequestSpec{Request: request, SignerName: certificatesv1.KubeAPIServerClientKubeletSignerName,
			Usages: []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// As kubectl certificate approve: on the CSR as read, again on a
	// conflict (the approving controller writes it too).
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		csr, err := csrs.Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, c := range csr.Status.Conditions {
			if c.Type == certificatesv1.CertificateApproved {
				// The approving controller was first: the admin may ask
				// for any node's certificate.
				return nil
			}
		}
		csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
			Type: certificatesv1.CertificateApproved, Status: "True", Reason: "ByTheTest", Message: "the test provisions the kubelet"})
		_, err = csrs.UpdateApproval(t.Context(), name, csr, metav1.UpdateOptions{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	var cert []byte
	eventually(t, 30*time.Second, "the kubelet's certificate issued", func() (bool, error) {
		c, err := csrs.Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		cert = c.Status.Certificate
		return len(cert) > 0, fmt.Errorf("no certificate yet")
	})
	keyPEM, err := keyutil.MarshalPrivateKeyToPEM(key)
	if err != nil {
		t.Fatal(err)
	}
	cfg := rest.AnonymousClientConfig(ts.rest)
	cfg.CertData, cfg.KeyData = cert, keyPEM
	cfg.ContentType = runtime.ContentTypeProtobuf
	cfg.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	cfg.QPS, cfg.Burst = -1, -1
	return cfg
}
