package etcdembed

import (
	"path/filepath"
	"testing"

	"github.com/kubestore/kubestore/config"
)

// internalConfig is the configuration of a member on a temporary data dir
// short enough for its unix socket, with a small bbolt quota (quota bytes).
func internalConfig(t *testing.T, quota config.ByteSize) config.Config {
	t.Helper()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	cfg.DataDir = dir
	cfg.Etcd.QuotaBackendBytes = quota
	return cfg
}
