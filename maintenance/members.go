package maintenance

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/kubestore/kubestore/config"
	"github.com/kubestore/kubestore/datadir"
	"github.com/kubestore/kubestore/site"
)

// MemberList prints the members of the site of cc's data directory, as its
// etcd sees them, and whether this gateway reaches each one's peer port.
func MemberList(ctx context.Context, cc config.Completed, version string, w io.Writer) error {
	cfg := cc.Config()
	if !cfg.Site.Enabled() {
		return fmt.Errorf("--%s is not set: this kubestore's etcd is not a site's member", config.FlagPeerAdvertiseAddress)
	}
	c, err := connect(ctx, cfg, version)
	if err != nil {
		return err
	}
	defer c.close()
	members, err := site.Members(ctx, datadir.Dir(cfg.DataDir), c.client)
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

// MemberRemove removes member name from the site; it may be down. etcd
// refuses when that would leave the site without quorum.
func MemberRemove(ctx context.Context, cc config.Completed, name, version string, w io.Writer) error {
	cfg := cc.Config()
	if !cfg.Site.Enabled() {
		return fmt.Errorf("--%s is not set: this kubestore's etcd is not a site's member", config.FlagPeerAdvertiseAddress)
	}
	c, err := connect(ctx, cfg, version)
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
