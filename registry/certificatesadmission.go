package registry

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	certificatesv1 "k8s.io/api/certificates/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"

	"github.com/kubestore/kubestore/registry/pkcs10"
)

// certificatesAdmission is what kube-apiserver checks on the certificates
// group besides the strategies, asking the server's authorizer:
//
//   - CertificateApproval: approving or denying a CSR
//     (certificatesigningrequests/approval) needs "approve" on the signer;
//   - CertificateSigning: changing a CSR's certificate or conditions
//     (certificatesigningrequests/status) needs "sign" on the signer;
//   - CertificateSubjectRestriction: no CSR for
//     kubernetes.io/kube-apiserver-client may ask for group
//     system:masters;
//   - a PodCertificateRequest's status changes only by a user who may
//     "sign" for its signer (upstream's status strategy).
//
// "approve" and "sign" are verbs on the resource signers.certificates.k8s.io
// named by the signer, or by its domain and "/*" (kubernetes.io/*). See
// k8s.io/kubernetes plugin/pkg/admission/certificates and
// pkg/certauthorization. NodeRestriction of PodCertificateRequests is not
// here: it is access/noderestriction's.
type certificatesAdmission struct {
	*admission.Handler
	az authorizer.UnconditionalAuthorizer
}

// NewCertificatesAdmission is the certificates group's admission on the
// authorizer az.
func NewCertificatesAdmission(az authorizer.UnconditionalAuthorizer) admission.ValidationInterface {
	return &certificatesAdmission{Handler: admission.NewHandler(admission.Create, admission.Update), az: az}
}

var (
	csrResource = certificatesv1.Resource("certificatesigningrequests")
	pcrResource = certificatesv1.Resource("podcertificaterequests")
)

func (c *certificatesAdmission) Validate(ctx context.Context, a admission.Attributes, _ admission.ObjectInterfaces) error {
	gr, sub, op := a.GetResource().GroupResource(), a.GetSubresource(), a.GetOperation()
	switch {
	case gr == csrResource && sub == "" && op == admission.Create:
		return restrictCSRSubject(a)
	case gr == csrResource && sub == "approval" && op == admission.Update:
		old, ok := a.GetOldObject().(*certificatesv1.CertificateSigningRequest)
		if !ok {
			return admission.NewForbidden(a, fmt.Errorf("expected type CertificateSigningRequest, got: %T", a.GetOldObject()))
		}
		// The stored signer: an update may not change it.
		if !authorizedForSigner(ctx, c.az, a.GetUserInfo(), "approve", old.Spec.SignerName) {
			return admission.NewForbidden(a, fmt.Errorf("user not permitted to approve requests with signerName %q", old.Spec.SignerName))
		}
	case gr == csrResource && sub == "status" && op == admission.Update:
		old, ok := a.GetOldObject().(*certificatesv1.CertificateSigningRequest)
		if !ok {
			return admission.NewForbidden(a, fmt.Errorf("expected type CertificateSigningRequest, got: %T", a.GetOldObject()))
		}
		csr, ok := a.GetObject().(*certificatesv1.CertificateSigningRequest)
		if !ok {
			return admission.NewForbidden(a, fmt.Errorf("expected type CertificateSigningRequest, got: %T", a.GetObject()))
		}
		if slices.Equal(old.Status.Certificate, csr.Status.Certificate) && apiequality.Semantic.DeepEqual(old.Status.Conditions, csr.Status.Conditions) {
			return nil
		}
		if !authorizedForSigner(ctx, c.az, a.GetUserInfo(), "sign", old.Spec.SignerName) {
			return admission.NewForbidden(a, fmt.Errorf("user not permitted to sign requests with signerName %q", old.Spec.SignerName))
		}
	case gr == pcrResource && sub == "status" && op == admission.Update:
		old, okOld := a.GetOldObject().(*certificatesv1.PodCertificateRequest)
		req, okNew := a.GetObject().(*certificatesv1.PodCertificateRequest)
		if !okOld || !okNew {
			return admission.NewForbidden(a, fmt.Errorf("expected type PodCertificateRequest, got: %T", a.GetObject()))
		}
		if apiequality.Semantic.DeepEqual(old.Status, req.Status) {
			return nil
		}
		u := a.GetUserInfo()
		if u == nil {
			return apierrors.NewInternalError(errors.New("cannot determine calling user to perform \"sign\" check"))
		}
		if !authorizedForSigner(ctx, c.az, u, "sign", old.Spec.SignerName) {
			return apierrors.NewInvalid(certificatesv1.Kind("PodCertificateRequest"), a.GetName(), field.ErrorList{
				field.Forbidden(field.NewPath("spec", "signerName"), fmt.Sprintf("User %q is not permitted to \"sign\" for signer %q", u.GetName(), old.Spec.SignerName)),
			})
		}
	}
	return nil
}

// restrictCSRSubject is CertificateSubjectRestriction.
func restrictCSRSubject(a admission.Attributes) error {
	csr, ok := a.GetObject().(*certificatesv1.CertificateSigningRequest)
	if !ok {
		return admission.NewForbidden(a, fmt.Errorf("expected type CertificateSigningRequest, got: %T", a.GetObject()))
	}
	if csr.Spec.SignerName != certificatesv1.KubeAPIServerClientSignerName {
		return nil
	}
	req, err := pkcs10.Parse(csr.Spec.Request)
	if err != nil {
		return admission.NewForbidden(a, fmt.Errorf("failed to parse CSR: %v", err))
	}
	if slices.Contains(req.Subject.Organization, user.SystemPrivilegedGroup) {
		return admission.NewForbidden(a, fmt.Errorf("use of %s signer with system:masters group is not allowed", certificatesv1.KubeAPIServerClientSignerName))
	}
	return nil
}

// authorizedForSigner is upstream's IsAuthorizedForSignerName: verb on the
// signer, or on every signer of its domain.
func authorizedForSigner(ctx context.Context, az authorizer.UnconditionalAuthorizer, u user.Info, verb, signerName string) bool {
	domain, _, _ := strings.Cut(signerName, "/")
	for _, name := range []string{signerName, domain + "/*"} {
		d, _, err := az.Authorize(ctx, authorizer.AttributesRecord{User: u, Verb: verb, Name: name,
			APIGroup: certificatesv1.GroupName, APIVersion: "*", Resource: "signers", ResourceRequest: true})
		if err == nil && d == authorizer.DecisionAllow {
			return true
		}
	}
	return false
}
