package registry

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/authentication/user"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
)

// The fixtures of k8s.io/kubernetes
// pkg/apis/certificates/validation/validation_test.go.
var (
	csrMeta         = metav1.ObjectMeta{Name: "testcsr"}
	csrSignerName   = "example.com/valid-name"
	csrValidUsages  = []certificatesv1.KeyUsage{certificatesv1.UsageKeyEncipherment}
	validCertChain  = []byte("\nLeading non-PEM content\n" + testCertPEM + "Intermediate non-PEM content\n" + testIntermediatePEM + "Trailing non-PEM content\n")
	certNoPEM       = []byte(`no PEM content`)
	certNonCertPEM  = []byte(strings.ReplaceAll(testCertPEM, "CERTIFICATE-----", "CERTIFICATE1-----"))
	certPEMHeaders  = []byte(strings.Replace(testCertPEM, "-----\n", "-----\nSome-Header: Some-Value\n", 1))
	certEmptyPEM    = []byte("-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n")
	certNonASN1Data = []byte(strings.Replace(testCertPEM, "MTYwOTE3MDUwNjAwWjAUMRIw", "MTYwOTE3MDUwNjAwWjAUNRIw", 1))
)

const (
	testCertPEM = `-----BEGIN CERTIFICATE-----
MIIBqDCCAU2gAwIBAgIUfbqeieihh/oERbfvRm38XvS/xHAwCgYIKoZIzj0EAwIw
GjEYMBYGA1UEAxMPSW50ZXJtZWRpYXRlLUNBMCAXDTE2MTAxMTA1MDYwMFoYDzIx
MTYwOTE3MDUwNjAwWjAUMRIwEAYDVQQDEwlNeSBDbGllbnQwWTATBgcqhkjOPQIB
BggqhkjOPQMBBwNCAARv6N4R/sjMR65iMFGNLN1GC/vd7WhDW6J4X/iAjkRLLnNb
KbRG/AtOUZ+7upJ3BWIRKYbOabbQGQe2BbKFiap4o3UwczAOBgNVHQ8BAf8EBAMC
BaAwEwYDVR0lBAwwCgYIKwYBBQUHAwIwDAYDVR0TAQH/BAIwADAdBgNVHQ4EFgQU
K/pZOWpNcYai6eHFpmJEeFpeQlEwHwYDVR0jBBgwFoAUX6nQlxjfWnP6aM1meO/Q
a6b3a9kwCgYIKoZIzj0EAwIDSQAwRgIhAIWTKw/sjJITqeuNzJDAKU4xo1zL+xJ5
MnVCuBwfwDXCAiEAw/1TA+CjPq9JC5ek1ifR0FybTURjeQqYkKpve1dveps=
-----END CERTIFICATE-----
`
	testIntermediatePEM = `-----BEGIN CERTIFICATE-----
MIIBqDCCAU6gAwIBAgIUfqZtjoFgczZ+oQZbEC/BDSS2J6wwCgYIKoZIzj0EAwIw
EjEQMA4GA1UEAxMHUm9vdC1DQTAgFw0xNjEwMTEwNTA2MDBaGA8yMTE2MDkxNzA1
MDYwMFowGjEYMBYGA1UEAxMPSW50ZXJtZWRpYXRlLUNBMFkwEwYHKoZIzj0CAQYI
KoZIzj0DAQcDQgAEyWHEMMCctJg8Xa5YWLqaCPbk3MjB+uvXac42JM9pj4k9jedD
kpUJRkWIPzgJI8Zk/3cSzluUTixP6JBSDKtwwaN4MHYwDgYDVR0PAQH/BAQDAgGm
MBMGA1UdJQQMMAoGCCsGAQUFBwMCMA8GA1UdEwEB/wQFMAMBAf8wHQYDVR0OBBYE
FF+p0JcY31pz+mjNZnjv0Gum92vZMB8GA1UdIwQYMBaAFB7P6+i4/pfNjqZgJv/b
dgA7Fe4tMAoGCCqGSM49BAMCA0gAMEUCIQCTT1YWQZaAqfQ2oBxzOkJE2BqLFxhz
3smQlrZ5gCHddwIgcvT7puhYOzAgcvMn9+SZ1JOyZ7edODjshCVCRnuHK2c=
-----END CERTIFICATE-----
`
)

// newCSRPEM is upstream's newCSRPEM: an Ed25519 request for testing-org.
func newCSRPEM(t *testing.T) []byte {
	t.Helper()
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{Organization: []string{"testing-org"}}}, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
}

