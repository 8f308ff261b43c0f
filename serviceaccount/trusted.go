package serviceaccount

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/golang-jwt/jwt/v5"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/klog/v2"

	"github.com/kubestore/kubestore/records/family"
)

// Trusted is the issuer of an upstream cluster's ServiceAccount tokens,
// as a gateway that mirrors the cluster trusts it: the tokens the
// cluster issued for the node's pods (the kubelet's TokenRequests, which
// the mirror relays while the link is up) authenticate the pods at the
// gateway too, online, offline and after a restart. What verifies them is
// learnt from the relayed answers and the cluster's JWKS: its issuer, the
// audiences of its API (what a TokenRequest naming none gets) and its
// public keys, kept in the local etcd. A token signed by a key the
// gateway does not know yet (the cluster rotated its keys) has the JWKS
// read again, with that token's own credentials (the cluster lets every
// ServiceAccount read its discovery documents), at most every
// unknownKeyRefresh.
type Trusted struct {
	st TrustedState
	// cur is the issuer trusted; mu orders its changes.
	mu    sync.Mutex
	cur   atomic.Pointer[trustedIssuer]
	fetch atomic.Pointer[JWKSFetcher]
	// lastFetch limits the reads a token of an unknown key causes.
	lastFetch atomic.Int64
}

// TrustedState is where the trusted issuer is kept (package records).
type TrustedState interface {
	GetState(ctx context.Context, name string) ([]byte, error)
	PutState(ctx context.Context, name string, value []byte) error
}

// JWKSFetcher reads the cluster's JWKS, with the credentials of token
// when the gateway's own are not allowed to.
type JWKSFetcher func(ctx context.Context, token string) ([]byte, error)

// trustedIssuer is the record's content, and its keys parsed.
type trustedIssuer struct {
	Issuer    string          `json:"issuer"`
	Audiences []string        `json:"audiences"`
	JWKS      json.RawMessage `json:"jwks"`
	keys      map[string]any
}

// parse reads the keys of the JWKS.
func (ti *trustedIssuer) parse() error {
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(ti.JWKS, &set); err != nil {
		return fmt.Errorf("the cluster's JWKS: %w", err)
	}
	ti.keys = map[string]any{}
	for _, k := range set.Keys {
		if k.Use != "" && k.Use != "sig" || !k.Valid() {
			continue
		}
		ti.keys[k.KeyID] = k.Public().Key
	}
	if len(ti.keys) == 0 {
		return errors.New("the cluster's JWKS holds no signing key")
	}
	return nil
}

// trustedMethods are the algorithms a cluster signs ServiceAccount tokens
// with (kube-apiserver's --service-account-signing-key-file: RSA or
// ECDSA).
var trustedMethods = []string{"RS256", "RS384", "RS512", "ES256", "ES384", "ES512", "PS256", "PS384", "PS512"}

// LoadTrusted reads the issuer trusted before, if any.
func LoadTrusted(ctx context.Context, st TrustedState) (*Trusted, error) {
	t := &Trusted{st: st}
	data, err := st.GetState(ctx, family.TrustedIssuer.Name())
	if err != nil || data == nil {
		return t, err
	}
	ti := &trustedIssuer{}
	if err := json.Unmarshal(data, ti); err != nil {
		return nil, fmt.Errorf("reading the trusted issuer: %w", err)
	}
	if err := ti.parse(); err != nil {
		return nil, fmt.Errorf("reading the trusted issuer: %w", err)
	}
	t.cur.Store(ti)
	return t, nil
}

// SetFetcher sets how the cluster's JWKS is read again when a token names
// a key the gateway does not know.
func (t *Trusted) SetFetcher(f JWKSFetcher) { t.fetch.Store(&f) }

// Issued reports whether token names the trusted issuer and one of its
// keys. It does not verify the token: it tells which issuer's a token that
// authenticated is (kubestore's own may name the same issuer, as both
// default to kube-apiserver's).
func (t *Trusted) Issued(token string) bool {
	ti := t.cur.Load()
	if ti == nil {
		return false
	}
	var c jwt.RegisteredClaims
	parsed, _, err := jwt.NewParser().ParseUnverified(token, &c)
	if err != nil || c.Issuer != ti.Issuer {
		return false
	}
	kid, _ := parsed.Header["kid"].(string)
	_, ok := ti.keys[kid]
	return ok
}

// issuerOf is the unverified iss of a JWT, "" when it is none.
func issuerOf(token string) string {
	var c jwt.RegisteredClaims
	if _, _, err := jwt.NewParser().ParseUnverified(token, &c); err != nil {
		return ""
	}
	return c.Issuer
}

