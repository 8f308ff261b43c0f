// Package kubelets connects the API to the node's kubelets, as
// kube-apiserver does: pods/log, exec, attach, portforward, pods/proxy
// and nodes/proxy reach the kubelet at the address and port its Node
// reports, with kubestore's kubelet client certificate, verifying the
// kubelet's serving certificate against kubestore's CA.
package kubelets

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"
)

// Credentials are what kubestore's PKI gives a connection to a kubelet:
// its client certificate and the CA bundle the kubelet's serving
// certificate must chain to. Both are asked for each connection, so a CA
// rotation or a renewal applies without a restart.
type Credentials interface {
	KubeletClient() (certPEM, keyPEM []byte, err error)
	CAPEM() []byte
}

// DialContext dials a kubelet's address ("host:port").
type DialContext func(ctx context.Context, network, address string) (net.Conn, error)

// transports returns the transport to kubelets and the one that skips the
// check of the kubelet's serving certificate (pods/log's
// insecureSkipTLSVerifyBackend, as kube-apiserver's), both presenting the
// client certificate.
func transports(creds Credentials, dial DialContext) (verified, insecure *http.Transport) {
	clientCert := func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
		certPEM, keyPEM, err := creds.KubeletClient()
		if err != nil {
			return nil, fmt.Errorf("kubestore's kubelet client certificate: %w", err)
		}
		cert, err := tls.X509KeyPair(certPEM, keyPEM)
		return &cert, err
	}
	make := func(verify bool) *http.Transport {
		cfg := &tls.Config{
			MinVersion:           tls.VersionTLS12,
			GetClientCertificate: clientCert,
			// The check is VerifyConnection's, against the CA
			// bundle of the moment.
			InsecureSkipVerify: true,
		}
		if verify {
			cfg.VerifyConnection = func(cs tls.ConnectionState) error { return verifyKubelet(cs, creds.CAPEM()) }
		}
		return &http.Transport{
			DialContext:         dial,
			TLSClientConfig:     cfg,
			TLSHandshakeTimeout: 10 * time.Second,
			IdleConnTimeout:     90 * time.Second,
			MaxIdleConnsPerHost: 2,
		}
	}
	return make(true), make(false)
}

// ErrUntrustedKubelet is a kubelet whose serving certificate kubestore's
// CA did not sign.
var ErrUntrustedKubelet = errors.New("the kubelet's serving certificate is not signed by kubestore's CA")

// verifyKubelet checks the kubelet's serving certificate against the CA
// bundle and the address dialled, as crypto/tls would with RootCAs and
// ServerName. A kubelet without serverTLSBootstrap serves a certificate
// it signed itself: the error says so, and what to set.
func verifyKubelet(cs tls.ConnectionState, caPEM []byte) error {
	if len(cs.PeerCertificates) == 0 {
		return fmt.Errorf("%w: it presented none", ErrUntrustedKubelet)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) {
		return errors.New("kubestore's CA bundle holds no certificate")
	}
	leaf := cs.PeerCertificates[0]
	opts := x509.VerifyOptions{Roots: roots, DNSName: cs.ServerName, Intermediates: x509.NewCertPool()}
	for _, c := range cs.PeerCertificates[1:] {
		opts.Intermediates.AddCert(c)
	}
	_, err := leaf.Verify(opts)
	var unknown x509.UnknownAuthorityError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &unknown):
		return fmt.Errorf("%w (subject %q, issuer %q): a kubelet signs its own unless its configuration sets serverTLSBootstrap: true and its kubelet-serving CertificateSigningRequest is approved (kubectl certificate approve): %v",
			ErrUntrustedKubelet, leaf.Subject.CommonName, leaf.Issuer.CommonName, err)
	}
	return fmt.Errorf("verifying the kubelet's serving certificate: %w", err)
}
