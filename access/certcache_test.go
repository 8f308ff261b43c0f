package access

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apiserver/pkg/authentication/authenticator"
	x509request "k8s.io/apiserver/pkg/authentication/request/x509"
)

// testCA is a CA that issues client certificates valid from notBefore to
// notAfter.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

func newTestCA(t *testing.T, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &testCA{cert: cert, key: key}
}

func (ca *testCA) issue(t *testing.T, user string, notAfter time.Time) *x509.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: user, Organization: []string{"readers"}},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: notAfter,
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, key.Public(), ca.key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

func (ca *testCA) options() x509.VerifyOptions {
	return x509.VerifyOptions{Roots: poolOf(ca.cert), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
}

// countingCache is a certCache in front of upstream's authenticator, with
// a clock the test moves and a count of the requests upstream verified.
type countingCache struct {
	*certCache
	verified atomic.Int32
	opts     atomic.Pointer[x509.VerifyOptions]
	clock    atomic.Pointer[time.Time]
}

func newCountingCache(opts x509.VerifyOptions) *countingCache {
	c := &countingCache{}
	c.opts.Store(&opts)
	now := time.Now()
	c.clock.Store(&now)
	options := func() (x509.VerifyOptions, bool) { return *c.opts.Load(), true }
	upstream := x509request.NewDynamic(options, x509request.CommonNameUserConversion)
	counted := authenticator.RequestFunc(func(req *http.Request) (*authenticator.Response, bool, error) {
		c.verified.Add(1)
		return upstream.AuthenticateRequest(req)
	})
	c.certCache = newCertCache(counted, options)
	c.certCache.now = func() time.Time { return *c.clock.Load() }
	return c
}

func (c *countingCache) advance(d time.Duration) {
	now := c.clock.Load().Add(d)
	c.clock.Store(&now)
}

// authenticate presents chain and says who it authenticated as ("" for
// no one), and whether upstream verified it.
func (c *countingCache) authenticate(t *testing.T, chain ...*x509.Certificate) (string, bool) {
	t.Helper()
	before := c.verified.Load()
	req := httptest.NewRequest(http.MethodGet, "/api", nil)
	req.TLS = &tls.ConnectionState{PeerCertificates: chain}
	resp, ok, _ := c.AuthenticateRequest(req)
	verified := c.verified.Load() != before
	if !ok {
		return "", verified
	}
	return resp.User.GetName(), verified
}

func TestCertCache(t *testing.T) {
	ca := newTestCA(t, "ca")
	alice := ca.issue(t, "alice", time.Now().Add(time.Hour))
	c := newCountingCache(ca.options())

	expect := func(what string, chain *x509.Certificate, wantUser string, wantVerified bool) {
		t.Helper()
		got, verified := c.authenticate(t, chain)
		if got != wantUser || verified != wantVerified {
			t.Errorf("%s: authenticated as %q, verified by upstream %v; want %q, %v", what, got, verified, wantUser, wantVerified)
		}
	}
	expect("first request", alice, "alice", true)
	expect("second request", alice, "alice", false)
	c.advance(certCacheTTL - time.Second)
	expect("within the TTL", alice, "alice", false)
	c.advance(time.Second)
	expect("after the TTL", alice, "alice", true)
	expect("after the TTL, again", alice, "alice", false)

	// Another CA's certificate, with the same name: refused every time.
	forged := newTestCA(t, "ca").issue(t, "alice", time.Now().Add(time.Hour))
	expect("another CA's certificate", forged, "", true)
	expect("another CA's certificate, again", forged, "", true)

	// A rotation's step replaces the bundle: nothing verified against the
	// old one is reused, and a bundle without alice's CA refuses her.
	next := newTestCA(t, "next")
	nextOnly := next.options()
	c.opts.Store(&nextOnly)
	expect("after the bundle changed", alice, "", true)
	expect("after the bundle changed, again", alice, "", true)
	both := ca.options()
	both.Roots.AddCert(next.cert)
	c.opts.Store(&both)
	expect("with both CAs", alice, "alice", true)
	expect("with both CAs, again", alice, "alice", false)
}

// A certificate is not taken as verified past its NotAfter, even within
// the TTL.
func TestCertCacheExpiry(t *testing.T) {
	ca := newTestCA(t, "ca")
	notAfter := time.Now().Add(certCacheTTL / 2)
	bob := ca.issue(t, "bob", notAfter)
	c := newCountingCache(ca.options())
	if got, verified := c.authenticate(t, bob); got != "bob" || !verified {
		t.Fatalf("first request: %q, verified %v", got, verified)
	}
	if got, verified := c.authenticate(t, bob); got != "bob" || verified {
		t.Fatalf("second request: %q, verified %v; want bob from the cache", got, verified)
	}
	c.advance(time.Until(notAfter) + time.Second)
	if _, verified := c.authenticate(t, bob); !verified {
		t.Error("a request past the certificate's NotAfter was served from the cache")
	}
}

// Concurrent requests of several chains share the cache (go test -race).
func TestCertCacheConcurrent(t *testing.T) {
	ca := newTestCA(t, "ca")
	var certs []*x509.Certificate
	for _, name := range []string{"a", "b", "c", "d"} {
		certs = append(certs, ca.issue(t, name, time.Now().Add(time.Hour)))
	}
	c := newCountingCache(ca.options())
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for j := range 50 {
				cert := certs[(i+j)%len(certs)]
				if got, _ := c.authenticate(t, cert); got != cert.Subject.CommonName {
					t.Errorf("authenticated as %q, want %q", got, cert.Subject.CommonName)
					return
				}
			}
		})
	}
	wg.Wait()
	if n := c.verified.Load(); n > 8*int32(len(certs)) {
		t.Errorf("upstream verified %d of 400 requests of 4 chains, want at most one per chain and goroutine", n)
	}
}