// sameErrors compares errors as upstream's CSR tests do: as a set of
// their messages.
func sameErrors(t *testing.T, got field.ErrorList, want ...string) {
	t.Helper()
	gotSet := sets.New[string]()
	for _, e := range got {
		gotSet.Insert(e.Error())
	}
	wantSet := sets.New(want...)
	for _, missing := range sets.List(wantSet.Difference(gotSet)) {
		t.Errorf("missing expected error: %s", missing)
	}
	for _, unexpected := range sets.List(gotSet.Difference(wantSet)) {
		t.Errorf("unexpected error: %s", unexpected)
	}
}

func csrConditions(types ...certificatesv1.RequestConditionType) certificatesv1.CertificateSigningRequestStatus {
	var st certificatesv1.CertificateSigningRequestStatus
	for _, ty := range types {
		st.Conditions = append(st.Conditions, certificatesv1.CertificateSigningRequestCondition{Type: ty, Status: corev1.ConditionTrue})
	}
	return st
}

// The cases of TestValidateCertificateSigningRequestCreate in
// pkg/apis/certificates/validation/validation_test.go, through the
// kind's create validation (metadata included).
func TestCSRValidateCreate(t *testing.T) {
	maxFQDN := fmt.Sprintf("%s.%s.%s.%s", strings.Repeat("a", 63), strings.Repeat("a", 63), strings.Repeat("a", 63), strings.Repeat("a", 61))
	maxSigner := fmt.Sprintf("%s/%s.%s", maxFQDN, strings.Repeat("a", 63), strings.Repeat("a", 253))
	dns1123 := `a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`
	request := newCSRPEM(t)
	spec := func(f func(*certificatesv1.CertificateSigningRequestSpec)) certificatesv1.CertificateSigningRequestSpec {
		s := certificatesv1.CertificateSigningRequestSpec{Usages: csrValidUsages, SignerName: csrSignerName, Request: request}
		f(&s)
		return s
	}
	signer := func(name string) certificatesv1.CertificateSigningRequestSpec {
		return spec(func(s *certificatesv1.CertificateSigningRequestSpec) { s.SignerName = name })
	}
	expiring := func(seconds int32) certificatesv1.CertificateSigningRequestSpec {
		return spec(func(s *certificatesv1.CertificateSigningRequestSpec) { s.ExpirationSeconds = &seconds })
	}
	tests := []struct {
		name   string
		spec   certificatesv1.CertificateSigningRequestSpec
		status certificatesv1.CertificateSigningRequestStatus
		errs   []string
	}{
		{name: "CSR with empty request data should fail", spec: spec(func(s *certificatesv1.CertificateSigningRequestSpec) { s.Request = nil }),
			errs: []string{field.Invalid(field.NewPath("spec", "request"), []byte(nil), "PEM block type must be CERTIFICATE REQUEST").Error()}},
		{name: "CSR with invalid request data should fail", spec: spec(func(s *certificatesv1.CertificateSigningRequestSpec) { s.Request = []byte("invalid data") }),
			errs: []string{field.Invalid(field.NewPath("spec", "request"), []byte("invalid data"), "PEM block type must be CERTIFICATE REQUEST").Error()}},
		{name: "CSR with no usages should fail", spec: spec(func(s *certificatesv1.CertificateSigningRequestSpec) { s.Usages = nil }),
			errs: []string{"spec.usages: Required value"}},
		{name: "CSR with no signerName set should fail", spec: signer(""), errs: []string{"spec.signerName: Required value"}},
		{name: "signerName contains no '/'", spec: signer("an-invalid-signer-name"),
			errs: []string{`spec.signerName: Invalid value: "an-invalid-signer-name": must be a fully qualified domain and path of the form 'example.com/signer-name'`}},
		{name: "signerName contains two '/'", spec: signer("an-invalid-signer-name.com/something/else"),
			errs: []string{`spec.signerName: Invalid value: "an-invalid-signer-name.com/something/else": must be a fully qualified domain and path of the form 'example.com/signer-name'`}},
		{name: "signerName domain component is not fully qualified", spec: signer("example/some-signer-name"),
			errs: []string{`spec.signerName: Invalid value: "example": should be a domain with at least two segments separated by dots`}},
		{name: "signerName path component is empty", spec: signer("example.com/"),
			errs: []string{`spec.signerName: Invalid value: "": validating label "": ` + dns1123}},
		{name: "signerName path component ends with a symbol", spec: signer("example.com/something-"),
			errs: []string{`spec.signerName: Invalid value: "something-": validating label "something-": ` + dns1123}},
		{name: "signerName path component is a symbol", spec: signer("example.com/-"),
			errs: []string{`spec.signerName: Invalid value: "-": validating label "-": ` + dns1123}},
		{name: "signerName path component contains no '.' but is valid", spec: signer("example.com/some-signer-name")},
		{name: "signerName with a total length greater than 571 characters should be rejected", spec: signer(maxSigner + ".toolong"),
			errs: []string{field.TooLong(field.NewPath("spec", "signerName"), "", len(maxSigner)).Error()}},
		{name: "signerName with a fqdn greater than 253 characters should be rejected", spec: signer(maxFQDN + ".extra/valid-path"),
			errs: []string{field.TooLong(field.NewPath("spec", "signerName"), "", len(maxFQDN)).Error()}},
		{name: "signerName can have a longer path if the domain component is less than the max length",
			spec: signer(fmt.Sprintf("abc.io/%s.%s", strings.Repeat("a", 253), strings.Repeat("a", 253)))},
		{name: "signerName with a domain label greater than 63 characters will fail", spec: signer(strings.Repeat("a", 66) + ".example.io/valid-path"),
			errs: []string{fmt.Sprintf(`spec.signerName: Invalid value: "%s.example.io": validating label "%s": must be no more than 63 characters`, strings.Repeat("a", 66), strings.Repeat("a", 66))}},
		{name: "signerName of max length in format <fully-qualified-domain-name>/<resource-namespace>.<resource-name> is valid", spec: signer(maxSigner)},
		{name: "legacy signer", spec: signer(legacyUnknownSignerName),
			errs: []string{`spec.signerName: Invalid value: "kubernetes.io/legacy-unknown": the legacy signerName is not allowed via this API version`}},
		{name: "negative duration", spec: expiring(-1), errs: []string{"spec.expirationSeconds: Invalid value: -1: may not specify a duration less than 600 seconds (10 minutes)"}},
		{name: "zero duration", spec: expiring(0), errs: []string{"spec.expirationSeconds: Invalid value: 0: may not specify a duration less than 600 seconds (10 minutes)"}},
		{name: "one duration", spec: expiring(1), errs: []string{"spec.expirationSeconds: Invalid value: 1: may not specify a duration less than 600 seconds (10 minutes)"}},
		{name: "too short duration", spec: expiring(60), errs: []string{"spec.expirationSeconds: Invalid value: 60: may not specify a duration less than 600 seconds (10 minutes)"}},
		{name: "valid duration", spec: expiring(600)},
		{name: "missing usages", spec: spec(func(s *certificatesv1.CertificateSigningRequestSpec) { s.Usages = []certificatesv1.KeyUsage{} }),
			errs: []string{"spec.usages: Required value"}},
		{name: "unknown and duplicate usages", spec: spec(func(s *certificatesv1.CertificateSigningRequestSpec) {
			s.Usages = []certificatesv1.KeyUsage{"unknown", "unknown"}
		}),
			errs: []string{
				field.NotSupported(field.NewPath("spec", "usages").Index(0), certificatesv1.KeyUsage("unknown"), sets.List(csrUsages)).Error(),
				field.NotSupported(field.NewPath("spec", "usages").Index(1), certificatesv1.KeyUsage("unknown"), sets.List(csrUsages)).Error(),
				`spec.usages[1]: Duplicate value: "unknown"`,
			}},
		{name: "approved condition only", spec: spec(func(*certificatesv1.CertificateSigningRequestSpec) {}), status: csrConditions(certificatesv1.CertificateApproved)},
		{name: "denied condition only", spec: spec(func(*certificatesv1.CertificateSigningRequestSpec) {}), status: csrConditions(certificatesv1.CertificateDenied)},
		{name: "both approved and denied conditions", spec: spec(func(*certificatesv1.CertificateSigningRequestSpec) {}),
			status: csrConditions(certificatesv1.CertificateApproved, certificatesv1.CertificateDenied),
			errs:   []string{`status.conditions: Invalid value: "Denied": Approved and Denied conditions are mutually exclusive`}},
		{name: "approved and failed conditions allowed", spec: spec(func(*certificatesv1.CertificateSigningRequestSpec) {}),
			status: csrConditions(certificatesv1.CertificateApproved, certificatesv1.CertificateFailed)},
		// Not upstream's: any name the store accepts, but not none.
		{name: "no name", spec: spec(func(*certificatesv1.CertificateSigningRequestSpec) {}), errs: []string{"metadata.name: Required value: name or generateName is required"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			csr := &certificatesv1.CertificateSigningRequest{ObjectMeta: csrMeta, Spec: tt.spec, Status: tt.status}
			if tt.name == "no name" {
				csr.Name = ""
			}
			sameErrors(t, validateCreate(t, certificateSigningRequestDef(), csr), tt.errs...)
		})
	}
}

