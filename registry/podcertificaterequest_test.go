package registry

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// stubRequest is a DER PKCS#10 request signed by a new key of the kind
// gen makes, as kubelet sends it (empty), and the key.
func stubRequest(t *testing.T, gen func() (crypto.Signer, error)) ([]byte, crypto.Signer) {
	t.Helper()
	key, err := gen()
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{}, key)
	if err != nil {
		t.Fatal(err)
	}
	return der, key
}

func ed25519Key() (crypto.Signer, error) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	return priv, err
}

func ecdsaKey(c elliptic.Curve) func() (crypto.Signer, error) {
	return func() (crypto.Signer, error) { return ecdsa.GenerateKey(c, rand.Reader) }
}

func rsaKey(bits int) func() (crypto.Signer, error) {
	return func() (crypto.Signer, error) { return rsa.GenerateKey(rand.Reader, bits) }
}

func newPCR(stub []byte, f func(*certificatesv1.PodCertificateRequestSpec)) *certificatesv1.PodCertificateRequest {
	pcr := &certificatesv1.PodCertificateRequest{
		ObjectMeta: metav1.ObjectMeta{Namespace: "foo", Name: "bar"},
		Spec: certificatesv1.PodCertificateRequestSpec{SignerName: "foo.com/abc", PodName: "pod-1", PodUID: "pod-uid-1",
			ServiceAccountName: "sa-1", ServiceAccountUID: "sa-uid-1", NodeName: "node-1", NodeUID: "node-uid-1",
			MaxExpirationSeconds: ptrTo[int32](86400), StubPKCS10Request: stub},
	}
	if f != nil {
		f(&pcr.Spec)
	}
	return pcr
}

