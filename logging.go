package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"regexp"

	"github.com/go-logr/logr"
	"go.uber.org/zap/zapcore"
	logsapi "k8s.io/component-base/logs/api/v1"
	logsjson "k8s.io/component-base/logs/json"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/textlogger"

	"github.com/kubestore/kubestore/config"
)

// klogBackend is what klog writes through: klog's text format (as
// component-base's text format writes it: textlogger for structured calls,
// klog's own line for printf-style ones) or JSON lines, on out, without
// the lines quiet calls noise. stopping is closed when a graceful stop
// begins.
func klogBackend(cfg config.Log, out io.Writer, stopping <-chan struct{}) (logr.Logger, []klog.LoggerOption) {
	q := quiet{stopping: stopping}
	var inner logr.LogSink
	var opts []klog.LoggerOption
	if cfg.Format == config.LogFormatJSON {
		l, _ := logsjson.NewJSONLogger(logsapi.VerbosityLevel(cfg.Verbosity), zapcore.Lock(zapcore.AddSync(out)), nil, nil)
		inner = l.GetSink()
	} else {
		l := textlogger.NewLogger(textlogger.NewConfig(textlogger.Verbosity(cfg.Verbosity), textlogger.Output(out)))
		inner = l.GetSink()
		w := inner.(textlogger.KlogBufferWriter)
		opts = append(opts, klog.WriteKlogBuffer(func(line []byte) {
			if sev, msg, ok := klogLine(line); !ok || !q.noise(sev, msg, nil) {
				w.WriteKlogBuffer(line)
			}
		}))
	}
	// quietSink adds a frame between the caller and the inner sink.
	if cd, ok := inner.(logr.CallDepthLogSink); ok {
		inner = cd.WithCallDepth(1)
	}
	return logr.New(&quietSink{LogSink: inner, quiet: q}), opts
}

// quiet knows the lines upstream code logs as warnings or errors during a
// normal start and stop although nothing is wrong, so that operators can
// alert on kubestore's warnings and errors. Each is matched by message and
// error, never by level alone: the same message with another error, or
// outside a stop, is logged.
type quiet struct {
	stopping <-chan struct{}
}

// noise reports whether a line of severity 'I', 'W' or 'E' is noise; err
// is the error of a structured error line.
func (q quiet) noise(sev byte, msg string, err error) bool {
	switch msg {
	case "Skipping API apiextensions.k8s.io/v1beta1 because it has no resources.":
		// k8s.io/apiserver pkg/server/genericapiserver.go installAPIResources:
		// the apiextensions scheme still registers v1beta1, so its group
		// lists that version, but apiextensions-apiserver serves only v1.
		// kube-apiserver logs the same line at every start.
		return sev != 'E'
	case "Failed to watch":
		// k8s.io/client-go tools/cache/reflector.go: the in-process
		// informers of apiextensions-apiserver watch through the loopback
		// client and stop when the server stops listening, the moment it
		// also ends their watches (pkg/server/genericapiserver.go
		// RunWithContext); a reflector that was just watching again
		// reports the cancelled request.
		return sev == 'E' && errors.Is(err, context.Canceled) && q.stopped()
	case "Unhandled Error":
		// k8s.io/apiextensions-apiserver pkg/controller/establish: the
		// establishing controller's status update of a CRD created just
		// before the stop, through the loopback client the stop cancels.
		// Its error is formatted with %v, so only its text says it was
		// cancelled.
		return sev == 'E' && q.stopped() && err != nil && establishCanceled.MatchString(err.Error())
	}
	return false
}

// establishCanceled is the establishing controller's error for a status
// update the stop cancelled: "<crd> failed with: Put
// \"https://…/apis/apiextensions.k8s.io/v1/customresourcedefinitions/<crd>/status\": context canceled".
var establishCanceled = regexp.MustCompile(`^[^ ]+ failed with: Put "[^"]*/apis/apiextensions\.k8s\.io/v1/customresourcedefinitions/[^"/]+/status": context canceled$`)

func (q quiet) stopped() bool {
	select {
	case <-q.stopping:
		return true
	default:
		return false
	}
}

// klogLine splits a line of klog's text format, "W0102 15:04:05.000000
// 1234 file.go:12] message", into its severity and message.
func klogLine(line []byte) (sev byte, msg string, ok bool) {
	_, rest, found := bytes.Cut(line, []byte("] "))
	if !found {
		return 0, "", false
	}
	return line[0], string(bytes.TrimSuffix(rest, []byte("\n"))), true
}

// quietSink is a logr.LogSink that drops what quiet calls noise.
type quietSink struct {
	logr.LogSink
	quiet quiet
}

var _ logr.CallDepthLogSink = (*quietSink)(nil)

// Init does nothing: the inner sink was initialised by its own logger, and
// its call depth already counts quietSink's frame.
func (s *quietSink) Init(logr.RuntimeInfo) {}

func (s *quietSink) Info(level int, msg string, kv ...any) {
	if !s.quiet.noise('I', msg, nil) {
		s.LogSink.Info(level, msg, kv...)
	}
}

func (s *quietSink) Error(err error, msg string, kv ...any) {
	if !s.quiet.noise('E', msg, err) {
		s.LogSink.Error(err, msg, kv...)
	}
}

func (s *quietSink) WithValues(kv ...any) logr.LogSink {
	return &quietSink{LogSink: s.LogSink.WithValues(kv...), quiet: s.quiet}
}

func (s *quietSink) WithName(name string) logr.LogSink {
	return &quietSink{LogSink: s.LogSink.WithName(name), quiet: s.quiet}
}

func (s *quietSink) WithCallDepth(depth int) logr.LogSink {
	if cd, ok := s.LogSink.(logr.CallDepthLogSink); ok {
		return &quietSink{LogSink: cd.WithCallDepth(depth), quiet: s.quiet}
	}
	return s
}
