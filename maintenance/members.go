package maintenance

import (
	"context"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/kubestore/kubestore/access"
	"github.com/kubestore/kubestore/config"
	"github.com/kubestore/kubestore/datadir"
	"github.com/kubestore/kubestore/etcdembed"
	"github.com/kubestore/kubestore/site"
)

// siteMember refuses a site's command that starts the member's etcd
// itself, as its server would, without the site's flags it needs for
// that.
func siteMember(cfg config.Config) error {
	if !cfg.Site.Enabled() {
		return fmt.Errorf("--%s is not set: this kubestore's etcd is not a site's member", config.FlagPeerAdvertiseAddress)
	}
	return nil
}

// connectSite connects to the etcd of a site's member (connect), and
// refuses one that is not, as its etcd tells (whoAmI).
func connectSite(ctx context.Context, cfg config.Config, version string) (*conn, error) {
	c, err := connect(ctx, cfg, version)
	if err != nil {
		return nil, err
	}
	me, err := whoAmI(ctx, c, cfg)
	if err == nil && !me.site {
		err = fmt.Errorf("the etcd of --%s %s is not a site's member: it is this gateway's alone", config.FlagDataDir, cfg.DataDir)
	}
	if err != nil {
		c.close()
		return nil, err
	}
	return c, nil
}

// MemberList prints the members of the site of cc's data directory, as its
// etcd sees them, and whether this gateway reaches each one's peer port.
func MemberList(ctx context.Context, cc config.Completed, version string, w io.Writer) error {
	cfg := cc.Config()
	c, err := connectSite(ctx, cfg, version)
	if err != nil {
		return err
	}
	defer c.close()
	members, err := site.Members(ctx, datadir.Dir(cfg.DataDir), c.client, site.StatusLeader(c.client))
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tID\tPEER URL\tROLE\tREACHABLE")
	for _, m := range members {
		name, role, reach := m.Name, "voter", "yes"
		switch {
		case m.Learner:
			role = "learner"
		case m.Leader:
			role = "leader"
		}
		if name == "" {
			name = "(not started)"
		}
		switch {
		case m.Self:
			reach = "(this member)"
		case m.Unreachable != "":
			reach = "no: " + m.Unreachable
		}
		fmt.Fprintf(tw, "%s\t%x\t%s\t%s\t%s\n", name, m.ID, m.PeerURL, role, reach)
	}
	return tw.Flush()
}

// MemberToken prints the join token of the site of cc's data directory.
// The directory says whether its etcd is a site's member, not the
// command's flags; it is read without starting that etcd, so that the
// token is printed with the site down too.
func MemberToken(cc config.Completed, w io.Writer) error {
	dir := datadir.Dir(cc.Config().DataDir)
	if site, err := etcdembed.ServedInSite(dir); err != nil {
		return err
	} else if !site {
		return fmt.Errorf("the etcd of --%s %s has not served as a site's member: start this gateway's server with --%s first", config.FlagDataDir, dir, config.FlagPeerAdvertiseAddress)
	}
	token, err := access.JoinToken(dir)
	if err != nil {
		return fmt.Errorf("reading the site's CA in %s (has the server started on it?): %w", dir.PKI(), err)
	}
	fmt.Fprintln(w, token)
	return nil
}

// MemberRemove removes member name from the site; it may be down. etcd
// refuses when that would leave the site without quorum.
func MemberRemove(ctx context.Context, cc config.Completed, name, version string, w io.Writer) error {
	c, err := connectSite(ctx, cc.Config(), version)
	if err != nil {
		return err
	}
	defer c.close()
	m, err := site.RemoveMember(ctx, c.client, name)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "removed member %s (%x, %s); it rejoins with a wiped data dir, or at its next start with --%s\n", m.Name, m.ID, m.PeerURL, config.FlagJoin)
	return nil
}

// ClusterReset makes the stopped member of cc's data directory the only
// member of its site, with all its data, after the site lost quorum for
// good (etcdembed.ResetSite).
func ClusterReset(ctx context.Context, cc config.Completed, version string, w io.Writer) error {
	cfg := cc.Config()
	if err := siteMember(cfg); err != nil {
		return err
	}
	dir := datadir.Dir(cfg.DataDir)
	lock, err := dir.Lock()
	if errors.Is(err, datadir.ErrLocked) {
		return fmt.Errorf("a server runs on --%s %s: stop it first (a reset is for a site that lost quorum, whose servers cannot serve)", config.FlagDataDir, cfg.DataDir)
	}
	if err != nil {
		return err
	}
	defer lock.Unlock()
	if _, _, err := dir.RefuseNewerFormat(version); err != nil {
		return err
	}
	keep, err := etcdembed.ResetSite(ctx, cfg)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "this member is now the only member of its site, with all its data (the data before the reset is in %s); start it, then the other gateways: with --%s naming it, they join it again by themselves\n",
		keep, config.FlagJoin)
	return nil
}
