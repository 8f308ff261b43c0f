package registry

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/diff"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/apimachinery/pkg/util/sets"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/kubestore/kubestore/registry/pkcs10"
)

// CertificateSigningRequests, transcribed from k8s.io/kubernetes
// pkg/registry/certificates/certificates (strategy), pkg/apis/certificates
// (helpers, validation) and pkg/printers/internalversion. A create records
// the requesting user and starts without status; the spec never changes;
// the status subresource (the signer) sets the certificate and conditions
// other than Approved and Denied, the approval subresource only those two.
// Who may sign or approve for a signer is checked by CertificatesAdmission.

// legacyUnknownSignerName is the signer of CSRs made through
// certificates.k8s.io/v1beta1; v1 refuses it on create.
const legacyUnknownSignerName = "kubernetes.io/legacy-unknown"

func certificateSigningRequestDef() *resourceDef {
	csr := func(obj runtime.Object) *certificatesv1.CertificateSigningRequest {
		return obj.(*certificatesv1.CertificateSigningRequest)
	}
	return &resourceDef{
		gvr:         certificatesv1.SchemeGroupVersion.WithResource("certificatesigningrequests"),
		kind:        "CertificateSigningRequest",
		singular:    "certificatesigningrequest",
		shortNames:  []string{"csr"},
		keyPrefix:   "certificatesigningrequests",
		newFunc:     func() runtime.Object { return &certificatesv1.CertificateSigningRequest{} },
		newListFunc: func() runtime.Object { return &certificatesv1.CertificateSigningRequestList{} },
		// Upstream's ValidateCertificateRequestName: any name the store's
		// key accepts.
		nameFunc: func(string, bool) []string { return nil },
		fields: func(obj runtime.Object) fields.Set {
			return fields.Set{"spec.signerName": csr(obj).Spec.SignerName}
		},
		fieldLabels:      []string{"spec.signerName"},
		prepareForCreate: func(ctx context.Context, obj runtime.Object) { setCSRRequestor(ctx, csr(obj)) },
		// The spec is immutable after creation; status changes through
		// the subresources.
		prepareForUpdate:    func(obj, old runtime.Object) { csr(obj).Spec = csr(old).Spec },
		ownUpdateValidation: true,
		validate: func(obj runtime.Object) field.ErrorList {
			return validateCSR(csr(obj), csrValidationOptions(csr(obj), nil))
		},
		validateUpdate: func(obj, old runtime.Object) field.ErrorList {
			return validateCSRUpdate(csr(obj), csr(old), csrValidationOptions(csr(obj), csr(old)))
		},
		resetFields: []fieldpath.Path{fieldpath.MakePathOrDie("spec"), fieldpath.MakePathOrDie("status")},
		status: &statusDef{
			keepStatus: func(obj, old runtime.Object) { csr(obj).Status = csr(old).Status },
			keepSpec:   func(obj, old runtime.Object) { csr(obj).Spec = csr(old).Spec },
			// Users cannot create pre-approved requests.
			resetOnCreate: func(obj runtime.Object) {
				csr(obj).Status = certificatesv1.CertificateSigningRequestStatus{Conditions: []certificatesv1.CertificateSigningRequestCondition{}}
			},
			// The signer keeps the Approved and Denied conditions as they
			// are; adding or removing one fails validation.
			prepare: func(obj, old runtime.Object) {
				n, o := csr(obj), csr(old)
				preserveConditionInstances(n, o, certificatesv1.CertificateApproved)
				preserveConditionInstances(n, o, certificatesv1.CertificateDenied)
				populateConditionTimestamps(n, o)
			},
			validate: func(obj, old runtime.Object) field.ErrorList {
				opts := csrValidationOptions(csr(obj), csr(old))
				opts.allowSettingCertificate = true
				return validateCSRUpdate(csr(obj), csr(old), opts)
			},
			resetFields: []fieldpath.Path{fieldpath.MakePathOrDie("spec"), fieldpath.MakePathOrDie("status", "conditions")},
		},
		subresources: map[string]*statusDef{
			"approval": {
				// Only the conditions change.
				keepSpec: func(obj, old runtime.Object) {
					n := csr(obj)
					conditions := n.Status.Conditions
					n.Spec, n.Status = csr(old).Spec, csr(old).Status
					n.Status.Conditions = conditions
				},
				prepare: func(obj, old runtime.Object) { populateConditionTimestamps(csr(obj), csr(old)) },
				validate: func(obj, old runtime.Object) field.ErrorList {
					opts := csrValidationOptions(csr(obj), csr(old))
					opts.allowSettingApprovalConditions = true
					return validateCSRUpdate(csr(obj), csr(old), opts)
				},
				resetFields: []fieldpath.Path{fieldpath.MakePathOrDie("spec"), fieldpath.MakePathOrDie("status", "certificate")},
			},
		},
		columns: []metav1.TableColumnDefinition{
			nameCol,
			ageCol,
			col("SignerName", "string", certificatesv1.CertificateSigningRequestSpec{}.SwaggerDoc()["signerName"]),
			col("Requestor", "string", certificatesv1.CertificateSigningRequestSpec{}.SwaggerDoc()["request"]),
			col("RequestedDuration", "string", certificatesv1.CertificateSigningRequestSpec{}.SwaggerDoc()["expirationSeconds"]),
			col("Condition", "string", certificatesv1.CertificateSigningRequestStatus{}.SwaggerDoc()["conditions"]),
		},
		row: func(obj runtime.Object) []any { return csrRow(csr(obj)) },
	}
}

