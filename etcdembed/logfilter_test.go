package etcdembed

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"
)

// The filter drops exactly the lines etcd logs during a normal start and
// stop (messages and errors as etcd v3.7 logs them), and keeps the same
// messages with another error, before the stop, or from another logger.
func TestLogFilter(t *testing.T) {
	// What net.Listener.Accept returns once the listener is closed.
	closedListener := &net.OpError{Op: "accept", Net: "unix", Addr: &net.UnixAddr{Name: "/data/etcd/http.sock", Net: "unix"}, Err: net.ErrClosed}
	cases := []struct {
		name     string
		logger   string
		stopping bool
		level    zapcore.Level
		msg      string
		err      error
		dropped  bool
	}{
		{"schema version before the first commit", "etcd", false, zapcore.WarnLevel, "Failed to detect schema version",
			errors.New("missing term information"), true},
		{"storage version before the first commit", "etcd", false, zapcore.ErrorLevel, "failed to update storage version",
			fmt.Errorf("cannot detect storage schema version: %w", errors.New("missing term information")), true},
		{"storage version migration failing", "etcd", false, zapcore.ErrorLevel, "failed to update storage version",
			fmt.Errorf("cannot create migration plan: %w", errors.New(`version "3.8.0" is not supported`)), false},
		{"http server closed by Close", "etcd", true, zapcore.ErrorLevel, "setting up serving from embedded etcd failed.",
			http.ErrServerClosed, true},
		{"listener closed by Close", "etcd", true, zapcore.ErrorLevel, "setting up serving from embedded etcd failed.",
			closedListener, true},
		{"http server closed while serving", "etcd", false, zapcore.ErrorLevel, "setting up serving from embedded etcd failed.",
			http.ErrServerClosed, false},
		{"serving failing during Close", "etcd", true, zapcore.ErrorLevel, "setting up serving from embedded etcd failed.",
			errors.New("listen unix /data/etcd/etcd.sock: bind: address already in use"), false},
		{"watch answer to a client closed by the stop", "etcd", true, zapcore.WarnLevel, "failed to send watch control response to gRPC stream",
			grpcstatus.Error(codes.Unavailable, "transport is closing"), true},
		{"watch answer failing while serving", "etcd", false, zapcore.WarnLevel, "failed to send watch control response to gRPC stream",
			grpcstatus.Error(codes.Unavailable, "transport is closing"), false},
		{"same message from another logger", "etcd.client", false, zapcore.WarnLevel, "Failed to detect schema version",
			errors.New("missing term information"), false},
		{"same message without an error", "etcd", true, zapcore.ErrorLevel, "setting up serving from embedded etcd failed.",
			nil, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			core := zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(&out), zapcore.DebugLevel)
			closing := make(chan struct{})
			if tc.stopping {
				close(closing)
			}
			lg := zap.New(core).WithOptions(zap.WrapCore(logFilter{closing: closing}.wrap))
			for _, name := range strings.Split(tc.logger, ".") {
				lg = lg.Named(name)
			}
			// With is how etcd's components derive their loggers.
			lg = lg.With(zap.String("local-member-id", "8e9e05c52164694d"))
			var fields []zap.Field
			if tc.err != nil {
				fields = append(fields, zap.Error(tc.err))
			}
			lg.Log(tc.level, tc.msg, fields...)
			if dropped := out.Len() == 0; dropped != tc.dropped {
				t.Errorf("dropped = %v, want %v; logged %q", dropped, tc.dropped, out.String())
			}
		})
	}
}

// raft's panic on a log shorter than what the member acknowledged is
// recorded, through a logger derived as etcd derives raft's, before the
// panic; other panics and other loggers are not.
func TestLogFilterRaftLogLost(t *testing.T) {
	cases := []struct {
		logger, msg string
		lost        bool
	}{
		{"etcd.raft", "tocommit(1009) is out of range [lastIndex(1008)]. Was the raft log corrupted, truncated, or lost?", true},
		{"etcd.raft", "8e9e05c52164694d state.commit 1009 is out of range [10, 1008]", true},
		{"etcd.raft", "unexpected state", false},
		{"etcd", "tocommit(1009) is out of range [lastIndex(1008)]. Was the raft log corrupted, truncated, or lost?", false},
	}
	for _, tc := range cases {
		var got []string
		core := zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(&bytes.Buffer{}), zapcore.DebugLevel)
		lg := zap.New(core).WithOptions(zap.WrapCore(logFilter{logLost: func(msg string) { got = append(got, msg) }}.wrap))
		for _, name := range strings.Split(tc.logger, ".") {
			lg = lg.Named(name)
		}
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s %q: no panic", tc.logger, tc.msg)
				}
			}()
			lg.With(zap.String("local-member-id", "8e9e05c52164694d")).Sugar().Panicf("%s", tc.msg)
		}()
		if lost := len(got) == 1 && got[0] == tc.msg; lost != tc.lost {
			t.Errorf("%s %q: recorded %q, want recorded: %v", tc.logger, tc.msg, got, tc.lost)
		}
	}
}

