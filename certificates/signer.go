package certificates

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	certificatesv1client "k8s.io/client-go/kubernetes/typed/certificates/v1"

	"github.com/kubestore/kubestore/config"
	"github.com/kubestore/kubestore/registry/pkcs10"
)

// DefaultDuration is kube-controller-manager's --cluster-signing-duration
// default: a year. A CSR's spec.expirationSeconds may ask for less.
const DefaultDuration = 365 * 24 * time.Hour

// Signers are the signer names the signing controller issues for with
// kubestore's CA. kubernetes.io/legacy-unknown is not one: it has no
// restriction on usages or subject, and no certificates.k8s.io/v1 request
// may name it.
var Signers = []string{
	certificatesv1.KubeAPIServerClientSignerName,
	certificatesv1.KubeAPIServerClientKubeletSignerName,
	certificatesv1.KubeletServingSignerName,
}

// isRequestForSignerFunc reports whether a request is one the signer
// issues for; an error fails it.
type isRequestForSignerFunc func(req *x509.CertificateRequest, usages []certificatesv1.KeyUsage, signerName string) (bool, error)

// signer is one signer of kube-controller-manager's csrsigning controller
// (pkg/controller/certificates/signer): it issues approved requests of its
// signer name with the CA, or marks them Failed when they break its rules.
type signer struct {
	ca     *authority
	client certificatesv1client.CertificateSigningRequestInterface
	// certTTL is the longest lifetime; a request may ask for less.
	certTTL              time.Duration
	signerName           string
	isRequestForSignerFn isRequestForSignerFunc
}

func newSigner(signerName string, ca *authority, client certificatesv1client.CertificateSigningRequestInterface, certTTL time.Duration) (*signer, error) {
	fn, err := verificationFor(signerName)
	if err != nil {
		return nil, err
	}
	return &signer{ca: ca, client: client, certTTL: certTTL, signerName: signerName, isRequestForSignerFn: fn}, nil
}

// handle issues csr if it is approved, not failed and of this signer. The
// status update names the resourceVersion read: when another signer (a
// kubestore on the same etcd) issued first, it conflicts, and the request
// is read again, now with its certificate.
func (s *signer) handle(ctx context.Context, csr *certificatesv1.CertificateSigningRequest) error {
	if !isApproved(csr) || hasTrueCondition(csr, certificatesv1.CertificateFailed) {
		return nil
	}
	if csr.Spec.SignerName != s.signerName {
		return nil
	}
	x509cr, err := pkcs10.Parse(csr.Spec.Request)
	if err != nil {
		return fmt.Errorf("unable to parse csr %q: %v", csr.Name, err)
	}
	recognized, err := s.isRequestForSignerFn(x509cr, csr.Spec.Usages, csr.Spec.SignerName)
	if err == nil && recognized && x509cr.Subject.CommonName == config.SiteMemberCommonName {
		// The subject that opens a site's etcd peer port: members issue
		// it to themselves, nobody gets it through a request.
		err = fmt.Errorf("subject common name %q is reserved for the members of a site", config.SiteMemberCommonName)
	}
	if err != nil {
		csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
			Type:           certificatesv1.CertificateFailed,
			Status:         corev1.ConditionTrue,
			Reason:         "SignerValidationFailure",
			Message:        err.Error(),
			LastUpdateTime: metav1.Now(),
		})
		if _, err := s.client.UpdateStatus(ctx, csr, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("error adding failure condition for csr: %w", err)
		}
		return nil
	}
	if !recognized {
		return nil
	}
	cert, err := s.sign(x509cr, csr.Spec.Usages, csr.Spec.ExpirationSeconds, nil)
	if err != nil {
		return fmt.Errorf("error auto signing csr: %v", err)
	}
	csr.Status.Certificate = cert
	if _, err := s.client.UpdateStatus(ctx, csr, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("error updating signature for csr: %w", err)
	}
	return nil
}

