package registry

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"testing"

	certificatesv1 "k8s.io/api/certificates/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
)

// signerGrants allows verb on the signers named, and records what it was
// asked.
type signerGrants struct {
	verb  string
	names []string
	asked []string
}

func (g *signerGrants) Authorize(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	g.asked = append(g.asked, a.GetVerb()+" "+a.GetResource()+"."+a.GetAPIGroup()+" "+a.GetName())
	for _, n := range g.names {
		if a.GetVerb() == g.verb && a.GetResource() == "signers" && a.GetAPIGroup() == "certificates.k8s.io" && a.GetName() == n {
			return authorizer.DecisionAllow, "", nil
		}
	}
	return authorizer.DecisionNoOpinion, "", nil
}

func admitCertificates(t *testing.T, az authorizer.UnconditionalAuthorizer, op admission.Operation, resource, subresource string, obj, old runtime.Object) error {
	t.Helper()
	l := NewCertificatesAdmission(az)
	if !l.Handles(op) {
		return nil
	}
	attrs := admission.NewAttributesRecord(obj, old, certificatesv1.SchemeGroupVersion.WithKind("Unused"), "", "name",
		certificatesv1.SchemeGroupVersion.WithResource(resource), subresource, op, nil, false, &user.DefaultInfo{Name: "bob"})
	return l.Validate(t.Context(), attrs, nil)
}

func csrFor(t *testing.T, signer string, orgs ...string) *certificatesv1.CertificateSigningRequest {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "someone", Organization: orgs}}, key)
	if err != nil {
		t.Fatal(err)
	}
	return &certificatesv1.CertificateSigningRequest{Spec: certificatesv1.CertificateSigningRequestSpec{SignerName: signer,
		Request: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})}}
}

// The cases of TestPlugin in k8s.io/kubernetes
// plugin/pkg/admission/certificates/approval/admission_test.go and
// signing/admission_test.go: approving and signing need the verb on the
// signer or on its domain's "/*", checked against the stored signer.
func TestCertificatesAdmissionApproveAndSign(t *testing.T) {
	approvedCSR := func(signer string) *certificatesv1.CertificateSigningRequest {
		c := csrFor(t, signer)
		c.Status = csrConditions(certificatesv1.CertificateApproved)
		return c
	}
	issued := func(signer string) *certificatesv1.CertificateSigningRequest {
		c := approvedCSR(signer)
		c.Status.Certificate = []byte("data")
		return c
	}
	tests := []struct {
		name        string
		grant       signerGrants
		subresource string
		csr, old    *certificatesv1.CertificateSigningRequest
		allowed     bool
	}{
		{name: "approve: wrong verb", grant: signerGrants{verb: "sign", names: []string{"abc.com/xyz"}}, subresource: "approval",
			csr: approvedCSR("abc.com/xyz"), old: csrFor(t, "abc.com/xyz")},
		{name: "approve: signer name", grant: signerGrants{verb: "approve", names: []string{"abc.com/xyz"}}, subresource: "approval",
			csr: approvedCSR("abc.com/xyz"), old: csrFor(t, "abc.com/xyz"), allowed: true},
		{name: "approve: domain wildcard", grant: signerGrants{verb: "approve", names: []string{"abc.com/*"}}, subresource: "approval",
			csr: approvedCSR("abc.com/xyz"), old: csrFor(t, "abc.com/xyz"), allowed: true},
		{name: "approve: the stored signer counts, not the sent one", grant: signerGrants{verb: "approve", names: []string{"abc.com/xyz"}}, subresource: "approval",
			csr: approvedCSR("abc.com/xyz"), old: csrFor(t, "abc.com/other")},
		{name: "sign: signer name", grant: signerGrants{verb: "sign", names: []string{"abc.com/xyz"}}, subresource: "status",
			csr: issued("abc.com/xyz"), old: approvedCSR("abc.com/xyz"), allowed: true},
		{name: "sign: domain wildcard", grant: signerGrants{verb: "sign", names: []string{"abc.com/*"}}, subresource: "status",
			csr: issued("abc.com/xyz"), old: approvedCSR("abc.com/xyz"), allowed: true},
		{name: "sign: wrong verb", grant: signerGrants{verb: "approve", names: []string{"abc.com/xyz"}}, subresource: "status",
			csr: issued("abc.com/xyz"), old: approvedCSR("abc.com/xyz")},
		{name: "sign: status unchanged needs nothing", grant: signerGrants{}, subresource: "status",
			csr: approvedCSR("abc.com/xyz"), old: approvedCSR("abc.com/xyz"), allowed: true},
		{name: "sign: a Failed condition needs sign", grant: signerGrants{}, subresource: "status",
			csr: func() *certificatesv1.CertificateSigningRequest {
				c := approvedCSR("abc.com/xyz")
				c.Status = csrConditions(certificatesv1.CertificateApproved, certificatesv1.CertificateFailed)
				return c
			}(), old: approvedCSR("abc.com/xyz")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := admitCertificates(t, &tt.grant, admission.Update, "certificatesigningrequests", tt.subresource, tt.csr, tt.old)
			if tt.allowed && err != nil || !tt.allowed && !apierrors.IsForbidden(err) {
				t.Errorf("got %v, allowed %v (asked %v)", err, tt.allowed, tt.grant.asked)
			}
		})
	}
}