// A line repeated within a second is written once, and the next one after
// the second carries how many were not written. A line is its level,
// logger, message and call site, not its fields: a busy loop's warning
// with another error each turn is collapsed too.
func TestLogFilterCollapsesRepeats(t *testing.T) {
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	repeats := newRepeatFilter(func() time.Time { return now })
	var out bytes.Buffer
	core := zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(&out), zapcore.DebugLevel)
	// As Logger and start compose them, with the caller as production's.
	lg := zap.New(core, zap.AddCaller()).
		WithOptions(zap.WrapCore(repeats.wrap), zap.WrapCore(logFilter{closing: make(chan struct{})}.wrap)).
		Named(loggerName).With(zap.String("local-member-id", "8e9e05c52164694d"))
	const msg = "failed to publish local member to cluster through raft"
	// One call site, as etcd's publishV3 loop.
	publish := func(err error) { lg.Warn(msg, zap.Error(err)) }
	errs := []error{errors.New("etcdserver: too many requests"), errors.New("etcdserver: request timed out")}

	// lines are the lines written since the last call.
	lines := func(t *testing.T) []map[string]any {
		t.Helper()
		var got []map[string]any
		for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
			if l == "" {
				continue
			}
			var m map[string]any
			if err := json.Unmarshal([]byte(l), &m); err != nil {
				t.Fatalf("not JSON: %q", l)
			}
			got = append(got, m)
		}
		out.Reset()
		return got
	}
	// want checks the lines' messages and their repeated counts (0: none).
	want := func(t *testing.T, msgs []string, repeated []float64) {
		t.Helper()
		got := lines(t)
		if len(got) != len(msgs) {
			t.Fatalf("%d lines written, want %d: %v", len(got), len(msgs), got)
		}
		for i, m := range got {
			r, _ := m["repeated"].(float64)
			if m["msg"] != msgs[i] || r != repeated[i] {
				t.Errorf("line %d: msg %q repeated %v, want %q repeated %v", i, m["msg"], m["repeated"], msgs[i], repeated[i])
			}
		}
	}

	t.Run("a second of the same warning", func(t *testing.T) {
		for i := range 10000 {
			publish(errs[i%2])
			now = now.Add(50 * time.Microsecond) // 0.5 s in all
		}
		want(t, []string{msg}, []float64{0})
	})
	t.Run("other lines in that second", func(t *testing.T) {
		slow := func(took int) { lg.Warn("slow fdatasync", zap.Int("took", took)) }
		slow(1)
		lg.Error(msg)                    // another level
		lg.Named("client").Warn(msg)     // another logger
		lg.Warn(msg, zap.Error(errs[0])) // another call site
		lg.DPanic("inconsistent state")  // never collapsed
		lg.DPanic("inconsistent state")
		slow(2) // collapsed: only its fields differ
		want(t, []string{"slow fdatasync", msg, msg, msg, "inconsistent state", "inconsistent state"}, []float64{0, 0, 0, 0, 0, 0})
	})
	t.Run("after the second", func(t *testing.T) {
		now = now.Add(600 * time.Millisecond) // 1.1 s after the first
		publish(errs[0])
		want(t, []string{msg}, []float64{9999})
	})
	t.Run("the count starts again", func(t *testing.T) {
		publish(errs[0])
		publish(errs[1])
		now = now.Add(time.Second)
		publish(errs[0])
		publish(errs[0])
		want(t, []string{msg}, []float64{2})
	})
	t.Run("a clock set back", func(t *testing.T) {
		now = now.Add(-time.Hour)
		publish(errs[0])
		want(t, []string{msg}, []float64{1})
	})
	t.Run("memory is bounded", func(t *testing.T) {
		for i := range 3 * maxRepeatKeys {
			lg.Warn(fmt.Sprintf("line %d", i))
		}
		if got := len(lines(t)); got != 3*maxRepeatKeys {
			t.Errorf("%d of %d distinct lines written", got, 3*maxRepeatKeys)
		}
		repeats.mu.Lock()
		defer repeats.mu.Unlock()
		if n := len(repeats.seen); n > maxRepeatKeys {
			t.Errorf("%d lines remembered, want at most %d", n, maxRepeatKeys)
		}
	})
}
