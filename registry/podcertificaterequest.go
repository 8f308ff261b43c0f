package registry

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net/mail"
	"strings"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
)

// PodCertificateRequests, transcribed from k8s.io/kubernetes
// pkg/registry/certificates/podcertificaterequest and
// pkg/apis/certificates/validation: a kubelet asks a signer for a pod's
// certificate; the spec is immutable, and the status (set once by the
// signer, who must be allowed to "sign" for the signer name: see
// CertificatesAdmission) moves from pending to Issued, Denied or Failed.
// certificates.k8s.io/v1 has only the stub PKCS#10 request, not v1beta1's
// pkixPublicKey and proofOfPossession.

// Limits of upstream's pkg/apis/certificates/types.go, and the default of
// maxExpirationSeconds (pkg/apis/certificates/v1/zz_generated.defaults.go).
const (
	maxStubPKCS10RequestSize          = 10 * 1024
	maxCertificateChainSize           = 100 * 1024
	minMaxExpirationSeconds           = 60 * 60
	maxMaxExpirationSeconds           = 91 * 24 * 60 * 60
	kubernetesMaxMaxExpirationSeconds = 24 * 60 * 60
	defaultMaxExpirationSeconds       = 24 * 60 * 60
)

func podCertificateRequestDef() *resourceDef {
	pcr := func(obj runtime.Object) *certificatesv1.PodCertificateRequest {
		return obj.(*certificatesv1.PodCertificateRequest)
	}
	return &resourceDef{
		gvr:         certificatesv1.SchemeGroupVersion.WithResource("podcertificaterequests"),
		kind:        "PodCertificateRequest",
		singular:    "podcertificaterequest",
		namespaced:  true,
		keyPrefix:   "podcertificaterequests",
		newFunc:     func() runtime.Object { return &certificatesv1.PodCertificateRequest{} },
		newListFunc: func() runtime.Object { return &certificatesv1.PodCertificateRequestList{} },
		defaults: func(obj any) {
			if s := &obj.(*certificatesv1.PodCertificateRequest).Spec; s.MaxExpirationSeconds == nil {
				s.MaxExpirationSeconds = ptrTo[int32](defaultMaxExpirationSeconds)
			}
		},
		fields: func(obj runtime.Object) fields.Set {
			s := pcr(obj).Spec
			return fields.Set{"spec.signerName": s.SignerName, "spec.podName": s.PodName, "spec.nodeName": string(s.NodeName)}
		},
		fieldLabels: []string{"spec.signerName", "spec.podName", "spec.nodeName"},
		// A kubelet watches its own node's requests.
		index:               &fieldIndex{field: "spec.nodeName", value: func(obj runtime.Object) string { return string(pcr(obj).Spec.NodeName) }},
		ownUpdateValidation: true,
		validate:            func(obj runtime.Object) field.ErrorList { return validatePCR(pcr(obj)) },
		// Only metadata changes; the spec is immutable.
		validateUpdate: func(obj, old runtime.Object) field.ErrorList {
			return apivalidation.ValidateImmutableField(pcr(obj).Spec, pcr(old).Spec, field.NewPath("spec"))
		},
		conditionalUpdate: true,
		status: &statusDef{
			keepStatus:    func(obj, old runtime.Object) { pcr(obj).Status = pcr(old).Status },
			keepSpec:      func(obj, old runtime.Object) { pcr(obj).Spec = pcr(old).Spec },
			resetOnCreate: func(obj runtime.Object) { pcr(obj).Status = certificatesv1.PodCertificateRequestStatus{} },
			prepare: func(obj, old runtime.Object) {
				metav1.ResetObjectMetaForStatus(&pcr(obj).ObjectMeta, &pcr(old).ObjectMeta)
			},
			validate: func(obj, old runtime.Object) field.ErrorList {
				return validatePCRStatusUpdate(pcr(obj), pcr(old), time.Now())
			},
			resetFields: []fieldpath.Path{fieldpath.MakePathOrDie("metadata"), fieldpath.MakePathOrDie("spec")},
		},
		columns: []metav1.TableColumnDefinition{
			nameCol,
			col("PodName", "string", certificatesv1.PodCertificateRequestSpec{}.SwaggerDoc()["podName"]),
			col("ServiceAccountName", "string", certificatesv1.PodCertificateRequestSpec{}.SwaggerDoc()["serviceAccountName"]),
			col("NodeName", "string", certificatesv1.PodCertificateRequestSpec{}.SwaggerDoc()["nodeName"]),
			col("SignerName", "string", certificatesv1.PodCertificateRequestSpec{}.SwaggerDoc()["signerName"]),
			col("State", "string", "Is the request Pending, Issued, Denied, or Failed?"),
			// Upstream prints this cell only for -o wide but declares the
			// column at priority 0, so the server's table has one cell
			// fewer than columns; here it is a wide column with its cell.
			wideCol("UnverifiedUserAnnotations", "string", certificatesv1.PodCertificateRequestSpec{}.SwaggerDoc()["unverifiedUserAnnotations"]),
		},
		row: func(obj runtime.Object) []any { return pcrRow(pcr(obj)) },
	}
}

