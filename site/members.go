package site

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"

	"github.com/kubestore/kubestore/datadir"
)

// Member is one member of the site as this gateway sees it.
type Member struct {
	Name    string
	ID      uint64
	PeerURL string
	// Learner: added, not promoted yet. A member that never started has
	// no name yet.
	Learner bool
	Leader  bool
	Self    bool
	// Unreachable is why this gateway cannot reach the member's peer
	// port, empty when it can (Self is never probed).
	Unreachable string
}

// probeTimeout bounds one probe of a peer.
const probeTimeout = 2 * time.Second

// peerClient is an HTTPS client with this member's peer certificate: the
// other members' peer ports ask for it (mutual TLS).
func peerClient(dir datadir.Dir) (*http.Client, error) {
	cert, err := tls.LoadX509KeyPair(dir.PeerCert(), dir.PeerKey())
	if err != nil {
		return nil, fmt.Errorf("this member's peer certificate: %w", err)
	}
	pool, err := trustedCAs(dir)
	if err != nil {
		return nil, err
	}
	return &http.Client{
		Timeout:   probeTimeout,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool}, DisableKeepAlives: true},
	}, nil
}

// trustedCAs are the CAs of this member's bundle (ca.crt): the site's, and
// during a rotation the previous one too.
func trustedCAs(dir datadir.Dir) (*x509.CertPool, error) {
	bundle, err := os.ReadFile(dir.CACert())
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(bundle) {
		return nil, fmt.Errorf("%s holds no certificate", dir.CACert())
	}
	return pool, nil
}

// Leader is the ID of the site's leader as a member sees it, 0 for none.
type Leader func(context.Context) uint64

// StatusLeader asks the member at client's first endpoint, by etcd's
// Status RPC: for an operator's command. Not for a member's own server,
// in process: etcd 3.7 panics on a Status that races the member's removal
// (membership.IsLocalMemberLearner, etcd-io/etcd#21966), and the removed
// member then exits with a panic instead of its one line (seen in
// TestSiteFounderRemovedRejoins); the server's own Leader has no such
// path.
func StatusLeader(client *clientv3.Client) Leader {
	return func(ctx context.Context) uint64 {
		if st, err := client.Status(ctx, client.Endpoints()[0]); err == nil {
			return st.Leader
		}
		return 0
	}
}

// ServerLeader is the view of the member's own server, in process (the
// embedded etcd's Leader), with no RPC.
func ServerLeader(leader func() uint64) Leader {
	return func(context.Context) uint64 { return leader() }
}

// NoLeader is for a caller that does not look at who leads.
var NoLeader Leader = func(context.Context) uint64 { return 0 }

