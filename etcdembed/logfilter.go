package etcdembed

import (
	"errors"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// loggerName names etcd's logger, and only its own lines: etcd's
// components log under sub-names (etcd.raft, etcd.client).
const loggerName = "etcd"

// logFilter drops the lines the embedded etcd logs at warning or error
// level during a normal start and stop of one member although nothing is
// wrong, so that operators can alert on etcd's warnings and errors. It
// matches the message and the error of each, never a level: the same
// message with another error, or at another time, is logged.
type logFilter struct {
	// closing is the Server's: closed when Close begins.
	closing <-chan struct{}
	// onRemoved, when set, is called once etcd says the site removed this
	// member.
	onRemoved func()
	// removed, when set, is set once etcd says the site removed this
	// member (it stops then, with an error that does not say so).
	removed *atomic.Bool
	// logLost, when set, is called with raft's message when it panics
	// because the log holds less than this member acknowledged
	// (raftLogLost), before the panic ends the process.
	logLost func(msg string)
	// campaigning is true while campaignAlone asks raft to campaign.
	campaigning *atomic.Bool
}

// raftLogLost reports whether e is raft's panic on a log that lost
// entries the member had acknowledged: a commit index past its last
// entry, from the leader (raft/log.go, commitTo) or in its own hard state
// (raft.go, loadState).
func raftLogLost(e zapcore.Entry) bool {
	return e.Level >= zapcore.PanicLevel && e.LoggerName == loggerName+".raft" &&
		(strings.Contains(e.Message, "Was the raft log corrupted, truncated, or lost?") ||
			strings.Contains(e.Message, "state.commit") && strings.Contains(e.Message, "is out of range"))
}

// wrap is a zap.WrapCore option.
func (f logFilter) wrap(c zapcore.Core) zapcore.Core { return &filterCore{Core: c, filter: f} }

func (f logFilter) stopping() bool {
	select {
	case <-f.closing:
		return true
	default:
		return false
	}
}

// drop reports whether an entry is known noise.
func (f logFilter) drop(e zapcore.Entry, fields []zapcore.Field) bool {
	if f.campaigning != nil && f.campaigning.Load() && campaignRefused(e) {
		return true
	}
	if e.LoggerName != loggerName {
		return false
	}
	err := fieldError(fields)
	if err == nil {
		return false
	}
	switch e.Message {
	case "Failed to detect schema version", "failed to update storage version":
		// On a new member the storage version monitor runs as soon as the
		// cluster version is set, before the backend's first commit has
		// written the raft term the schema is detected from
		// (server/storage/schema/schema.go, UnsafeDetectSchemaVersion), so
		// the term can only be missing until that commit; the monitor
		// runs again every few seconds and then succeeds. etcd's own
		// TestNoErrorLogsDuringNormalOperations ignores this error as
		// harmless (etcd-io/etcd#18978, #19040).
		msg := err.Error()
		return msg == "missing term information" || msg == "cannot detect storage schema version: missing term information"
	case "failed to send watch control response to gRPC stream":
		// The stop closes kubestore's client before the member; etcd's
		// watch stream can meet the closing transport before it sees the
		// client's context end (v3rpc/watch.go, sendLoop: isClientCtxErr),
		// and then warns that it could not answer a client that is gone.
		st, ok := status.FromError(err)
		return f.stopping() && ok && st.Code() == codes.Unavailable && strings.Contains(st.Message(), "transport is closing")
	case "setting up serving from embedded etcd failed.":
		// Close shuts the client servers down, and errHandler
		// (server/embed/etcd.go) logs what each Serve returns, also the
		// errors that only say the server or its listener was closed
		// (etcd-io/etcd#17424).
		return f.stopping() && (errors.Is(err, http.ErrServerClosed) || errors.Is(err, net.ErrClosed))
	}
	return false
}

// fieldError is the error of an entry's fields (zap.Error), if any.
func fieldError(fields []zapcore.Field) error {
	for _, fl := range fields {
		if fl.Type == zapcore.ErrorType && fl.Key == "error" {
			err, _ := fl.Interface.(error)
			return err
		}
	}
	return nil
}

// filterCore is a zapcore.Core that drops what its filter calls noise.
type filterCore struct {
	zapcore.Core
	filter logFilter
}

func (c *filterCore) With(fields []zapcore.Field) zapcore.Core {
	return &filterCore{Core: c.Core.With(fields), filter: c.filter}
}

func (c *filterCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(e.Level) {
		return ce.AddCore(e, c)
	}
	return ce
}

func (c *filterCore) Write(e zapcore.Entry, fields []zapcore.Field) error {
	if c.filter.logLost != nil && raftLogLost(e) {
		c.filter.logLost(e.Message)
	}
	if r := c.filter.removed; r != nil && e.LoggerName == loggerName && e.Message == "server error" {
		if err := fieldError(fields); err != nil && strings.Contains(err.Error(), "permanently removed") && !r.Swap(true) && c.filter.onRemoved != nil {
			c.filter.onRemoved()
		}
	}
	if c.filter.drop(e, fields) {
		return nil
	}
	return c.Core.Write(e, fields)
}

// repeatWindow is how long a line is not written again once it was. etcd
// retries some requests in a busy loop and warns at every attempt: its
// publishV3, while raft answered "too many requests", logged the same
// warning thousands of times a second, gigabytes in minutes, and a device
// on flash must not write a log like that (zap's own sampler, off in
// Logger, would drop lines of a second without saying how many).
const repeatWindow = time.Second

// maxRepeatKeys bounds the lines a repeatFilter remembers.
const maxRepeatKeys = 256

// repeatFilter collapses repeated lines: a line written is not written
// again for repeatWindow, and the first one written after that carries,
// as "repeated", how many were not. A line is its level, logger name,
// message and call site; not its fields, so that a loop warning with
// another error or attempt number at each turn is collapsed too: of a
// second's lines with one message from one place, the first is written,
// with its fields. Panics and fatal errors are always written. Every core
// derived from it (With) shares its memory.
type repeatFilter struct {
	now func() time.Time

	mu   sync.Mutex
	seen map[repeatKey]repeatState
}

type repeatKey struct {
	level   zapcore.Level
	logger  string
	message string
	// The call site: a file and line, not a PC, which inlining makes
	// differ at one line. Empty without caller.
	file string
	line int
}

type repeatState struct {
	written    time.Time // the last line written
	suppressed int       // lines not written since
}

func newRepeatFilter(now func() time.Time) *repeatFilter {
	return &repeatFilter{now: now, seen: make(map[repeatKey]repeatState)}
}

// wrap is a zap.WrapCore option.
func (r *repeatFilter) wrap(c zapcore.Core) zapcore.Core { return &repeatCore{Core: c, repeats: r} }

// admit reports whether e is written, and how many lines like it were not
// since the last one written.
func (r *repeatFilter) admit(e zapcore.Entry) (write bool, suppressed int) {
	if e.Level >= zapcore.DPanicLevel {
		return true, 0
	}
	k := repeatKey{level: e.Level, logger: e.LoggerName, message: e.Message, file: e.Caller.File, line: e.Caller.Line}
	now := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	s, ok := r.seen[k]
	if ok && within(now.Sub(s.written)) {
		s.suppressed++
		r.seen[k] = s
		return false, 0
	}
	if !ok && len(r.seen) >= maxRepeatKeys {
		r.prune(now)
	}
	r.seen[k] = repeatState{written: now}
	return true, s.suppressed
}

// within reports whether d since a line was written is inside its window;
// a clock set back does not hold lines back.
func within(d time.Duration) bool { return d >= 0 && d < repeatWindow }

// prune forgets the lines whose window has passed, or else the oldest: a
// line forgotten is written at its next turn, its count of lines not
// written lost.
func (r *repeatFilter) prune(now time.Time) {
	var oldest repeatKey
	var oldestAt time.Time
	for k, s := range r.seen {
		if !within(now.Sub(s.written)) {
			delete(r.seen, k)
		} else if oldestAt.IsZero() || s.written.Before(oldestAt) {
			oldest, oldestAt = k, s.written
		}
	}
	if len(r.seen) >= maxRepeatKeys {
		delete(r.seen, oldest)
	}
}

// repeatCore is a zapcore.Core that writes what its repeatFilter admits.
type repeatCore struct {
	zapcore.Core
	repeats *repeatFilter
}

func (c *repeatCore) With(fields []zapcore.Field) zapcore.Core {
	return &repeatCore{Core: c.Core.With(fields), repeats: c.repeats}
}

func (c *repeatCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(e.Level) {
		return ce.AddCore(e, c)
	}
	return ce
}

func (c *repeatCore) Write(e zapcore.Entry, fields []zapcore.Field) error {
	write, suppressed := c.repeats.admit(e)
	if !write {
		return nil
	}
	if suppressed > 0 {
		// A copy: the caller's slice is not ours to append to.
		fields = append(fields[:len(fields):len(fields)], zap.Int("repeated", suppressed))
	}
	return c.Core.Write(e, fields)
}
