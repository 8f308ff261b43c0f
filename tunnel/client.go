package tunnel

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/yamux"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/kubestore/kubestore/kubelets"
)

// Client is the gateway's end: it keeps one tunnel open to the endpoint,
// reconnecting with a growing wait, and serves each connection the
// endpoint opens through it when its destination is the node's own
// kubelet.
type Client struct {
	// Endpoint is the endpoint's URL (https://host:port).
	Endpoint string
	// TLS is the client's TLS configuration: the endpoint's CA, and the
	// node's client certificate when it has one.
	TLS *tls.Config
	// NodeName is the node the gateway serves, sent in NodeHeader.
	NodeName string
	// Token is the bearer token of the gateway's credentials when they
	// are not a certificate (TokenFile, when set, is read at each
	// connection, as client-go reads a rotated token).
	Token, TokenFile string
	// Node reads the node's own Node: its addresses and kubelet port are
	// the only destination the client dials.
	Node func(ctx context.Context) (*corev1.Node, error)

	mu     sync.Mutex
	status Status
}

// Status is the tunnel's state, for /mirrorz and the metrics.
type Status struct {
	Endpoint  string    `json:"endpoint"`
	Connected bool      `json:"connected"`
	Since     time.Time `json:"since,omitzero"`
	LastError string    `json:"lastError,omitempty"`
}

// Status is the tunnel's state now.
func (c *Client) Status() Status {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.status
	s.Endpoint = c.Endpoint
	return s
}

func (c *Client) set(connected bool, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if connected != c.status.Connected || c.status.Since.IsZero() {
		c.status.Since = time.Now()
	}
	c.status.Connected = connected
	if err != nil {
		c.status.LastError = err.Error()
	}
	if connected {
		tunnelConnected.WithLabelValues(c.Endpoint).Set(1)
	} else {
		tunnelConnected.WithLabelValues(c.Endpoint).Set(0)
	}
}

// Backoff bounds between two attempts to open the tunnel (and up to half
// again, at random, so that a fleet does not come back at once): at most
// 9 s after the link's return the tunnel is open again.
const (
	backoffMin = time.Second
	backoffMax = 6 * time.Second
)

// Run keeps the tunnel open until ctx ends.
func (c *Client) Run(ctx context.Context) {
	registerMetrics()
	wait := backoffMin
	for ctx.Err() == nil {
		session, err := c.connect(ctx)
		if err == nil {
			klog.InfoS("Tunnel: connected to the endpoint", "endpoint", c.Endpoint)
			c.set(true, nil)
			wait = backoffMin
			err = c.serve(ctx, session)
			session.Close()
		}
		if ctx.Err() != nil {
			break
		}
		c.set(false, err)
		klog.InfoS("Tunnel: not connected to the endpoint; trying again", "endpoint", c.Endpoint, "err", err, "in", wait)
		select {
		case <-ctx.Done():
		case <-time.After(wait + rand.N(wait/2)):
		}
		wait = min(2*wait, backoffMax)
	}
	c.set(false, nil)
}