// Members lists the site's members through client (this gateway's etcd)
// and probes each other member's peer port (etcd's /version there) with
// this member's peer certificate; leader says which leads.
func Members(ctx context.Context, dir datadir.Dir, client *clientv3.Client, leaderOf Leader) ([]Member, error) {
	list, err := client.MemberList(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing the site's members (has it lost quorum?): %w", err)
	}
	leader := leaderOf(ctx)
	hc, err := peerClient(dir)
	if err != nil {
		return nil, err
	}
	out := make([]Member, len(list.Members))
	var wg sync.WaitGroup
	for i, m := range list.Members {
		out[i] = Member{Name: m.Name, ID: m.ID, PeerURL: strings.Join(m.PeerURLs, ","), Learner: m.IsLearner,
			Leader: m.ID == leader, Self: m.ID == list.Header.MemberId}
		if out[i].Self || len(m.PeerURLs) == 0 {
			continue
		}
		wg.Go(func() {
			if err := probe(ctx, hc, m.PeerURLs[0]); err != nil {
				out[i].Unreachable = err.Error()
			}
		})
	}
	wg.Wait()
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func probe(ctx context.Context, hc *http.Client, peerURL string) error {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	r, err := http.NewRequestWithContext(ctx, http.MethodGet, peerURL+"/version", nil)
	if err != nil {
		return err
	}
	resp, err := hc.Do(r)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	return nil
}

// RemoveMember removes the member named name (or whose id, in hex, is
// name: a member that never started has no name) from the site. etcd
// refuses when that would leave the site without quorum.
func RemoveMember(ctx context.Context, client *clientv3.Client, name string) (Member, error) {
	list, err := client.MemberList(ctx)
	if err != nil {
		return Member{}, fmt.Errorf("listing the site's members (has it lost quorum?): %w", err)
	}
	for _, m := range list.Members {
		if m.Name == name || fmt.Sprintf("%x", m.ID) == name {
			if _, err := client.MemberRemove(ctx, m.ID); errors.Is(err, rpctypes.ErrUnhealthy) || errors.Is(err, rpctypes.ErrMemberNotEnoughStarted) {
				// etcd's strict reconfiguration check: the members left
				// must have reached each other for 5 s.
				return Member{}, fmt.Errorf("removing member %s (%x) now could leave the site without quorum: its other members have not all reached each other for the last 5 s (one just started, or is down: kubestore member list); retry in a few seconds", name, m.ID)
			} else if err != nil {
				return Member{}, fmt.Errorf("removing member %s (%x): %w", name, m.ID, err)
			}
			return Member{Name: m.Name, ID: m.ID, PeerURL: strings.Join(m.PeerURLs, ",")}, nil
		}
	}
	return Member{}, fmt.Errorf("the site has no member named %s (kubestore member list)", name)
}

var (
	memberReachable = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Namespace: "kubestore", Subsystem: "site", Name: "member_reachable",
		Help:           "1 while this gateway reaches the member's peer port, else 0; one series per other member of the site.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"member"})
	registerMetrics sync.Once
)

// checkPeriod is how often Health probes the other members.
const checkPeriod = 2 * time.Second

// Health follows this member and the others of the site from this
// gateway. The readyz check etcd-members fails when this member cannot
// serve a write (it has no leader: the site lost quorum, or this member is
// cut off from it); a dead peer of a site that keeps quorum is the metric
// kubestore_site_member_reachable and a line of kubestore member list, not
// a failed readyz on the healthy members (a load balancer would take out a
// site that still serves).
type Health struct {
	dir    datadir.Dir
	client *clientv3.Client
	// leader is the member's own server's view (ServerLeader).
	leader Leader
	mu     sync.Mutex
	// down maps each unreachable member to when it was first seen so.
	down map[string]time.Time
	err  error
	// leaderless is since when this member has had no leader (zero while
	// it has one).
	leaderless time.Time
}

// NewHealth follows the site of the member of dir, whose etcd client is
// client and whose server says who leads through leader.
func NewHealth(dir datadir.Dir, client *clientv3.Client, leader func() uint64) *Health {
	registerMetrics.Do(func() { legacyregistry.MustRegister(memberReachable) })
	return &Health{dir: dir, client: client, leader: ServerLeader(leader), down: map[string]time.Time{}}
}

// Run probes every checkPeriod until ctx ends.
func (h *Health) Run(ctx context.Context) {
	t := time.NewTicker(checkPeriod)
	defer t.Stop()
	for {
		h.update(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (h *Health) update(ctx context.Context) {
	leader := h.leader(ctx) != 0
	h.mu.Lock()
	switch {
	case leader:
		h.leaderless = time.Time{}
	case h.leaderless.IsZero():
		h.leaderless = time.Now()
	}
	h.mu.Unlock()
	// Without a leader the member list (a linearizable read) waits for
	// one: bounded, so the check follows the leader's return.
	lctx, cancel := context.WithTimeout(ctx, 2*checkPeriod)
	defer cancel()
	members, err := Members(lctx, h.dir, h.client, h.leader)
	h.mu.Lock()
	defer h.mu.Unlock()
	h.err = err
	if err != nil {
		return
	}
	now, seen := time.Now(), map[string]bool{}
	memberReachable.Reset()
	for _, m := range members {
		if m.Self {
			continue
		}
		key := m.Name
		if key == "" {
			key = fmt.Sprintf("%x", m.ID)
		}
		seen[key] = true
		if m.Unreachable == "" {
			delete(h.down, key)
			memberReachable.WithLabelValues(key).Set(1)
			continue
		}
		memberReachable.WithLabelValues(key).Set(0)
		if _, ok := h.down[key]; !ok {
			h.down[key] = now
		}
	}
	for key := range h.down {
		if !seen[key] {
			delete(h.down, key) // removed from the site
		}
	}
}

// Name is the readyz check's.
func (h *Health) Name() string { return "etcd-members" }

// Check fails while this member has no leader, naming the members
// unreachable from here: it acknowledges no write then. A member down in
// a site that keeps quorum does not fail it.
func (h *Health) Check(*http.Request) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.leaderless.IsZero() {
		return nil
	}
	var names []string
	for key, since := range h.down {
		names = append(names, fmt.Sprintf("%s for %s", key, time.Since(since).Round(time.Second)))
	}
	sort.Strings(names)
	why := "the site has lost quorum, or this member is cut off from it"
	if len(names) > 0 {
		why += "; unreachable from here: " + strings.Join(names, ", ")
	}
	if h.err != nil {
		why += "; " + h.err.Error()
	}
	return fmt.Errorf("this member has had no leader for %s (%s)", time.Since(h.leaderless).Round(time.Second), why)
}
