package etcdembed

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	"go.etcd.io/etcd/server/v3/embed"
	"go.etcd.io/etcd/server/v3/etcdserver/api/membership"
	etcderrors "go.etcd.io/etcd/server/v3/etcdserver/errors"
	"go.uber.org/zap"

	"github.com/kubestore/kubestore/config"
	"github.com/kubestore/kubestore/datadir"
)

// siteClusterToken is the initial cluster token of every site: etcd mixes
// it into the ids of a new cluster's members. A site's members never dial
// another site's (each site has its own CA), so one value serves all.
const siteClusterToken = "kubestore-site"

// promoteRetry is how often a learner asks to be promoted while it
// catches up with the leader.
const promoteRetry = 500 * time.Millisecond

// Join is how a member joined its site, written by the join (package site)
// before the member's first start and read by Start while the member has
// no etcd data: etcd's --initial-cluster of the site as the join found it,
// with --initial-cluster-state existing.
type Join struct {
	// MemberID is the id the site gave this member (a learner's, until it
	// is promoted): a later start asks the site whether it still has it.
	MemberID       uint64 `json:"memberID,string"`
	InitialCluster string `json:"initialCluster"`
}

// WriteJoin records j in dir.
func WriteJoin(dir datadir.Dir, j Join) error {
	data, err := json.Marshal(j)
	if err != nil {
		return err
	}
	return datadir.WriteFileAtomic(dir.SiteJoin(), append(data, '\n'))
}

// ReadJoin reads the join record of dir; an error wrapping os.ErrNotExist
// means the member founded its site, or is alone.
func ReadJoin(dir datadir.Dir) (Join, error) {
	var j Join
	data, err := os.ReadFile(dir.SiteJoin())
	if err != nil {
		return j, err
	}
	if err := json.Unmarshal(data, &j); err != nil {
		return j, fmt.Errorf("reading %s: %w", dir.SiteJoin(), err)
	}
	return j, nil
}

// ServedInSite reports whether the etcd of dir served as a site's member:
// every start of one records its join (settleInSite), and only a restore
// removes that record (its data then founds a site anew, or stays alone).
func ServedInSite(dir datadir.Dir) (bool, error) {
	_, err := os.Stat(dir.SiteJoin())
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	return err == nil, err
}

// siteConfig makes ec a member of c's site: named, listening for its peers
// on --peer-bind-address and --peer-port with mutual TLS from the site's
// CA, advertising --peer-advertise-address, with raft's timing from
// --etcd-heartbeat-interval and --etcd-election-timeout. A member with no
// etcd data founds a new site, unless it has just joined one (ReadJoin).
func siteConfig(ec *embed.Config, c config.Config) error {
	dir, s := datadir.Dir(c.DataDir), c.Site
	ec.Name = s.Name()
	advertise, err := url.Parse(s.PeerURL())
	if err != nil {
		return fmt.Errorf("invalid --%s %q: %w", config.FlagPeerAdvertiseAddress, s.PeerAdvertiseAddress, err)
	}
	ec.ListenPeerUrls = []url.URL{{Scheme: "https", Host: net.JoinHostPort(s.PeerBindAddress, strconv.Itoa(s.PeerPort))}}
	ec.AdvertisePeerUrls = []url.URL{*advertise}
	// The site's CA signs more than the members' certificates (kubelets',
	// users'): the members' own subject is required both ways, so no other
	// certificate opens a raft stream or answers as a member.
	ec.PeerTLSInfo = transport.TLSInfo{
		CertFile:       dir.PeerCert(),
		KeyFile:        dir.PeerKey(),
		TrustedCAFile:  dir.CACert(),
		ClientCertAuth: true,
		AllowedCNs:     []string{config.SiteMemberCommonName},
	}
	ec.TickMs = uint(c.Etcd.HeartbeatInterval.Milliseconds())
	ec.ElectionMs = uint(c.Etcd.ElectionTimeout.Milliseconds())
	ec.InitialClusterToken = siteClusterToken
	ec.InitialCluster = ec.InitialClusterFromName(ec.Name)
	ec.ClusterState = embed.ClusterStateFlagNew
	if dir.HasEtcdData() {
		return nil // etcd's own records name the cluster from now on
	}
	j, err := ReadJoin(dir)
	switch {
	case err == nil && j.InitialCluster != "":
		ec.InitialCluster, ec.ClusterState = j.InitialCluster, embed.ClusterStateFlagExisting
	case err == nil: // a founder's record: it founds a site again
	case !errors.Is(err, os.ErrNotExist):
		return err
	}
	return nil
}

