package tunnel

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/yamux"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	authenticationv1client "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authorizationv1client "k8s.io/client-go/kubernetes/typed/authorization/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// Node identities, as the Node authorizer names them.
const (
	nodeUserPrefix = "system:node:"
	nodesGroup     = "system:nodes"
)

// NodeHeader names the node a gateway serves, when its identity is not the
// node's own.
const NodeHeader = "X-Kubestore-Node"

// addressIndex indexes Nodes by their addresses.
const addressIndex = "address"

// Endpoint is the cloud's end: it holds each node's tunnel and routes
// kube-apiserver's CONNECT requests to the node that owns the destination.
type Endpoint struct {
	client    ClusterClient
	clientCAs *x509.CertPool
	nodes     cache.SharedIndexInformer

	mu       sync.Mutex
	sessions map[string]*yamux.Session
}

// ClusterClient is what the endpoint asks the cluster: its Nodes, and the
// reviews of gateways' tokens and of what they may tunnel to. A
// kubernetes.Interface is one; 'kubestore tunnel-endpoint' passes the
// three typed clients alone (NewClusterClient), as a whole kubernetes.Clientset
// in the binary keeps every group's typed client and apply configurations.
type ClusterClient interface {
	CoreV1() corev1client.CoreV1Interface
	AuthenticationV1() authenticationv1client.AuthenticationV1Interface
	AuthorizationV1() authorizationv1client.AuthorizationV1Interface
}

// NewClusterClient is a ClusterClient on cfg.
func NewClusterClient(cfg *rest.Config) (ClusterClient, error) {
	core, err := corev1client.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	authn, err := authenticationv1client.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	authz, err := authorizationv1client.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return clients{core: core, authn: authn, authz: authz}, nil
}

type clients struct {
	core  corev1client.CoreV1Interface
	authn authenticationv1client.AuthenticationV1Interface
	authz authorizationv1client.AuthorizationV1Interface
}

func (c clients) CoreV1() corev1client.CoreV1Interface { return c.core }
func (c clients) AuthenticationV1() authenticationv1client.AuthenticationV1Interface {
	return c.authn
}
func (c clients) AuthorizationV1() authorizationv1client.AuthorizationV1Interface { return c.authz }

// NewEndpoint is an endpoint reading the cluster's Nodes with client (and
// validating gateways' bearer tokens with its TokenReview); clientCAs
// verify gateways' client certificates (nil: tokens only).
func NewEndpoint(client ClusterClient, clientCAs *x509.CertPool) *Endpoint {
	registerMetrics()
	// As client-go's Node informer builds it, on the core group's client.
	lw := cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			return client.CoreV1().Nodes().List(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			return client.CoreV1().Nodes().Watch(ctx, opts)
		},
	}, client)
	nodes := cache.NewSharedIndexInformer(lw, &corev1.Node{}, 0, cache.Indexers{addressIndex: func(obj any) ([]string, error) {
		n, ok := obj.(*corev1.Node)
		if !ok {
			return nil, nil
		}
		var out []string
		for _, a := range n.Status.Addresses {
			if a.Address != "" && !slices.Contains(out, a.Address) {
				out = append(out, a.Address)
			}
		}
		return out, nil
	}})
	return &Endpoint{client: client, clientCAs: clientCAs, nodes: nodes, sessions: map[string]*yamux.Session{}}
}

// Run reads the cluster's Nodes until ctx ends; it returns once they are
// synced (or ctx ended first).
func (e *Endpoint) Run(ctx context.Context) error {
	go e.nodes.RunWithContext(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), e.nodes.HasSynced) {
		return fmt.Errorf("reading the cluster's Nodes: %w", context.Cause(ctx))
	}
	go func() {
		<-ctx.Done()
		e.mu.Lock()
		defer e.mu.Unlock()
		for _, s := range e.sessions {
			s.Close()
		}
	}()
	return nil
}

