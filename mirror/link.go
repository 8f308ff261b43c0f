package mirror

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
)

// link is the upstream as both flows reach it: its clients, and whether it
// answers. The streams and the uplink's writes report every request's
// outcome (reached); a probe tries it on its own, so that a link's return
// is seen within seconds, not at the end of each stream's back-off.
type link struct {
	// host names the upstream in messages: its host and port.
	host string
	wire *wire
	dyn  dynamic.Interface
	raw  rest.Interface
	// pods is the upstream's client configuration without credentials:
	// a pod's client adds its token (asPod).
	pods *rest.Config

	linkUp atomic.Bool
	// heardAt is when the upstream last answered a request or sent a
	// watch event (UnixNano).
	heardAt atomic.Int64
	// probed is when the probe last asked (its goroutine's only).
	probed time.Time
	mu     sync.Mutex
	// upNow is closed when the link comes up: streams and the uplink
	// waiting to retry go at once.
	upNow chan struct{}
}

// newLink makes the clients of upstream.
func newLink(upstream *rest.Config) (*link, error) {
	upstream.UserAgent = userAgent
	// The pods' requests reach the upstream with the same TLS settings
	// and checks, on a transport of their own, each with its token.
	pods := rest.AnonymousClientConfig(upstream)
	if err := healthChecked(upstream); err != nil {
		return nil, fmt.Errorf("upstream client: %w", err)
	}
	if err := healthChecked(pods); err != nil {
		return nil, fmt.Errorf("upstream client: %w", err)
	}
	// Starting the streams of a node's references opens a watch each, as
	// the kubelet's configmap and secret managers do.
	upstream.QPS, upstream.Burst = 50, 100
	w, err := newWire()
	if err != nil {
		return nil, fmt.Errorf("upstream client: %w", err)
	}
	dyn, raw, err := w.clients(upstream)
	if err != nil {
		return nil, fmt.Errorf("upstream client: %w", err)
	}
	host := upstream.Host
	if u, err := url.Parse(host); err == nil && u.Host != "" {
		host = u.Host
	}
	return &link{host: host, wire: w, dyn: dyn, raw: raw, pods: pods, upNow: make(chan struct{})}, nil
}

// linkComesUp is closed when the link next comes up.
func (l *link) linkComesUp() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.upNow
}

// probeEvery is how often the link is tried while it is down: one cheap
// request, where every stream retrying on its own back-off would reconnect
// seconds late, or make many. While it is up it is tried when nothing of
// the upstream's was heard for upProbeEvery (a watch's event, a write's
// answer: a node's Lease renewal every 10 s is one), with upProbeTimeout
// to answer: a link that hangs (connections open, nothing moves) fails
// that, on top of the HTTP/2 pings of the upstream's connections
// (pingEvery). A link in use costs the cluster no probe.
const (
	probeEvery     = 2 * time.Second
	upProbeEvery   = 10 * time.Second
	upProbeTimeout = 3 * time.Second
)

// probe asks the upstream for /version; an API server's answer, even a
// refusal below 500, means it is up, and the streams go; no answer in
// time, or one that is not an API server's, means it is down.
func (l *link) probe(ctx context.Context) {
	timeout := probeEvery
	if l.linkUp.Load() {
		if time.Since(l.probed) < upProbeEvery || time.Since(time.Unix(0, l.heardAt.Load())) < upProbeEvery {
			return
		}
		timeout = upProbeTimeout
	}
	l.probed = time.Now()
	pctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	data, err := l.raw.Get().AbsPath("/version").DoRaw(pctx)
	if err == nil {
		// An answer an API server gives: its version, as JSON.
		var v struct {
			GitVersion string `json:"gitVersion"`
		}
		if json.Unmarshal(data, &v) != nil || v.GitVersion == "" {
			err = errUnreadable{fmt.Errorf("the upstream's /version is not an API server's: %.40q", data)}
		}
	}
	if ctx.Err() == nil {
		l.reached(err)
	}
}

// errUnreadable is an answer no API server gives (a broken proxy, a
// captive portal): the upstream is not reachable.
type errUnreadable struct{ error }

func (e errUnreadable) Unwrap() error { return e.error }

