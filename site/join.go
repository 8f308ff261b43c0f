package site

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"k8s.io/klog/v2"

	"github.com/kubestore/kubestore/access"
	"github.com/kubestore/kubestore/config"
	"github.com/kubestore/kubestore/datadir"
	"github.com/kubestore/kubestore/etcdembed"
)

// The paths of the join protocol on every member's API port, served
// before authentication (WithJoin checks the join secret itself).
const (
	// CAPath serves the site's CA certificate, which is public: a joiner
	// trusts it only if it hashes to what its token pins.
	CAPath = "/kubestore/v1/site/ca"
	// JoinPath adds a joiner, or tells a member whether it still is one.
	JoinPath = "/kubestore/v1/site/join"
)

// joinRequest is what a joiner sends to JoinPath.
type joinRequest struct {
	Name    string `json:"name"`
	PeerURL string `json:"peerURL"`
	// MemberID, when the joiner has etcd data, asks whether the site still
	// has that member; it is not added again if so.
	MemberID uint64 `json:"memberID,omitempty,string"`
}

// joinResponse is the member's answer.
type joinResponse struct {
	// Member: the joiner's MemberID is still a member; nothing else is
	// set.
	Member bool `json:"member,omitempty"`
	// The joiner's new membership.
	MemberID       uint64              `json:"memberID,omitempty,string"`
	InitialCluster string              `json:"initialCluster,omitempty"`
	Secrets        *access.SiteSecrets `json:"secrets,omitempty"`
}

// joinTimeout bounds the whole join; joinRetry is the pause between tries
// a member answered "retry" to (another learner is catching up).
const (
	joinTimeout = 5 * time.Minute
	joinRetry   = 2 * time.Second
)

// Prepare readies a site's member before its etcd starts: with --join and
// no etcd data it joins the site; with --join and data it asks the site
// whether it is still a member, and joins again if the site removed it
// (its old data is moved to a new <data-dir>/etcd.removed.<time>); then it issues the
// member's peer certificate. A site that cannot be reached leaves a member
// with data as it is: it may be the one the others need for quorum.
func Prepare(ctx context.Context, cfg config.Config) error {
	dir := datadir.Dir(cfg.DataDir)
	lost, err := lostLog(cfg, dir)
	if err != nil {
		return err
	}
	if cfg.Site.Join != "" {
		if err := joinIfNeeded(ctx, cfg, dir, lost); err != nil {
			return err
		}
	}
	pki, err := access.LoadPKI(dir, access.ServingHosts(cfg.Server, cfg.Site))
	if err != nil {
		return err
	}
	if err := pki.Peer(cfg.Site); err != nil {
		return err
	}
	_, err = access.ReadSiteSecrets(dir) // a founder's join secret, from its first start
	return err
}

// lostLog is why etcd's raft log lost entries this member had
// acknowledged (etcdembed recorded raft's panic), "" when it did not. Such
// a member joins its site again wiped: raft cannot take it back (etcd
// refuses it for good), and its data cannot be trusted. Only with --join:
// a member without it has no site to rejoin, and is refused in one line.
func lostLog(cfg config.Config, dir datadir.Dir) (string, error) {
	lost, err := os.ReadFile(dir.RaftLogLost())
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	why := strings.TrimSpace(string(lost))
	if cfg.Site.Join == "" {
		return "", fmt.Errorf("etcd's raft log in %s lost entries this member had acknowledged (%s): start it with --%s naming another member, and it rejoins the site wiped; or restore a snapshot",
			dir.Etcd(), why, config.FlagJoin)
	}
	return why, nil
}

