package config_test

import (
	"os"
	"path/filepath"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

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

// On a small device ConfigMaps and Secrets are read from etcd unless
// --watch-cache-sizes names them; everything else keeps its setting, and a
// device that is not small (or of unknown memory) changes nothing.
func TestSmallDeviceCaches(t *testing.T) {
	configmaps, secrets, pods := schema.GroupResource{Resource: "configmaps"}, schema.GroupResource{Resource: "secrets"}, schema.GroupResource{Resource: "pods"}
	cases := []struct {
		name   string
		memory int64
		sizes  []string
		cached map[schema.GroupResource]bool
	}{
		{"small", 512 << 20, nil, map[schema.GroupResource]bool{configmaps: false, secrets: false, pods: true}},
		{"at the bound", config.SmallDevice, nil, map[schema.GroupResource]bool{configmaps: false, secrets: false, pods: true}},
		{"small, ConfigMaps named", 512 << 20, []string{"configmaps#100"}, map[schema.GroupResource]bool{configmaps: true, secrets: false, pods: true}},
		{"small, pods off by flag", 512 << 20, []string{"pods#0"}, map[schema.GroupResource]bool{configmaps: false, secrets: false, pods: false}},
		{"large", 4 << 30, nil, map[schema.GroupResource]bool{configmaps: true, secrets: true, pods: true}},
		{"unknown memory", 0, nil, map[schema.GroupResource]bool{configmaps: true, secrets: true, pods: true}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := config.Default()
			c.Cache.Sizes = tc.sizes
			cc, err := c.Complete()
			if err != nil {
				t.Fatal(err)
			}
			before := cc.CacheFor(configmaps)
			on := cc.OnDevice(tc.memory)
			if on.SmallDevice() != config.IsSmallDevice(tc.memory) {
				t.Errorf("SmallDevice() = %v with %d bytes", on.SmallDevice(), tc.memory)
			}
			for gr, want := range tc.cached {
				if got := on.CacheFor(gr).Enabled; got != want {
					t.Errorf("CacheFor(%v).Enabled = %v, want %v", gr, got, want)
				}
			}
			if after := cc.CacheFor(configmaps); after != before {
				t.Errorf("OnDevice changed the config it was called on: %+v, was %+v", after, before)
			}
		})
	}
}
