package etcdembed

import (
	"errors"
	"net"
	"net/http"
	"strings"
	"sync/atomic"

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
	// removed, when set, is set once etcd says the site removed this
	// member (it stops then, with an error that does not say so).
	removed *atomic.Bool
	// logLost, when set, is called with raft's message when it panics
	// because the log holds less than this member acknowledged
	// (raftLogLost), before the panic ends the process.
	logLost func(msg string)
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
		if err := fieldError(fields); err != nil && strings.Contains(err.Error(), "permanently removed") {
			r.Store(true)
		}
	}
	if c.filter.drop(e, fields) {
		return nil
	}
	return c.Core.Write(e, fields)
}
