package maintenance

import (
	"context"
	"fmt"
	"strings"

	"go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/kubestore/kubestore/config"
)

// member is the member of the data directory's etcd a command runs on,
// as that etcd records it. Its server named it from its own flags when it
// started; the command's flags need not repeat them (the README runs the
// commands with --data-dir alone), and where they differ etcd is right.
type member struct {
	id   uint64
	name string
	// site: the member is a site's, its etcd shared with other gateways.
	site bool
}

// whoAmI reads the member c's etcd is. A site's member is told by etcd's
// membership: other members, or, for a site of one, the https peer URL
// every site's member advertises (etcdembed's siteConfig); a gateway of
// its own keeps etcd's default http://localhost:2380, which nothing
// dials. Its name is then the one its server records its progress under
// (CARotation: --member-name or the host name), as before: its etcd's
// name is kubestore's constant.
func whoAmI(ctx context.Context, c *conn, cfg config.Config) (member, error) {
	if cfg.Etcd.External() {
		// An external etcd's members are not kubestore's.
		return member{name: cfg.Site.Name()}, nil
	}
	id, err := localMemberID(ctx, c.client)
	if err != nil {
		return member{}, err
	}
	list, err := c.client.MemberList(ctx)
	if err != nil {
		return member{}, fmt.Errorf("listing the members of the etcd of --%s %s: %w", config.FlagDataDir, cfg.DataDir, err)
	}
	for _, m := range list.Members {
		if m.ID != id {
			continue
		}
		me := member{id: id, name: cfg.Site.Name(), site: len(list.Members) > 1 || sitePeerURL(m)}
		if me.site {
			me.name = m.Name
		}
		return me, nil
	}
	return member{}, fmt.Errorf("the etcd of --%s %s (member %x) is not in its own member list", config.FlagDataDir, cfg.DataDir, id)
}

// sitePeerURL reports whether m advertises a site's peer URL.
func sitePeerURL(m *etcdserverpb.Member) bool {
	for _, u := range m.PeerURLs {
		if strings.HasPrefix(u, "https://") {
			return true
		}
	}
	return false
}

// memberName is how a command names m: its name, or, for a member added
// that has not started yet (etcd knows its name only from its first
// start), its id.
func memberName(m *etcdserverpb.Member) string {
	if m.Name == "" {
		return fmt.Sprintf("%x (not started yet)", m.ID)
	}
	return m.Name
}