// HTTP/2 health checks of the upstream's connections: one that reads
// nothing for pingEvery is pinged, and closed when the ping is not
// answered within pingTimeout, failing the watches and writes on it.
const (
	pingEvery   = 5 * time.Second
	pingTimeout = 5 * time.Second
	dialTimeout = 5 * time.Second
)

// healthChecked gives cfg a transport of its own that pings its HTTP/2
// connections (client-go's default waits 30 s, then 15 s more) and gives
// up dialling and TLS handshakes after dialTimeout. A kubeconfig whose
// credentials come from an exec plugin keeps client-go's transport (its
// certificates are not a static TLS config) and relies on the probe.
func healthChecked(cfg *rest.Config) error {
	if cfg.ExecProvider != nil || cfg.Transport != nil || cfg.WrapTransport != nil {
		return nil
	}
	tlsConfig, err := rest.TLSConfigFor(cfg)
	if err != nil {
		return err
	}
	proxy := cfg.Proxy
	if proxy == nil {
		proxy = http.ProxyFromEnvironment
	}
	cfg.Transport = &http.Transport{
		Proxy:               proxy,
		DialContext:         (&net.Dialer{Timeout: dialTimeout, KeepAlive: 30 * time.Second}).DialContext,
		TLSClientConfig:     tlsConfig,
		TLSHandshakeTimeout: dialTimeout,
		ForceAttemptHTTP2:   true,
		MaxIdleConnsPerHost: 25,
		IdleConnTimeout:     90 * time.Second,
		HTTP2:               &http.HTTP2Config{SendPingTimeout: pingEvery, PingTimeout: pingTimeout},
	}
	// The transport holds the TLS settings now; client-go refuses both.
	cfg.TLSClientConfig = rest.TLSClientConfig{}
	return nil
}

// heard records that the upstream was just heard from.
func (l *link) heard() { l.heardAt.Store(time.Now().UnixNano()) }

// Connected reports whether the link is up: the upstream answered the
// last request a stream or a forwarded write made.
func (l *link) Connected() bool { return l.linkUp.Load() }

// reached records whether the upstream answered a request; err is the
// request's outcome. Errors with an HTTP answer below 500 (403, 410) mean
// it did.
func (l *link) reached(err error) {
	if errors.As(err, new(localError)) {
		return
	}
	// An upstream that answers 5xx serves nothing either: the link counts
	// as down, so the probe finds its recovery within seconds instead of
	// each stream at the end of its back-off.
	up := err == nil || errors.Is(err, errExpired) || !isNetworkError(err) && statusCode(err) < http.StatusInternalServerError
	if up {
		l.heard()
	}
	if l.linkUp.Swap(up) != up {
		if up {
			klog.InfoS("Upstream link up", "upstream", l.host)
			l.mu.Lock()
			close(l.upNow)
			l.upNow = make(chan struct{})
			l.mu.Unlock()
		} else {
			klog.InfoS("Upstream link down; serving local data, refusing writes to mirrored objects", "upstream", l.host, "err", err)
		}
	}
}

// isNetworkError reports whether err means the upstream was not reached
// (or the connection broke), rather than that it answered with an error.
func isNetworkError(err error) bool {
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		// client-go reports some transport failures as statuses too: a
		// watch whose connection broke ("http2: client connection lost")
		// ends with a 500 of its own making.
		s := status.Status()
		if s.Details != nil {
			for _, c := range s.Details.Causes {
				if c.Type == clientWatchDecoding {
					return true
				}
			}
		}
		return s.Code == 0 || s.Code == http.StatusServiceUnavailable || s.Code == http.StatusGatewayTimeout ||
			s.Reason == metav1.StatusReasonServerTimeout
	}
	return true
}

// noAnswer reports whether err means no answer of the upstream came: the
// connection failed or broke (client-go's own status of a watch that
// broke counts), rather than that the upstream answered with an error.
func noAnswer(err error) bool {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return true
	}
	if d := status.Status().Details; d != nil {
		for _, c := range d.Causes {
			if c.Type == clientWatchDecoding {
				return true
			}
		}
	}
	return status.Status().Code == 0
}

// clientWatchDecoding is the cause client-go gives a watch it could not
// read on (k8s.io/client-go/rest: the stream broke, or was not a watch).
const clientWatchDecoding metav1.CauseType = "ClientWatchDecoding"
