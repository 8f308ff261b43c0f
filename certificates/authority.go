package certificates

import (
	"crypto"
	"crypto/rand"
	"crypto/x509"
	"fmt"
	"math/big"
	"slices"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
)

// authority and permissivePolicy are kube-controller-manager's
// pkg/controller/certificates/authority: a CA that signs a PKCS#10
// request with the usages and lifetime of a policy.
type authority struct {
	cert *x509.Certificate
	key  crypto.Signer
	// current, when set, is the CA instead of cert and key, and the chain
	// that follows what it issues.
	current func() (*x509.Certificate, crypto.Signer, []byte)
}

// ca is the CA to sign with, and the chain (PEM) to follow its certificates.
func (ca *authority) ca() (*x509.Certificate, crypto.Signer, []byte) {
	if ca.current != nil {
		return ca.current()
	}
	return ca.cert, ca.key, nil
}

var serialNumberLimit = new(big.Int).Lsh(big.NewInt(1), 128)

// sign issues a certificate for the DER request crDER: its subject and
// SANs, the policy's usages and lifetime, no other extension. chain (PEM)
// is to follow it.
func (ca *authority) sign(crDER []byte, policy permissivePolicy) (der, chain []byte, err error) {
	cr, err := x509.ParseCertificateRequest(crDER)
	if err != nil {
		return nil, nil, fmt.Errorf("unable to parse certificate request: %v", err)
	}
	if err := cr.CheckSignature(); err != nil {
		return nil, nil, fmt.Errorf("unable to verify certificate request signature: %v", err)
	}
	serial, err := rand.Int(rand.Reader, serialNumberLimit)
	if err != nil {
		return nil, nil, fmt.Errorf("unable to generate a serial number for %s: %v", cr.Subject.CommonName, err)
	}
	caCert, caKey, chain := ca.ca()
	tmpl := &x509.Certificate{
		SerialNumber:       serial,
		Subject:            cr.Subject,
		DNSNames:           cr.DNSNames,
		IPAddresses:        cr.IPAddresses,
		EmailAddresses:     cr.EmailAddresses,
		URIs:               cr.URIs,
		PublicKeyAlgorithm: cr.PublicKeyAlgorithm,
		PublicKey:          cr.PublicKey,
	}
	if err := policy.apply(tmpl, caCert.NotAfter); err != nil {
		return nil, nil, err
	}
	der, err = x509.CreateCertificate(rand.Reader, tmpl, caCert, cr.PublicKey, caKey)
	if err != nil {
		return nil, nil, fmt.Errorf("failed to sign certificate: %v", err)
	}
	return der, chain, nil
}

// permissivePolicy is upstream's PermissiveSigningPolicy: the request's
// SANs, the policy's usages, no CA, NotBefore backdated by Backdate and
// NotAfter TTL later (less Backdate for certificates of at least Short),
// never past the signer's own NotAfter.
type permissivePolicy struct {
	TTL      time.Duration
	Usages   []certificatesv1.KeyUsage
	Backdate time.Duration
	Short    time.Duration
	// Now defaults to time.Now.
	Now func() time.Time
}

func (p permissivePolicy) apply(tmpl *x509.Certificate, signerNotAfter time.Time) error {
	now := time.Now()
	if p.Now != nil {
		now = p.Now()
	}
	usage, extUsages, err := keyUsagesFromStrings(p.Usages)
	if err != nil {
		return err
	}
	tmpl.KeyUsage, tmpl.ExtKeyUsage = usage, extUsages
	tmpl.ExtraExtensions, tmpl.Extensions = nil, nil
	tmpl.BasicConstraintsValid, tmpl.IsCA = true, false
	tmpl.NotBefore = now.Add(-p.Backdate)
	if p.TTL < p.Short {
		tmpl.NotAfter = now.Add(p.TTL)
	} else {
		tmpl.NotAfter = now.Add(p.TTL - p.Backdate)
	}
	if !tmpl.NotAfter.Before(signerNotAfter) {
		tmpl.NotAfter = signerNotAfter
	}
	if !tmpl.NotBefore.Before(signerNotAfter) {
		return fmt.Errorf("the signer has expired: NotAfter=%v", signerNotAfter)
	}
	if !now.Before(signerNotAfter) {
		return fmt.Errorf("refusing to sign a certificate that expired in the past: NotAfter=%v", signerNotAfter)
	}
	return nil
}

