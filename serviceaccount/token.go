package serviceaccount

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/uuid"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	saauth "k8s.io/apiserver/pkg/authentication/serviceaccount"
	tokenjwt "k8s.io/apiserver/pkg/authentication/token/jwt"
)

// The claims of a bound token, upstream's (pkg/serviceaccount/claims.go).
type claims struct {
	jwt.RegisteredClaims
	Kubernetes kubernetesClaims `json:"kubernetes.io"`
}

type kubernetesClaims struct {
	Namespace      string `json:"namespace"`
	ServiceAccount ref    `json:"serviceaccount"`
	Pod            *ref   `json:"pod,omitempty"`
	Secret         *ref   `json:"secret,omitempty"`
}

type ref struct {
	Name string `json:"name"`
	UID  string `json:"uid"`
}

// TokenRequest's bounds and default (pkg/apis/authentication/validation).
const (
	maxExpiration    = 1 << 32 * time.Second
	minExpiration    = 10 * time.Minute
	defaultExpiresIn = time.Hour
	// standInExpiresIn is the lifetime of a token kubestore issues in a
	// mirrored cluster's stead (mirrored.StandIn): the shortest a
	// TokenRequest may ask.
	standInExpiresIn = minExpiration
)

// Issue signs a token for sa, bound to pod or secret when given.
func (k *Keys) Issue(sa *corev1.ServiceAccount, audiences []string, expiresIn time.Duration, pod, secret *ref) (string, time.Time, error) {
	return k.issueAt(time.Now(), sa, audiences, expiresIn, pod, secret)
}

// issueAt is Issue by a clock that says now.
func (k *Keys) issueAt(now time.Time, sa *corev1.ServiceAccount, audiences []string, expiresIn time.Duration, pod, secret *ref) (string, time.Time, error) {
	exp := now.Add(expiresIn)
	c := claims{
		RegisteredClaims: jwt.RegisteredClaims{
			Issuer: k.issuer, Subject: saauth.MakeUsername(sa.Namespace, sa.Name), Audience: audiences,
			ExpiresAt: jwt.NewNumericDate(exp), IssuedAt: jwt.NewNumericDate(now), NotBefore: jwt.NewNumericDate(now),
			ID: uuid.NewString(),
		},
		Kubernetes: kubernetesClaims{Namespace: sa.Namespace, ServiceAccount: ref{Name: sa.Name, UID: string(sa.UID)}, Pod: pod, Secret: secret},
	}
	t := jwt.NewWithClaims(jwt.SigningMethodES256, c)
	t.Header["kid"] = k.kid
	signed, err := t.SignedString(k.signer)
	return signed, exp, err
}

// clockLeeway is the clock skew a token's nbf, iat and exp allow, and
// deletedGrace how long after its deletionTimestamp a bound object still
// vouches for a token: upstream's 60 s each (k8s.io/kubernetes
// pkg/serviceaccount/claims.go; go-jose's DefaultLeeway). A gateway
// without a real-time clock drifts, and a token issued by one member of a
// site is checked by another; a terminating pod must still release what
// it holds.
const (
	clockLeeway  = time.Minute
	deletedGrace = time.Minute
)

// deletedLongAgo reports whether an object deleted at ts no longer
// vouches for the tokens bound to it.
func deletedLongAgo(ts *metav1.Time) bool {
	return ts != nil && ts.Time.Before(time.Now().Add(-deletedGrace))
}

// Lookup reads the objects a token names, from the server's cache.
type Lookup interface {
	ServiceAccount(ctx context.Context, namespace, name string) (*corev1.ServiceAccount, error)
	Pod(ctx context.Context, namespace, name string) (*corev1.Pod, error)
	Secret(ctx context.Context, namespace, name string) (*corev1.Secret, error)
}

// Authenticator accepts the tokens Issue signs (of any published key),
// as upstream's bound token validator does (verifyBound). Tokens of other
// issuers are left to the other authenticators.
func (k *Keys) Authenticator(lookup func() (Lookup, error)) authenticator.Token {
	return authenticator.TokenFunc(func(ctx context.Context, token string) (*authenticator.Response, bool, error) {
		return verifyBound(ctx, token, issuerKeys{
			issuer:    k.issuer,
			audiences: authenticator.Audiences{k.issuer},
			methods:   []string{jwt.SigningMethodES256.Alg()},
			key: func(ctx context.Context, kid string) (any, bool) {
				pub, ok := k.verifier(ctx, kid)
				return pub, ok
			},
		}, lookup)
	})
}