// joinIfNeeded joins the site at --join when this member has no data, or
// the site removed it, or its raft log lost what it had acknowledged
// (lost, the reason): its data is moved aside (never deleted) only once
// the site has answered that it takes the member back, so members that
// lost their tails in one power cut, with nobody left to take them back,
// keep their data for a reset.
func joinIfNeeded(ctx context.Context, cfg config.Config, dir datadir.Dir, lost string) error {
	req := joinRequest{Name: cfg.Site.Name(), PeerURL: cfg.Site.PeerURL()}
	hasData := dir.HasEtcdData()
	// A member etcd found removed asks, a founder too: its own etcd says
	// the site it founded went on without it.
	_, err := os.Stat(dir.EtcdRemoved())
	removed := err == nil
	if hasData && removed {
		if j, err := etcdembed.ReadJoin(dir); err == nil {
			req.MemberID = j.MemberID
		}
	}
	if hasData && lost == "" && !removed {
		j, err := etcdembed.ReadJoin(dir)
		if errors.Is(err, os.ErrNotExist) || (err == nil && (j.MemberID == 0 || j.InitialCluster == "")) {
			// It never served as a site's member, or founded its site
			// (first, or by a restore or a reset): nothing to ask. A
			// founder asking could be told by a member of a site it
			// replaced that it is gone.
			return nil
		}
		if err != nil {
			return err
		}
		req.MemberID = j.MemberID
	}
	token, err := config.ParseJoinToken(cfg.Site.JoinToken)
	if err != nil {
		return fmt.Errorf("invalid --%s: %w", config.FlagJoinToken, err)
	}
	// A member with data trusts the site by its own CA bundle, not by the
	// token's pin: the token may pin a CA the site has since rotated
	// (kubestore ca rotate), and the bundle follows the rotation.
	// Its own join secret too: a rotation replaced the token's.
	var trusted *x509.CertPool
	if hasData {
		trusted, _ = trustedCAs(dir) // without a bundle, the token's pin
		if own, err := access.ReadSiteSecrets(dir); err == nil && own.JoinSecret != "" {
			token.Secret = own.JoinSecret
		}
	}
	ctx, cancel := context.WithTimeout(ctx, joinTimeout)
	defer cancel()
	resp, err := join(ctx, cfg.Site.Join, token, trusted, req)
	for err != nil && hasData && removed && lost == "" && errors.Is(err, errUnreachable) {
		// Its etcd said the site removed it: its data cannot serve, so
		// it waits for the site (one that lost its quorum for a moment,
		// a member of two removed while the other restarted) rather
		// than start on it and stop again at once.
		klog.InfoS("The site removed this member and is not reachable to take it back; asking again", "join", cfg.Site.Join, "err", err, "in", joinRetry)
		select {
		case <-ctx.Done():
			return fmt.Errorf("the site at --%s %s removed this member and did not answer within %s: %w (with the site gone for good, move %s away to start afresh)",
				config.FlagJoin, cfg.Site.Join, joinTimeout, err, dir.Etcd())
		case <-time.After(joinRetry):
		}
		resp, err = join(ctx, cfg.Site.Join, token, trusted, req)
	}
	if err != nil && lost != "" {
		return fmt.Errorf("etcd's raft log lost entries this member had acknowledged (%s): its data in %s stays until the site at --%s %s takes the member back: %w",
			lost, dir.Etcd(), config.FlagJoin, cfg.Site.Join, err)
	}
	if err != nil {
		if hasData && errors.Is(err, errUnreachable) {
			klog.InfoS("The site is not reachable to confirm this member is still in it; starting with the data it has", "join", cfg.Site.Join, "err", err)
			return nil
		}
		return fmt.Errorf("joining the site at --%s %s: %w", config.FlagJoin, cfg.Site.Join, err)
	}
	if resp.Member {
		return nil
	}
	switch {
	case hasData && lost != "":
		aside, err := dir.MoveEtcdAside("etcd.log-lost")
		if err != nil {
			return err
		}
		datadir.SetAside("etcd.log-lost", aside, "etcd's raft log lost entries this member had acknowledged ("+lost+"): the site takes it back wiped, and what this member alone held is only in the copy")
	case hasData:
		// The site removed this member: its data is of a past
		// membership. It is kept aside, never deleted.
		removed, err := dir.MoveEtcdAside("etcd.removed")
		if err != nil {
			return err
		}
		datadir.SetAside("etcd.removed", removed, "the site at --"+config.FlagJoin+" "+cfg.Site.Join+" had removed this member: it joins again, and what it wrote after its removal is only in the copy")
	}
	if lost != "" {
		if err := os.Remove(dir.RaftLogLost()); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	if removed {
		if err := os.Remove(dir.EtcdRemoved()); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	if resp.Secrets == nil {
		return fmt.Errorf("joining the site at --%s %s: the member sent no secrets", config.FlagJoin, cfg.Site.Join)
	}
	if err := access.WriteSiteSecrets(dir, *resp.Secrets); err != nil {
		return err
	}
	klog.InfoS("Joined the site as a learner", "join", cfg.Site.Join, "member", req.Name, "id", strconv.FormatUint(resp.MemberID, 16))
	return etcdembed.WriteJoin(dir, etcdembed.Join{MemberID: resp.MemberID, InitialCluster: resp.InitialCluster})
}

// errUnreachable wraps failures to reach the member at all, as opposed to
// its refusals.
var errUnreachable = errors.New("unreachable")

// join runs the protocol against the member at base: the CA, pinned
// (unless trusted already says which CAs to trust); then the join
// request, retried while the member says to.
func join(ctx context.Context, base string, token config.JoinToken, trusted *x509.CertPool, req joinRequest) (*joinResponse, error) {
	pool := trusted
	if pool == nil {
		var err error
		if pool, err = pinnedCA(ctx, base, token.CAHash); err != nil {
			return nil, err
		}
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: verifyChainOnly(pool)}, Timeout: 30 * time.Second}
	body, _ := json.Marshal(req)
	for {
		r, err := http.NewRequestWithContext(ctx, http.MethodPost, base+JoinPath, bytes.NewReader(body))
		if err != nil {
			return nil, err
		}
		r.Header.Set("Authorization", "Bearer "+token.Secret)
		r.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(r)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", errUnreachable, err)
		}
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		switch resp.StatusCode {
		case http.StatusOK:
			var out joinResponse
			if err := json.Unmarshal(data, &out); err != nil {
				return nil, fmt.Errorf("the member's answer: %w", err)
			}
			return &out, nil
		case http.StatusServiceUnavailable, http.StatusTooManyRequests:
			if req.MemberID != 0 && resp.Header.Get(removedHeader) == "" {
				// A member with data asks, and starts anyway if the site
				// cannot answer: it may be the one the site lacks.
				return nil, fmt.Errorf("%w: %s", errUnreachable, bytes.TrimSpace(data))
			}
			klog.InfoS("The site asks to retry the join", "reason", string(bytes.TrimSpace(data)))
			select {
			case <-time.After(joinRetry):
				continue
			case <-ctx.Done():
				return nil, fmt.Errorf("%w (the site's last answer: %s)", ctx.Err(), bytes.TrimSpace(data))
			}
		case http.StatusUnauthorized:
			if req.MemberID != 0 {
				// A member with data whose secret the site rotated while
				// it was down: it takes the rotation from its peers.
				return nil, fmt.Errorf("%w: %s", errUnreachable, bytes.TrimSpace(data))
			}
			return nil, fmt.Errorf("%s (HTTP %d)", bytes.TrimSpace(data), resp.StatusCode)
		default: // refused, for good: 409, 412
			return nil, fmt.Errorf("%s (HTTP %d)", bytes.TrimSpace(data), resp.StatusCode)
		}
	}
}

