package cacher

import (
	"context"
	"errors"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"k8s.io/klog/v2"
)

// electionTTL is the lease of an election's holder: a holder killed
// without resigning is replaced within it.
const electionTTL = 10 // seconds

// electionRetry is the pause after a failed campaign (etcd unreachable).
const electionRetry = 2 * time.Second

// Lead runs fn while this process holds the election key, an etcd
// election (concurrency.Election) under kubestore's own records: one holder
// at a time among every process on this etcd. fn's context ends with the
// term (the holder's lease lost, or ctx ended); Lead then campaigns again,
// until ctx ends. identity names this process's holder: a holder of the
// same identity left by its previous run (killed) is taken over at once
// rather than after electionTTL.
func (b *Backend) Lead(ctx context.Context, key, identity string, fn func(term context.Context)) {
	for ctx.Err() == nil {
		if err := b.leadOnce(ctx, key, identity, fn); err != nil && ctx.Err() == nil {
			klog.V(2).InfoS("Election: campaigning again", "election", key, "err", err)
			select {
			case <-ctx.Done():
			case <-time.After(electionRetry):
			}
		}
	}
}

func (b *Backend) leadOnce(ctx context.Context, key, identity string, fn func(context.Context)) error {
	// The session outlives ctx so that Close can still revoke its lease:
	// a stopped holder hands over at once.
	sess, err := concurrency.NewSession(b.client.Client, concurrency.WithTTL(electionTTL), concurrency.WithContext(context.WithoutCancel(ctx)))
	if err != nil {
		return err
	}
	defer sess.Close()
	el := concurrency.NewElection(sess, b.stateKey("elections/"+key))
	if resp, err := el.Leader(ctx); err == nil && len(resp.Kvs) > 0 {
		if kv := resp.Kvs[0]; string(kv.Value) == identity && clientv3.LeaseID(kv.Lease) != sess.Lease() {
			if _, err := b.client.Client.Revoke(ctx, clientv3.LeaseID(kv.Lease)); err != nil {
				return err
			}
		}
	} else if err != nil && !errors.Is(err, concurrency.ErrElectionNoLeader) {
		return err
	}
	if err := el.Campaign(ctx, identity); err != nil {
		return err
	}
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
	return nil
}
