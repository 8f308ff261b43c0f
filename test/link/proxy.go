package link

import (
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"regexp"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/rest"
)

// Proxy is an API server's front in tests, for the faults a TCP link
// cannot make: it answers chosen requests itself (a 500 for one object's
// writes) or holds them a while, and passes every other request on with
// the credentials of the identity it was given. It serves HTTPS with a
// certificate of its own, whose CA is CAData; its clients need no
// credentials.
type Proxy struct {
	// URL is where clients connect; Addr the same as host:port, for a
	// Link in front of it.
	URL, Addr string
	CAData    []byte

	mu     sync.Mutex
	faults []*Fault
}

// Fault is a fault the proxy makes of the requests it matches, until
// removed.
type Fault struct {
	p     *Proxy
	match func(*http.Request) bool
	code  int
	delay time.Duration
	hits  atomic.Int64
}

// Hits is how many requests the fault acted on.
func (f *Fault) Hits() int64 { return f.hits.Load() }

// Remove ends the fault.
func (f *Fault) Remove() {
	f.p.mu.Lock()
	defer f.p.mu.Unlock()
	for i, g := range f.p.faults {
		if g == f {
			f.p.faults = append(f.p.faults[:i:i], f.p.faults[i+1:]...)
			return
		}
	}
}

// Request matches requests of method (any when "") whose path matches
// the regular expression path.
func Request(method, path string) func(*http.Request) bool {
	re := regexp.MustCompile(path)
	return func(r *http.Request) bool { return (method == "" || r.Method == method) && re.MatchString(r.URL.Path) }
}

// NewProxy starts a proxy to the API server of upstream (its address and
// identity); it stops at the end of the test.
func NewProxy(t testing.TB, upstream *rest.Config) *Proxy {
	t.Helper()
	target, err := url.Parse(upstream.Host)
	if err != nil {
		t.Fatal(err)
	}
	transport, err := rest.TransportFor(upstream)
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{}
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target)
			r.Out.Host = target.Host
		},
		Transport: transport,
		// Watches stream.
		FlushInterval: -1,
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if f := p.fault(r); f != nil {
			f.hits.Add(1)
			if f.delay > 0 {
				select {
				case <-time.After(f.delay):
				case <-r.Context().Done():
					return
				}
			}
			if f.code != 0 {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(f.code)
				fmt.Fprintf(w, `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"the test's proxy answers %d to %s %s","reason":"InternalError","code":%d}`,
					f.code, r.Method, r.URL.Path, f.code)
				return
			}
		}
		rp.ServeHTTP(w, r)
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	p.URL = srv.URL
	p.Addr = srv.Listener.Addr().String()
	p.CAData = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	return p
}

// Fail answers the requests match matches with code (a Status of the
// InternalError reason) instead of passing them on.
func (p *Proxy) Fail(match func(*http.Request) bool, code int) *Fault {
	return p.add(&Fault{p: p, match: match, code: code})
}

// Delay holds the requests match matches for d, then passes them on.
func (p *Proxy) Delay(match func(*http.Request) bool, d time.Duration) *Fault {
	return p.add(&Fault{p: p, match: match, delay: d})
}

func (p *Proxy) add(f *Fault) *Fault {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.faults = append(p.faults, f)
	return f
}

func (p *Proxy) fault(r *http.Request) *Fault {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, f := range p.faults {
		if f.match(r) {
			return f
		}
	}
	return nil
}