// pinnedCA fetches the site's CA from base without trusting it, and returns
// it only if its SHA-256 is want.
func pinnedCA(ctx context.Context, base string, want [sha256.Size]byte) (*x509.CertPool, error) {
	// Not trusted yet: the hash below is the check.
	insecure := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, Timeout: 30 * time.Second} //nolint:gosec
	r, err := http.NewRequestWithContext(ctx, http.MethodGet, base+CAPath, nil)
	if err != nil {
		return nil, err
	}
	resp, err := insecure.Do(r)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errUnreachable, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s answers %s with HTTP %d: is it a kubestore site's member?", base, CAPath, resp.StatusCode)
	}
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, fmt.Errorf("%s sent no CA certificate", base)
	}
	if got := sha256.Sum256(block.Bytes); got != want {
		return nil, fmt.Errorf("refusing to join: the site's CA has SHA-256 %s, but --%s pins %s (a wrong token, or not the site the token is for)",
			hex.EncodeToString(got[:]), config.FlagJoinToken, hex.EncodeToString(want[:]))
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return pool, nil
}

// verifyChainOnly trusts a server whose certificate the pinned CA signed
// as a member's serving certificate (access.ServingCommonName), whatever
// name it was dialled by: --join may name a member by an address its
// serving certificate does not list. The CA signs kubelets' serving
// certificates too: one of them never gets the join secret.
func verifyChainOnly(pool *x509.CertPool) *tls.Config {
	return &tls.Config{
		InsecureSkipVerify: true, //nolint:gosec // verified below, against the pinned CA
		VerifyPeerCertificate: func(raw [][]byte, _ [][]*x509.Certificate) error {
			if len(raw) == 0 {
				return errors.New("the member sent no certificate")
			}
			leaf, err := x509.ParseCertificate(raw[0])
			if err != nil {
				return err
			}
			inter := x509.NewCertPool()
			for _, r := range raw[1:] {
				if c, err := x509.ParseCertificate(r); err == nil {
					inter.AddCert(c)
				}
			}
			if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
				return err
			}
			if leaf.Subject.CommonName != access.ServingCommonName {
				return fmt.Errorf("the server's certificate (subject %q) is not a kubestore member's: the join secret is not sent", leaf.Subject.CommonName)
			}
			return nil
		},
	}
}
