package registry

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"
	genericapiserver "k8s.io/apiserver/pkg/server"
)

// The review APIs answer questions instead of storing objects: who am I
// (authentication.k8s.io SelfSubjectReview), who is this token
// (TokenReview, which a kubelet asks about the bearer tokens on its own
// port), may I / may they
// (authorization.k8s.io SelfSubjectAccessReview, SubjectAccessReview,
// LocalSubjectAccessReview), what may I (SelfSubjectRulesReview). Each is
// create-only and answered by the server's own authorizer, so `kubectl auth
// whoami` and `kubectl auth can-i` tell the truth for every identity
// kubestore knows. Upstream: pkg/registry/authentication/selfsubjectreview
// and pkg/registry/authorization/* in k8s.io/kubernetes.

// reviewTypes are registered in the scheme with the served kinds.
var reviewTypes = map[schema.GroupVersion][]runtime.Object{
	// TokenRequest is served as serviceaccounts/token in the core group.
	authenticationv1.SchemeGroupVersion: {&authenticationv1.SelfSubjectReview{}, &authenticationv1.TokenRequest{}, &authenticationv1.TokenReview{}},
	authorizationv1.SchemeGroupVersion: {&authorizationv1.SelfSubjectAccessReview{}, &authorizationv1.SelfSubjectRulesReview{},
		&authorizationv1.SubjectAccessReview{}, &authorizationv1.LocalSubjectAccessReview{}},
}

// addReviewTypes registers the review kinds under their version and the
// internal one, with the same Go type (see newScheme).
func addReviewTypes(s *runtime.Scheme) error {
	for gv, types := range reviewTypes {
		s.AddKnownTypes(gv, types...)
		metav1.AddToGroupVersion(s, gv)
		s.AddKnownTypes(schema.GroupVersion{Group: gv.Group, Version: runtime.APIVersionInternal}, types...)
		if err := s.SetVersionPriority(gv); err != nil {
			return err
		}
	}
	return nil
}

// InstallReviews installs the review APIs in gs, answered by tokens (the
// server's bearer-token authenticators), az (its authorizer) and rules (its
// rule resolver).
func (a *API) InstallReviews(gs *genericapiserver.GenericAPIServer, tokens authenticator.Request, az authorizer.Authorizer, rules authorizer.RuleResolver) error {
	authn := genericapiserver.NewDefaultAPIGroupInfo(authenticationv1.GroupName, a.scheme, runtime.NewParameterCodec(a.scheme), a.codecs)
	authn.VersionedResourcesStorageMap["v1"] = map[string]rest.Storage{
		"selfsubjectreviews": &reviewREST{singular: "selfsubjectreview", new: func() runtime.Object { return &authenticationv1.SelfSubjectReview{} },
			create: selfSubjectReview},
		"tokenreviews": &reviewREST{singular: "tokenreview", new: func() runtime.Object { return &authenticationv1.TokenReview{} },
			create: func(ctx context.Context, obj runtime.Object) (runtime.Object, error) {
				return tokenReview(tokens, obj.(*authenticationv1.TokenReview))
			}},
	}
	authz := genericapiserver.NewDefaultAPIGroupInfo(authorizationv1.GroupName, a.scheme, runtime.NewParameterCodec(a.scheme), a.codecs)
	authz.VersionedResourcesStorageMap["v1"] = map[string]rest.Storage{
		"selfsubjectaccessreviews": &reviewREST{singular: "selfsubjectaccessreview", new: func() runtime.Object { return &authorizationv1.SelfSubjectAccessReview{} },
			create: func(ctx context.Context, obj runtime.Object) (runtime.Object, error) {
				return selfSubjectAccessReview(ctx, az, obj.(*authorizationv1.SelfSubjectAccessReview))
			}},
		"selfsubjectrulesreviews": &reviewREST{singular: "selfsubjectrulesreview", new: func() runtime.Object { return &authorizationv1.SelfSubjectRulesReview{} },
			create: func(ctx context.Context, obj runtime.Object) (runtime.Object, error) {
				return selfSubjectRulesReview(ctx, rules, obj.(*authorizationv1.SelfSubjectRulesReview))
			}},
		"subjectaccessreviews": &reviewREST{singular: "subjectaccessreview", new: func() runtime.Object { return &authorizationv1.SubjectAccessReview{} },
			create: func(ctx context.Context, obj runtime.Object) (runtime.Object, error) {
				return subjectAccessReview(ctx, az, obj.(*authorizationv1.SubjectAccessReview))
			}},
		"localsubjectaccessreviews": &reviewREST{singular: "localsubjectaccessreview", namespaced: true, new: func() runtime.Object { return &authorizationv1.LocalSubjectAccessReview{} },
			create: func(ctx context.Context, obj runtime.Object) (runtime.Object, error) {
				return localSubjectAccessReview(ctx, az, obj.(*authorizationv1.LocalSubjectAccessReview))
			}},
	}
	if err := gs.InstallAPIGroups(&authn, &authz); err != nil {
		return fmt.Errorf("installing the review APIs: %w", err)
	}
	forgetStaticOpenAPISpecs(&authn, &authz)
	return nil
}