// The cases of TestValidatePodCertificateRequestCreate in
// pkg/apis/certificates/validation/validation_test.go that apply to
// certificates.k8s.io/v1, which has only stubPKCS10Request (the
// pkixPublicKey/proofOfPossession cases become the request's own).
func TestPCRValidateCreate(t *testing.T) {
	stubEd25519, _ := stubRequest(t, ed25519Key)
	stubP224, _ := stubRequest(t, ecdsaKey(elliptic.P224()))
	stubP256, _ := stubRequest(t, ecdsaKey(elliptic.P256()))
	stubP384, _ := stubRequest(t, ecdsaKey(elliptic.P384()))
	stubP521, _ := stubRequest(t, ecdsaKey(elliptic.P521()))
	stubRSA2048, _ := stubRequest(t, rsaKey(2048))
	stubRSA3072, _ := stubRequest(t, rsaKey(3072))
	badSignature := append([]byte(nil), stubP256...)
	badSignature[len(badSignature)-3] ^= 0xff
	spec := field.NewPath("spec")
	tooLong := strings.Repeat("a", 129)
	tests := []struct {
		name string
		pcr  *certificatesv1.PodCertificateRequest
		errs field.ErrorList
	}{
		{name: "valid Ed25519 PCR (using PKCS#10)", pcr: newPCR(stubEd25519, nil)},
		{name: "invalid ECDSA P224 PCR", pcr: newPCR(stubP224, nil),
			errs: field.ErrorList{field.Invalid(pkcs10ReqPath, "curve P-224", "elliptic public keys must use curve P256, P384, or P521")}},
		{name: "valid ECDSA P256 PCR", pcr: newPCR(stubP256, nil)},
		{name: "valid ECDSA P384 PCR", pcr: newPCR(stubP384, nil)},
		{name: "valid ECDSA P521 PCR", pcr: newPCR(stubP521, nil)},
		{name: "invalid RSA 2048 PCR", pcr: newPCR(stubRSA2048, nil),
			errs: field.ErrorList{field.Invalid(pkcs10ReqPath, "2048-bit modulus", "RSA keys must have modulus size 3072 or 4096")}},
		{name: "valid RSA 3072 PCR", pcr: newPCR(stubRSA3072, nil)},
		{name: "invalid signature", pcr: newPCR(badSignature, nil), errs: field.ErrorList{field.Invalid(pkcs10ReqPath, field.OmitValueType{}, "invalid signature")}},
		{name: "not a request", pcr: newPCR([]byte("junk"), nil), errs: field.ErrorList{field.Invalid(pkcs10ReqPath, field.OmitValueType{}, "must be a valid PKCS#10 CSR")}},
		{name: "no request", pcr: newPCR(nil, nil),
			errs: field.ErrorList{field.Invalid(spec, field.OmitValueType{}, "exactly one of (stubPKCS10Request) or (pkixPublicKey, proofOfPossession) must be set")}},
		{name: "bad signer name", pcr: newPCR(stubEd25519, func(s *certificatesv1.PodCertificateRequestSpec) { s.SignerName = "foo/abc" }),
			errs: field.ErrorList{field.Invalid(spec.Child("signerName"), "foo", "should be a domain with at least two segments separated by dots")}},
		{name: "bad pod name", pcr: newPCR(stubEd25519, func(s *certificatesv1.PodCertificateRequestSpec) { s.PodName = "foo_bar" }),
			errs: field.ErrorList{field.Invalid(spec.Child("podName"), "foo_bar", `a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`)}},
		{name: "bad pod uid", pcr: newPCR(stubEd25519, func(s *certificatesv1.PodCertificateRequestSpec) { s.PodUID = "" }),
			errs: field.ErrorList{field.Invalid(spec.Child("podUID"), "", "must not be empty")}},
		{name: "pod uid too long", pcr: newPCR(stubEd25519, func(s *certificatesv1.PodCertificateRequestSpec) { s.PodUID = types.UID(tooLong) }),
			errs: field.ErrorList{field.TooLong(spec.Child("podUID"), tooLong, 128)}},
		{name: "bad service account name", pcr: newPCR(stubEd25519, func(s *certificatesv1.PodCertificateRequestSpec) { s.ServiceAccountName = "foo_bar" }),
			errs: field.ErrorList{field.Invalid(spec.Child("serviceAccountName"), "foo_bar", `a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`)}},
		{name: "bad service account uid", pcr: newPCR(stubEd25519, func(s *certificatesv1.PodCertificateRequestSpec) { s.ServiceAccountUID = "" }),
			errs: field.ErrorList{field.Invalid(spec.Child("serviceAccountUID"), "", "must not be empty")}},
		{name: "bad node name", pcr: newPCR(stubEd25519, func(s *certificatesv1.PodCertificateRequestSpec) { s.NodeName = "foo_bar" }),
			errs: field.ErrorList{field.Invalid(spec.Child("nodeName"), types.NodeName("foo_bar"), `a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`)}},
		{name: "bad node uid", pcr: newPCR(stubEd25519, func(s *certificatesv1.PodCertificateRequestSpec) { s.NodeUID = "" }),
			errs: field.ErrorList{field.Invalid(spec.Child("nodeUID"), "", "must not be empty")}},
		{name: "maxExpirationSeconds missing", pcr: newPCR(stubEd25519, func(s *certificatesv1.PodCertificateRequestSpec) { s.MaxExpirationSeconds = nil }),
			errs: field.ErrorList{field.Required(spec.Child("maxExpirationSeconds"), "must be set")}},
		{name: "maxExpirationSeconds too large", pcr: newPCR(stubEd25519, func(s *certificatesv1.PodCertificateRequestSpec) { s.MaxExpirationSeconds = ptrTo[int32](91*86400 + 1) }),
			errs: field.ErrorList{field.Invalid(spec.Child("maxExpirationSeconds"), ptrTo[int32](91*86400+1), "must be in the range [3600, 7862400]")}},
		{name: "maxExpirationSeconds too large (Kubernetes signer)", pcr: newPCR(stubEd25519, func(s *certificatesv1.PodCertificateRequestSpec) {
			s.SignerName, s.MaxExpirationSeconds = "kubernetes.io/foo", ptrTo[int32](86401)
		}), errs: field.ErrorList{field.Invalid(spec.Child("maxExpirationSeconds"), ptrTo[int32](86401), "must be in the range [3600, 86400]")}},
		{name: "maxExpirationSeconds too small", pcr: newPCR(stubEd25519, func(s *certificatesv1.PodCertificateRequestSpec) { s.MaxExpirationSeconds = ptrTo[int32](3599) }),
			errs: field.ErrorList{field.Invalid(spec.Child("maxExpirationSeconds"), ptrTo[int32](3599), "must be in the range [3600, 7862400]")}},
		{name: "bad user annotations key name", pcr: newPCR(stubEd25519, func(s *certificatesv1.PodCertificateRequestSpec) {
			s.UnverifiedUserAnnotations = map[string]string{"test/domain/foo": "bar"}
		}), errs: field.ErrorList{field.Invalid(spec.Child("unverifiedUserAnnotations"), "test/domain/foo", "a valid label key must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')")}},
		{name: "bad user annotations key prefix too long", pcr: newPCR(stubEd25519, func(s *certificatesv1.PodCertificateRequestSpec) {
			s.UnverifiedUserAnnotations = map[string]string{strings.Repeat("a", 254) + "/foo": "bar"}
		}), errs: field.ErrorList{field.Invalid(spec.Child("unverifiedUserAnnotations"), strings.Repeat("a", 254)+"/foo", "prefix part must be no more than 253 bytes")}},
		// Not upstream's: every key has a domain.
		{name: "user annotation key without a domain", pcr: newPCR(stubEd25519, func(s *certificatesv1.PodCertificateRequestSpec) {
			s.UnverifiedUserAnnotations = map[string]string{"foo": "abc"}
		}), errs: field.ErrorList{field.Invalid(spec.Child("unverifiedUserAnnotations"), "foo", "must be a domain-prefixed key (such as \"acme.io/foo\")")}},
		{name: "bad user annotations key/value total size too long", pcr: newPCR(stubEd25519, func(s *certificatesv1.PodCertificateRequestSpec) {
			s.UnverifiedUserAnnotations = map[string]string{"test.io/a": strings.Repeat("a", 256*1024)}
		}), errs: field.ErrorList{field.TooLong(spec.Child("unverifiedUserAnnotations"), "", 256*1024)}},
		{name: "namespace required", pcr: func() *certificatesv1.PodCertificateRequest {
			p := newPCR(stubEd25519, nil)
			p.Namespace = ""
			return p
		}(),
			errs: field.ErrorList{field.Required(field.NewPath("metadata", "namespace"), "")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := validateCreate(t, podCertificateRequestDef(), tt.pcr); errString(got) != errString(tt.errs) {
				t.Errorf("errors\n%s\nwant\n%s", errString(got), errString(tt.errs))
			}
		})
	}
}