// validatePCR is upstream's ValidatePodCertificateRequestCreate without
// the metadata, which the strategy checks.
func validatePCR(req *certificatesv1.PodCertificateRequest) field.ErrorList {
	spec := field.NewPath("spec")
	errs := validateSignerName(spec.Child("signerName"), req.Spec.SignerName)
	if req.Spec.UnverifiedUserAnnotations != nil {
		errs = append(errs, validateUserAnnotations(req.Spec.UnverifiedUserAnnotations, spec.Child("unverifiedUserAnnotations"))...)
	}
	errs = append(errs, invalidEach(spec.Child("podName"), req.Spec.PodName, apivalidation.NameIsDNSSubdomain(req.Spec.PodName, false))...)
	errs = append(errs, validateUID(spec.Child("podUID"), string(req.Spec.PodUID))...)
	errs = append(errs, invalidEach(spec.Child("serviceAccountName"), req.Spec.ServiceAccountName, apivalidation.ValidateServiceAccountName(req.Spec.ServiceAccountName, false))...)
	errs = append(errs, validateUID(spec.Child("serviceAccountUID"), string(req.Spec.ServiceAccountUID))...)
	errs = append(errs, invalidEach(spec.Child("nodeName"), req.Spec.NodeName, apivalidation.NameIsDNSSubdomain(string(req.Spec.NodeName), false))...)
	errs = append(errs, validateUID(spec.Child("nodeUID"), string(req.Spec.NodeUID))...)

	max := req.Spec.MaxExpirationSeconds
	if max == nil {
		return append(errs, field.Required(spec.Child("maxExpirationSeconds"), "must be set"))
	}
	// Kubernetes signers issue for at most a day, others for 91 days.
	upper := int32(maxMaxExpirationSeconds)
	if isKubernetesSignerName(req.Spec.SignerName) {
		upper = kubernetesMaxMaxExpirationSeconds
	}
	if *max < minMaxExpirationSeconds || *max > upper {
		errs = append(errs, field.Invalid(spec.Child("maxExpirationSeconds"), max, fmt.Sprintf("must be in the range [%d, %d]", minMaxExpirationSeconds, upper)))
	}
	if len(req.Spec.StubPKCS10Request) == 0 {
		return append(errs, field.Invalid(spec, field.OmitValueType{}, "exactly one of (stubPKCS10Request) or (pkixPublicKey, proofOfPossession) must be set"))
	}
	return append(errs, validateStubPKCS10Request(req.Spec.StubPKCS10Request)...)
}

func validateUID(path *field.Path, uid string) field.ErrorList {
	switch {
	case uid == "":
		return field.ErrorList{field.Invalid(path, uid, "must not be empty")}
	case len(uid) > 128:
		return field.ErrorList{field.TooLong(path, uid, 128)}
	}
	return nil
}