// reviewREST is one create-only review resource.
type reviewREST struct {
	singular   string
	namespaced bool
	new        func() runtime.Object
	create     func(ctx context.Context, obj runtime.Object) (runtime.Object, error)
}

var (
	_ rest.Creater              = (*reviewREST)(nil)
	_ rest.Scoper               = (*reviewREST)(nil)
	_ rest.SingularNameProvider = (*reviewREST)(nil)
)

func (r *reviewREST) New() runtime.Object     { return r.new() }
func (r *reviewREST) Destroy()                {}
func (r *reviewREST) NamespaceScoped() bool   { return r.namespaced }
func (r *reviewREST) GetSingularName() string { return r.singular }
func (r *reviewREST) Create(ctx context.Context, obj runtime.Object, createValidation rest.ValidateObjectFunc, _ *metav1.CreateOptions) (runtime.Object, error) {
	if createValidation != nil {
		if err := createValidation(ctx, obj.DeepCopyObject()); err != nil {
			return nil, err
		}
	}
	return r.create(ctx, obj)
}

func requestUser(ctx context.Context) (user.Info, error) {
	u, ok := genericapirequest.UserFrom(ctx)
	if !ok {
		return nil, apierrors.NewBadRequest("no user present on request")
	}
	return u, nil
}

func selfSubjectReview(ctx context.Context, _ runtime.Object) (runtime.Object, error) {
	u, err := requestUser(ctx)
	if err != nil {
		return nil, err
	}
	return &authenticationv1.SelfSubjectReview{
		ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(time.Now())},
		Status:     authenticationv1.SelfSubjectReviewStatus{UserInfo: userInfo(u)},
	}, nil
}

// tokenReview is upstream's TokenReview (pkg/registry/authentication/
// tokenreview): the token is authenticated as if it came in a request's
// Authorization header, for the audiences the review names (else the
// API's), and the review says who it is.
func tokenReview(tokens authenticator.Request, r *authenticationv1.TokenReview) (runtime.Object, error) {
	if r.Spec.Token == "" {
		return nil, apierrors.NewBadRequest("token is required for TokenReview in authentication")
	}
	req := &http.Request{Header: http.Header{"Authorization": {"Bearer " + r.Spec.Token}}}
	if len(r.Spec.Audiences) > 0 {
		req = req.WithContext(authenticator.WithAudiences(req.Context(), r.Spec.Audiences))
	}
	resp, ok, err := tokens.AuthenticateRequest(req)
	r.Status = authenticationv1.TokenReviewStatus{Authenticated: ok}
	if err != nil {
		r.Status.Error = err.Error()
	}
	if len(r.Spec.Audiences) > 0 && resp != nil && len(authenticator.Audiences(r.Spec.Audiences).Intersect(resp.Audiences)) == 0 {
		return nil, apierrors.NewInternalError(errors.New("error validating audiences"))
	}
	if ok && resp != nil && resp.User != nil {
		r.Status.User = userInfo(resp.User)
		r.Status.Audiences = resp.Audiences
	}
	return r, nil
}