// Test_getValidationOptions in validation_test.go.
func TestCSRValidationOptions(t *testing.T) {
	withConditions := func(types ...certificatesv1.RequestConditionType) *certificatesv1.CertificateSigningRequest {
		csr := &certificatesv1.CertificateSigningRequest{}
		for _, ty := range types {
			csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{Type: ty})
		}
		return csr
	}
	withCertificate := func(c []byte) *certificatesv1.CertificateSigningRequest {
		return &certificatesv1.CertificateSigningRequest{Status: certificatesv1.CertificateSigningRequestStatus{Certificate: c}}
	}
	withUsages := func(u ...certificatesv1.KeyUsage) *certificatesv1.CertificateSigningRequest {
		return &certificatesv1.CertificateSigningRequest{Spec: certificatesv1.CertificateSigningRequestSpec{Usages: u}}
	}
	tests := []struct {
		name        string
		csr, old    *certificatesv1.CertificateSigningRequest
		want        csrOptions
		description string
	}{
		{name: "strict create"},
		{name: "strict update", old: &certificatesv1.CertificateSigningRequest{}},
		{name: "compatible update, approved+denied", old: withConditions(certificatesv1.CertificateApproved, certificatesv1.CertificateDenied), want: csrOptions{allowBothApprovedAndDenied: true}},
		{name: "compatible update, legacy signerName", old: &certificatesv1.CertificateSigningRequest{Spec: certificatesv1.CertificateSigningRequestSpec{SignerName: legacyUnknownSignerName}},
			want: csrOptions{allowLegacySignerName: true}},
		{name: "compatible update, duplicate condition types", old: withConditions(certificatesv1.CertificateApproved, certificatesv1.CertificateApproved), want: csrOptions{allowDuplicateConditionTypes: true}},
		{name: "compatible update, empty condition types", old: withConditions(""), want: csrOptions{allowEmptyConditionType: true}},
		{name: "compatible update, no diff to certificate", csr: withCertificate(validCertChain), old: withCertificate(validCertChain), want: csrOptions{allowArbitraryCertificate: true}},
		{name: "compatible update, existing invalid certificate", csr: withCertificate([]byte(`new - no PEM blocks`)), old: withCertificate([]byte(`old - no PEM blocks`)),
			want: csrOptions{allowArbitraryCertificate: true}},
		{name: "compatible update, existing unknown usages", old: withUsages("unknown"), want: csrOptions{allowUnknownUsages: true}},
		{name: "compatible update, existing duplicate usages", old: withUsages("any", "any"), want: csrOptions{allowDuplicateUsages: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := csrValidationOptions(tt.csr, tt.old); got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

// The cases of TestValidateCertificateSigningRequestUpdate, ...StatusUpdate
// and ...ApprovalUpdate in validation_test.go, each through the strategy of
// its endpoint (the main resource, status, approval), without the
// strategies' PrepareForUpdate, as upstream's tests call the validation.
func TestCSRValidateUpdates(t *testing.T) {
	meta := csrMeta
	meta.ResourceVersion = "1"
	withFinalizers := meta
	withFinalizers.Finalizers = []string{"example.com/foo"}
	spec := certificatesv1.CertificateSigningRequestSpec{Usages: csrValidUsages, Request: newCSRPEM(t), SignerName: "example.com/something"}
	csr := func(m metav1.ObjectMeta, st certificatesv1.CertificateSigningRequestStatus) *certificatesv1.CertificateSigningRequest {
		return &certificatesv1.CertificateSigningRequest{ObjectMeta: m, Spec: spec, Status: st}
	}
	none := certificatesv1.CertificateSigningRequestStatus{}
	cert := func(c []byte) certificatesv1.CertificateSigningRequestStatus {
		return certificatesv1.CertificateSigningRequestStatus{Certificate: c}
	}
	approved, denied, failed := csrConditions(certificatesv1.CertificateApproved), csrConditions(certificatesv1.CertificateDenied), csrConditions(certificatesv1.CertificateFailed)
	const (
		addApproved     = `status.conditions: Forbidden: updates may not add a condition of type "Approved"`
		addDenied       = `status.conditions: Forbidden: updates may not add a condition of type "Denied"`
		removeApproved  = `status.conditions: Forbidden: updates may not remove a condition of type "Approved"`
		removeDenied    = `status.conditions: Forbidden: updates may not remove a condition of type "Denied"`
		removeFailed    = `status.conditions: Forbidden: updates may not remove a condition of type "Failed"`
		setCertificate  = `status.certificate: Forbidden: updates may not set certificate content`
		exclusive       = `status.conditions: Invalid value: "Denied": Approved and Denied conditions are mutually exclusive`
		noPEM           = `status.certificate: Invalid value: "<certificate data>": must contain at least one CERTIFICATE PEM block`
		resetCertficate = `status.certificate: Forbidden: updates may not modify existing certificate content`
	)
	// endpoint → errors; a missing endpoint expects none.
	tests := []struct {
		name     string
		csr, old *certificatesv1.CertificateSigningRequest
		errs     map[string][]string
	}{
		{name: "no-op", csr: csr(meta, none), old: csr(meta, none)},
		{name: "finalizer change with invalid status", csr: csr(meta, cert(certNoPEM)), old: csr(withFinalizers, cert(certNoPEM))},
		{name: "add Approved condition", csr: csr(meta, approved), old: csr(withFinalizers, none),
			errs: map[string][]string{"": {addApproved}, "status": {addApproved}}},
		{name: "remove Approved condition", csr: csr(meta, none), old: csr(withFinalizers, approved),
			errs: map[string][]string{"": {removeApproved}, "status": {removeApproved}, "approval": {removeApproved}}},
		{name: "add Denied condition", csr: csr(meta, denied), old: csr(withFinalizers, none),
			errs: map[string][]string{"": {addDenied}, "status": {addDenied}}},
		{name: "remove Denied condition", csr: csr(meta, none), old: csr(withFinalizers, denied),
			errs: map[string][]string{"": {removeDenied}, "status": {removeDenied}, "approval": {removeDenied}}},
		{name: "add Failed condition", csr: csr(meta, failed), old: csr(withFinalizers, none)},
		{name: "remove Failed condition", csr: csr(meta, none), old: csr(withFinalizers, failed),
			errs: map[string][]string{"": {removeFailed}, "status": {removeFailed}, "approval": {removeFailed}}},
		{name: "set certificate", csr: csr(meta, cert(validCertChain)), old: csr(withFinalizers, none),
			errs: map[string][]string{"": {setCertificate}, "approval": {setCertificate}}},
		{name: "set invalid certificate", csr: csr(meta, cert(certNoPEM)), old: csr(withFinalizers, none),
			errs: map[string][]string{"": {noPEM, setCertificate}, "status": {noPEM}, "approval": {noPEM, setCertificate}}},
		{name: "reset certificate", csr: csr(meta, cert(certNonCertPEM)), old: csr(withFinalizers, cert(certNoPEM)),
			errs: map[string][]string{"": {setCertificate}, "status": {resetCertficate}, "approval": {setCertificate}}},
		{name: "add both approved and denied conditions",
			csr: csr(meta, csrConditions(certificatesv1.CertificateApproved, certificatesv1.CertificateDenied)), old: csr(withFinalizers, none),
			errs: map[string][]string{"": {addApproved, addDenied, exclusive}, "status": {addApproved, addDenied, exclusive}, "approval": {exclusive}}},
		{name: "finalizer change with duplicate and unknown usages",
			csr: func() *certificatesv1.CertificateSigningRequest {
				c := csr(meta, none)
				c.Spec.Usages = []certificatesv1.KeyUsage{"unknown", "unknown"}
				return c
			}(),
			old: func() *certificatesv1.CertificateSigningRequest {
				c := csr(withFinalizers, none)
				c.Spec.Usages = []certificatesv1.KeyUsage{"unknown", "unknown"}
				return c
			}()},
	}
	d := certificateSigningRequestDef()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sameErrors(t, validateUpdate(t, d, tt.csr, tt.old), tt.errs[""]...)
			status := statusStrategy{strategy: newStrategy(nil, d)}
			sameErrors(t, status.ValidateUpdate(t.Context(), tt.csr, tt.old), tt.errs["status"]...)
			approval := statusStrategy{strategy: newStrategy(nil, d), part: d.subresources["approval"]}
			sameErrors(t, approval.ValidateUpdate(t.Context(), tt.csr, tt.old), tt.errs["approval"]...)
		})
	}
}