// TestValidatePodCertificateRequestUpdate (validation_test.go) and
// TestPrepareForCreate, TestPrepareForUpdate, TestStatusPrepareForUpdate,
// TestAllowCreateOnUpdate, TestAllowUnconditionalUpdate
// (pkg/registry/certificates/podcertificaterequest/strategy_test.go).
func TestPCRStrategy(t *testing.T) {
	stub, _ := stubRequest(t, ed25519Key)
	d := podCertificateRequestDef()
	st := newStrategy(nil, d)
	if st.AllowCreateOnUpdate(t.Context()) || st.AllowUnconditionalUpdate(t.Context()) {
		t.Error("PodCertificateRequests allow create on update or unconditional updates")
	}
	denied := certificatesv1.PodCertificateRequestStatus{Conditions: []metav1.Condition{{Type: "Denied", Status: metav1.ConditionFalse, Reason: "Foo", Message: "Foo message"}}}

	created := newPCR(stub, nil)
	created.Status = denied
	st.PrepareForCreate(t.Context(), created)
	if !reflect.DeepEqual(created, newPCR(stub, nil)) {
		t.Errorf("create kept the status: %+v", created.Status)
	}

	old := newPCR(stub, nil)
	old.ResourceVersion = "1"
	updated := newPCR(stub, nil)
	updated.ResourceVersion = "1"
	updated.Status = denied
	st.PrepareForUpdate(t.Context(), updated, old)
	if !reflect.DeepEqual(updated, old) {
		t.Errorf("update changed the status: %+v", updated.Status)
	}

	changed := newPCR(stub, func(s *certificatesv1.PodCertificateRequestSpec) { s.PodName = "pod-2" })
	changed.ResourceVersion = "1"
	errorsContain(t, validateUpdate(t, d, changed, old), "spec: Invalid value")

	status := statusStrategy{strategy: st}
	viaStatus := newPCR(stub, func(s *certificatesv1.PodCertificateRequestSpec) { s.PodName = "pod-2" })
	viaStatus.ResourceVersion = "1"
	viaStatus.Labels = map[string]string{"a": "b"}
	viaStatus.Status = denied
	status.PrepareForUpdate(t.Context(), viaStatus, old)
	if viaStatus.Spec.PodName != "pod-1" || viaStatus.Labels != nil || !reflect.DeepEqual(viaStatus.Status, denied) {
		t.Errorf("a status update changed spec or metadata, or lost status: %+v", viaStatus)
	}
}