// The cases of TestPlugin in
// plugin/pkg/admission/certificates/subjectrestriction/admission_test.go:
// no system:masters client certificate from kube-apiserver-client.
func TestCertificatesAdmissionSubjectRestriction(t *testing.T) {
	invalid := csrFor(t, certificatesv1.KubeAPIServerClientSignerName)
	invalid.Spec.Request = []byte("invalid")
	tests := []struct {
		name    string
		csr     *certificatesv1.CertificateSigningRequest
		allowed bool
	}{
		{name: "some other signer", csr: csrFor(t, "example.com/signer", user.SystemPrivilegedGroup), allowed: true},
		{name: "invalid request", csr: invalid},
		{name: "some other group", csr: csrFor(t, certificatesv1.KubeAPIServerClientSignerName, "system:nodes"), allowed: true},
		{name: "request for system:masters", csr: csrFor(t, certificatesv1.KubeAPIServerClientSignerName, "team", user.SystemPrivilegedGroup)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := admitCertificates(t, &signerGrants{}, admission.Create, "certificatesigningrequests", "", tt.csr, nil)
			if tt.allowed && err != nil || !tt.allowed && !apierrors.IsForbidden(err) {
				t.Errorf("got %v, allowed %v", err, tt.allowed)
			}
		})
	}
	// An update is not a create; the approval subresource is not the CSR.
	if err := admitCertificates(t, &signerGrants{verb: "approve", names: []string{certificatesv1.KubeAPIServerClientSignerName}}, admission.Update, "certificatesigningrequests", "approval",
		tests[3].csr, tests[3].csr); err != nil {
		t.Errorf("approval of an existing request: %v", err)
	}
}

// TestStatusValidateUpdate in
// pkg/registry/certificates/podcertificaterequest/strategy_test.go: a
// PodCertificateRequest's status changes only by a signer of it, refused
// with upstream's 422.
func TestCertificatesAdmissionPodCertificateRequests(t *testing.T) {
	stub, _ := stubRequest(t, ed25519Key)
	old := newPCR(stub, nil)
	failed := newPCR(stub, nil)
	failed.Status.Conditions = []metav1.Condition{{Type: "Failed", Status: metav1.ConditionTrue, Reason: "Foo", Message: "Foo message"}}

	if err := admitCertificates(t, &signerGrants{verb: "sign", names: []string{"foo.com/abc"}}, admission.Update, "podcertificaterequests", "status", failed, old); err != nil {
		t.Errorf("No errors when the caller is authorized: %v", err)
	}
	err := admitCertificates(t, &signerGrants{}, admission.Update, "podcertificaterequests", "status", failed, old)
	if !apierrors.IsInvalid(err) || err.Error() != `PodCertificateRequest.certificates.k8s.io "name" is invalid: spec.signerName: Forbidden: User "bob" is not permitted to "sign" for signer "foo.com/abc"` {
		t.Errorf("Error when the caller is not authorized: %v", err)
	}
	if err := admitCertificates(t, &signerGrants{}, admission.Update, "podcertificaterequests", "status", old, old); err != nil {
		t.Errorf("an unchanged status needs no signer: %v", err)
	}
	if err := admitCertificates(t, &signerGrants{}, admission.Update, "podcertificaterequests", "", failed, old); err != nil {
		t.Errorf("the main resource (whose strategy keeps the status) needs no signer: %v", err)
	}
}
