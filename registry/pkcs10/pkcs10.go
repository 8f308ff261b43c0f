// Package pkcs10 reads the request of a CertificateSigningRequest, for the
// registry's validation, the CSR controllers and NodeRestriction, none of
// which needs the rest of the other.
package pkcs10

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
)

// Parse decodes the PEM-encoded PKCS#10 request of a
// CertificateSigningRequest (upstream's certificates.ParseCSR).
func Parse(pemBytes []byte) (*x509.CertificateRequest, error) {
	block, _ := pem.Decode(pemBytes)
	if block == nil || block.Type != "CERTIFICATE REQUEST" {
		return nil, errors.New("PEM block type must be CERTIFICATE REQUEST")
	}
	return x509.ParseCertificateRequest(block.Bytes)
}