// The cases of TestValidatePodCertificateRequestStatusUpdate in
// validation_test.go, at upstream's fake time 1970-01-01T00:00:00Z.
func TestPCRValidateStatusUpdate(t *testing.T) {
	epoch := time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC)
	caDER, caKey := makeTestCA(t, nil, nil)
	interDER, interKey := makeTestCA(t, caDER, caKey)
	stub, key := stubRequest(t, ed25519Key)
	pub := key.Public()
	sign := func(validity time.Duration, dnsName *string, email string) string {
		return signTestCert(t, validity, pub, caDER, caKey, dnsName, email)
	}
	str := func(s string) *string { return &s }
	otherKeys := signTestCert(t, 24*time.Hour, mustKey(t).Public(), caDER, caKey, nil, "")
	cert1, cert2 := sign(24*time.Hour, nil, ""), sign(18*time.Hour, nil, "")
	fromIntermediate := signTestCert(t, 24*time.Hour, pub, interDER, interKey, nil, "") + string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: interDER}))
	at := func(s string) *metav1.Time {
		tm, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return ptrTo(metav1.NewTime(tm))
	}
	cond := func(ty string, s metav1.ConditionStatus) metav1.Condition {
		return metav1.Condition{Type: ty, Status: s, Reason: "Whatever", Message: "Foo message", LastTransitionTime: metav1.NewTime(time.Now())}
	}
	issued := func(chain string, notBefore, refresh, notAfter *metav1.Time) certificatesv1.PodCertificateRequestStatus {
		return certificatesv1.PodCertificateRequestStatus{Conditions: []metav1.Condition{cond("Issued", metav1.ConditionTrue)},
			CertificateChain: chain, NotBefore: notBefore, BeginRefreshAt: refresh, NotAfter: notAfter}
	}
	day := func(chain string) certificatesv1.PodCertificateRequestStatus {
		return issued(chain, at("1970-01-01T00:00:00Z"), at("1970-01-01T12:00:00Z"), at("1970-01-02T00:00:00Z"))
	}
	conds := func(c ...metav1.Condition) certificatesv1.PodCertificateRequestStatus {
		return certificatesv1.PodCertificateRequestStatus{Conditions: c}
	}
	status := field.NewPath("status")
	conditionAt := func(i int, child string) *field.Path {
		return status.Child("conditions", fmt.Sprintf("[%d]", i), child)
	}
	immutableDone := field.Invalid(status, field.OmitValueType{}, "immutable after PodCertificateRequest is issued, denied, or failed")
	nonCondition := field.Invalid(status, field.OmitValueType{}, "non-condition status fields must be empty when denying or failing the PodCertificateRequest")
	tests := []struct {
		name     string
		old, new certificatesv1.PodCertificateRequestStatus
		errs     field.ErrorList
	}{
		{name: "changing nothing is allowed"},
		{name: "adding unknown condition types is not allowed", new: conds(cond("Unknown", metav1.ConditionTrue)),
			errs: field.ErrorList{field.NotSupported(conditionAt(0, "type"), "Unknown", pcrTerminal)}},
		{name: "Issued must have status True", new: conds(cond("Issued", metav1.ConditionFalse)),
			errs: field.ErrorList{field.NotSupported(conditionAt(0, "status"), metav1.ConditionFalse, []metav1.ConditionStatus{metav1.ConditionTrue})}},
		{name: "Denied must have status True", new: conds(cond("Denied", metav1.ConditionFalse)),
			errs: field.ErrorList{field.NotSupported(conditionAt(0, "status"), metav1.ConditionFalse, []metav1.ConditionStatus{metav1.ConditionTrue})}},
		{name: "transitioning to Denied status is allowed", new: conds(cond("Denied", metav1.ConditionTrue))},
		{name: "you can't issue a certificate if you set Denied status", new: func() certificatesv1.PodCertificateRequestStatus {
			s := conds(cond("Denied", metav1.ConditionTrue))
			s.CertificateChain = cert1
			return s
		}(), errs: field.ErrorList{nonCondition}},
		{name: "transitioning to Failed status is allowed", new: conds(cond("Failed", metav1.ConditionTrue))},
		{name: "valid issuance", new: day(cert1)},
		{name: "valid issuance with intermediate CA", new: day(fromIntermediate)},
		{name: "Once issued, the certificate cannot be changed to a different valid certificate", old: day(cert1),
			new: issued(cert2, at("1970-01-01T00:00:00Z"), at("1970-01-01T09:00:00Z"), at("1970-01-01T18:00:00Z")), errs: field.ErrorList{immutableDone}},
		{name: "a request cannot be both Denied and Failed", new: conds(cond("Denied", metav1.ConditionTrue), cond("Failed", metav1.ConditionTrue)),
			errs: field.ErrorList{field.Invalid(conditionAt(1, "type"), "Failed", `There may be at most one condition with type "Issued", "Denied", or "Failed"`)}},
		{name: "a request cannot change from Denied to Failed", old: conds(cond("Denied", metav1.ConditionTrue)), new: conds(cond("Failed", metav1.ConditionTrue)),
			errs: field.ErrorList{immutableDone}},
		{name: "a request cannot change from Failed to pending", old: conds(cond("Failed", metav1.ConditionTrue)), errs: field.ErrorList{immutableDone}},
		{name: "a request cannot change from issued to Denied", old: day(cert1), new: conds(cond("Denied", metav1.ConditionTrue)), errs: field.ErrorList{immutableDone}},
		{name: "notbefore must be consistent with leaf certificate", new: issued(cert1, at("1971-01-01T00:00:00Z"), at("1970-01-01T12:00:00Z"), at("1970-01-02T00:00:00Z")),
			errs: field.ErrorList{field.Invalid(status.Child("notBefore"), at("1971-01-01T00:00:00Z").Time, "must be set to the NotBefore time encoded in the leaf certificate")}},
		{name: "notAfter must be consistent with leaf certificate", new: issued(cert1, at("1970-01-01T00:00:00Z"), at("1970-01-01T12:00:00Z"), at("1971-01-02T00:00:00Z")),
			errs: field.ErrorList{field.Invalid(status.Child("notAfter"), at("1971-01-02T00:00:00Z").Time, "must be set to the NotAfter time encoded in the leaf certificate")}},
		{name: "beginRefreshAt must be >= notBefore + 10 min", new: issued(cert1, at("1970-01-01T00:00:00Z"), at("1970-01-01T00:05:00Z"), at("1970-01-02T00:00:00Z")),
			errs: field.ErrorList{field.Invalid(status.Child("beginRefreshAt"), at("1970-01-01T00:05:00Z").Time, "must be at least 10 minutes after status.notBefore")}},
		{name: "beginRefreshAt must be <= notAfter - 10 min", new: issued(cert1, at("1970-01-01T00:00:00Z"), at("1970-01-01T23:55:00Z"), at("1970-01-02T00:00:00Z")),
			errs: field.ErrorList{field.Invalid(status.Child("beginRefreshAt"), at("1970-01-01T23:55:00Z").Time, "must be at least 10 minutes before status.notAfter")}},
		{name: "timestamps must be set", new: issued(cert1, nil, nil, nil), errs: field.ErrorList{
			field.Required(status.Child("notBefore"), "must be present and consistent with the issued certificate"),
			field.Required(status.Child("notAfter"), "must be present and consistent with the issued certificate"),
			field.Required(status.Child("beginRefreshAt"), "must be present and in the range [notbefore+10min, notafter-10min]"),
		}},
		{name: "certs shorter than one hour are rejected", new: issued(sign(50*time.Minute, nil, ""), at("1970-01-01T00:00:00Z"), at("1970-01-01T00:20:00Z"), at("1970-01-01T00:50:00Z")),
			errs: field.ErrorList{field.Invalid(certChainPath, 50*time.Minute, "leaf certificate lifetime must be >= 1 hour")}},
		{name: "certs longer than maxExpirationSeconds are rejected", new: issued(sign(25*time.Hour, nil, ""), at("1970-01-01T00:00:00Z"), at("1970-01-01T12:00:00Z"), at("1970-01-02T01:00:00Z")),
			errs: field.ErrorList{field.Invalid(certChainPath, 25*time.Hour, "leaf certificate lifetime must be <= spec.maxExpirationSeconds (86400)")}},
		{name: "leaf cert can not contain empty DNSName", new: day(sign(24*time.Hour, str(""), "")),
			errs: field.ErrorList{field.Invalid(certChainPath, "", "leaf certificate should not contain empty DNSName")}},
		{name: "leaf cert can not contain DNSName contains '..'", new: day(sign(24*time.Hour, str("test-name..example"), "")),
			errs: field.ErrorList{field.Invalid(certChainPath, "test-name..example", "leaf certificate's DNSName should not contain '..'")}},
		{name: "leaf cert can not contain DNSName start with '.'", new: day(sign(24*time.Hour, str(".example"), "")),
			errs: field.ErrorList{field.Invalid(certChainPath, ".example", "leaf certificate's DNSName should not start or end with '.'")}},
		{name: "leaf cert can not contain bad email address", new: day(sign(24*time.Hour, nil, "email@@address")),
			errs: field.ErrorList{field.Invalid(certChainPath, "email@@address", "leaf certificate should not contain invalid EmailAddress")}},
		// Not upstream's: a certificate for another key.
		{name: "another key", new: day(otherKeys), errs: field.ErrorList{field.Invalid(certChainPath, otherKeys, "leaf certificate was not issued to the requested public key")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			old, req := newPCR(stub, nil), newPCR(stub, nil)
			old.Status, req.Status = tt.old, tt.new
			if got := validatePCRStatusUpdate(req, old, epoch); errString(got) != errString(tt.errs) {
				t.Errorf("errors\n%s\nwant\n%s", errString(got), errString(tt.errs))
			}
		})
	}
}