var keyUsages = map[certificatesv1.KeyUsage]x509.KeyUsage{
	certificatesv1.UsageSigning:           x509.KeyUsageDigitalSignature,
	certificatesv1.UsageDigitalSignature:  x509.KeyUsageDigitalSignature,
	certificatesv1.UsageContentCommitment: x509.KeyUsageContentCommitment,
	certificatesv1.UsageKeyEncipherment:   x509.KeyUsageKeyEncipherment,
	certificatesv1.UsageKeyAgreement:      x509.KeyUsageKeyAgreement,
	certificatesv1.UsageDataEncipherment:  x509.KeyUsageDataEncipherment,
	certificatesv1.UsageCertSign:          x509.KeyUsageCertSign,
	certificatesv1.UsageCRLSign:           x509.KeyUsageCRLSign,
	certificatesv1.UsageEncipherOnly:      x509.KeyUsageEncipherOnly,
	certificatesv1.UsageDecipherOnly:      x509.KeyUsageDecipherOnly,
}

var extKeyUsages = map[certificatesv1.KeyUsage]x509.ExtKeyUsage{
	certificatesv1.UsageAny:             x509.ExtKeyUsageAny,
	certificatesv1.UsageServerAuth:      x509.ExtKeyUsageServerAuth,
	certificatesv1.UsageClientAuth:      x509.ExtKeyUsageClientAuth,
	certificatesv1.UsageCodeSigning:     x509.ExtKeyUsageCodeSigning,
	certificatesv1.UsageEmailProtection: x509.ExtKeyUsageEmailProtection,
	certificatesv1.UsageSMIME:           x509.ExtKeyUsageEmailProtection,
	certificatesv1.UsageIPsecEndSystem:  x509.ExtKeyUsageIPSECEndSystem,
	certificatesv1.UsageIPsecTunnel:     x509.ExtKeyUsageIPSECTunnel,
	certificatesv1.UsageIPsecUser:       x509.ExtKeyUsageIPSECUser,
	certificatesv1.UsageTimestamping:    x509.ExtKeyUsageTimeStamping,
	certificatesv1.UsageOCSPSigning:     x509.ExtKeyUsageOCSPSigning,
	certificatesv1.UsageMicrosoftSGC:    x509.ExtKeyUsageMicrosoftServerGatedCrypto,
	certificatesv1.UsageNetscapeSGC:     x509.ExtKeyUsageNetscapeServerGatedCrypto,
}

// keyUsagesFromStrings maps a CSR's usages to X.509 key usages and the
// sorted, distinct extended key usages.
func keyUsagesFromStrings(usages []certificatesv1.KeyUsage) (x509.KeyUsage, []x509.ExtKeyUsage, error) {
	var ku x509.KeyUsage
	var ext []x509.ExtKeyUsage
	var unrecognized []certificatesv1.KeyUsage
	for _, u := range usages {
		if v, ok := keyUsages[u]; ok {
			ku |= v
		} else if v, ok := extKeyUsages[u]; ok {
			if !slices.Contains(ext, v) {
				ext = append(ext, v)
			}
		} else {
			unrecognized = append(unrecognized, u)
		}
	}
	if len(unrecognized) > 0 {
		return 0, nil, fmt.Errorf("unrecognized usage values: %q", unrecognized)
	}
	slices.Sort(ext)
	return ku, ext, nil
}
