package main

import (
	"testing"

	"github.com/kubestore/kubestore/config"
)

// A machine's memory is shared: half of it. A cgroup's limit is
// kubestore's own: all of it but a quarter (at least 32 MiB) for the
// binary's pages and the page cache. Never below the smallest limit.
func TestDerivedMemoryLimit(t *testing.T) {
	const mi = 1 << 20
	cgroup := "/sys/fs/cgroup/memory.max"
	for _, tc := range []struct {
		device int64
		from   string
		want   int64
	}{
		{1024 * mi, config.MemTotalSource, 512 * mi},
		{64 * mi, config.MemTotalSource, config.MinMemoryLimit},
		{64 * mi, cgroup, config.MinMemoryLimit},
		{96 * mi, cgroup, 64 * mi},
		{128 * mi, cgroup, 96 * mi},
		{512 * mi, cgroup, 384 * mi},
		{2048 * mi, cgroup, 1536 * mi},
	} {
		got, how := derivedMemoryLimit(tc.device, tc.from)
		if got != tc.want || how == "" {
			t.Errorf("derivedMemoryLimit(%s, %s) = %s (%s), want %s", config.ByteSize(tc.device), tc.from, config.ByteSize(got), how, config.ByteSize(tc.want))
		}
	}
}