// errString is the errors as upstream's tests print them, "" for none.
func errString(errs field.ErrorList) string {
	if len(errs) == 0 {
		return ""
	}
	return errs.ToAggregate().Error()
}

func mustKey(t *testing.T) crypto.Signer {
	t.Helper()
	k, err := ed25519Key()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// makeTestCA is upstream's mustMakeCA (parent nil) and
// mustMakeIntermediateCA: valid through 1970.
func makeTestCA(t *testing.T, parentDER []byte, parentKey crypto.Signer) ([]byte, crypto.Signer) {
	t.Helper()
	key := mustKey(t)
	tmpl := &x509.Certificate{IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		NotBefore: time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC), NotAfter: time.Date(1971, 1, 1, 0, 0, 0, 0, time.UTC)}
	parent, signer := tmpl, key
	if parentDER != nil {
		p, err := x509.ParseCertificate(parentDER)
		if err != nil {
			t.Fatal(err)
		}
		parent, signer = p, parentKey
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, key.Public(), signer)
	if err != nil {
		t.Fatal(err)
	}
	return der, key
}

// signTestCert is upstream's mustSignCertForPublicKey: valid from the
// epoch for validity.
func signTestCert(t *testing.T, validity time.Duration, pub crypto.PublicKey, caDER []byte, caKey crypto.Signer, dnsName *string, email string) string {
	t.Helper()
	epoch := time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC)
	tmpl := &x509.Certificate{Subject: pkix.Name{CommonName: "foo"}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth, x509.ExtKeyUsageServerAuth}, NotBefore: epoch, NotAfter: epoch.Add(validity)}
	if dnsName != nil {
		tmpl.DNSNames = []string{*dnsName}
	}
	if email != "" {
		tmpl.EmailAddresses = []string{email}
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, pub, caKey)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