// userInfo is u as the authentication API reports a user.
func userInfo(u user.Info) authenticationv1.UserInfo {
	info := authenticationv1.UserInfo{Username: u.GetName(), UID: u.GetUID(), Groups: u.GetGroups()}
	if extra := u.GetExtra(); len(extra) > 0 {
		info.Extra = make(map[string]authenticationv1.ExtraValue, len(extra))
		for k, v := range extra {
			info.Extra[k] = v
		}
	}
	return info
}

func selfSubjectAccessReview(ctx context.Context, az authorizer.Authorizer, r *authorizationv1.SelfSubjectAccessReview) (runtime.Object, error) {
	spec := field.NewPath("spec")
	errs := validateReviewMeta(r.ObjectMeta)
	errs = append(errs, validateAttributes(r.Spec.ResourceAttributes, r.Spec.NonResourceAttributes, spec)...)
	if len(errs) > 0 {
		return nil, apierrors.NewInvalid(authorizationv1.SchemeGroupVersion.WithKind("SelfSubjectAccessReview").GroupKind(), "", errs)
	}
	u, err := requestUser(ctx)
	if err != nil {
		return nil, err
	}
	r.Status = decide(ctx, az, attributes(u, r.Spec.ResourceAttributes, r.Spec.NonResourceAttributes))
	return r, nil
}

func subjectAccessReview(ctx context.Context, az authorizer.Authorizer, r *authorizationv1.SubjectAccessReview) (runtime.Object, error) {
	errs := validateReviewMeta(r.ObjectMeta)
	errs = append(errs, validateSubjectSpec(r.Spec, field.NewPath("spec"))...)
	if len(errs) > 0 {
		return nil, apierrors.NewInvalid(authorizationv1.SchemeGroupVersion.WithKind("SubjectAccessReview").GroupKind(), "", errs)
	}
	r.Status = decide(ctx, az, attributes(subject(r.Spec), r.Spec.ResourceAttributes, r.Spec.NonResourceAttributes))
	return r, nil
}

func localSubjectAccessReview(ctx context.Context, az authorizer.Authorizer, r *authorizationv1.LocalSubjectAccessReview) (runtime.Object, error) {
	spec := field.NewPath("spec")
	// Upstream's ValidateLocalSubjectAccessReview: the namespace is the
	// object's, and only resource attributes make sense in one.
	meta := r.ObjectMeta
	meta.Namespace = ""
	errs := validateReviewMeta(meta)
	errs = append(errs, validateSubjectSpec(r.Spec, spec)...)
	if r.Spec.ResourceAttributes != nil && r.Spec.ResourceAttributes.Namespace != r.Namespace {
		errs = append(errs, field.Invalid(spec.Child("resourceAttributes", "namespace"), r.Spec.ResourceAttributes.Namespace, "must match metadata.namespace"))
	}
	if r.Spec.NonResourceAttributes != nil {
		errs = append(errs, field.Invalid(spec.Child("nonResourceAttributes"), r.Spec.NonResourceAttributes, "disallowed on this kind of request"))
	}
	if len(errs) > 0 {
		return nil, apierrors.NewInvalid(authorizationv1.SchemeGroupVersion.WithKind("LocalSubjectAccessReview").GroupKind(), "", errs)
	}
	namespace := genericapirequest.NamespaceValue(ctx)
	if namespace == "" {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("namespace is required on this type: %v", namespace))
	}
	if namespace != r.Namespace {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("spec.resourceAttributes.namespace must match namespace: %v", namespace))
	}
	r.Status = decide(ctx, az, attributes(subject(r.Spec), r.Spec.ResourceAttributes, nil))
	return r, nil
}