// Test_validateCertificateSigningRequestOptions in validation_test.go:
// each option tolerates what the stored object already has.
func TestCSRValidationTolerance(t *testing.T) {
	spec := certificatesv1.CertificateSigningRequestSpec{Usages: csrValidUsages, Request: newCSRPEM(t), SignerName: "example.com/something"}
	approvedWith := func(c []byte) certificatesv1.CertificateSigningRequestStatus {
		st := csrConditions(certificatesv1.CertificateApproved)
		st.Certificate = c
		return st
	}
	tests := []struct {
		name      string
		spec      *certificatesv1.CertificateSigningRequestSpec
		status    certificatesv1.CertificateSigningRequestStatus
		lenient   csrOptions
		strict    []string
		strictRes []*regexp.Regexp
	}{
		{name: "no status"},
		{name: "approved condition", status: csrConditions(certificatesv1.CertificateApproved)},
		{name: "denied condition", status: csrConditions(certificatesv1.CertificateDenied)},
		{name: "failed condition", status: csrConditions(certificatesv1.CertificateFailed)},
		{name: "approved+issued", status: approvedWith(validCertChain)},
		{name: "legacy signer", spec: func() *certificatesv1.CertificateSigningRequestSpec {
			s := spec
			s.SignerName = legacyUnknownSignerName
			return &s
		}(),
			lenient: csrOptions{allowLegacySignerName: true},
			strict:  []string{`spec.signerName: Invalid value: "kubernetes.io/legacy-unknown": the legacy signerName is not allowed via this API version`}},
		{name: "empty condition type", status: certificatesv1.CertificateSigningRequestStatus{Conditions: []certificatesv1.CertificateSigningRequestCondition{{Status: corev1.ConditionTrue}}},
			lenient: csrOptions{allowEmptyConditionType: true}, strict: []string{`status.conditions[0].type: Required value`}},
		{name: "approved and denied", status: csrConditions(certificatesv1.CertificateApproved, certificatesv1.CertificateDenied),
			lenient: csrOptions{allowBothApprovedAndDenied: true}, strict: []string{`status.conditions: Invalid value: "Denied": Approved and Denied conditions are mutually exclusive`}},
		{name: "duplicate condition", status: csrConditions(certificatesv1.CertificateApproved, certificatesv1.CertificateApproved),
			lenient: csrOptions{allowDuplicateConditionTypes: true}, strict: []string{`status.conditions[1].type: Duplicate value: "Approved"`}},
		{name: "status.certificate, no PEM", status: approvedWith(certNoPEM), lenient: csrOptions{allowArbitraryCertificate: true},
			strict: []string{`status.certificate: Invalid value: "<certificate data>": must contain at least one CERTIFICATE PEM block`}},
		{name: "status.certificate, non-CERTIFICATE PEM", status: approvedWith(certNonCertPEM), lenient: csrOptions{allowArbitraryCertificate: true},
			strict: []string{`status.certificate: Invalid value: "<certificate data>": only CERTIFICATE PEM blocks are allowed, found "CERTIFICATE1"`}},
		{name: "status.certificate, PEM headers", status: approvedWith(certPEMHeaders), lenient: csrOptions{allowArbitraryCertificate: true},
			strict: []string{`status.certificate: Invalid value: "<certificate data>": no PEM block headers are permitted`}},
		{name: "status.certificate, empty PEM block", status: approvedWith(certEmptyPEM), lenient: csrOptions{allowArbitraryCertificate: true},
			strict: []string{`status.certificate: Invalid value: "<certificate data>": found CERTIFICATE PEM block containing 0 certificates`}},
		{name: "status.certificate, non-ASN1 data", status: approvedWith(certNonASN1Data), lenient: csrOptions{allowArbitraryCertificate: true},
			strictRes: []*regexp.Regexp{regexp.MustCompile(`status.certificate: Invalid value: "\<certificate data\>": (asn1: structure error: sequence tag mismatch|x509: invalid RDNSequence)`)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			csr := &certificatesv1.CertificateSigningRequest{ObjectMeta: csrMeta, Spec: spec, Status: tt.status}
			if tt.spec != nil {
				csr.Spec = *tt.spec
			}
			sameErrors(t, validateCSR(csr, tt.lenient))
			// Errors matching a regexp are left out; each must match one.
			var strict field.ErrorList
			matched := make([]bool, len(tt.strictRes))
		errors:
			for _, e := range validateCSR(csr, csrOptions{}) {
				for i, re := range tt.strictRes {
					if re.MatchString(e.Error()) {
						matched[i] = true
						continue errors
					}
				}
				strict = append(strict, e)
			}
			for i, ok := range matched {
				if !ok {
					t.Errorf("no error matches %s", tt.strictRes[i])
				}
			}
			sameErrors(t, strict, tt.strict...)
		})
	}
}

