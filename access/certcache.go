package access

import (
	"crypto/sha256"
	"crypto/x509"
	"net/http"
	"sync"
	"time"

	"k8s.io/apiserver/pkg/authentication/authenticator"
	x509request "k8s.io/apiserver/pkg/authentication/request/x509"
)

// certCacheTTL is how long a client certificate chain that verified is
// taken as verified again without checking its signatures, as a bearer
// token is for tokenCacheTTL. Upstream's x509 authenticator verifies the
// chain of every request (an ECDSA signature check, ~90 µs here: 8 % of
// the server's CPU per create in a CPU profile), though a connection
// presents the same chain for its whole life; kubernetes/kubernetes#100902
// proposed the same cache per connection.
const certCacheTTL = tokenCacheTTL

// certCacheSize bounds the chains remembered: more than a gateway's
// clients, few enough that a flood of self-made certificates cannot grow
// it (a chain that does not verify is never cached).
const certCacheSize = 1024

// certCache caches what next, upstream's x509 authenticator, answers for a
// client certificate chain it authenticated. An answer is reused only
// while the CA bundle is the one it was verified against (the pool that
// options returns is replaced whenever the bundle changes: a rotation's
// steps), within the validity of every certificate of the verified chain,
// and for at most certCacheTTL. Failures are not cached. Upstream's
// histogram of the certificates' remaining validity
// (apiserver_client_certificate_expiration_seconds) is observed when a
// chain is verified, so once per chain and TTL instead of per request.
type certCache struct {
	next    authenticator.Request
	options x509request.VerifyOptionFunc
	now     func() time.Time

	mu      sync.Mutex
	entries map[[sha256.Size]byte]certEntry
}

type certEntry struct {
	roots *x509.CertPool
	resp  authenticator.Response
	// from and until bound when the entry may be used: the verified
	// chain's latest NotBefore, and the earliest of its NotAfters and the
	// entry's TTL.
	from, until time.Time
}

func newCertCache(next authenticator.Request, options x509request.VerifyOptionFunc) *certCache {
	return &certCache{next: next, options: options, now: time.Now, entries: map[[sha256.Size]byte]certEntry{}}
}

func (c *certCache) AuthenticateRequest(req *http.Request) (*authenticator.Response, bool, error) {
	if req.TLS == nil || len(req.TLS.PeerCertificates) == 0 {
		return c.next.AuthenticateRequest(req)
	}
	opts, ok := c.options()
	if !ok {
		return c.next.AuthenticateRequest(req)
	}
	peer := req.TLS.PeerCertificates
	key := chainKey(peer)
	now := c.now()
	c.mu.Lock()
	e, hit := c.entries[key]
	c.mu.Unlock()
	if hit && e.roots == opts.Roots && !now.Before(e.from) && now.Before(e.until) {
		resp := e.resp
		return &resp, true, nil
	}
	resp, ok, err := c.next.AuthenticateRequest(req)
	if err != nil || !ok {
		return resp, ok, err
	}
	// Upstream's authenticator does not say which chain it verified; the
	// entry's window is that of one chain the same options verify, its
	// root included. The cost is one more verification per chain and TTL.
	if opts.Intermediates == nil && len(peer) > 1 {
		opts.Intermediates = x509.NewCertPool()
		for _, cert := range peer[1:] {
			opts.Intermediates.AddCert(cert)
		}
	}
	opts.CurrentTime = now
	chains, verr := peer[0].Verify(opts)
	if verr != nil || len(chains) == 0 {
		// The bundle changed in between: upstream's answer stands, uncached.
		return resp, ok, err
	}
	e = certEntry{roots: opts.Roots, resp: *resp, until: now.Add(certCacheTTL)}
	for _, cert := range chains[0] {
		if cert.NotBefore.After(e.from) {
			e.from = cert.NotBefore
		}
		if cert.NotAfter.Before(e.until) {
			e.until = cert.NotAfter
		}
	}
	c.mu.Lock()
	if len(c.entries) >= certCacheSize {
		for k, old := range c.entries {
			if !now.Before(old.until) || old.roots != opts.Roots {
				delete(c.entries, k)
			}
		}
		if len(c.entries) >= certCacheSize {
			clear(c.entries)
		}
	}
	c.entries[key] = e
	c.mu.Unlock()
	return resp, ok, err
}

// chainKey identifies a presented chain by its certificates' DER.
func chainKey(chain []*x509.Certificate) [sha256.Size]byte {
	h := sha256.New()
	for _, cert := range chain {
		h.Write(cert.Raw)
		// The length separates the certificates: DER is self-delimiting,
		// but the key should not depend on it.
		h.Write([]byte{byte(len(cert.Raw) >> 24), byte(len(cert.Raw) >> 16), byte(len(cert.Raw) >> 8), byte(len(cert.Raw))})
	}
	var key [sha256.Size]byte
	h.Sum(key[:0])
	return key
}