// Connected are the nodes whose gateways hold a tunnel now.
func (e *Endpoint) Connected() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []string
	for n, s := range e.sessions {
		if !s.IsClosed() {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

// TunnelHandler takes gateways' tunnels (at Path, on the endpoint's TLS
// listener, which asks for client certificates).
func (e *Endpoint) TunnelHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != Path {
			http.NotFound(w, r)
			return
		}
		if !strings.EqualFold(r.Header.Get("Upgrade"), Protocol) {
			http.Error(w, "a tunnel is an upgrade to "+Protocol, http.StatusUpgradeRequired)
			return
		}
		node, err := e.authenticate(r)
		if err != nil {
			code := http.StatusUnauthorized
			var f forbidden
			if errors.As(err, &f) {
				code = http.StatusForbidden
			}
			klog.InfoS("Tunnel: refused a gateway", "remote", r.RemoteAddr, "code", code, "err", err)
			http.Error(w, err.Error(), code)
			return
		}
		conn, buf, err := http.NewResponseController(w).Hijack()
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		conn.SetDeadline(time.Time{})
		if _, err := fmt.Fprintf(conn, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: %s\r\n\r\n", Protocol); err != nil {
			conn.Close()
			return
		}
		session, err := yamux.Client(bufferedConn{Conn: conn, r: buf.Reader}, yamuxConfig())
		if err != nil {
			conn.Close()
			return
		}
		e.mu.Lock()
		if old := e.sessions[node]; old != nil {
			// The node's gateway connected again (its old connection
			// may not have ended yet): the newest is the node's.
			old.Close()
		}
		e.sessions[node] = session
		tunnels.Set(float64(len(e.sessions)))
		e.mu.Unlock()
		klog.InfoS("Tunnel: a gateway connected", "node", node, "remote", r.RemoteAddr)
		go func() {
			<-session.CloseChan()
			e.mu.Lock()
			if e.sessions[node] == session {
				delete(e.sessions, node)
			}
			tunnels.Set(float64(len(e.sessions)))
			e.mu.Unlock()
			klog.InfoS("Tunnel: a gateway's tunnel ended", "node", node, "remote", r.RemoteAddr)
		}()
	})
}

// authenticate names the node a gateway serves. The cluster
// authenticates it: its client certificate (verified by the TLS listener
// against the cluster's client CA) or its bearer token (TokenReview). A
// node's own identity (system:node:<name> in system:nodes) serves its
// node; any other identity (a gateway's ServiceAccount) serves the node
// it names in NodeHeader if the cluster authorizes it to create
// nodes/tunnel of that name (SubjectAccessReview): an RBAC rule with the
// node in resourceNames, so that one gateway's credentials cannot take
// another node's tunnel.
func (e *Endpoint) authenticate(r *http.Request) (string, error) {
	var u user
	if r.TLS != nil && len(r.TLS.VerifiedChains) > 0 {
		cert := r.TLS.VerifiedChains[0][0]
		u = user{name: cert.Subject.CommonName, groups: cert.Subject.Organization}
	} else {
		token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || token == "" {
			return "", errors.New("a gateway authenticates with the cluster's credentials: a client certificate of the cluster's CA or a bearer token")
		}
		var err error
		if u, err = e.review(r.Context(), token); err != nil {
			return "", err
		}
	}
	named := r.Header.Get(NodeHeader)
	if node, ok := strings.CutPrefix(u.name, nodeUserPrefix); ok && slices.Contains(u.groups, nodesGroup) {
		if named != "" && named != node {
			return "", forbidden{fmt.Errorf("%s names node %s, but it is node %s", u.name, named, node)}
		}
		return node, nil
	}
	if named == "" {
		return "", forbidden{fmt.Errorf("%s is not a node: it names the node it serves in %s", u.name, NodeHeader)}
	}
	ctx, cancel := context.WithTimeout(r.Context(), dialTimeout)
	defer cancel()
	sar, err := e.client.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: u.name, Groups: u.groups, UID: u.uid, Extra: u.extra,
		ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "create", Resource: "nodes", Subresource: "tunnel", Name: named},
	}}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("authorizing %s for node %s's tunnel: %w", u.name, named, err)
	}
	if !sar.Status.Allowed {
		return "", forbidden{fmt.Errorf("%s may not create nodes/tunnel %q in the cluster %s", u.name, named, sar.Status.Reason)}
	}
	return named, nil
}

// forbidden is an authenticated gateway refused its node's tunnel (403).
type forbidden struct{ error }

func (f forbidden) Unwrap() error { return f.error }

// user is an identity the cluster authenticated.
type user struct {
	name, uid string
	groups    []string
	extra     map[string]authorizationv1.ExtraValue
}

