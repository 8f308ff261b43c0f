package serviceaccount

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/golang-jwt/jwt/v5"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// memState is a TrustedState in memory.
type memState struct {
	mu sync.Mutex
	m  map[string][]byte
}

func (s *memState) GetState(_ context.Context, name string) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m[name], nil
}

func (s *memState) PutState(_ context.Context, name string, value []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[name] = value
	return nil
}

// cluster is an upstream's ServiceAccount issuer: RSA keys, as
// kube-apiserver's usually are, by key id.
type cluster struct {
	t    *testing.T
	keys map[string]*rsa.PrivateKey
}

func (c *cluster) addKey(kid string) {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		c.t.Fatal(err)
	}
	c.keys[kid] = k
}

func (c *cluster) jwks() []byte {
	var set jose.JSONWebKeySet
	for kid, k := range c.keys {
		set.Keys = append(set.Keys, jose.JSONWebKey{Key: &k.PublicKey, KeyID: kid, Algorithm: "RS256", Use: "sig"})
	}
	b, err := json.Marshal(set)
	if err != nil {
		c.t.Fatal(err)
	}
	return b
}

// token is a token of the cluster's key kid for the pod app of apps.
func (c *cluster) token(kid string) string {
	now := time.Now()
	cl := claims{RegisteredClaims: jwt.RegisteredClaims{Issuer: "https://kubernetes.default.svc.cluster.local", Subject: "system:serviceaccount:apps:app",
		Audience: []string{"https://kubernetes.default.svc.cluster.local"}, ExpiresAt: jwt.NewNumericDate(now.Add(time.Hour)),
		IssuedAt: jwt.NewNumericDate(now), NotBefore: jwt.NewNumericDate(now), ID: "jti"},
		Kubernetes: kubernetesClaims{Namespace: "apps", ServiceAccount: ref{Name: "app", UID: "sa-uid"}, Pod: &ref{Name: "app", UID: "pod-uid"}}}
	tok := jwt.NewWithClaims(jwt.SigningMethodRS256, cl)
	tok.Header["kid"] = kid
	s, err := tok.SignedString(c.keys[kid])
	if err != nil {
		c.t.Fatal(err)
	}
	return s
}

// The cluster's issuer, learnt from a relayed token and its JWKS, is
// trusted for the tokens of the pods whose copies the gateway holds: kept
// across a restart, read again (rate-limited) when the cluster signs with
// a new key, never taken for kubestore's own tokens of the same issuer
// name, and never learnt from a JWKS that does not verify the token.
func TestTrustedIssuer(t *testing.T) {
	ctx := context.Background()
	c := &cluster{t: t, keys: map[string]*rsa.PrivateKey{}}
	c.addKey("one")
	st := &memState{m: map[string][]byte{}}
	lookup := func() (Lookup, error) {
		return objects{sas: map[string]*corev1.ServiceAccount{"apps/app": {ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: "apps", UID: "sa-uid"}}},
			pods: map[string]*corev1.Pod{"apps/app": {ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: "apps", UID: "pod-uid"}}}}, nil
	}
	tr, err := LoadTrusted(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	first := c.token("one")
	if _, ok, err := tr.Authenticator(lookup).AuthenticateToken(ctx, first); ok || err != nil {
		t.Fatalf("before any relayed token: %t, %v; want no opinion", ok, err)
	}
	other := &cluster{t: t, keys: map[string]*rsa.PrivateKey{}}
	other.addKey("one")
	jwksOf := func(c *cluster) func(context.Context) ([]byte, error) {
		return func(context.Context) ([]byte, error) { return c.jwks(), nil }
	}
	if err := tr.Learn(ctx, first, nil, jwksOf(other)); err == nil {
		t.Fatal("learnt an issuer from a JWKS that does not verify its token")
	}
	if err := tr.Learn(ctx, first, nil, jwksOf(c)); err != nil {
		t.Fatal(err)
	}
	// A third party's token learns no audience, and forgets none, even
	// when it is learnt at the same time as an API token.
	for range 10 {
		third := &Trusted{st: &memState{m: map[string][]byte{}}}
		// Both read the JWKS before either keeps what it learnt.
		var arrived sync.WaitGroup
		arrived.Add(2)
		both := func(ctx context.Context) ([]byte, error) {
			arrived.Done()
			arrived.Wait()
			return c.jwks(), nil
		}
		var wg sync.WaitGroup
		for _, auds := range [][]string{{"vault"}, nil} {
			wg.Go(func() {
				if err := third.Learn(ctx, first, auds, both); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		if reread, err := LoadTrusted(ctx, third.st); err != nil || !slices.Equal(reread.cur.Load().Audiences, []string{"https://kubernetes.default.svc.cluster.local"}) ||
			!slices.Equal(third.cur.Load().Audiences, reread.cur.Load().Audiences) {
			t.Fatalf("the issuer kept after relays of a third party's and the API's tokens at once: %v in memory, %v kept (%v)", third.cur.Load(), reread.cur.Load(), err)
		}
	}
	// Known now: nothing to read again.
	if err := tr.Learn(ctx, c.token("one"), nil, func(context.Context) ([]byte, error) { t.Error("read the JWKS again for a known key"); return nil, nil }); err != nil {
		t.Fatal(err)
	}
	res, ok, err := tr.Authenticator(lookup).AuthenticateToken(ctx, first)
	if !ok || err != nil || res.User.GetName() != "system:serviceaccount:apps:app" || res.User.GetExtra()["authentication.kubernetes.io/pod-uid"][0] != "pod-uid" {
		t.Fatalf("the cluster's token: %v, %t, %v", res, ok, err)
	}
	if !tr.Issued(first) {
		t.Error("Issued: false for the cluster's token")
	}
	own := newKeys(t)
	own.issuer = "https://kubernetes.default.svc.cluster.local"
	mine, _, err := own.Issue(&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: "apps", UID: "sa-uid"}}, nil, time.Hour, &ref{Name: "app", UID: "pod-uid"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if tr.Issued(mine) {
		t.Error("Issued: true for kubestore's own token of the same issuer name")
	}

	// Restarted: the issuer is read back.
	tr, err = LoadTrusted(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := tr.Authenticator(lookup).AuthenticateToken(ctx, first); !ok || err != nil {
		t.Fatalf("after a restart: %t, %v", ok, err)
	}

	// The cluster rotates its key: the JWKS is read again, with the new
	// token's credentials, once per unknownKeyRefresh.
	c.addKey("two")
	var fetched []string
	tr.SetFetcher(func(_ context.Context, token string) ([]byte, error) {
		fetched = append(fetched, token)
		return c.jwks(), nil
	})
	second := c.token("two")
	if _, ok, err := tr.Authenticator(lookup).AuthenticateToken(ctx, second); !ok || err != nil || len(fetched) != 1 || fetched[0] != second {
		t.Fatalf("a token of the cluster's new key: %t, %v, fetched %d times", ok, err, len(fetched))
	}
	c.addKey("three")
	if _, ok, _ := tr.Authenticator(lookup).AuthenticateToken(ctx, c.token("three")); ok || len(fetched) != 1 {
		t.Errorf("a second unknown key at once: %t, fetched %d times; want refused, no read", ok, len(fetched))
	}
	if tr, err = LoadTrusted(ctx, st); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := tr.Authenticator(lookup).AuthenticateToken(ctx, second); !ok || err != nil {
		t.Errorf("the new key after a restart: %t, %v", ok, err)
	}
}
