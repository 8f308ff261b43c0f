package carotation

import (
	"bytes"
	"context"
	"crypto/x509"
	"fmt"
	"github.com/kubestore/kubestore/records/family"
	"slices"

	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/klog/v2"

	"github.com/kubestore/kubestore/datadir"
	"github.com/kubestore/kubestore/records"
	"github.com/kubestore/kubestore/site"
)

// peerRestartLease bounds how long one member's restart holds the site's
// turn (peerRestartKey) if it never comes back to release it.
const peerRestartLease = 120

// peerRestartKey is the state record of the member whose turn it is to
// restart: one at a time, so the site keeps its quorum.
var peerRestartKey = family.PeerRestart.Name()

// peerRestart starts a site's member again once its etcd peer port trusts
// a CA the member no longer trusts (a finished rotation): etcd reads its
// trusted CAs only at its start, and until then a peer certificate the
// previous CA's key can still make reaches it. The members take turns,
// each only while every member is a reachable voter.
type peerRestart struct {
	dir    datadir.Dir
	client *clientv3.Client
	// turn is the site's record of whose turn it is (peerRestartKey).
	turn   records.Record
	member string
	// trust is what etcd trusts since its start.
	trust []*x509.Certificate
	// restart asks the server to stop and start again.
	restart func(reason string)
	// released: this member's turn of before its restart is given back.
	released bool
}

// reconcile takes this member's turn when it needs one and it is free;
// trusted are the CAs (DER) the member trusts now.
func (p *peerRestart) reconcile(ctx context.Context, trusted [][]byte) error {
	turn := p.turn
	if !p.released {
		// The turn this member took before it started again.
		if _, err := turn.DeleteIf(ctx, []byte(p.member)); err != nil {
			return err
		}
		p.released = true
	}
	stale := p.stale(trusted)
	if stale == "" {
		return nil
	}
	members, err := site.Members(ctx, p.dir, p.client, site.NoLeader)
	if err != nil {
		return err
	}
	for _, m := range members {
		if m.Learner || m.Unreachable != "" {
			klog.V(2).InfoS("Waiting for every member to be a reachable voter before restarting to drop a CA from etcd's peer trust", "member", m.Name)
			return nil
		}
	}
	if mine, err := turn.Claim(ctx, p.member, peerRestartLease); err != nil || !mine {
		return err // another member's turn
	}
	p.restart(fmt.Sprintf("etcd's peer port trusts the CA %s, which this member no longer trusts", stale))
	return nil
}

// stale names a CA etcd trusts that is not among trusted (DER), "" if
// none.
func (p *peerRestart) stale(trusted [][]byte) string {
	for _, c := range p.trust {
		if !slices.ContainsFunc(trusted, func(der []byte) bool { return bytes.Equal(der, c.Raw) }) {
			return c.Subject.CommonName
		}
	}
	return ""
}