// validateUserAnnotations is upstream's ValidateUserAnnotations
// (pkg/apis/core/validation/validation.go): every key
// domain-prefixed, the whole within the annotations' size limit.
func validateUserAnnotations(annotations map[string]string, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for k := range annotations {
		errs = append(errs, utilvalidation.IsDomainPrefixedKey(path, strings.ToLower(k))...)
	}
	if err := apivalidation.ValidateAnnotationsSize(annotations); err != nil {
		errs = append(errs, field.TooLong(path, "", apivalidation.TotalAnnotationSizeLimitB))
	}
	return errs
}

var pkcs10ReqPath = field.NewPath("spec", "stubPKCS10Request")

// validateStubPKCS10Request: a DER PKCS#10 request of an Ed25519, ECDSA
// P-256/384/521 or RSA 3072/4096 key, signed by it. Its content is not
// checked (kubelet sends it empty; signers deny what they do not want).
func validateStubPKCS10Request(der []byte) field.ErrorList {
	if len(der) > maxStubPKCS10RequestSize {
		return field.ErrorList{field.TooLong(pkcs10ReqPath, der, maxStubPKCS10RequestSize)}
	}
	req, err := x509.ParseCertificateRequest(der)
	if err != nil {
		return field.ErrorList{field.Invalid(pkcs10ReqPath, field.OmitValueType{}, "must be a valid PKCS#10 CSR")}
	}
	switch pub := req.PublicKey.(type) {
	case ed25519.PublicKey:
	case *ecdsa.PublicKey:
		if pub.Curve != elliptic.P256() && pub.Curve != elliptic.P384() && pub.Curve != elliptic.P521() {
			return field.ErrorList{field.Invalid(pkcs10ReqPath, "curve "+pub.Curve.Params().Name, "elliptic public keys must use curve P256, P384, or P521")}
		}
	case *rsa.PublicKey:
		if bits := pub.Size() * 8; bits != 3072 && bits != 4096 {
			return field.ErrorList{field.Invalid(pkcs10ReqPath, fmt.Sprintf("%d-bit modulus", bits), "RSA keys must have modulus size 3072 or 4096")}
		}
	default:
		return field.ErrorList{field.Invalid(pkcs10ReqPath, field.OmitValueType{}, "unknown public key type; supported types are Ed25519, ECDSA, and RSA")}
	}
	if err := req.CheckSignature(); err != nil {
		return field.ErrorList{field.Invalid(pkcs10ReqPath, field.OmitValueType{}, "invalid signature")}
	}
	return nil
}

var (
	certChainPath    = field.NewPath("status", "certificateChain")
	notBeforePath    = field.NewPath("status", "notBefore")
	notAfterPath     = field.NewPath("status", "notAfter")
	beginRefreshPath = field.NewPath("status", "beginRefreshAt")
)

// pcrTerminal are the conditions that end a request.
var pcrTerminal = []string{certificatesv1.PodCertificateRequestConditionTypeIssued, certificatesv1.PodCertificateRequestConditionTypeDenied, certificatesv1.PodCertificateRequestConditionTypeFailed}

