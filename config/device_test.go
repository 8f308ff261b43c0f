package config_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/kubestore/kubestore/config"
)

func TestDeviceMemory(t *testing.T) {
	const meminfo = "MemTotal:        1015808 kB\nMemFree:          500000 kB\n"
	for _, tc := range []struct {
		name     string
		files    map[string]string
		want     int64
		wantFrom string
	}{
		{"no cgroup: MemTotal", map[string]string{"proc/meminfo": meminfo}, 1015808 << 10, "MemTotal in /proc/meminfo"},
		{"v2 limit below MemTotal", map[string]string{
			"proc/meminfo": meminfo, "proc/self/cgroup": "0::/edge/kubestore\n",
			"sys/fs/cgroup/edge/kubestore/memory.max": "268435456\n",
		}, 256 << 20, "/sys/fs/cgroup/edge/kubestore/memory.max"},
		{"v2 max: MemTotal", map[string]string{
			"proc/meminfo": meminfo, "proc/self/cgroup": "0::/edge\n", "sys/fs/cgroup/edge/memory.max": "max\n",
		}, 1015808 << 10, "MemTotal in /proc/meminfo"},
		{"v2 in a cgroup namespace: the mount's root", map[string]string{
			"proc/meminfo": meminfo, "proc/self/cgroup": "0::/\n", "sys/fs/cgroup/memory.max": "134217728\n",
		}, 128 << 20, "/sys/fs/cgroup/memory.max"},
		{"v1 limit", map[string]string{
			"proc/meminfo": meminfo, "proc/self/cgroup": "5:cpu,cpuacct:/a\n4:memory:/a\n",
			"sys/fs/cgroup/memory/a/memory.limit_in_bytes": "201326592\n",
		}, 192 << 20, "/sys/fs/cgroup/memory/a/memory.limit_in_bytes"},
		{"v1 unlimited: MemTotal", map[string]string{
			"proc/meminfo": meminfo, "proc/self/cgroup": "4:memory:/a\n",
			"sys/fs/cgroup/memory/a/memory.limit_in_bytes": "9223372036854771712\n",
		}, 1015808 << 10, "MemTotal in /proc/meminfo"},
		{"limit above MemTotal: MemTotal", map[string]string{
			"proc/meminfo": meminfo, "proc/self/cgroup": "0::/\n", "sys/fs/cgroup/memory.max": "4294967296\n",
		}, 1015808 << 10, "MemTotal in /proc/meminfo"},
		{"nothing readable", map[string]string{}, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			for name, content := range tc.files {
				p := filepath.Join(root, name)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			got, from := config.DeviceMemory(root)
			if got != tc.want || from != tc.wantFrom {
				t.Errorf("DeviceMemory = %d, %q; want %d, %q", got, from, tc.want, tc.wantFrom)
			}
			// Every device here but the unreadable one has at most 1 GiB.
			if small := config.IsSmallDevice(got); small != (tc.want > 0) {
				t.Errorf("IsSmallDevice = %v with %d bytes", small, tc.want)
			}
		})
	}
}