// TestStrategyCreate in pkg/registry/certificates/certificates/strategy_test.go:
// the requestor is the request's user, never the client's, and status
// starts empty.
func TestCSRPrepareForCreate(t *testing.T) {
	empty := certificatesv1.CertificateSigningRequestStatus{Conditions: []certificatesv1.CertificateSigningRequestCondition{}}
	bob := &user.DefaultInfo{Name: "bob", UID: "123", Groups: []string{"group1"}, Extra: map[string][]string{"foo": {"bar"}}}
	clientSet := certificatesv1.CertificateSigningRequestSpec{Username: "bob", UID: "123", Groups: []string{"group1"}}
	tests := []struct {
		name string
		user user.Info
		in   certificatesv1.CertificateSigningRequest
		want certificatesv1.CertificateSigningRequest
	}{
		{name: "no user in context, no user in obj", want: certificatesv1.CertificateSigningRequest{Status: empty}},
		{name: "user in context, no user in obj", user: bob, want: certificatesv1.CertificateSigningRequest{
			Spec:   certificatesv1.CertificateSigningRequestSpec{Username: "bob", UID: "123", Groups: []string{"group1"}, Extra: map[string]certificatesv1.ExtraValue{"foo": {"bar"}}},
			Status: empty}},
		{name: "no user in context, user in obj", in: certificatesv1.CertificateSigningRequest{Spec: clientSet}, want: certificatesv1.CertificateSigningRequest{Status: empty}},
		{name: "user in context, user in obj", user: &user.DefaultInfo{Name: "alice", UID: "234"}, in: certificatesv1.CertificateSigningRequest{Spec: clientSet},
			want: certificatesv1.CertificateSigningRequest{Spec: certificatesv1.CertificateSigningRequestSpec{Username: "alice", UID: "234"}, Status: empty}},
		{name: "pre-approved status", in: certificatesv1.CertificateSigningRequest{Status: csrConditions(certificatesv1.CertificateApproved)},
			want: certificatesv1.CertificateSigningRequest{Status: empty}},
		{name: "expirationSeconds set", in: certificatesv1.CertificateSigningRequest{Spec: certificatesv1.CertificateSigningRequestSpec{ExpirationSeconds: ptrTo[int32](1234)}},
			want: certificatesv1.CertificateSigningRequest{Spec: certificatesv1.CertificateSigningRequestSpec{ExpirationSeconds: ptrTo[int32](1234)}, Status: empty}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := genericapirequest.NewContext()
			if tt.user != nil {
				ctx = genericapirequest.WithUser(ctx, tt.user)
			}
			obj := tt.in.DeepCopy()
			newStrategy(nil, certificateSigningRequestDef()).PrepareForCreate(ctx, obj)
			if !reflect.DeepEqual(*obj, tt.want) {
				t.Errorf("got %+v, want %+v", *obj, tt.want)
			}
		})
	}
}