// setCSRRequestor is upstream's PrepareForCreate: the requesting user,
// never what the client sent, is the requestor.
func setCSRRequestor(ctx context.Context, csr *certificatesv1.CertificateSigningRequest) {
	csr.Spec.Username, csr.Spec.UID, csr.Spec.Groups, csr.Spec.Extra = "", "", nil, nil
	u, ok := genericapirequest.UserFrom(ctx)
	if !ok {
		return
	}
	csr.Spec.Username = u.GetName()
	csr.Spec.UID = u.GetUID()
	csr.Spec.Groups = u.GetGroups()
	if extra := u.GetExtra(); len(extra) > 0 {
		csr.Spec.Extra = make(map[string]certificatesv1.ExtraValue, len(extra))
		for k, v := range extra {
			csr.Spec.Extra[k] = v
		}
	}
}

// preserveConditionInstances copies the conditions of type t from old
// into csr when csr has as many of them; otherwise validation refuses the
// change.
func preserveConditionInstances(csr, old *certificatesv1.CertificateSigningRequest, t certificatesv1.RequestConditionType) {
	oldIndices, newIndices := conditionIndices(old, t), conditionIndices(csr, t)
	if len(oldIndices) != len(newIndices) {
		return
	}
	for i, oldIndex := range oldIndices {
		csr.Status.Conditions[newIndices[i]] = old.Status.Conditions[oldIndex]
	}
}

func conditionIndices(csr *certificatesv1.CertificateSigningRequest, t certificatesv1.RequestConditionType) []int {
	var out []int
	for i, c := range csr.Status.Conditions {
		if c.Type == t {
			out = append(out, i)
		}
	}
	return out
}

// csrNow is the time conditions are stamped with; tests set it.
var csrNow = metav1.Now

// populateConditionTimestamps sets a condition's missing lastUpdateTime
// to now, and its missing lastTransitionTime to that of the stored
// condition of the same type and status, or now.
func populateConditionTimestamps(csr, old *certificatesv1.CertificateSigningRequest) {
	now := csrNow()
	for i := range csr.Status.Conditions {
		c := &csr.Status.Conditions[i]
		if c.LastUpdateTime.IsZero() {
			c.LastUpdateTime = now
		}
		if !c.LastTransitionTime.IsZero() {
			continue
		}
		c.LastTransitionTime = now
		for _, o := range old.Status.Conditions {
			if o.Type == c.Type && o.Status == c.Status && !o.LastTransitionTime.IsZero() {
				c.LastTransitionTime = o.LastTransitionTime
				break
			}
		}
	}
}

