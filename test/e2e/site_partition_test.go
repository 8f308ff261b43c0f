package e2e

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// peerRelay stands between a site's members on one machine, so that one of
// them can be cut off in both directions although every member's traffic
// leaves from 127.0.0.1. Each member listens for its peers on 127.0.0.2
// and advertises 127.0.0.1, where the relay listens on the same port. The
// relay terminates TLS with the member's own peer certificate, learns the
// dialling member from its client certificate, and dials the member with
// the dialler's certificate: the members see the same mutual TLS as
// without it, and the relay knows who talks to whom.
type peerRelay struct {
	t       *testing.T
	mu      sync.Mutex
	members map[string]*siteGateway // by name
	cut     map[string]bool         // members cut off from all others
	conns   map[net.Conn][2]string  // open relayed connections: from, to
}

// newPeerRelay relays between gws: each one's certificate is read when it
// dials, so a joiner is relayed from its first connection.
func newPeerRelay(t *testing.T, gws ...*siteGateway) *peerRelay {
	r := &peerRelay{t: t, members: map[string]*siteGateway{}, cut: map[string]bool{}, conns: map[net.Conn][2]string{}}
	for _, g := range gws {
		r.members[g.name] = g
		g.extra = []string{"--peer-bind-address", "127.0.0.2"}
	}
	return r
}

// serve relays to g once g's peer certificate exists (after its start).
func (r *peerRelay) serve(g *siteGateway) {
	t := r.t
	t.Helper()
	cert, err := tls.LoadX509KeyPair(filepath.Join(g.dir, "pki", "peer.crt"), filepath.Join(g.dir, "pki", "peer.key"))
	if err != nil {
		t.Fatal(err)
	}
	caPEM, err := os.ReadFile(filepath.Join(g.dir, "pki", "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	ln, err := tls.Listen("tcp", "127.0.0.1:"+strconv.Itoa(g.peerPort), &tls.Config{
		Certificates: []tls.Certificate{cert}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go r.relay(c.(*tls.Conn), g)
		}
	}()
}

func (r *peerRelay) relay(in *tls.Conn, to *siteGateway) {
	defer in.Close()
	if err := in.Handshake(); err != nil {
		return
	}
	// Every member's peer certificate has the members' subject; its first
	// name is the member's.
	var from string
	if names := in.ConnectionState().PeerCertificates[0].DNSNames; len(names) > 0 {
		from = names[0]
	}
	r.mu.Lock()
	dialler, known := r.members[from]
	blocked := r.cut[from] || r.cut[to.name]
	r.mu.Unlock()
	if !known || blocked {
		return
	}
	cert, err := tls.LoadX509KeyPair(filepath.Join(dialler.dir, "pki", "peer.crt"), filepath.Join(dialler.dir, "pki", "peer.key"))
	if err != nil {
		return
	}
	out, err := tls.Dial("tcp", "127.0.0.2:"+strconv.Itoa(to.peerPort), &tls.Config{Certificates: []tls.Certificate{cert}, InsecureSkipVerify: true}) //nolint:gosec // the relay trusts the member it is a test harness for
	if err != nil {
		return
	}
	defer out.Close()
	r.mu.Lock()
	r.conns[in], r.conns[out] = [2]string{from, to.name}, [2]string{from, to.name}
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		delete(r.conns, in)
		delete(r.conns, out)
		r.mu.Unlock()
	}()
	done := make(chan struct{}, 2)
	go func() { io.Copy(out, in); done <- struct{}{} }()
	go func() { io.Copy(in, out); done <- struct{}{} }()
	<-done
}

// partition cuts name off from every other member, both ways, and closes
// its relayed connections; heal lets it talk again.
func (r *peerRelay) partition(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cut[name] = true
	for c, ends := range r.conns {
		if ends[0] == name || ends[1] == name {
			c.Close()
		}
	}
}

func (r *peerRelay) heal(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.cut, name)
}