// validatePCRStatusUpdate is upstream's
// ValidatePodCertificateRequestStatusUpdate without the metadata, which the
// strategy checks, at the time now: at most one of Issued, Denied, Failed,
// True; the status is set once, and an issued chain matches the request's
// key, its times, and the request's maximum lifetime.
func validatePCRStatusUpdate(req, old *certificatesv1.PodCertificateRequest, now time.Time) field.ErrorList {
	var errs field.ErrorList
	conditions := field.NewPath("status", "conditions")
	known := 0
	for i, c := range req.Status.Conditions {
		// Upstream names the index as a child: status.conditions.[0].type.
		at := conditions.Child(fmt.Sprintf("[%d]", i))
		switch c.Type {
		case certificatesv1.PodCertificateRequestConditionTypeIssued, certificatesv1.PodCertificateRequestConditionTypeDenied, certificatesv1.PodCertificateRequestConditionTypeFailed:
			known++
			if known > 1 {
				errs = append(errs, field.Invalid(at.Child("type"), c.Type, `There may be at most one condition with type "Issued", "Denied", or "Failed"`))
			}
			if c.Status != metav1.ConditionTrue {
				errs = append(errs, field.NotSupported(at.Child("status"), c.Status, []metav1.ConditionStatus{metav1.ConditionTrue}))
			}
		default:
			errs = append(errs, field.NotSupported(at.Child("type"), c.Type, pcrTerminal))
		}
	}
	errs = append(errs, metav1validation.ValidateConditions(req.Status.Conditions, conditions)...)
	if len(errs) > 0 {
		return errs
	}
	if pcrHas(old, pcrTerminal...) {
		return immutable(req.Status, old.Status, field.NewPath("status"), "immutable after PodCertificateRequest is issued, denied, or failed")
	}
	if pcrHas(req, certificatesv1.PodCertificateRequestConditionTypeDenied, certificatesv1.PodCertificateRequestConditionTypeFailed) {
		want := certificatesv1.PodCertificateRequestStatus{Conditions: req.Status.Conditions}
		return immutable(req.Status, want, field.NewPath("status"), "non-condition status fields must be empty when denying or failing the PodCertificateRequest")
	}
	if pcrHas(req, certificatesv1.PodCertificateRequestConditionTypeIssued) {
		return validatePCRIssued(req, old, now)
	}
	return immutable(req.Status, old.Status, field.NewPath("status"), `status is immutable unless transitioning to "Issued", "Denied", or "Failed"`)
}