func selfSubjectRulesReview(ctx context.Context, rules authorizer.RuleResolver, r *authorizationv1.SelfSubjectRulesReview) (runtime.Object, error) {
	u, err := requestUser(ctx)
	if err != nil {
		return nil, err
	}
	if r.Spec.Namespace == "" {
		return nil, apierrors.NewBadRequest("no namespace on request")
	}
	res, nonRes, incomplete, err := rules.RulesFor(ctx, u, r.Spec.Namespace)
	out := &authorizationv1.SelfSubjectRulesReview{Status: authorizationv1.SubjectRulesReviewStatus{Incomplete: incomplete}}
	for _, rule := range res {
		out.Status.ResourceRules = append(out.Status.ResourceRules, authorizationv1.ResourceRule{Verbs: rule.GetVerbs(),
			APIGroups: rule.GetAPIGroups(), Resources: rule.GetResources(), ResourceNames: rule.GetResourceNames()})
	}
	for _, rule := range nonRes {
		out.Status.NonResourceRules = append(out.Status.NonResourceRules, authorizationv1.NonResourceRule{Verbs: rule.GetVerbs(), NonResourceURLs: rule.GetNonResourceURLs()})
	}
	if err != nil {
		out.Status.EvaluationError = err.Error()
	}
	return out, nil
}

// decide asks the authorizer, as upstream's reviews do.
func decide(ctx context.Context, az authorizer.Authorizer, attrs authorizer.AttributesRecord) authorizationv1.SubjectAccessReviewStatus {
	d, reason, err := az.Authorize(ctx, attrs)
	st := authorizationv1.SubjectAccessReviewStatus{Allowed: d == authorizer.DecisionAllow, Denied: d == authorizer.DecisionDeny, Reason: reason}
	if err != nil {
		st.EvaluationError = err.Error()
	}
	return st
}

// attributes are upstream's ResourceAttributesFrom and
// NonResourceAttributesFrom (pkg/registry/authorization/util).
func attributes(u user.Info, res *authorizationv1.ResourceAttributes, nonRes *authorizationv1.NonResourceAttributes) authorizer.AttributesRecord {
	if res != nil {
		return authorizer.AttributesRecord{User: u, Verb: res.Verb, Namespace: res.Namespace, APIGroup: res.Group, APIVersion: matchAllVersionIfEmpty(res.Version),
			Resource: res.Resource, Subresource: res.Subresource, Name: res.Name, ResourceRequest: true}
	}
	return authorizer.AttributesRecord{User: u, ResourceRequest: false, Path: nonRes.Path, Verb: nonRes.Verb}
}

func matchAllVersionIfEmpty(v string) string {
	if v == "" {
		return "*"
	}
	return v
}

// subject is the user a SubjectAccessReview asks about.
func subject(spec authorizationv1.SubjectAccessReviewSpec) user.Info {
	u := &user.DefaultInfo{Name: spec.User, UID: spec.UID, Groups: spec.Groups}
	if len(spec.Extra) > 0 {
		u.Extra = make(map[string][]string, len(spec.Extra))
		for k, v := range spec.Extra {
			u.Extra[k] = v
		}
	}
	return u
}

// validateReviewMeta is upstream's rule that a review carries no
// metadata (managedFields aside).
func validateReviewMeta(m metav1.ObjectMeta) field.ErrorList {
	m.ManagedFields = nil
	if !apiequality.Semantic.DeepEqual(metav1.ObjectMeta{}, m) {
		return field.ErrorList{field.Invalid(field.NewPath("metadata"), m, "must be empty")}
	}
	return nil
}