// sign issues the PEM certificate of x509cr, backdated five minutes.
func (s *signer) sign(x509cr *x509.CertificateRequest, usages []certificatesv1.KeyUsage, expirationSeconds *int32, now func() time.Time) ([]byte, error) {
	der, chain, err := s.ca.sign(x509cr.Raw, permissivePolicy{
		TTL:    s.duration(expirationSeconds),
		Usages: usages,
		// Less than the shortest lifetime a request may ask for.
		Backdate: 5 * time.Minute,
		// Five minutes of backdating are about 1% of eight hours.
		Short: 8 * time.Hour,
		Now:   now,
	})
	if err != nil {
		return nil, err
	}
	return append(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), chain...), nil
}

// duration is the lifetime of a certificate: what the request asks for,
// at least ten minutes and at most certTTL.
func (s *signer) duration(expirationSeconds *int32) time.Duration {
	if expirationSeconds == nil {
		return s.certTTL
	}
	const min = 10 * time.Minute
	switch requested := time.Duration(*expirationSeconds) * time.Second; {
	case requested > s.certTTL:
		return s.certTTL
	case requested < min:
		return min
	default:
		return requested
	}
}

// verificationFor is upstream's getCSRVerificationFuncForSignerName,
// without the legacy-unknown signer.
func verificationFor(signerName string) (isRequestForSignerFunc, error) {
	switch signerName {
	case certificatesv1.KubeletServingSignerName:
		return isKubeletServing, nil
	case certificatesv1.KubeAPIServerClientKubeletSignerName:
		return isKubeletClient, nil
	case certificatesv1.KubeAPIServerClientSignerName:
		return isKubeAPIServerClient, nil
	}
	return nil, fmt.Errorf("unrecognized signerName: %q", signerName)
}

func isKubeletServing(req *x509.CertificateRequest, usages []certificatesv1.KeyUsage, signerName string) (bool, error) {
	if signerName != certificatesv1.KubeletServingSignerName {
		return false, nil
	}
	return true, validateKubeletServingCSR(req, usageSet(usages))
}

func isKubeletClient(req *x509.CertificateRequest, usages []certificatesv1.KeyUsage, signerName string) (bool, error) {
	if signerName != certificatesv1.KubeAPIServerClientKubeletSignerName {
		return false, nil
	}
	return true, validateKubeletClientCSR(req, usageSet(usages))
}

func isKubeAPIServerClient(_ *x509.CertificateRequest, usages []certificatesv1.KeyUsage, signerName string) (bool, error) {
	if signerName != certificatesv1.KubeAPIServerClientSignerName {
		return false, nil
	}
	return true, validAPIServerClientUsages(usages)
}

// validAPIServerClientUsages: client auth, and at most digital signature
// and key encipherment besides.
func validAPIServerClientUsages(usages []certificatesv1.KeyUsage) error {
	hasClientAuth := false
	for _, u := range usages {
		switch u {
		case certificatesv1.UsageDigitalSignature, certificatesv1.UsageKeyEncipherment:
		case certificatesv1.UsageClientAuth:
			hasClientAuth = true
		default:
			return fmt.Errorf("invalid usage for client certificate: %s", u)
		}
	}
	if !hasClientAuth {
		return fmt.Errorf("missing required usage for client certificate: %s", certificatesv1.UsageClientAuth)
	}
	return nil
}

func usageSet(usages []certificatesv1.KeyUsage) sets.Set[string] {
	s := sets.New[string]()
	for _, u := range usages {
		s.Insert(string(u))
	}
	return s
}

