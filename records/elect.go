package records

import (
	"context"
	"errors"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"k8s.io/klog/v2"

	"github.com/kubestore/kubestore/records/family"
)

// electionTTL is the lease of an election's holder: a holder killed
// without resigning is replaced within it.
const electionTTL = 10 // seconds

// electionRetry is the pause after a failed campaign (etcd unreachable),
// and after a term shorter than it (fn returned or the session died at
// once): each campaign is an etcd write, so a failing fn must not spin.
const electionRetry = 2 * time.Second

// Lead runs fn while this process holds the election key, an etcd
// election (concurrency.Election) under the records (elections/<key>): one holder
// at a time among every process on this etcd. fn's context ends with the
// term (the holder's lease lost, or ctx ended); Lead then campaigns again,
// until ctx ends. identity names this process's holder: a holder of the
// same identity left by its previous run (killed) is taken over at once
// rather than after electionTTL. A term that ends within electionRetry of
// being won is followed by a pause of electionRetry, as a failed campaign.
// Holding costs etcd no write: the session's lease is kept alive by
// keepalives, which etcd does not persist (a Lease object renewed through
// the API is a write each time).
func (s *Store) Lead(ctx context.Context, key, identity string, fn func(term context.Context)) {
	for ctx.Err() == nil {
		won, err := s.leadOnce(ctx, key, identity, fn)
		if ctx.Err() != nil {
			return
		}
		switch {
		case err != nil:
			klog.V(2).InfoS("Election: campaigning again", "election", key, "err", err)
		case time.Since(won) < electionRetry:
			klog.V(2).InfoS("Election: term ended at once, campaigning again after a pause", "election", key, "pause", electionRetry)
		default:
			continue
		}
		select {
		case <-ctx.Done():
		case <-time.After(electionRetry):
		}
	}
}

// leadOnce campaigns once and runs fn for the term won, which began at won.
func (s *Store) leadOnce(ctx context.Context, key, identity string, fn func(context.Context)) (won time.Time, err error) {
	// The session outlives ctx so that Close can still revoke its lease:
	// a stopped holder hands over at once.
	sess, err := concurrency.NewSession(s.client, concurrency.WithTTL(electionTTL), concurrency.WithContext(context.WithoutCancel(ctx)))
	if err != nil {
		return won, err
	}
	defer sess.Close()
	el := concurrency.NewElection(sess, s.key(family.Elections.For(key)))
	if resp, err := el.Leader(ctx); err == nil && len(resp.Kvs) > 0 {
		if kv := resp.Kvs[0]; string(kv.Value) == identity && clientv3.LeaseID(kv.Lease) != sess.Lease() {
			if _, err := s.client.Revoke(ctx, clientv3.LeaseID(kv.Lease)); err != nil {
				return won, err
			}
		}
	} else if err != nil && !errors.Is(err, concurrency.ErrElectionNoLeader) {
		return won, err
	}
	if err := el.Campaign(ctx, identity); err != nil {
		return won, err
	}
	won = time.Now()
	term, end := context.WithCancel(ctx)
	defer end()
	go func() {
		select {
		case <-sess.Done():
			end()
		case <-term.Done():
		}
	}()
	klog.InfoS("Election won", "election", key, "identity", identity)
	fn(term)
	return won, nil
}