// review authenticates a bearer token with the cluster's TokenReview.
func (e *Endpoint) review(ctx context.Context, token string) (user, error) {
	ctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	review, err := e.client.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{
		Spec: authenticationv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
	if err != nil {
		return user{}, fmt.Errorf("reviewing the gateway's token: %w", err)
	}
	if !review.Status.Authenticated {
		return user{}, fmt.Errorf("the cluster did not authenticate the gateway's token: %s", review.Status.Error)
	}
	st := review.Status.User
	u := user{name: st.Username, uid: st.UID, groups: st.Groups, extra: map[string]authorizationv1.ExtraValue{}}
	for k, v := range st.Extra {
		u.extra[k] = authorizationv1.ExtraValue(v)
	}
	return u, nil
}

// ConnectHandler serves kube-apiserver's egress: HTTP CONNECT host:port,
// answered 200 and spliced to the node's kubelet through its gateway's
// tunnel, or refused with a status whose reason names why (kube-apiserver
// reports it: "proxy error ... code 503: 503 no tunnel from node edge-1").
func (e *Endpoint) ConnectHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodConnect {
			http.Error(w, "the tunnel endpoint takes CONNECT host:port", http.StatusMethodNotAllowed)
			return
		}
		dest := r.Host
		stream, code, err := e.open(dest)
		conn, buf, herr := http.NewResponseController(w).Hijack()
		if herr != nil {
			if stream != nil {
				stream.Close()
			}
			http.Error(w, herr.Error(), http.StatusInternalServerError)
			return
		}
		if err != nil {
			dials.WithLabelValues(strconv.Itoa(code)).Inc()
			klog.V(2).InfoS("Tunnel: refused a connection", "destination", dest, "code", code, "err", err)
			fmt.Fprintf(conn, "HTTP/1.1 %d %s\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", code, oneLine(err.Error()))
			conn.Close()
			return
		}
		dials.WithLabelValues("200").Inc()
		if _, err := conn.Write([]byte("HTTP/1.1 200 Connection established\r\n\r\n")); err != nil {
			conn.Close()
			stream.Close()
			return
		}
		conn.SetDeadline(time.Time{})
		splice(bufferedConn{Conn: conn, r: buf.Reader}, stream)
	})
}

// open opens a stream to the kubelet at dest through its node's tunnel;
// on failure, the HTTP code to answer.
func (e *Endpoint) open(dest string) (net.Conn, int, error) {
	host, _, err := net.SplitHostPort(dest)
	if err != nil {
		return nil, http.StatusBadRequest, fmt.Errorf("destination %q: %v", dest, err)
	}
	objs, err := e.nodes.GetIndexer().ByIndex(addressIndex, host)
	if err != nil {
		return nil, http.StatusInternalServerError, err
	}
	var owners []string
	for _, o := range objs {
		owners = append(owners, o.(*corev1.Node).Name)
	}
	slices.Sort(owners)
	switch len(owners) {
	case 0:
		return nil, http.StatusNotFound, fmt.Errorf("no node has the address %s", host)
	case 1:
	default:
		return nil, http.StatusConflict, fmt.Errorf("the address %s is claimed by nodes %s", host, strings.Join(owners, ", "))
	}
	node := owners[0]
	e.mu.Lock()
	session := e.sessions[node]
	e.mu.Unlock()
	if session == nil || session.IsClosed() {
		return nil, http.StatusServiceUnavailable, fmt.Errorf("no tunnel from node %s", node)
	}
	stream, err := session.OpenStream()
	if err != nil {
		return nil, http.StatusServiceUnavailable, fmt.Errorf("node %s's tunnel: %v", node, err)
	}
	stream.SetDeadline(time.Now().Add(answerTimeout))
	if _, err := fmt.Fprintf(stream, "%s\n", dest); err != nil {
		stream.Close()
		return nil, http.StatusServiceUnavailable, fmt.Errorf("node %s's tunnel: %v", node, err)
	}
	if err := readAnswer(stream); err != nil {
		stream.Close()
		return nil, http.StatusBadGateway, fmt.Errorf("node %s's gateway: %v", node, err)
	}
	stream.SetDeadline(time.Time{})
	return stream, 0, nil
}