// validatePCRIssued checks the status of a request being issued.
func validatePCRIssued(req, old *certificatesv1.PodCertificateRequest, now time.Time) field.ErrorList {
	st := req.Status
	if len(st.CertificateChain) > maxCertificateChainSize {
		return field.ErrorList{field.TooLong(certChainPath, st.CertificateChain, maxCertificateChainSize)}
	}
	leafBlock, rest := pem.Decode([]byte(st.CertificateChain))
	switch {
	case leafBlock == nil:
		return field.ErrorList{field.Invalid(certChainPath, st.CertificateChain, "issued certificate chain must contain at least one certificate")}
	case leafBlock.Type != "CERTIFICATE":
		return field.ErrorList{field.Invalid(certChainPath, st.CertificateChain, "issued certificate chain must consist entirely of CERTIFICATE PEM blocks")}
	}
	leaf, err := x509.ParseCertificate(leafBlock.Bytes)
	if err != nil {
		return field.ErrorList{field.Invalid(certChainPath, st.CertificateChain, "leaf certificate does not parse as valid X.509")}
	}
	var errs field.ErrorList
	for _, name := range leaf.DNSNames {
		if name == "" {
			errs = append(errs, field.Invalid(certChainPath, name, "leaf certificate should not contain empty DNSName"))
		}
		if strings.Contains(name, "..") {
			errs = append(errs, field.Invalid(certChainPath, name, "leaf certificate's DNSName should not contain '..'"))
		}
		if strings.HasPrefix(name, ".") || strings.HasSuffix(name, ".") {
			errs = append(errs, field.Invalid(certChainPath, name, "leaf certificate's DNSName should not start or end with '.'"))
		}
	}
	for _, address := range leaf.EmailAddresses {
		if _, err := mail.ParseAddress(address); err != nil {
			errs = append(errs, field.Invalid(certChainPath, address, "leaf certificate should not contain invalid EmailAddress"))
		}
	}
	stub, err := x509.ParseCertificateRequest(old.Spec.StubPKCS10Request)
	if err != nil {
		return append(errs, field.Invalid(pkcs10ReqPath, field.OmitValueType{}, "must be a valid PKCS#10 CSR"))
	}
	if want, ok := stub.PublicKey.(interface{ Equal(crypto.PublicKey) bool }); ok && !want.Equal(leaf.PublicKey) {
		return append(errs, field.Invalid(certChainPath, st.CertificateChain, "leaf certificate was not issued to the requested public key"))
	}
	if st.NotBefore == nil {
		errs = append(errs, field.Required(notBeforePath, "must be present and consistent with the issued certificate"))
	}
	if st.NotAfter == nil {
		errs = append(errs, field.Required(notAfterPath, "must be present and consistent with the issued certificate"))
	}
	if st.BeginRefreshAt == nil {
		errs = append(errs, field.Required(beginRefreshPath, "must be present and in the range [notbefore+10min, notafter-10min]"))
	}
	if len(errs) > 0 {
		return errs
	}
	lifetime := leaf.NotAfter.Sub(leaf.NotBefore)
	switch {
	case !st.NotBefore.Time.Equal(leaf.NotBefore):
		return field.ErrorList{field.Invalid(notBeforePath, st.NotBefore.Time, "must be set to the NotBefore time encoded in the leaf certificate")}
	case !st.NotBefore.Time.After(now.Add(-5*time.Minute)) || !st.NotBefore.Time.Before(now.Add(5*time.Minute)):
		return field.ErrorList{field.Invalid(notBeforePath, st.NotBefore.Time, "must be set to within 5 minutes of kube-apiserver's current time")}
	case !st.NotAfter.Time.Equal(leaf.NotAfter):
		return field.ErrorList{field.Invalid(notAfterPath, st.NotAfter.Time, "must be set to the NotAfter time encoded in the leaf certificate")}
	case lifetime < time.Hour:
		return field.ErrorList{field.Invalid(certChainPath, lifetime, "leaf certificate lifetime must be >= 1 hour")}
	case lifetime > time.Duration(*req.Spec.MaxExpirationSeconds)*time.Second:
		return field.ErrorList{field.Invalid(certChainPath, lifetime, fmt.Sprintf("leaf certificate lifetime must be <= spec.maxExpirationSeconds (%v)", *req.Spec.MaxExpirationSeconds))}
	case st.BeginRefreshAt.Time.Before(st.NotBefore.Time.Add(10 * time.Minute)):
		return field.ErrorList{field.Invalid(beginRefreshPath, st.BeginRefreshAt.Time, "must be at least 10 minutes after status.notBefore")}
	case st.BeginRefreshAt.Time.After(st.NotAfter.Time.Add(-10 * time.Minute)):
		return field.ErrorList{field.Invalid(beginRefreshPath, st.BeginRefreshAt.Time, "must be at least 10 minutes before status.notAfter")}
	}
	// The rest of the chain: certificates, not verified as a chain.
	for {
		var block *pem.Block
		if block, rest = pem.Decode(rest); block == nil {
			return nil
		}
		if block.Type != "CERTIFICATE" {
			return field.ErrorList{field.Invalid(certChainPath, st.CertificateChain, "issued certificate chain must consist entirely of CERTFICATE PEM blocks")}
		}
		if _, err := x509.ParseCertificate(block.Bytes); err != nil {
			return field.ErrorList{field.Invalid(certChainPath, st.CertificateChain, "intermediate certificate does not parse as valid X.509")}
		}
	}
}

// pcrHas reports whether req has a True condition of one of types.
func pcrHas(req *certificatesv1.PodCertificateRequest, types ...string) bool {
	for _, c := range req.Status.Conditions {
		for _, t := range types {
			if c.Type == t && c.Status == metav1.ConditionTrue {
				return true
			}
		}
	}
	return false
}

// immutable is upstream's validateSemanticEquality.
func immutable(a, b any, path *field.Path, detail string) field.ErrorList {
	if apiequality.Semantic.DeepEqual(a, b) {
		return nil
	}
	return field.ErrorList{field.Invalid(path, field.OmitValueType{}, detail)}
}

// pcrRow is upstream's printPodCertificateRequest, with the wide cell.
func pcrRow(req *certificatesv1.PodCertificateRequest) []any {
	state := "Pending"
	for _, c := range req.Status.Conditions {
		switch c.Type {
		case certificatesv1.PodCertificateRequestConditionTypeIssued, certificatesv1.PodCertificateRequestConditionTypeDenied, certificatesv1.PodCertificateRequestConditionTypeFailed:
			state = c.Type
		}
	}
	s := req.Spec
	return []any{req.Name, s.PodName, s.ServiceAccountName, string(s.NodeName), s.SignerName, state, formatLabels(s.UnverifiedUserAnnotations)}
}
