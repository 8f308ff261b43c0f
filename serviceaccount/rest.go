package serviceaccount

import (
	"context"
	"fmt"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/utils/ptr"

	"github.com/kubestore/kubestore/mirrored"
)

// TokenREST is the serviceaccounts/token subresource: TokenRequest, as
// kube-apiserver's (pkg/registry/core/serviceaccount/storage/token.go).
type TokenREST struct {
	keys   *Keys
	lookup func() (Lookup, error)
}

// NewTokenREST issues with keys, reading ServiceAccounts and bound objects
// through lookup.
func NewTokenREST(keys *Keys, lookup func() (Lookup, error)) *TokenREST {
	return &TokenREST{keys: keys, lookup: lookup}
}

var (
	_ rest.NamedCreater             = (*TokenREST)(nil)
	_ rest.GroupVersionKindProvider = (*TokenREST)(nil)
)

func (r *TokenREST) New() runtime.Object { return &authenticationv1.TokenRequest{} }
func (r *TokenREST) Destroy()            {}
func (r *TokenREST) GroupVersionKind(schema.GroupVersion) schema.GroupVersionKind {
	return authenticationv1.SchemeGroupVersion.WithKind("TokenRequest")
}

func (r *TokenREST) Create(ctx context.Context, name string, obj runtime.Object, createValidation rest.ValidateObjectFunc, _ *metav1.CreateOptions) (runtime.Object, error) {
	req := obj.(*authenticationv1.TokenRequest)
	gk := authenticationv1.SchemeGroupVersion.WithKind("TokenRequest").GroupKind()
	namespace := genericapirequest.NamespaceValue(ctx)
	// The body may name the ServiceAccount only as the URL does.
	if req.Name != "" && req.Name != name {
		return nil, apierrors.NewInvalid(gk, name, field.ErrorList{field.Invalid(field.NewPath("metadata").Child("name"), req.Name, "must match the service account name if specified")})
	}
	if req.Namespace != "" && req.Namespace != namespace {
		return nil, apierrors.NewInvalid(gk, name, field.ErrorList{field.Invalid(field.NewPath("metadata").Child("namespace"), req.Namespace, "must match the service account namespace if specified")})
	}
	if req.Spec.ExpirationSeconds == nil {
		req.Spec.ExpirationSeconds = ptr.To(int64(defaultExpiresIn / time.Second))
	}
	if errs := validateTokenRequest(req); len(errs) > 0 {
		return nil, apierrors.NewInvalid(gk, "", errs)
	}
	if mirrored.StandIn(ctx) && *req.Spec.ExpirationSeconds > int64(standInExpiresIn/time.Second) {
		// Issued in the cluster's stead: the kubelet refreshes a token
		// after 80 % of the lifetime the answer states, so it gets the
		// cluster's within minutes of the link's return.
		req.Spec.ExpirationSeconds = ptr.To(int64(standInExpiresIn / time.Second))
	}
	if createValidation != nil {
		if err := createValidation(ctx, obj.DeepCopyObject()); err != nil {
			return nil, err
		}
	}
	l, err := r.lookup()
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	sa, err := l.ServiceAccount(ctx, namespace, name)
	if err != nil {
		return nil, err
	}
	if req.UID != "" && req.UID != sa.UID {
		return nil, apierrors.NewConflict(schema.GroupResource{Group: gk.Group, Resource: gk.Kind}, name,
			fmt.Errorf("the UID in the token request (%s) does not match the UID of the service account (%s)", req.UID, sa.UID))
	}
	var pod, secret *ref
	if b := req.Spec.BoundObjectRef; b != nil {
		var uid types.UID
		switch {
		case b.Kind == "Pod" && (b.APIVersion == "" || b.APIVersion == "v1"):
			p, err := l.Pod(ctx, namespace, b.Name)
			if err != nil {
				return nil, err
			}
			// A token of one ServiceAccount never carries a pod of another.
			if name != p.Spec.ServiceAccountName {
				return nil, apierrors.NewBadRequest(fmt.Sprintf("cannot bind token for serviceaccount %q to pod running with different serviceaccount name.", name))
			}
			uid, pod = p.UID, &ref{Name: p.Name, UID: string(p.UID)}
		case b.Kind == "Secret" && (b.APIVersion == "" || b.APIVersion == "v1"):
			s, err := l.Secret(ctx, namespace, b.Name)
			if err != nil {
				return nil, err
			}
			uid, secret = s.UID, &ref{Name: s.Name, UID: string(s.UID)}
		default:
			return nil, apierrors.NewBadRequest(fmt.Sprintf("cannot bind token to object of type %s (kubestore binds to v1 Pods and Secrets)", b.Kind))
		}
		if b.UID != "" && b.UID != uid {
			return nil, apierrors.NewConflict(corev1.Resource(b.Kind), b.Name, fmt.Errorf("the UID in the bound object reference (%s) does not match the UID in record. The object might have been deleted and then recreated", b.UID))
		}
	}
	audiences := req.Spec.Audiences
	if len(audiences) == 0 {
		audiences = []string{r.keys.issuer}
	}
	token, exp, err := r.keys.Issue(sa, audiences, time.Duration(*req.Spec.ExpirationSeconds)*time.Second, pod, secret)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	out := req.DeepCopy()
	out.Name, out.Namespace, out.UID = sa.Name, sa.Namespace, sa.UID
	out.CreationTimestamp = metav1.NewTime(exp.Add(-time.Duration(*req.Spec.ExpirationSeconds) * time.Second))
	out.Spec.Audiences = audiences
	out.Status = authenticationv1.TokenRequestStatus{Token: token, ExpirationTimestamp: metav1.NewTime(exp)}
	return out, nil
}

// validateTokenRequest is upstream's ValidateTokenRequest.
func validateTokenRequest(r *authenticationv1.TokenRequest) field.ErrorList {
	path := field.NewPath("spec", "expirationSeconds")
	switch d := time.Duration(*r.Spec.ExpirationSeconds) * time.Second; {
	case d < minExpiration:
		return field.ErrorList{field.Invalid(path, *r.Spec.ExpirationSeconds, "may not specify a duration less than 10 minutes")}
	case d > maxExpiration:
		return field.ErrorList{field.Invalid(path, *r.Spec.ExpirationSeconds, "may not specify a duration larger than 2^32 seconds")}
	}
	return nil
}
