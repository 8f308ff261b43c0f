package gc

import (
	"context"

	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
)

// ElectionKey is the etcd election whose holder collects, when several
// kubestores share one etcd.
const ElectionKey = "garbage-collector"

// Lead runs fn while this process, named identity, holds the etcd
// election key, once per term (fn's context ends with the term), until
// ctx ends: the shape of records.Store.Lead.
//
// It replaced a Lease renewed through the API every 5 s: each renewal was
// an etcd write, all an idle device wrote to flash (7.2 KB/s, issue 39).
// An etcd election writes only to campaign; its lease is kept alive by
// keepalives, which etcd does not persist.
type Lead func(ctx context.Context, key, identity string, fn func(term context.Context))

// RunWithLeaderElection collects while this process holds the election
// ElectionKey through lead, and campaigns again when it loses it, until
// ctx is done; on ctx's end the term is given up, so another process takes
// over at once. identity names this process, the same across its restarts
// (a killed holder's election is taken over by its restart at once); a
// holder of another identity that is killed is replaced once its etcd
// lease expires (cacher's electionTTL).
func RunWithLeaderElection(ctx context.Context, cfg *rest.Config, local Source, lead Lead, identity string) error {
	c, err := New(cfg, local)
	if err != nil {
		return err
	}
	lead(ctx, ElectionKey, identity, func(term context.Context) {
		klog.InfoS("Garbage collector leads", "election", ElectionKey, "identity", identity)
		c.Run(term)
	})
	return nil
}