// issuerKeys is what verifies one issuer's tokens: its name, the audiences
// of its API (what a token presented to the API must name one of), the
// signing algorithms it uses and its public key by key id.
type issuerKeys struct {
	issuer    string
	audiences authenticator.Audiences
	methods   []string
	key       func(ctx context.Context, kid string) (any, bool)
}

// verifyBound verifies token as upstream's bound token validator does
// (k8s.io/kubernetes pkg/serviceaccount/claims.go): signature, issuer,
// audience (the request's, a TokenReview's; else the API's), expiry, and
// the ServiceAccount and bound object still existing with the token's
// uids. A token of another issuer is not its to judge (false, no error).
func verifyBound(ctx context.Context, token string, ik issuerKeys, lookup func() (Lookup, error)) (*authenticator.Response, bool, error) {
	if strings.Count(token, ".") != 2 {
		return nil, false, nil
	}
	var c claims
	parsed, err := jwt.ParseWithClaims(token, &c, func(t *jwt.Token) (any, error) {
		if iss, _ := t.Claims.GetIssuer(); iss != ik.issuer {
			return nil, errors.New("another issuer's")
		}
		kid, _ := t.Header["kid"].(string)
		if pub, ok := ik.key(ctx, kid); ok {
			return pub, nil
		}
		return nil, errors.New("signed by an unknown key")
	}, jwt.WithValidMethods(ik.methods), jwt.WithIssuer(ik.issuer), jwt.WithExpirationRequired(),
		jwt.WithIssuedAt(), jwt.WithLeeway(clockLeeway))
	if c.Issuer != ik.issuer {
		return nil, false, nil // not this issuer's
	}
	if err != nil || !parsed.Valid {
		return nil, false, fmt.Errorf("invalid service account token: %w", err)
	}
	// The audiences the request is for (a TokenReview's), else the
	// API's own, as upstream's jwtTokenAuthenticator.
	want, ok := authenticator.AudiencesFrom(ctx)
	if !ok {
		want = ik.audiences
	}
	auds := want.Intersect(authenticator.Audiences(c.Audience))
	if len(auds) == 0 {
		return nil, false, fmt.Errorf("invalid service account token: token audiences %q is invalid for the target audiences %q", c.Audience, want)
	}
	l, err := lookup()
	if err != nil {
		return nil, false, err
	}
	kc := c.Kubernetes
	sa, err := l.ServiceAccount(ctx, kc.Namespace, kc.ServiceAccount.Name)
	switch {
	case apierrors.IsNotFound(err):
		return nil, false, fmt.Errorf("service account %s/%s has been deleted", kc.Namespace, kc.ServiceAccount.Name)
	case err != nil:
		return nil, false, err
	case sa.UID != types.UID(kc.ServiceAccount.UID):
		return nil, false, fmt.Errorf("service account UID (%s) does not match claim (%s)", sa.UID, kc.ServiceAccount.UID)
	case deletedLongAgo(sa.DeletionTimestamp):
		return nil, false, fmt.Errorf("service account %s/%s has been deleted", kc.Namespace, kc.ServiceAccount.Name)
	}
	info := saauth.ServiceAccountInfo{Name: kc.ServiceAccount.Name, Namespace: kc.Namespace, UID: kc.ServiceAccount.UID,
		CredentialID: tokenjwt.CredentialIDForJTI(c.ID)}
	if p := kc.Pod; p != nil {
		pod, err := l.Pod(ctx, kc.Namespace, p.Name)
		if err != nil || pod.UID != types.UID(p.UID) || deletedLongAgo(pod.DeletionTimestamp) {
			return nil, false, fmt.Errorf("the pod %s/%s the token is bound to no longer exists", kc.Namespace, p.Name)
		}
		info.PodName, info.PodUID = p.Name, p.UID
	}
	if s := kc.Secret; s != nil {
		secret, err := l.Secret(ctx, kc.Namespace, s.Name)
		if err != nil || secret.UID != types.UID(s.UID) || deletedLongAgo(secret.DeletionTimestamp) {
			return nil, false, fmt.Errorf("the secret %s/%s the token is bound to no longer exists", kc.Namespace, s.Name)
		}
	}
	return &authenticator.Response{User: info.UserInfo(), Audiences: auds}, true, nil
}
