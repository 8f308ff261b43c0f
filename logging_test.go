package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/klog/v2"

	"github.com/kubestore/kubestore/config"
)

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// The noise of a start and stop is dropped in both formats, through the
// calls upstream makes (klog.Warningf, utilruntime.HandleErrorWithContext
// as the reflector calls it); the same messages with another argument or
// error, or before the stop, and every other line are logged, each naming
// its caller.
func TestKlogBackendDropsOnlyNoise(t *testing.T) {
	for _, format := range []string{config.LogFormatText, config.LogFormatJSON} {
		t.Run(format, func(t *testing.T) {
			var out syncBuffer
			stopping := make(chan struct{})
			logger, opts := klogBackend(config.Log{Format: format}, &out, stopping)
			klog.SetLoggerWithOptions(logger, opts...)
			t.Cleanup(klog.ClearLogger)

			ctx := context.Background()
			canceled := fmt.Errorf("Get \"https://127.0.0.1:6443/apis\": %w", context.Canceled)
			klog.Warningf("Skipping API %v because it has no resources.", "apiextensions.k8s.io/v1beta1")
			klog.Warningf("Skipping API %v because it has no resources.", "example.com/v1")
			utilruntime.HandleErrorWithContext(ctx, canceled, "Failed to watch", "reflector", "before-stop")
			establishing := fmt.Errorf("%v failed with: %v", "widgets.example.com", `Put "https://127.0.0.1:6443/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.example.com/status": context canceled`)
			utilruntime.HandleErrorWithContext(ctx, establishing, "Unhandled Error", "when", "establish-before-stop")
			close(stopping)
			utilruntime.HandleErrorWithContext(ctx, establishing, "Unhandled Error", "when", "establish-during-stop")
			utilruntime.HandleErrorWithContext(ctx, errors.New("widgets.example.com failed with: conflict"), "Unhandled Error", "when", "establish-other-error")
			utilruntime.HandleErrorWithContext(ctx, canceled, "Failed to watch", "reflector", "during-stop")
			utilruntime.HandleErrorWithContext(ctx, errors.New("connection refused"), "Failed to watch", "reflector", "other-error")
			klog.ErrorS(canceled, "Failed to list", "reflector", "other-message")
			klog.InfoS("Serving", "port", 6443)
			klog.Flush()

			logs := out.String()
			for _, gone := range []string{"apiextensions.k8s.io/v1beta1", "during-stop", "establish-during-stop"} {
				if strings.Contains(logs, gone) {
					t.Errorf("%s was logged:\n%s", gone, logs)
				}
			}
			for _, kept := range []string{"example.com/v1", "before-stop", "other-error", "other-message", "Serving", "establish-before-stop", "establish-other-error"} {
				if !strings.Contains(logs, kept) {
					t.Errorf("%s was not logged:\n%s", kept, logs)
				}
			}
			if n := strings.Count(logs, "logging_test.go:"); n != 7 {
				t.Errorf("%d of 7 lines name this file as their caller:\n%s", n, logs)
			}
		})
	}
}

func TestKlogLine(t *testing.T) {
	cases := []struct {
		line string
		sev  byte
		msg  string
		ok   bool
	}{
		{"W1123 17:42:07.149736   20199 genericapiserver.go:798] Skipping API x because it has no resources.\n", 'W', "Skipping API x because it has no resources.", true},
		{"I1123 17:42:07.149736   20199 a.go:1] a] b", 'I', "a] b", true},
		{"no header", 0, "", false},
		{"", 0, "", false},
	}
	for _, tc := range cases {
		sev, msg, ok := klogLine([]byte(tc.line))
		if sev != tc.sev || msg != tc.msg || ok != tc.ok {
			t.Errorf("klogLine(%q) = %q, %q, %v; want %q, %q, %v", tc.line, sev, msg, ok, tc.sev, tc.msg, tc.ok)
		}
	}
}