// TestPrintPodCertificateRequest in
// pkg/printers/internalversion/printers_test.go, with the wide cell the
// server always sends; and the field selectors.
func TestPCRTableAndFields(t *testing.T) {
	pcr := &certificatesv1.PodCertificateRequest{
		ObjectMeta: metav1.ObjectMeta{Namespace: "foo", Name: "bar"},
		Spec: certificatesv1.PodCertificateRequestSpec{SignerName: "foo.com/abc", PodName: "pod-1", ServiceAccountName: "sa-1", NodeName: "node-1",
			UnverifiedUserAnnotations: map[string]string{"test/domain": "bar", "test/foo": "abc"}},
		Status: certificatesv1.PodCertificateRequestStatus{Conditions: []metav1.Condition{{Type: certificatesv1.PodCertificateRequestConditionTypeIssued}}},
	}
	if got, want := tableRow(t, podCertificateRequestDef(), pcr), []any{"bar", "pod-1", "sa-1", "node-1", "foo.com/abc", "Issued", "test/domain=bar,test/foo=abc"}; !reflect.DeepEqual(got, want) {
		t.Errorf("row = %#v, want %#v", got, want)
	}
	pcr.Status, pcr.Spec.UnverifiedUserAnnotations = certificatesv1.PodCertificateRequestStatus{}, nil
	if got, want := tableRow(t, podCertificateRequestDef(), pcr), []any{"bar", "pod-1", "sa-1", "node-1", "foo.com/abc", "Pending", "<none>"}; !reflect.DeepEqual(got, want) {
		t.Errorf("row = %#v, want %#v", got, want)
	}
	_, got, err := podCertificateRequestDef().getAttrs(pcr)
	if err != nil {
		t.Fatal(err)
	}
	want := fields.Set{"metadata.name": "bar", "metadata.namespace": "foo", "spec.signerName": "foo.com/abc", "spec.podName": "pod-1", "spec.nodeName": "node-1"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("fields = %v, want %v", got, want)
	}
}