// connect opens the tunnel: TLS to the endpoint, the upgrade, and the
// session the endpoint opens streams in.
func (c *Client) connect(ctx context.Context) (*yamux.Session, error) {
	u, err := url.Parse(c.Endpoint)
	if err != nil {
		return nil, err
	}
	host := u.Host
	if u.Port() == "" {
		host = net.JoinHostPort(u.Hostname(), "443")
	}
	cfg := &tls.Config{}
	if c.TLS != nil {
		cfg = c.TLS.Clone()
	}
	if cfg.ServerName == "" {
		cfg.ServerName = u.Hostname()
	}
	dctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	conn, err := (&tls.Dialer{Config: cfg}).DialContext(dctx, "tcp", host)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequest(http.MethodGet, (&url.URL{Scheme: "https", Host: u.Host, Path: Path}).String(), nil)
	if err != nil {
		conn.Close()
		return nil, err
	}
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", Protocol)
	req.Header.Set(NodeHeader, c.NodeName)
	token := c.Token
	if c.TokenFile != "" {
		data, err := os.ReadFile(c.TokenFile)
		if err != nil {
			conn.Close()
			return nil, err
		}
		token = strings.TrimSpace(string(data))
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	conn.SetDeadline(time.Now().Add(dialTimeout))
	if err := req.Write(conn); err != nil {
		conn.Close()
		return nil, err
	}
	br := bufio.NewReader(conn)
	res, err := http.ReadResponse(br, req)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("reading the endpoint's answer: %w", err)
	}
	if res.StatusCode != http.StatusSwitchingProtocols {
		why, _ := io.ReadAll(io.LimitReader(res.Body, maxLine))
		conn.Close()
		return nil, fmt.Errorf("the endpoint refused the tunnel: %s: %s", res.Status, strings.TrimSpace(string(why)))
	}
	res.Body.Close()
	conn.SetDeadline(time.Time{})
	return yamux.Server(bufferedConn{Conn: conn, r: br}, yamuxConfig())
}

// serve accepts the endpoint's streams until the session ends.
func (c *Client) serve(ctx context.Context, session *yamux.Session) error {
	go func() {
		select {
		case <-ctx.Done():
			session.Close()
		case <-session.CloseChan():
		}
	}()
	for {
		stream, err := session.AcceptStream()
		if err != nil {
			if errors.Is(err, yamux.ErrSessionShutdown) {
				return errors.New("the tunnel closed")
			}
			return err
		}
		go c.stream(ctx, stream)
	}
}

// stream serves one connection: its destination is checked against the
// node's own kubelet, dialed, and spliced.
func (c *Client) stream(ctx context.Context, stream net.Conn) {
	stream.SetDeadline(time.Now().Add(dialTimeout))
	dest, err := readLine(stream)
	if err != nil {
		stream.Close()
		return
	}
	kubelet, err := c.dial(ctx, dest)
	if err != nil {
		streams.WithLabelValues("refused").Inc()
		klog.V(2).InfoS("Tunnel: refused a connection", "destination", dest, "err", err)
		answer(stream, err)
		stream.Close()
		return
	}
	if err := answer(stream, nil); err != nil {
		kubelet.Close()
		stream.Close()
		return
	}
	streams.WithLabelValues("served").Inc()
	stream.SetDeadline(time.Time{})
	splice(stream, kubelet)
}

// dial connects to the node's own kubelet if dest is it: one of the
// addresses its Node reports, at its kubelet port. It dials the kubelet
// as kubestore does for its own pods/log (kubelets.PreferredAddress): a
// kube-apiserver that prefers the node's Hostname (its default) names
// one the gateway need not resolve.
func (c *Client) dial(ctx context.Context, dest string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(dest)
	if err != nil {
		return nil, fmt.Errorf("destination %q: %w", dest, err)
	}
	node, err := c.Node(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the node: %w", err)
	}
	if err := Kubelet(node, host, port); err != nil {
		return nil, err
	}
	if a := kubelets.PreferredAddress(node); a != "" {
		host = a
	}
	dctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	return (&net.Dialer{}).DialContext(dctx, "tcp", net.JoinHostPort(host, port))
}

// Kubelet says whether host:port is node's kubelet: one of its addresses,
// at the port it reports (kubelets.DefaultPort when none).
func Kubelet(node *corev1.Node, host, port string) error {
	want := int(node.Status.DaemonEndpoints.KubeletEndpoint.Port)
	if want <= 0 {
		want = kubelets.DefaultPort
	}
	if port != strconv.Itoa(want) {
		return fmt.Errorf("port %s is not node %s's kubelet port %d", port, node.Name, want)
	}
	if !slices.ContainsFunc(node.Status.Addresses, func(a corev1.NodeAddress) bool { return a.Address == host }) {
		return fmt.Errorf("%s is not an address of node %s", host, node.Name)
	}
	return nil
}