// Learn trusts the issuer of token, a token the cluster issued in answer
// to a relayed TokenRequest for audiences (none: the cluster's API). When
// its issuer and key are trusted already (and, for a token of the API, its
// audiences known), there is nothing to learn; else the cluster's JWKS
// (jwks reads it) must verify the token. A token of another issuer than
// the one trusted replaces it: the cluster's issuer changed.
func (t *Trusted) Learn(ctx context.Context, token string, audiences []string, jwks func(context.Context) ([]byte, error)) error {
	iss := issuerOf(token)
	if iss == "" {
		return errors.New("the cluster's token names no issuer")
	}
	if old := t.cur.Load(); t.Issued(token) && (len(audiences) > 0 || len(old.Audiences) > 0) {
		return nil
	}
	set, err := jwks(ctx)
	if err != nil {
		return fmt.Errorf("reading the cluster's JWKS: %w", err)
	}
	ti := &trustedIssuer{Issuer: iss, JWKS: set}
	if err := ti.parse(); err != nil {
		return err
	}
	var c claims
	if _, err := jwt.ParseWithClaims(token, &c, func(tok *jwt.Token) (any, error) {
		kid, _ := tok.Header["kid"].(string)
		if k, ok := ti.keys[kid]; ok {
			return k, nil
		}
		return nil, errors.New("signed by a key the cluster's JWKS does not hold")
	}, jwt.WithValidMethods(trustedMethods), jwt.WithLeeway(clockLeeway)); err != nil {
		return fmt.Errorf("the cluster's token does not verify with its JWKS: %w", err)
	}
	if len(audiences) == 0 {
		// The audiences of the cluster's API, which a TokenRequest that
		// names none is given.
		ti.Audiences = c.Audience
	}
	return t.keep(ctx, ti)
}

// keep trusts ti, with the API audiences known before of the same issuer
// (a relay of a third party's token learns none, and two relays may
// learn at once), in the local etcd and then in memory.
func (t *Trusted) keep(ctx context.Context, ti *trustedIssuer) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	old := t.cur.Load()
	if old != nil && old.Issuer == ti.Issuer {
		for _, a := range old.Audiences {
			if !slices.Contains(ti.Audiences, a) {
				ti.Audiences = append(ti.Audiences, a)
			}
		}
		slices.Sort(ti.Audiences)
		if slices.Equal(old.Audiences, ti.Audiences) && string(old.JWKS) == string(ti.JWKS) {
			return nil
		}
	}
	data, err := json.Marshal(ti)
	if err != nil {
		return err
	}
	if err := t.st.PutState(ctx, family.TrustedIssuer.Name(), data); err != nil {
		return err
	}
	t.cur.Store(ti)
	klog.InfoS("Trusting the cluster's ServiceAccount tokens", "issuer", ti.Issuer, "audiences", ti.Audiences, "keys", len(ti.keys))
	return nil
}

// Authenticator accepts the trusted issuer's tokens for the audiences of
// its API, as the local issuer's (verifyBound): the ServiceAccount and
// the pod a token is bound to are the mirror's copies, of the cluster's
// uids.
func (t *Trusted) Authenticator(lookup func() (Lookup, error)) authenticator.Token {
	return authenticator.TokenFunc(func(ctx context.Context, token string) (*authenticator.Response, bool, error) {
		ti := t.cur.Load()
		if ti == nil || len(ti.Audiences) == 0 {
			return nil, false, nil
		}
		return verifyBound(ctx, token, issuerKeys{
			issuer:    ti.Issuer,
			audiences: ti.Audiences,
			methods:   trustedMethods,
			key: func(ctx context.Context, kid string) (any, bool) {
				if k, ok := t.cur.Load().keys[kid]; ok {
					return k, true
				}
				return t.refetch(ctx, token, kid)
			},
		}, lookup)
	})
}

// refetch reads the cluster's JWKS again for a token signed by kid, an
// unknown key.
func (t *Trusted) refetch(ctx context.Context, token, kid string) (any, bool) {
	fetch := t.fetch.Load()
	last := t.lastFetch.Load()
	if fetch == nil || time.Since(time.Unix(0, last)) < unknownKeyRefresh || !t.lastFetch.CompareAndSwap(last, time.Now().UnixNano()) {
		return nil, false
	}
	jwks, err := (*fetch)(ctx, token)
	if err != nil {
		klog.V(2).InfoS("Reading the cluster's JWKS for a token of an unknown key", "kid", kid, "err", err)
		return nil, false
	}
	ti := &trustedIssuer{Issuer: t.cur.Load().Issuer, JWKS: jwks}
	if err := ti.parse(); err != nil {
		klog.InfoS("The cluster's JWKS", "err", err)
		return nil, false
	}
	k, ok := ti.keys[kid]
	if !ok {
		return nil, false
	}
	if err := t.keep(ctx, ti); err != nil {
		klog.ErrorS(err, "Keeping the cluster's JWKS")
		return nil, false
	}
	return k, true
}
