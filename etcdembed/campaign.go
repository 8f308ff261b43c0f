package etcdembed

import (
	"context"
	"strings"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/server/v3/etcdserver"
	"go.etcd.io/raft/v3/raftpb"
	"go.uber.org/zap/zapcore"
)

// campaignPoll is how often campaignAlone looks whether the member has
// applied its log or has a leader; campaignRetry how long it gives raft to
// start the election it asked for before asking again.
const (
	campaignPoll  = 2 * time.Millisecond
	campaignRetry = 20 * time.Millisecond
)

// campaignAlone has the only member of its cluster campaign as soon as it
// has applied its log, instead of at the end of a random election timeout.
//
// etcd fast-forwards a single member's election ticks by all but one
// (EtcdServer.adjustTicks), but raft draws the timeout from
// [election, 2×election) ticks (raft.resetRandomizedElectionTimeout): the
// member still waited 1 to 10 heartbeats of 100 ms, 550 ms on average, for
// the one vote it casts itself. That wait was the largest and the most
// variable part of exec-to-ready (docs/PERFORMANCE.md, "Start-up").
//
// The trigger is raft's MsgTimeoutNow, which a leader sends the member it
// hands leadership to and which starts an election at once, delivered as
// a local message (term 0) through EtcdServer.Process, the way rafthttp
// delivers a peer's. An election by the only voter is always safe: the
// timeout only spaces out the candidates of larger clusters. A member that
// has a leader ignores the message. raft refuses to campaign while a
// committed configuration change is not applied, which it learns after
// etcd has applied it: until the election starts the request is repeated,
// and raft's warning that it refused is dropped (quiet, logFilter). stop
// ends the wait.
//
// start calls it only on a member's first start (no WAL yet): a restarted
// member's raft log may begin after a snapshot that etcd applies before
// raft learns it, and raft's check for unapplied configuration changes
// then scanned compacted entries and panicked (a restore's restart, found
// by CI). The membership may be empty until the bootstrap's entries are
// applied: the loop waits for it (IsLearner would panic there).
func campaignAlone(s *etcdserver.EtcdServer, quiet *atomic.Bool, stop <-chan struct{}) {
	quiet.Store(true)
	defer quiet.Store(false)
	tick := time.NewTicker(campaignPoll)
	defer tick.Stop()
	var asked time.Time
	for {
		select {
		case <-stop:
			return
		case <-s.StopNotify():
			return
		case <-tick.C:
		}
		if s.Leader() != 0 {
			return
		}
		members := s.Cluster().Members()
		if len(members) == 0 {
			continue
		}
		if len(members) != 1 || members[0].ID != s.MemberID() || members[0].IsLearner {
			return
		}
		if c := s.CommittedIndex(); c == 0 || s.AppliedIndex() < c || time.Since(asked) < campaignRetry {
			continue
		}
		asked = time.Now()
		id := uint64(s.MemberID())
		_ = s.Process(context.Background(), &raftpb.Message{Type: raftpb.MsgTimeoutNow.Enum(), To: &id, From: &id})
	}
}

// campaignRefused is raft's warning that it did not campaign because a
// committed configuration change is not applied yet.
func campaignRefused(e zapcore.Entry) bool {
	return e.LoggerName == loggerName+".raft" && strings.Contains(e.Message, "since there are still pending configuration changes to apply")
}