// csrOptions are upstream's certificateValidationOptions: what an update
// through a subresource may change, and the bad data tolerated because the
// stored object already has it.
type csrOptions struct {
	allowSettingApprovalConditions bool
	allowSettingCertificate        bool
	allowBothApprovedAndDenied     bool
	allowResettingCertificate      bool
	allowLegacySignerName          bool
	allowDuplicateConditionTypes   bool
	allowEmptyConditionType        bool
	allowArbitraryCertificate      bool
	allowUnknownUsages             bool
	allowDuplicateUsages           bool
}

// csrValidationOptions is upstream's getValidationOptions; old is nil on
// create.
func csrValidationOptions(csr, old *certificatesv1.CertificateSigningRequest) csrOptions {
	if old == nil {
		return csrOptions{}
	}
	approved, denied := conditionIndices(old, certificatesv1.CertificateApproved), conditionIndices(old, certificatesv1.CertificateDenied)
	seen := map[certificatesv1.RequestConditionType]bool{}
	var duplicate, empty bool
	for _, c := range old.Status.Conditions {
		duplicate = duplicate || seen[c.Type]
		empty = empty || c.Type == ""
		seen[c.Type] = true
	}
	seenUsages := map[certificatesv1.KeyUsage]bool{}
	var duplicateUsage, unknownUsage bool
	for _, u := range old.Spec.Usages {
		duplicateUsage = duplicateUsage || seenUsages[u]
		unknownUsage = unknownUsage || !csrUsages.Has(string(u))
		seenUsages[u] = true
	}
	return csrOptions{
		allowBothApprovedAndDenied:   len(approved) > 0 && len(denied) > 0,
		allowLegacySignerName:        old.Spec.SignerName == legacyUnknownSignerName,
		allowDuplicateConditionTypes: duplicate,
		allowEmptyConditionType:      empty,
		// Updates that leave the certificate alone, or of a stored one
		// that is already invalid.
		allowArbitraryCertificate: csr != nil && bytes.Equal(csr.Status.Certificate, old.Status.Certificate) ||
			validateCertificatePEM(old.Status.Certificate) != nil,
		allowDuplicateUsages: duplicateUsage,
		allowUnknownUsages:   unknownUsage,
	}
}

// csrUsages are the key usages a CSR may request.
var csrUsages = sets.New(
	string(certificatesv1.UsageSigning), string(certificatesv1.UsageDigitalSignature), string(certificatesv1.UsageContentCommitment),
	string(certificatesv1.UsageKeyEncipherment), string(certificatesv1.UsageKeyAgreement), string(certificatesv1.UsageDataEncipherment),
	string(certificatesv1.UsageCertSign), string(certificatesv1.UsageCRLSign), string(certificatesv1.UsageEncipherOnly),
	string(certificatesv1.UsageDecipherOnly), string(certificatesv1.UsageAny), string(certificatesv1.UsageServerAuth),
	string(certificatesv1.UsageClientAuth), string(certificatesv1.UsageCodeSigning), string(certificatesv1.UsageEmailProtection),
	string(certificatesv1.UsageSMIME), string(certificatesv1.UsageIPsecEndSystem), string(certificatesv1.UsageIPsecTunnel),
	string(certificatesv1.UsageIPsecUser), string(certificatesv1.UsageTimestamping), string(certificatesv1.UsageOCSPSigning),
	string(certificatesv1.UsageMicrosoftSGC), string(certificatesv1.UsageNetscapeSGC),
)

