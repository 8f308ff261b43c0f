package cacher

import (
	"context"
	"sync"
	"time"

	etcdclient "go.etcd.io/etcd/client/v3"
	"k8s.io/apiserver/pkg/storage/etcd3"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"
)

// compactRevKey is the key upstream's compactors agree through
// (k8s.io/apiserver pkg/storage/etcd3/compact.go): its version is their
// logical clock, its value the last compacted revision.
const compactRevKey = "compact_rev_key"

// idleCompactor compacts etcd every interval with upstream's own protocol
// (etcd3.Compact: a compare-and-swap of compact_rev_key, so that of the
// kube-apiservers and kubestores on one etcd one compacts per interval),
// and skips a tick when nothing but its own last record was written since
// it compacted: on an idle server every tick of upstream's compactor
// wrote the key and compacted nothing, the whole of its idle flash (about
// 40 KB a tick, issue 53). Once writes resume, the next tick compacts as
// upstream's would; the revisions they left stay until then, and a watch
// of them is as resumable as before.
//
// Upstream's compactor runs beside it with an interval of 0, which does
// not compact but follows the compacted revision for the watch cache
// (CompactRevision, for list-from-cache-snapshot).
type idleCompactor struct {
	compactor
	client   *etcdclient.Client
	interval time.Duration
	stop     context.CancelFunc
	done     sync.WaitGroup
}

// compactions counts the compactor's ticks by what they did: compacted
// (or found another process had), skipped (nothing to compact), failed.
var (
	compactions = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace:      "kubestore",
		Name:           "etcd_compaction_ticks_total",
		Help:           "The etcd compactor's ticks by result: compacted, skipped (nothing written since its last compaction), failed.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"result"})
	registerCompactions sync.Once
)

// startCompactor compacts through client every interval (0: never, the
// compacted revision followed only).
func startCompactor(client *etcdclient.Client, interval time.Duration) compactor {
	follow := etcd3.StartCompactorPerEndpoint(client, 0)
	if interval == 0 {
		return follow
	}
	registerCompactions.Do(func() { legacyregistry.MustRegister(compactions) })
	ctx, cancel := context.WithCancel(context.Background())
	c := &idleCompactor{compactor: follow, client: client, interval: interval, stop: cancel}
	c.done.Add(1)
	go func() {
		defer c.done.Done()
		c.run(ctx)
	}()
	return c
}

// Stop ends the loop, then upstream's compactor.
func (c *idleCompactor) Stop() {
	c.stop()
	c.done.Wait()
	c.compactor.Stop()
}

// run is upstream's runCompactLoop, with a tick skipped when the revision
// is still the one of its own last record and nothing older is left to
// compact.
func (c *idleCompactor) run(ctx context.Context) {
	// version is compact_rev_key's version as last seen, rev the
	// revision the next compaction compacts at (the revision after the
	// last tick), compacted the last compacted revision known.
	var version, rev, compacted int64
	for {
		select {
		case <-time.After(c.interval):
		case <-ctx.Done():
			return
		}
		if c.idle(ctx, rev, compacted) {
			compactions.WithLabelValues("skipped").Inc()
			continue
		}
		var at int64
		var err error
		version, rev, at, err = etcd3.Compact(ctx, c.client, version, rev)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			compactions.WithLabelValues("failed").Inc()
			klog.ErrorS(err, "Compacting etcd", "endpoints", c.client.Endpoints())
			continue
		}
		compactions.WithLabelValues("compacted").Inc()
		if at != 0 {
			compacted = at
			if u, ok := c.compactor.(interface{ UpdateCompactRevision(int64) }); ok {
				u.UpdateCompactRevision(at)
			}
		}
	}
}

// idle reports whether a compaction now would compact nothing but the
// previous version of compact_rev_key: the revision is still rev, the one
// the last tick left (after its own record), and everything before the
// record is compacted. It reads without writing; an error is no answer,
// and the tick compacts.
func (c *idleCompactor) idle(ctx context.Context, rev, compacted int64) bool {
	if rev == 0 || compacted < rev-1 {
		return false
	}
	resp, err := c.client.Get(ctx, compactRevKey, etcdclient.WithCountOnly())
	return err == nil && resp.Header.Revision == rev
}