// settleInSite, once a site's member serves, waits for its promotion if it
// joined as a learner (a learner serves no linearizable read, so the API
// cannot start on it), makes its peer URL the one it advertises now (a
// member that was alone, or whose address changed, tells the site), and
// records its id, which a later start with --join asks the site about.
func (s *Server) settleInSite(ctx context.Context, c config.Config, timeout <-chan time.Time, lg *zap.Logger) error {
	srv, dir := s.etcd.Server, datadir.Dir(c.DataDir)
	if j, err := ReadJoin(dir); err != nil || j.MemberID != uint64(srv.MemberID()) {
		if err := WriteJoin(dir, Join{MemberID: uint64(srv.MemberID()), InitialCluster: j.InitialCluster}); err != nil {
			return err
		}
	}
	for srv.IsLearner() {
		_, err := srv.PromoteMember(ctx, uint64(srv.MemberID()))
		if err == nil {
			lg.Info("promoted from learner to voting member", zap.String("member", c.Site.Name()))
			break
		}
		if !errors.Is(err, etcderrors.ErrLearnerNotReady) {
			lg.Warn("promoting this member", zap.Error(err))
		}
		select {
		case <-time.After(promoteRetry):
		case <-timeout:
			return fmt.Errorf("this member joined its site as a learner and was not promoted within --%s %s: it is still catching up with the leader, or cannot reach it (last answer: %v)",
				config.FlagEtcdStartTimeout, c.Etcd.StartTimeout, err)
		case <-ctx.Done():
			return ctx.Err()
		case <-s.failed:
			return s.failure
		}
	}
	want := c.Site.PeerURL()
	m := srv.Cluster().Member(srv.MemberID())
	if m == nil || (len(m.PeerURLs) == 1 && m.PeerURLs[0] == want) {
		return nil
	}
	update := membership.Member{ID: m.ID, RaftAttributes: membership.RaftAttributes{PeerURLs: []string{want}, IsLearner: m.IsLearner}}
	if _, err := srv.UpdateMember(ctx, update); err != nil {
		return fmt.Errorf("advertising peer URL %s (--%s) to the site instead of %v: %w", want, config.FlagPeerAdvertiseAddress, m.PeerURLs, err)
	}
	lg.Info("advertising a new peer URL", zap.Strings("from", m.PeerURLs), zap.String("to", want))
	return nil
}

// MemberID is this member's id in its cluster.
func (s *Server) MemberID() uint64 { return uint64(s.etcd.Server.MemberID()) }

// HasLeader reports whether the member knows a leader: a single member
// always does, a site's member not while its site elects one or has lost
// quorum.
func (s *Server) HasLeader() bool { return s.etcd.Server.Leader() != 0 }

// Leader is the ID of the leader this member knows, 0 for none.
func (s *Server) Leader() uint64 { return uint64(s.etcd.Server.Leader()) }

// ResetSite makes the stopped member of c's data directory the only member
// of its site, with all its data: the recovery of a site that lost quorum
// for good (etcd's --force-new-cluster, k3s's --cluster-reset). It first
// copies the member's data as it was to a new
// <data-dir>/etcd.before-reset.<time>, whose path it returns (an earlier
// copy stays). The caller holds the data directory's lock. The other
// gateways, asking --join at their next start, find they are no longer
// members and join the reset site again by themselves.
func ResetSite(ctx context.Context, c config.Config) (string, error) {
	dir := datadir.Dir(c.DataDir)
	if !dir.HasEtcdData() {
		return "", fmt.Errorf("no etcd data in --%s %s to reset the site from", config.FlagDataDir, c.DataDir)
	}
	keep, err := dir.AsidePath("etcd.before-reset")
	if err != nil {
		return "", err
	}
	if err := copyTree(dir.Etcd(), keep); err != nil {
		os.RemoveAll(keep) // this copy, partial; the data is still in etcd/
		return "", fmt.Errorf("copying the data before the reset to %s: %w", keep, err)
	}
	datadir.SetAside("etcd.before-reset", keep, "kubestore cluster reset makes this member the only one of its site: the data as it was before, with the other members' membership, is in the copy")
	// The reset member founds a new site: it no longer asks whether the
	// old one still has it.
	if err := os.Remove(dir.SiteJoin()); err != nil && !os.IsNotExist(err) {
		return "", err
	}
	s, err := start(ctx, c, true)
	if err != nil {
		return "", fmt.Errorf("resetting the site (the data before it is in %s): %w", keep, err)
	}
	s.Close()
	return keep, nil
}

// copyTree copies the directory src to dst, file by file, each synced, then
// the directories.
func copyTree(src, dst string) error {
	err := filepath.WalkDir(src, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		target := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(target, 0o700)
		case !d.Type().IsRegular():
			return nil // etcd's sockets
		}
		in, err := os.Open(path)
		if err != nil {
			return err
		}
		defer in.Close()
		out, err := os.OpenFile(target, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
		if err != nil {
			return err
		}
		if _, err := io.Copy(out, in); err != nil {
			out.Close()
			return err
		}
		if err := out.Sync(); err != nil {
			out.Close()
			return err
		}
		return out.Close()
	})
	if err != nil {
		return err
	}
	return filepath.WalkDir(dst, func(path string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		return datadir.SyncDir(path)
	})
}