var (
	// trueOnlyConditions may only have status True.
	trueOnlyConditions = sets.New(certificatesv1.CertificateApproved, certificatesv1.CertificateDenied, certificatesv1.CertificateFailed)
	trueStatusOnly     = sets.New(string(corev1.ConditionTrue))
	allStatusValues    = sets.New(string(corev1.ConditionTrue), string(corev1.ConditionFalse), string(corev1.ConditionUnknown))
)

// validateCSR is upstream's validateCertificateSigningRequest without the
// metadata, which the strategy checks: a PKCS#10 request with a valid
// signature, known usages each once, a valid signer, at least ten minutes,
// valid conditions and certificate.
func validateCSR(csr *certificatesv1.CertificateSigningRequest, opts csrOptions) field.ErrorList {
	var errs field.ErrorList
	spec := field.NewPath("spec")
	if req, err := pkcs10.Parse(csr.Spec.Request); err != nil {
		errs = append(errs, field.Invalid(spec.Child("request"), csr.Spec.Request, err.Error()))
	} else if err := req.CheckSignature(); err != nil {
		errs = append(errs, field.Invalid(spec.Child("request"), csr.Spec.Request, err.Error()))
	}
	if len(csr.Spec.Usages) == 0 {
		errs = append(errs, field.Required(spec.Child("usages"), ""))
	}
	if !opts.allowUnknownUsages {
		for i, u := range csr.Spec.Usages {
			if !csrUsages.Has(string(u)) {
				errs = append(errs, field.NotSupported(spec.Child("usages").Index(i), u, sets.List(csrUsages)))
			}
		}
	}
	if !opts.allowDuplicateUsages {
		seen := make(map[certificatesv1.KeyUsage]bool, len(csr.Spec.Usages))
		for i, u := range csr.Spec.Usages {
			if seen[u] {
				errs = append(errs, field.Duplicate(spec.Child("usages").Index(i), u))
			}
			seen[u] = true
		}
	}
	if !opts.allowLegacySignerName && csr.Spec.SignerName == legacyUnknownSignerName {
		errs = append(errs, field.Invalid(spec.Child("signerName"), csr.Spec.SignerName, "the legacy signerName is not allowed via this API version"))
	} else {
		errs = append(errs, validateSignerName(spec.Child("signerName"), csr.Spec.SignerName)...)
	}
	if e := csr.Spec.ExpirationSeconds; e != nil && *e < 600 {
		errs = append(errs, field.Invalid(spec.Child("expirationSeconds"), *e, "may not specify a duration less than 600 seconds (10 minutes)"))
	}
	errs = append(errs, validateCSRConditions(field.NewPath("status", "conditions"), csr, opts)...)
	if !opts.allowArbitraryCertificate {
		if err := validateCertificatePEM(csr.Status.Certificate); err != nil {
			errs = append(errs, field.Invalid(field.NewPath("status", "certificate"), "<certificate data>", err.Error()))
		}
	}
	return errs
}

// validateCSRConditions: each condition has a type, once, and a status
// (True for Approved, Denied and Failed); Approved and Denied exclude each
// other.
func validateCSRConditions(path *field.Path, csr *certificatesv1.CertificateSigningRequest, opts csrOptions) field.ErrorList {
	var errs field.ErrorList
	seen := map[certificatesv1.RequestConditionType]bool{}
	var approved, denied bool
	for i, c := range csr.Status.Conditions {
		if !opts.allowEmptyConditionType && c.Type == "" {
			errs = append(errs, field.Required(path.Index(i).Child("type"), ""))
		}
		allowed := allStatusValues
		if trueOnlyConditions.Has(c.Type) {
			allowed = trueStatusOnly
		}
		switch {
		case c.Status == "":
			errs = append(errs, field.Required(path.Index(i).Child("status"), ""))
		case !allowed.Has(string(c.Status)):
			errs = append(errs, field.NotSupported(path.Index(i).Child("status"), c.Status, sets.List(allowed)))
		}
		if !opts.allowBothApprovedAndDenied {
			switch c.Type {
			case certificatesv1.CertificateApproved:
				approved = true
				if denied {
					errs = append(errs, field.Invalid(path, c.Type, "Approved and Denied conditions are mutually exclusive"))
				}
			case certificatesv1.CertificateDenied:
				denied = true
				if approved {
					errs = append(errs, field.Invalid(path, c.Type, "Approved and Denied conditions are mutually exclusive"))
				}
			}
		}
		if !opts.allowDuplicateConditionTypes {
			if seen[c.Type] {
				errs = append(errs, field.Duplicate(path.Index(i).Child("type"), c.Type))
			}
			seen[c.Type] = true
		}
	}
	return errs
}