// TestSitePartitionedMember: one gateway of a site of three is cut off
// from the other two, both ways, under writes through all three, then the
// partition heals. The majority side keeps acknowledging writes; the
// minority gateway acknowledges none (it has no leader) and keeps serving
// reads from its watch cache; after the heal it catches up with every
// acknowledged write and the site is whole again (issue 26).
func TestSitePartitionedMember(t *testing.T) {
	a, b, c := newGateway(t, "gw-a"), newGateway(t, "gw-b"), newGateway(t, "gw-c")
	relay := newPeerRelay(t, a, b, c)
	a.start(t, "", "")
	relay.serve(a)
	token := a.token(t)
	for _, g := range []*siteGateway{b, c} {
		// The relay serves a joiner once its certificate exists: the
		// join writes it before etcd starts, and etcd retries its peers.
		g.launch(t, a.url(), token)
		if !eventually(60*time.Second, func() bool {
			_, err := os.Stat(filepath.Join(g.dir, "pki", "peer.crt"))
			return err == nil
		}) {
			t.Fatalf("%s wrote no peer certificate\n%s", g.name, g.p.logs())
		}
		relay.serve(g)
		g.waitServing(t)
	}
	if !eventually(30*time.Second, func() bool { return voters(a.memberList(t), "gw-a", "gw-b", "gw-c") }) {
		t.Fatalf("the relayed site is not three reachable voters:\n%s", a.memberList(t))
	}

	w := startSiteWriters(t, a, b, c)
	time.Sleep(2 * time.Second)
	relay.partition(c.name)
	w.mu.Lock()
	w.mark = time.Now()
	w.mu.Unlock()
	time.Sleep(3 * time.Second) // the minority notices: no leader
	before := len(w.acknowledged(c.name))
	time.Sleep(5 * time.Second)
	during := len(w.acknowledged(c.name)) - before
	if during != 0 {
		t.Errorf("gw-c, cut off from its site, acknowledged %d writes", during)
	}
	for _, g := range []*siteGateway{a, b} {
		if w.firstAfter[g.name].IsZero() {
			t.Errorf("no write through %s succeeded while gw-c was cut off", g.name)
		}
	}
	// Its watch cache still serves reads at any resourceVersion (what
	// informers list at); a consistent read needs a leader, as on
	// kube-apiserver, and is refused.
	if list, err := c.p.clientset().CoreV1().ConfigMaps("default").List(t.Context(), metav1.ListOptions{ResourceVersion: "0"}); err != nil || len(list.Items) == 0 {
		t.Errorf("gw-c, cut off, does not serve a read from its watch cache: %v", err)
	}
	if _, err := c.p.kubectl("get", "configmaps", "--request-timeout=5s"); err == nil {
		t.Errorf("gw-c, cut off, served a consistent read")
	}
	if r := row(a.memberList(t), c.name); !strings.Contains(r, " no: ") {
		t.Errorf("gw-a lists the cut-off gw-c as reachable: %s", r)
	}
	// Readiness tells who can serve a write: gw-c, cut off, has no
	// leader; gw-a keeps quorum with gw-b, and stays ready.
	if !eventually(20*time.Second, func() bool {
		out, _ := c.p.kubectl("get", "--raw", "/readyz?verbose")
		return strings.Contains(out, "[-]etcd-members failed")
	}) {
		t.Errorf("/readyz on gw-c, cut off from its site, does not fail etcd-members")
	}
	if out, err := a.p.kubectl("get", "--raw", "/readyz?verbose"); err != nil || !strings.Contains(out, "[+]etcd-members ok") {
		t.Errorf("/readyz on gw-a, with quorum, while gw-c is cut off: %v\n%s", err, out)
	}

	relay.heal(c.name)
	time.Sleep(3 * time.Second)
	acked := w.stop()
	t.Logf("%d writes acknowledged across the partition and the heal", len(acked))
	if !eventually(30*time.Second, func() bool { return len(missing(t, c, acked)) == 0 }) {
		m := missing(t, c, acked)
		t.Fatalf("%d acknowledged writes missing on gw-c after the heal: %v", len(m), m[:min(5, len(m))])
	}
	for _, g := range []*siteGateway{a, b} {
		if m := missing(t, g, acked); len(m) > 0 {
			t.Fatalf("%d acknowledged writes missing on %s: %v", len(m), g.name, m[:min(5, len(m))])
		}
	}
	if !eventually(30*time.Second, func() bool { return voters(a.memberList(t), "gw-a", "gw-b", "gw-c") }) {
		t.Fatalf("the site is not whole after the heal:\n%s", a.memberList(t))
	}
}
