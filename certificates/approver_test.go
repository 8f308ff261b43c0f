package certificates

import (
	"context"
	"crypto/x509"
	"fmt"
	"reflect"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	authorizationv1client "k8s.io/client-go/kubernetes/typed/authorization/v1"
)

// fakeReviews answers every SubjectAccessReview with allowed and records
// the reviews.
type fakeReviews struct {
	authorizationv1client.SubjectAccessReviewInterface
	allowed bool
	asked   []authorizationv1.SubjectAccessReviewSpec
}

func (f *fakeReviews) Create(_ context.Context, sar *authorizationv1.SubjectAccessReview, _ metav1.CreateOptions) (*authorizationv1.SubjectAccessReview, error) {
	f.asked = append(f.asked, sar.Spec)
	return &authorizationv1.SubjectAccessReview{Status: authorizationv1.SubjectAccessReviewStatus{Allowed: f.allowed}}, nil
}

// The cases of TestHandle in k8s.io/kubernetes
// pkg/controller/certificates/approver/sarapprove_test.go: a recognized
// request is reviewed, and approved through the approval subresource when
// the review allows it.
func TestApproverHandle(t *testing.T) {
	for _, tt := range []struct {
		recognized, allowed, wantErr bool
		reviews                      int
		actions                      []string
	}{
		{recognized: false, allowed: false},
		{recognized: false, allowed: true},
		{recognized: true, allowed: false, wantErr: true, reviews: 1},
		{recognized: true, allowed: true, reviews: 1, actions: []string{"approval"}},
	} {
		t.Run(fmt.Sprintf("recognized:%v,allowed:%v", tt.recognized, tt.allowed), func(t *testing.T) {
			csrs, reviews := &fakeCSRs{}, &fakeReviews{allowed: tt.allowed}
			a := sarApprover{client: csrs, reviews: reviews, recognizers: []csrRecognizer{{
				successMessage: "tester",
				permission:     authorizationv1.ResourceAttributes{Group: "foo", Resource: "bar", Subresource: "baz"},
				recognize:      func(*certificatesv1.CertificateSigningRequest, *x509.CertificateRequest) bool { return tt.recognized },
			}}}
			csr := makeTestCSR(t, csrBuilder{cn: "test-cert", requestor: "system:node:foo"})
			csr.Spec.Groups, csr.Spec.Extra = []string{"system:nodes"}, map[string]certificatesv1.ExtraValue{"k": {"v"}}
			err := a.handle(t.Context(), csr)
			if (err != nil) != tt.wantErr {
				t.Errorf("error %v, want one: %v", err, tt.wantErr)
			}
			if len(reviews.asked) != tt.reviews || !reflect.DeepEqual(csrs.actions, tt.actions) {
				t.Fatalf("%d reviews, actions %v; want %d, %v", len(reviews.asked), csrs.actions, tt.reviews, tt.actions)
			}
			if tt.reviews > 0 {
				// The review is of the requestor, not of the controller.
				if r := reviews.asked[0]; r.User != "system:node:foo" || !reflect.DeepEqual(r.Groups, []string{"system:nodes"}) ||
					!reflect.DeepEqual(r.Extra, map[string]authorizationv1.ExtraValue{"k": {"v"}}) || r.ResourceAttributes.Subresource != "baz" {
					t.Errorf("review %+v", r)
				}
			}
			if len(csrs.written) == 1 {
				c := csrs.written[0].Status.Conditions
				if len(c) != 1 || c[0].Type != certificatesv1.CertificateApproved || c[0].Reason != "AutoApproved" || c[0].Message != "tester" {
					t.Errorf("conditions %+v", c)
				}
			}
		})
	}
	// Requests with a certificate, approved or denied are left alone.
	for _, cond := range []certificatesv1.RequestConditionType{certificatesv1.CertificateApproved, certificatesv1.CertificateDenied} {
		csrs, reviews := &fakeCSRs{}, &fakeReviews{allowed: true}
		csr := makeTestCSR(t, csrBuilder{cn: "system:node:foo", org: []string{"system:nodes"}, requestor: "system:node:foo", signerName: certificatesv1.KubeAPIServerClientKubeletSignerName,
			usages: []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth}})
		csr.Status.Conditions = []certificatesv1.CertificateSigningRequestCondition{{Type: cond}}
		if err := (&sarApprover{client: csrs, reviews: reviews, recognizers: recognizers()}).handle(t.Context(), csr); err != nil || len(reviews.asked)+len(csrs.actions) != 0 {
			t.Errorf("%s request: %v, %d reviews, %v", cond, err, len(reviews.asked), csrs.actions)
		}
	}
}

// TestRecognizers in sarapprove_test.go: which requests are a node's client
// certificate, and which its own.
func TestRecognizers(t *testing.T) {
	good := []func(b *csrBuilder){func(*csrBuilder) {}}
	bad := []func(b *csrBuilder){
		func(b *csrBuilder) { b.cn = "mike" },
		func(b *csrBuilder) { b.org = nil },
		func(b *csrBuilder) { b.org = []string{"system:master"} },
		func(b *csrBuilder) { b.usages = append(b.usages, certificatesv1.UsageServerAuth) },
		func(b *csrBuilder) { b.signerName = "example.com/not-correct" },
		func(b *csrBuilder) { b.signerName = certificatesv1.KubeletServingSignerName },
	}
	differentCN := []func(b *csrBuilder){
		func(b *csrBuilder) { b.requestor = "joe" },
		func(b *csrBuilder) { b.cn = "system:node:bar" },
	}
	check := func(cases []func(*csrBuilder), recognize func(*certificatesv1.CertificateSigningRequest, *x509.CertificateRequest) bool, want bool) {
		for i, c := range cases {
			// With and without key encipherment, as upstream.
			for _, usages := range [][]certificatesv1.KeyUsage{
				{certificatesv1.UsageKeyEncipherment, certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth},
				{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth},
			} {
				b := csrBuilder{signerName: certificatesv1.KubeAPIServerClientKubeletSignerName, cn: "system:node:foo", org: []string{"system:nodes"},
					requestor: "system:node:foo", usages: usages}
				c(&b)
				csr := makeTestCSR(t, b)
				x509cr, err := parseRequest(csr)
				if err != nil {
					t.Fatal(err)
				}
				if got := recognize(csr, x509cr); got != want {
					t.Errorf("case %d (%+v): recognized %v, want %v", i, b, got, want)
				}
			}
		}
	}
	check(good, isNodeClientCert, true)
	check(good, isSelfNodeClientCert, true)
	check(bad, isNodeClientCert, false)
	check(bad, isSelfNodeClientCert, false)
	check(differentCN, isNodeClientCert, true)
	check(differentCN, isSelfNodeClientCert, false)
}
