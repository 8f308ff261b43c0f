package etcdembed

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// A single member with a 50 s election timeout has its leader within
// seconds when campaignAlone asks: on its own it would wait 0.1 to 50 s
// after etcd's fast-forward (the 100 ms default has it wait 0.1 to 1 s).
func TestCampaignAlone(t *testing.T) {
	cfg := internalConfig(t, 64<<20)
	if err := os.MkdirAll(filepath.Join(cfg.DataDir, "etcd"), 0o700); err != nil {
		t.Fatal(err)
	}
	ec, err := embedConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ec.ElectionMs = 50000
	ec.LogLevel = "error"
	e, err := embed.StartEtcd(ec)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	stop := make(chan struct{})
	defer close(stop)
	quiet := new(atomic.Bool)
	start := time.Now()
	go campaignAlone(e.Server, quiet, stop)
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(10 * time.Second):
		t.Fatalf("no leader %s after start with a 50 s election timeout", time.Since(start))
	}
	if e.Server.Leader() != e.Server.MemberID() {
		t.Errorf("leader %s, want the member itself %s", e.Server.Leader(), e.Server.MemberID())
	}
	deadline := time.Now().Add(5 * time.Second)
	for quiet.Load() && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if quiet.Load() {
		t.Errorf("raft's refusals still dropped after the election")
	}
}

// raft's warning that it refused to campaign is dropped only while
// campaignAlone asks, and only raft's.
func TestLogFilterCampaignRefused(t *testing.T) {
	const refused = "8e9e05c52164694d cannot campaign at term 1 since there are still pending configuration changes to apply"
	cases := []struct {
		name        string
		logger      string
		campaigning bool
		dropped     bool
	}{
		{"while asking", "etcd.raft", true, true},
		{"after the election", "etcd.raft", false, false},
		{"another logger", "etcd", true, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			core := zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(&out), zapcore.DebugLevel)
			campaigning := new(atomic.Bool)
			campaigning.Store(tc.campaigning)
			lg := zap.New(core).WithOptions(zap.WrapCore(logFilter{closing: make(chan struct{}), campaigning: campaigning}.wrap))
			for _, name := range strings.Split(tc.logger, ".") {
				lg = lg.Named(name)
			}
			lg.Warn(refused)
			if dropped := out.Len() == 0; dropped != tc.dropped {
				t.Errorf("dropped = %v, want %v; logged %q", dropped, tc.dropped, out.String())
			}
		})
	}
}