// The rules of kubelet certificates, upstream's pkg/apis/certificates
// helpers: the subject is system:node:<name> in exactly system:nodes.
var (
	errOrganizationNotSystemNodes = errors.New("subject organization is not system:nodes")
	errCommonNameNotSystemNode    = errors.New("subject common name does not begin with system:node:")
	errDNSOrIPSANRequired         = errors.New("DNS or IP subjectAltName is required")
	errDNSSANNotAllowed           = errors.New("DNS subjectAltNames are not allowed")
	errEmailSANNotAllowed         = errors.New("Email subjectAltNames are not allowed")
	errIPSANNotAllowed            = errors.New("IP subjectAltNames are not allowed")
	errURISANNotAllowed           = errors.New("URI subjectAltNames are not allowed")

	kubeletServingUsages      = sets.New(string(certificatesv1.UsageDigitalSignature), string(certificatesv1.UsageKeyEncipherment), string(certificatesv1.UsageServerAuth))
	kubeletServingUsagesNoRSA = sets.New(string(certificatesv1.UsageDigitalSignature), string(certificatesv1.UsageServerAuth))
	kubeletClientUsages       = sets.New(string(certificatesv1.UsageDigitalSignature), string(certificatesv1.UsageKeyEncipherment), string(certificatesv1.UsageClientAuth))
	kubeletClientUsagesNoRSA  = sets.New(string(certificatesv1.UsageDigitalSignature), string(certificatesv1.UsageClientAuth))
)

const nodeUserPrefix = "system:node:"

// validateKubeletServingCSR: a node's serving certificate, with DNS or IP
// SANs only, for server auth.
func validateKubeletServingCSR(req *x509.CertificateRequest, usages sets.Set[string]) error {
	switch {
	case !slices.Equal(req.Subject.Organization, []string{"system:nodes"}):
		return errOrganizationNotSystemNodes
	case len(req.DNSNames) == 0 && len(req.IPAddresses) == 0:
		return errDNSOrIPSANRequired
	case len(req.EmailAddresses) > 0:
		return errEmailSANNotAllowed
	case len(req.URIs) > 0:
		return errURISANNotAllowed
	case !kubeletServingUsages.Equal(usages) && !kubeletServingUsagesNoRSA.Equal(usages):
		return fmt.Errorf("usages did not match %v", sets.List(kubeletServingUsages))
	case !strings.HasPrefix(req.Subject.CommonName, nodeUserPrefix):
		return errCommonNameNotSystemNode
	}
	return nil
}

// validateKubeletClientCSR: a node's client certificate, without SANs,
// for client auth.
func validateKubeletClientCSR(req *x509.CertificateRequest, usages sets.Set[string]) error {
	switch {
	case !slices.Equal(req.Subject.Organization, []string{"system:nodes"}):
		return errOrganizationNotSystemNodes
	case len(req.DNSNames) > 0:
		return errDNSSANNotAllowed
	case len(req.EmailAddresses) > 0:
		return errEmailSANNotAllowed
	case len(req.IPAddresses) > 0:
		return errIPSANNotAllowed
	case len(req.URIs) > 0:
		return errURISANNotAllowed
	case !strings.HasPrefix(req.Subject.CommonName, nodeUserPrefix):
		return errCommonNameNotSystemNode
	case !kubeletClientUsages.Equal(usages) && !kubeletClientUsagesNoRSA.Equal(usages):
		return fmt.Errorf("usages did not match %v", sets.List(kubeletClientUsages))
	}
	return nil
}

// isApproved: Approved and not Denied (upstream's
// IsCertificateRequestApproved).
func isApproved(csr *certificatesv1.CertificateSigningRequest) bool {
	approved, denied := approvalConditions(csr)
	return approved && !denied
}

func approvalConditions(csr *certificatesv1.CertificateSigningRequest) (approved, denied bool) {
	for _, c := range csr.Status.Conditions {
		approved = approved || c.Type == certificatesv1.CertificateApproved
		denied = denied || c.Type == certificatesv1.CertificateDenied
	}
	return approved, denied
}

// hasTrueCondition: a condition of type t whose status is True or empty.
func hasTrueCondition(csr *certificatesv1.CertificateSigningRequest, t certificatesv1.RequestConditionType) bool {
	for _, c := range csr.Status.Conditions {
		if c.Type == t && (c.Status == "" || c.Status == corev1.ConditionTrue) {
			return true
		}
	}
	return false
}