// validateAttributes is upstream's ValidateSelfSubjectAccessReviewSpec:
// exactly one kind of attributes.
func validateAttributes(res *authorizationv1.ResourceAttributes, nonRes *authorizationv1.NonResourceAttributes, spec *field.Path) field.ErrorList {
	switch {
	case res != nil && nonRes != nil:
		return field.ErrorList{field.Invalid(spec.Child("nonResourceAttributes"), nonRes, "cannot be specified in combination with resourceAttributes")}
	case res == nil && nonRes == nil:
		return field.ErrorList{field.Invalid(spec.Child("resourceAttributes"), nonRes, "exactly one of nonResourceAttributes or resourceAttributes must be specified")}
	}
	return validateResourceAttributes(res, spec.Child("resourceAttributes"))
}

// validateResourceAttributes is upstream's validateResourceAttributes
// (pkg/apis/authorization/validation/validation.go).
func validateResourceAttributes(res *authorizationv1.ResourceAttributes, path *field.Path) field.ErrorList {
	if res == nil {
		return nil
	}
	errs := validateFieldSelectorAttributes(res.FieldSelector, path.Child("fieldSelector"))
	return append(errs, validateLabelSelectorAttributes(res.LabelSelector, path.Child("labelSelector"))...)
}

// validateFieldSelectorAttributes is upstream's
// validateFieldSelectorAttributes (validation.go).
func validateFieldSelectorAttributes(selector *authorizationv1.FieldSelectorAttributes, path *field.Path) field.ErrorList {
	if selector == nil {
		return nil
	}
	opts := metav1validation.FieldSelectorValidationOptions{AllowUnknownOperatorInRequirement: true}
	return validateSelectorAttributes(selector.RawSelector, selector.Requirements, path, func(r metav1.FieldSelectorRequirement, p *field.Path) field.ErrorList {
		return metav1validation.ValidateFieldSelectorRequirement(r, opts, p)
	})
}

// validateLabelSelectorAttributes is upstream's
// validateLabelSelectorAttributes (validation.go).
func validateLabelSelectorAttributes(selector *authorizationv1.LabelSelectorAttributes, path *field.Path) field.ErrorList {
	if selector == nil {
		return nil
	}
	opts := metav1validation.LabelSelectorValidationOptions{AllowUnknownOperatorInRequirement: true}
	return validateSelectorAttributes(selector.RawSelector, selector.Requirements, path, func(r metav1.LabelSelectorRequirement, p *field.Path) field.ErrorList {
		return metav1validation.ValidateLabelSelectorRequirement(r, opts, p)
	})
}

// validateSelectorAttributes is what upstream's two selector attributes'
// validations share: a raw selector or requirements, not both, each
// requirement valid. Unknown operators are allowed in requirements: a newer
// client may know operators kube-apiserver does not, and still be
// authorized.
func validateSelectorAttributes[R any](raw string, requirements []R, path *field.Path, validate func(R, *field.Path) field.ErrorList) field.ErrorList {
	var errs field.ErrorList
	if len(raw) > 0 && len(requirements) > 0 {
		errs = append(errs, field.Invalid(path.Child("rawSelector"), raw, "may not specified at the same time as requirements"))
	}
	if len(raw) == 0 && len(requirements) == 0 {
		errs = append(errs, field.Required(path.Child("requirements"), fmt.Sprintf("when %s is specified, requirements or rawSelector is required", path)))
	}
	for i, r := range requirements {
		errs = append(errs, validate(r, path.Child("requirements").Index(i))...)
	}
	return errs
}

// validateSubjectSpec is upstream's ValidateSubjectAccessReviewSpec.
func validateSubjectSpec(s authorizationv1.SubjectAccessReviewSpec, spec *field.Path) field.ErrorList {
	errs := validateAttributes(s.ResourceAttributes, s.NonResourceAttributes, spec)
	if s.User == "" && len(s.Groups) == 0 {
		errs = append(errs, field.Invalid(spec.Child("user"), s.User, "at least one of user or group must be specified"))
	}
	return errs
}
