package etcdembed

import (
	"strings"
	"testing"
	"time"

	"github.com/kubestore/kubestore/config"
)

func TestClientConfig(t *testing.T) {
	cfg := config.Default()
	ccfg, err := ClientConfig([]string{"unix:///s"}, cfg.Etcd, cfg.Log)
	if err != nil {
		t.Fatal(err)
	}
	// kube-apiserver's (storagebackend/factory/etcd3.go).
	if ccfg.DialTimeout != 20*time.Second || ccfg.DialKeepAliveTime != 30*time.Second || ccfg.DialKeepAliveTimeout != 10*time.Second {
		t.Errorf("timeouts dial %s, keepalive %s/%s; want 20s, 30s/10s", ccfg.DialTimeout, ccfg.DialKeepAliveTime, ccfg.DialKeepAliveTimeout)
	}
	if ccfg.TLS != nil || ccfg.Logger == nil || len(ccfg.Endpoints) != 1 || ccfg.Endpoints[0] != "unix:///s" {
		t.Errorf("without TLS files: TLS %v, logger %v, endpoints %v", ccfg.TLS, ccfg.Logger, ccfg.Endpoints)
	}

	cfg.Etcd.Servers = []string{"https://127.0.0.1:2379"}
	cfg.Etcd.CAFile = "/nonexistent/ca.crt"
	if _, err := ClientConfig(cfg.Etcd.Servers, cfg.Etcd, cfg.Log); err == nil || !strings.Contains(err.Error(), "etcd client TLS files") {
		t.Errorf("with a missing --etcd-cafile: %v, want an error about the TLS files", err)
	}
}

func TestEndpoints(t *testing.T) {
	cfg := config.Default().Etcd
	if got := Endpoints("/data", cfg); len(got) != 1 || got[0] != "unix:///data/etcd/etcd.sock" {
		t.Errorf("embedded endpoints %v", got)
	}
	cfg.Servers = []string{"https://a:2379", "https://b:2379"}
	if got := Endpoints("/data", cfg); strings.Join(got, ",") != "https://a:2379,https://b:2379" {
		t.Errorf("external endpoints %v", got)
	}
}