// validateCertificatePEM: empty, or CERTIFICATE PEM blocks without
// headers that each parse.
func validateCertificatePEM(data []byte) error {
	if len(data) == 0 {
		return nil
	}
	blocks := 0
	for {
		block, rest := pem.Decode(data)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			return fmt.Errorf("only CERTIFICATE PEM blocks are allowed, found %q", block.Type)
		}
		if len(block.Headers) != 0 {
			return errors.New("no PEM block headers are permitted")
		}
		blocks++
		certs, err := x509.ParseCertificates(block.Bytes)
		if err != nil {
			return err
		}
		if len(certs) == 0 {
			return errors.New("found CERTIFICATE PEM block containing 0 certificates")
		}
		data = rest
	}
	if blocks == 0 {
		return errors.New("must contain at least one CERTIFICATE PEM block")
	}
	return nil
}

// validateCSRUpdate is upstream's validateCertificateSigningRequestUpdate
// without the metadata: no update removes an Approved, Denied or Failed
// condition; only the approval subresource adds or changes Approved and
// Denied; only the status subresource sets the certificate, once.
func validateCSRUpdate(csr, old *certificatesv1.CertificateSigningRequest, opts csrOptions) field.ErrorList {
	errs := validateCSR(csr, opts)
	conditions := field.NewPath("status", "conditions")
	for _, t := range []certificatesv1.RequestConditionType{certificatesv1.CertificateApproved, certificatesv1.CertificateDenied, certificatesv1.CertificateFailed} {
		if len(conditionIndices(csr, t)) < len(conditionIndices(old, t)) {
			errs = append(errs, field.Forbidden(conditions, fmt.Sprintf("updates may not remove a condition of type %q", t)))
		}
	}
	if !opts.allowSettingApprovalConditions {
		for _, t := range []certificatesv1.RequestConditionType{certificatesv1.CertificateApproved, certificatesv1.CertificateDenied} {
			oldConditions, newConditions := findCSRConditions(old, t), findCSRConditions(csr, t)
			switch {
			case len(newConditions) < len(oldConditions):
				// refused above
			case len(newConditions) > len(oldConditions):
				errs = append(errs, field.Forbidden(conditions, fmt.Sprintf("updates may not add a condition of type %q", t)))
			case !apiequality.Semantic.DeepEqual(oldConditions, newConditions):
				errs = append(errs, field.Forbidden(conditions, fmt.Sprintf("updates may not modify a condition of type %q\n%v", t, diff.Diff(oldConditions, newConditions))))
			}
		}
	}
	if !bytes.Equal(csr.Status.Certificate, old.Status.Certificate) {
		switch {
		case !opts.allowSettingCertificate:
			errs = append(errs, field.Forbidden(field.NewPath("status", "certificate"), "updates may not set certificate content"))
		case !opts.allowResettingCertificate && len(old.Status.Certificate) > 0:
			errs = append(errs, field.Forbidden(field.NewPath("status", "certificate"), "updates may not modify existing certificate content"))
		}
	}
	return errs
}

