package cacher

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/apiserver/pkg/storage"
)

// leaderPoll and leaderWaitMax bound how long a watch cache's watch on etcd
// waits for a leader.
const (
	leaderPoll    = 50 * time.Millisecond
	leaderWaitMax = time.Second
)

// withLeaderWait makes s's Watch wait, at most leaderWaitMax, until the
// embedded member knows a leader. etcd refuses a watch at once while its
// member has none (kube-apiserver's watches require a leader), and the
// watch cache's reflector retries internal errors at once for 30 s
// (cacher.go, MaxInternalErrorRetryDuration): a site's member that lost
// quorum measured 23,000 refused watches, and as many error lines, a
// second. Waiting here bounds that to one per resource a second, and
// costs nothing while there is a leader.
func withLeaderWait(s storage.Interface, hasLeader func() bool) storage.Interface {
	return leaderWait{Interface: s, hasLeader: hasLeader}
}

type leaderWait struct {
	storage.Interface
	hasLeader func() bool
}

func (l leaderWait) Watch(ctx context.Context, key string, opts storage.ListOptions) (watch.Interface, error) {
	for waited := time.Duration(0); !l.hasLeader() && waited < leaderWaitMax; waited += leaderPoll {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(leaderPoll):
		}
	}
	return l.Interface.Watch(ctx, key, opts)
}
