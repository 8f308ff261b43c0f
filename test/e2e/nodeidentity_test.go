package e2e

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/client-go/tools/clientcmd"
)

// nodeKubeconfig is a kubeconfig for p's API as node's kubelet
// (system:node:<node> in system:nodes): a client certificate asked for
// with a CSR to kubernetes.io/kube-apiserver-client-kubelet, approved and
// issued through kubectl, as an operator provisions a kubelet by hand.
func (p *proc) nodeKubeconfig(node string) string {
	p.t.Helper()
	path, err := p.issueNodeKubeconfig(node, p.t.TempDir())
	must(p.t, err)
	return path
}

// issueNodeKubeconfig is nodeKubeconfig, written in dir, for a caller
// that is not the test's goroutine: it returns its failure.
func (p *proc) issueNodeKubeconfig(node, dir string) (string, error) {
	return p.issueClientKubeconfig("kubelet-"+node, pkix.Name{CommonName: "system:node:" + node, Organization: []string{"system:nodes"}},
		"kubernetes.io/kube-apiserver-client-kubelet", dir)
}

// issueClientKubeconfig is a kubeconfig for p's API as subject, written in
// dir: a client certificate asked for with a CSR named after prefix to
// signer, approved and issued through kubectl.
func (p *proc) issueClientKubeconfig(prefix string, subject pkix.Name, signer, dir string) (string, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", err
	}
	csr, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: subject}, key)
	if err != nil {
		return "", err
	}
	name := fmt.Sprintf("%s-%d", prefix, time.Now().UnixNano())
	manifest := fmt.Sprintf(`apiVersion: certificates.k8s.io/v1
kind: CertificateSigningRequest
metadata: {name: %s}
spec:
  request: %s
  signerName: %s
  usages: [digital signature, client auth]
`, name, base64.StdEncoding.EncodeToString(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: csr})), signer)
	if err := os.WriteFile(filepath.Join(dir, name+".yaml"), []byte(manifest), 0o600); err != nil {
		return "", err
	}
	if out, err := p.kubectl("create", "-f", filepath.Join(dir, name+".yaml")); err != nil {
		return "", fmt.Errorf("kubectl create csr: %w: %s", err, out)
	}
	if out, err := p.kubectl("certificate", "approve", name); err != nil {
		return "", fmt.Errorf("kubectl certificate approve: %w: %s", err, out)
	}
	var issued string
	if !eventually(30*time.Second, func() bool {
		issued, _ = p.kubectl("get", "csr", name, "-o", "jsonpath={.status.certificate}")
		return strings.TrimSpace(issued) != ""
	}) {
		return "", fmt.Errorf("the CSR %s of %s was not issued in 30 s", name, subject.CommonName)
	}
	certPEM, err := base64.StdEncoding.DecodeString(strings.TrimSpace(issued))
	if err != nil {
		return "", err
	}
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return "", err
	}
	kc, err := clientcmd.LoadFromFile(p.kubeconfig)
	if err != nil {
		return "", err
	}
	for _, a := range kc.AuthInfos {
		a.ClientCertificateData, a.ClientKeyData = certPEM, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der})
		a.ClientCertificate, a.ClientKey = "", ""
		a.Token = ""
	}
	path := filepath.Join(dir, name+".kubeconfig")
	return path, clientcmd.WriteToFile(*kc, path)
}