// TestStatusUpdate in strategy_test.go: a status update keeps the stored
// Approved and Denied conditions and stamps the others; and (not upstream's
// test) the main resource and the approval change what they own only.
func TestCSRPrepareForUpdate(t *testing.T) {
	now := metav1.Now()
	later := metav1.NewTime(now.Add(time.Hour))
	csrNow = func() metav1.Time { return now }
	t.Cleanup(func() { csrNow = metav1.Now })
	cond := func(ty certificatesv1.RequestConditionType, reason string, update, transition metav1.Time) certificatesv1.CertificateSigningRequestCondition {
		return certificatesv1.CertificateSigningRequestCondition{Type: ty, Reason: reason, LastUpdateTime: update, LastTransitionTime: transition}
	}
	withConditions := func(c ...certificatesv1.CertificateSigningRequestCondition) *certificatesv1.CertificateSigningRequest {
		return &certificatesv1.CertificateSigningRequest{Status: certificatesv1.CertificateSigningRequestStatus{Conditions: c}}
	}
	var zero metav1.Time
	tests := []struct {
		name           string
		csr, old, want *certificatesv1.CertificateSigningRequest
	}{
		{name: "no-op", csr: withConditions(), old: withConditions(), want: withConditions()},
		{name: "adding failed condition to existing approved/denied conditions",
			csr: withConditions(cond(certificatesv1.CertificateFailed, "", zero, zero), cond(certificatesv1.CertificateDenied, "", zero, zero),
				cond(certificatesv1.CertificateApproved, "", zero, zero), cond(certificatesv1.CertificateDenied, "", zero, zero), cond(certificatesv1.CertificateApproved, "", zero, zero)),
			old: withConditions(cond(certificatesv1.CertificateDenied, "because1", zero, zero), cond(certificatesv1.CertificateApproved, "because2", zero, zero),
				cond(certificatesv1.CertificateDenied, "because3", later, later), cond(certificatesv1.CertificateApproved, "because4", later, later)),
			want: withConditions(cond(certificatesv1.CertificateFailed, "", now, now), cond(certificatesv1.CertificateDenied, "because1", now, later),
				cond(certificatesv1.CertificateApproved, "because2", now, later), cond(certificatesv1.CertificateDenied, "because3", later, later),
				cond(certificatesv1.CertificateApproved, "because4", later, later))},
		{name: "add approved condition", csr: withConditions(cond(certificatesv1.CertificateApproved, "", zero, zero)), old: withConditions(),
			want: withConditions(cond(certificatesv1.CertificateApproved, "", now, now))},
	}
	d := certificateSigningRequestDef()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obj := tt.csr.DeepCopy()
			statusStrategy{strategy: newStrategy(nil, d)}.PrepareForUpdate(t.Context(), obj, tt.old.DeepCopy())
			if !reflect.DeepEqual(obj, tt.want) {
				t.Errorf("got %+v\nwant %+v", obj.Status, tt.want.Status)
			}
		})
	}

	old := &certificatesv1.CertificateSigningRequest{Spec: certificatesv1.CertificateSigningRequestSpec{SignerName: "example.com/a", Username: "bob"},
		Status: certificatesv1.CertificateSigningRequestStatus{Certificate: validCertChain}}
	changed := func() *certificatesv1.CertificateSigningRequest {
		return &certificatesv1.CertificateSigningRequest{Spec: certificatesv1.CertificateSigningRequestSpec{SignerName: "example.com/b", Username: "eve"},
			Status: csrConditions(certificatesv1.CertificateApproved)}
	}
	main := changed()
	newStrategy(nil, d).PrepareForUpdate(t.Context(), main, old)
	if !reflect.DeepEqual(main.Spec, old.Spec) || !reflect.DeepEqual(main.Status, old.Status) {
		t.Errorf("an update of the main resource changed spec or status: %+v", main)
	}
	approval := changed()
	statusStrategy{strategy: newStrategy(nil, d), part: d.subresources["approval"]}.PrepareForUpdate(t.Context(), approval, old)
	if !reflect.DeepEqual(approval.Spec, old.Spec) || string(approval.Status.Certificate) != string(validCertChain) ||
		len(approval.Status.Conditions) != 1 || approval.Status.Conditions[0].LastUpdateTime != now {
		t.Errorf("the approval changed more than the conditions, or did not stamp them: %+v", approval)
	}
}