func findCSRConditions(csr *certificatesv1.CertificateSigningRequest, t certificatesv1.RequestConditionType) []certificatesv1.CertificateSigningRequestCondition {
	var out []certificatesv1.CertificateSigningRequestCondition
	for _, c := range csr.Status.Conditions {
		if c.Type == t {
			out = append(out, c)
		}
	}
	return out
}

// validateSignerName is upstream's ValidateSignerName
// (pkg/apis/core/validation/names.go): <domain with a dot>/<path>, each
// part made of DNS labels and subdomains, at most 571 characters.
func validateSignerName(path *field.Path, signerName string) field.ErrorList {
	if signerName == "" {
		return field.ErrorList{field.Required(path, "")}
	}
	segments := strings.Split(signerName, "/")
	if len(segments) != 2 {
		return field.ErrorList{field.Invalid(path, signerName, "must be a fully qualified domain and path of the form 'example.com/signer-name'")}
	}
	var errs field.ErrorList
	maxDomain := utilvalidation.DNS1123SubdomainMaxLength
	if len(segments[0]) > maxDomain {
		errs = append(errs, field.TooLong(path, "", maxDomain))
	}
	domainLabels := strings.Split(segments[0], ".")
	for _, l := range domainLabels {
		if msgs := utilvalidation.IsDNS1123Label(l); len(msgs) > 0 {
			for _, msg := range msgs {
				errs = append(errs, field.Invalid(path, segments[0], fmt.Sprintf("validating label %q: %s", l, msg)))
			}
			break
		}
	}
	if len(domainLabels) < 2 {
		errs = append(errs, field.Invalid(path, segments[0], "should be a domain with at least two segments separated by dots"))
	}
	for _, l := range strings.Split(segments[1], ".") {
		if msgs := utilvalidation.IsDNS1123Subdomain(l); len(msgs) > 0 {
			for _, msg := range msgs {
				errs = append(errs, field.Invalid(path, segments[1], fmt.Sprintf("validating label %q: %s", l, msg)))
			}
			break
		}
	}
	maxPath := utilvalidation.DNS1123SubdomainMaxLength + utilvalidation.DNS1123LabelMaxLength + 1
	if maxSigner := maxDomain + maxPath + 1; len(signerName) > maxSigner {
		errs = append(errs, field.TooLong(path, "", maxSigner))
	}
	return errs
}

// isKubernetesSignerName reports whether a signer is one the Kubernetes
// project reserves (kubernetes.io or a subdomain of it).
func isKubernetesSignerName(signerName string) bool {
	host, _, _ := strings.Cut(signerName, "/")
	return host == "kubernetes.io" || strings.HasSuffix(host, ".kubernetes.io")
}

// csrRow is upstream's printCertificateSigningRequest.
func csrRow(csr *certificatesv1.CertificateSigningRequest) []any {
	requested := "<none>"
	if e := csr.Spec.ExpirationSeconds; e != nil {
		requested = duration.HumanDuration(time.Duration(*e) * time.Second)
	}
	signer := "<none>"
	if csr.Spec.SignerName != "" {
		signer = csr.Spec.SignerName
	}
	return []any{csr.Name, age(csr.CreationTimestamp), signer, csr.Spec.Username, requested, csrCondition(csr)}
}

// csrCondition is upstream's extractCSRStatus: Denied over Approved over
// Pending, then Failed and Issued.
func csrCondition(csr *certificatesv1.CertificateSigningRequest) string {
	var approved, denied, failed bool
	for _, c := range csr.Status.Conditions {
		switch c.Type {
		case certificatesv1.CertificateApproved:
			approved = true
		case certificatesv1.CertificateDenied:
			denied = true
		case certificatesv1.CertificateFailed:
			failed = true
		}
	}
	status := "Pending"
	switch {
	case denied:
		status = "Denied"
	case approved:
		status = "Approved"
	}
	if failed {
		status += ",Failed"
	}
	if len(csr.Status.Certificate) > 0 {
		status += ",Issued"
	}
	return status
}
