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
	t := p.t
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	must(t, err)
	csr, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject: pkix.Name{CommonName: "system:node:" + node, Organization: []string{"system:nodes"}}}, key)
	must(t, err)
	name := "kubelet-" + node
	manifest := fmt.Sprintf(`apiVersion: certificates.k8s.io/v1
kind: CertificateSigningRequest
metadata: {name: %s}
spec:
  request: %s
  signerName: kubernetes.io/kube-apiserver-client-kubelet
  usages: [digital signature, client auth]
`, name, base64.StdEncoding.EncodeToString(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: csr})))
	dir := t.TempDir()
	must(t, os.WriteFile(filepath.Join(dir, "csr.yaml"), []byte(manifest), 0o600))
	p.mustKubectl("create", "-f", filepath.Join(dir, "csr.yaml"))
	p.mustKubectl("certificate", "approve", name)
	var issued string
	if !eventually(30*time.Second, func() bool {
		issued, _ = p.kubectl("get", "csr", name, "-o", "jsonpath={.status.certificate}")
		return strings.TrimSpace(issued) != ""
	}) {
		t.Fatalf("the CSR of %s was not issued in 30 s", node)
	}
	certPEM, err := base64.StdEncoding.DecodeString(strings.TrimSpace(issued))
	must(t, err)
	der, err := x509.MarshalECPrivateKey(key)
	must(t, err)
	kc, err := clientcmd.LoadFromFile(p.kubeconfig)
	must(t, err)
	for _, a := range kc.AuthInfos {
		a.ClientCertificateData, a.ClientKeyData = certPEM, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der})
		a.Token = ""
	}
	path := filepath.Join(dir, node+".kubeconfig")
	must(t, clientcmd.WriteToFile(*kc, path))
	return path
}
