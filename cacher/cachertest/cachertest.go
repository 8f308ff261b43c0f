// Package cachertest opens kubestore's real storage, the embedded etcd
// behind cacher.Backend, on a temporary data directory, for the tests of
// the packages built on it. Nothing in it is a fake.
package cachertest

import (
	"path/filepath"
	"testing"

	"github.com/kubestore/kubestore/cacher"
	"github.com/kubestore/kubestore/config"
	"github.com/kubestore/kubestore/records"
)

// Open starts a cacher.Backend on the embedded etcd of a new temporary
// data directory, with the defaults changed by each configure (which sees
// the directory in DataDir), and closes it when the test ends.
func Open(t testing.TB, configure ...func(*config.Config)) *cacher.Backend {
	t.Helper()
	cfg := config.Default()
	// t.TempDir paths can exceed the 107 bytes a unix socket path may have.
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cfg.DataDir = dir
	for _, c := range configure {
		c(&cfg)
	}
	cc, err := cfg.Complete()
	if err != nil {
		t.Fatal(err)
	}
	b, err := cacher.Open(t.Context(), cc)
	if err != nil {
		t.Fatalf("opening storage: %v", err)
	}
	t.Cleanup(b.Close)
	return b
}

// Records is the store of kubestore's own records on b's etcd.
func Records(b *cacher.Backend) *records.Store { return b.Records() }
