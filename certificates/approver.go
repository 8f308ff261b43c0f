package certificates

import (
	"context"
	"crypto/x509"
	"fmt"

	authorizationv1 "k8s.io/api/authorization/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	authorizationv1client "k8s.io/client-go/kubernetes/typed/authorization/v1"
	certificatesv1client "k8s.io/client-go/kubernetes/typed/certificates/v1"

	"github.com/kubestore/kubestore/registry/pkcs10"
)

// csrRecognizer is a kind of request the approver approves for the users
// permission allows.
type csrRecognizer struct {
	recognize      func(csr *certificatesv1.CertificateSigningRequest, x509cr *x509.CertificateRequest) bool
	permission     authorizationv1.ResourceAttributes
	successMessage string
}

// sarApprover is kube-controller-manager's csrapproving controller
// (pkg/controller/certificates/approver): it approves a kubelet's client
// certificate request when a SubjectAccessReview of the requestor allows
// create on certificatesigningrequests/selfnodeclient (a node renewing its
// own certificate) or /nodeclient (bootstrap: any node's). kubestore's
// own authorizer answers the review: the admin, or what
// --authorization-policy-file grants. Everything else waits for someone
// allowed to approve its signer.
type sarApprover struct {
	client      certificatesv1client.CertificateSigningRequestInterface
	reviews     authorizationv1client.SubjectAccessReviewInterface
	recognizers []csrRecognizer
}

func recognizers() []csrRecognizer {
	return []csrRecognizer{
		{
			recognize: isSelfNodeClientCert,
			permission: authorizationv1.ResourceAttributes{Group: certificatesv1.GroupName, Resource: "certificatesigningrequests", Verb: "create",
				Subresource: "selfnodeclient", Version: "*"},
			successMessage: "Auto approving self kubelet client certificate after SubjectAccessReview.",
		},
		{
			recognize: isNodeClientCert,
			permission: authorizationv1.ResourceAttributes{Group: certificatesv1.GroupName, Resource: "certificatesigningrequests", Verb: "create",
				Subresource: "nodeclient", Version: "*"},
			successMessage: "Auto approving kubelet client certificate after SubjectAccessReview.",
		},
	}
}

func (a *sarApprover) handle(ctx context.Context, csr *certificatesv1.CertificateSigningRequest) error {
	if len(csr.Status.Certificate) != 0 {
		return nil
	}
	if approved, denied := approvalConditions(csr); approved || denied {
		return nil
	}
	x509cr, err := pkcs10.Parse(csr.Spec.Request)
	if err != nil {
		return fmt.Errorf("unable to parse csr %q: %v", csr.Name, err)
	}
	var tried []string
	for _, r := range a.recognizers {
		if !r.recognize(csr, x509cr) {
			continue
		}
		tried = append(tried, r.permission.Subresource)
		approved, err := a.authorize(ctx, csr, r.permission)
		if err != nil {
			return err
		}
		if approved {
			csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
				Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue, Reason: "AutoApproved", Message: r.successMessage,
			})
			if _, err := a.client.UpdateApproval(ctx, csr.Name, csr, metav1.UpdateOptions{}); err != nil {
				return fmt.Errorf("error updating approval for csr: %w", err)
			}
			return nil
		}
	}
	if len(tried) != 0 {
		return ignorable{fmt.Errorf("recognized csr %q as %v but subject access review was not approved", csr.Name, tried)}
	}
	return nil
}

// authorize asks whether the requestor may do rattrs.
func (a *sarApprover) authorize(ctx context.Context, csr *certificatesv1.CertificateSigningRequest, rattrs authorizationv1.ResourceAttributes) (bool, error) {
	extra := make(map[string]authorizationv1.ExtraValue, len(csr.Spec.Extra))
	for k, v := range csr.Spec.Extra {
		extra[k] = authorizationv1.ExtraValue(v)
	}
	sar, err := a.reviews.Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: csr.Spec.Username, UID: csr.Spec.UID, Groups: csr.Spec.Groups, Extra: extra, ResourceAttributes: &rattrs,
	}}, metav1.CreateOptions{})
	if err != nil {
		return false, err
	}
	return sar.Status.Allowed, nil
}

// isNodeClientCert: a kubelet client certificate request.
func isNodeClientCert(csr *certificatesv1.CertificateSigningRequest, x509cr *x509.CertificateRequest) bool {
	if csr.Spec.SignerName != certificatesv1.KubeAPIServerClientKubeletSignerName {
		return false
	}
	return validateKubeletClientCSR(x509cr, usageSet(csr.Spec.Usages)) == nil
}

// isSelfNodeClientCert: a kubelet client certificate request of the node
// that asks, for itself.
func isSelfNodeClientCert(csr *certificatesv1.CertificateSigningRequest, x509cr *x509.CertificateRequest) bool {
	return csr.Spec.Username == x509cr.Subject.CommonName && isNodeClientCert(csr, x509cr)
}