// The cases of TestPrintCertificateSigningRequest in
// pkg/printers/internalversion/printers_test.go, and the field selector.
func TestCSRTableAndFields(t *testing.T) {
	created := metav1.Time{Time: time.Now().Add(1.9e9)}
	csr := func(name, requestor, signer string, expiration *int32, st certificatesv1.CertificateSigningRequestStatus) *certificatesv1.CertificateSigningRequest {
		return &certificatesv1.CertificateSigningRequest{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: created},
			Spec: certificatesv1.CertificateSigningRequestSpec{Username: requestor, SignerName: signer, ExpirationSeconds: expiration}, Status: st}
	}
	approved := csrConditions(certificatesv1.CertificateApproved)
	issued := csrConditions(certificatesv1.CertificateApproved)
	issued.Certificate = []byte("cert data")
	weekAndHour := int32((7*24*time.Hour + time.Hour) / time.Second)
	tests := []struct {
		csr  *certificatesv1.CertificateSigningRequest
		want []any
	}{
		{csr("csr1", "", "", nil, certificatesv1.CertificateSigningRequestStatus{}), []any{"csr1", "0s", "<none>", "", "<none>", "Pending"}},
		{csr("csr2", "CSR Requestor", "", nil, approved), []any{"csr2", "0s", "<none>", "CSR Requestor", "<none>", "Approved"}},
		{csr("csr2", "CSR Requestor", "example.com/test-signer", nil, approved), []any{"csr2", "0s", "example.com/test-signer", "CSR Requestor", "<none>", "Approved"}},
		{csr("csr2", "CSR Requestor", "example.com/test-signer", &weekAndHour, approved), []any{"csr2", "0s", "example.com/test-signer", "CSR Requestor", "7d1h", "Approved"}},
		{csr("csr2", "CSR Requestor", "", nil, issued), []any{"csr2", "0s", "<none>", "CSR Requestor", "<none>", "Approved,Issued"}},
		{csr("csr3", "CSR Requestor", "", nil, csrConditions(certificatesv1.CertificateDenied)), []any{"csr3", "0s", "<none>", "CSR Requestor", "<none>", "Denied"}},
		// Not upstream's: Denied wins over Approved, Failed is added.
		{csr("csr4", "r", "", nil, csrConditions(certificatesv1.CertificateApproved, certificatesv1.CertificateDenied, certificatesv1.CertificateFailed)),
			[]any{"csr4", "0s", "<none>", "r", "<none>", "Denied,Failed"}},
	}
	for _, tt := range tests {
		t.Run(tt.csr.Name, func(t *testing.T) {
			if got := tableRow(t, certificateSigningRequestDef(), tt.csr); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("row = %#v, want %#v", got, tt.want)
			}
		})
	}
	_, got, err := certificateSigningRequestDef().getAttrs(csr("csr1", "", "example.com/test-signer", nil, approved))
	if err != nil {
		t.Fatal(err)
	}
	if want := (fields.Set{"metadata.name": "csr1", "spec.signerName": "example.com/test-signer"}); !reflect.DeepEqual(got, want) {
		t.Errorf("fields = %v, want %v", got, want)
	}
}
