package memory

import (
	"math"
	"os"
	"runtime/debug"
	"strings"
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
			root := writeFiles(t, tc.files)
			got, from := deviceMemory(root, limitingCgroup(root))
			if got != tc.want || from != tc.wantFrom {
				t.Errorf("deviceMemory = %d, %q; want %d, %q", got, from, tc.want, tc.wantFrom)
			}
			// Every device here but the unreadable one has at most 1 GiB.
			if small := isSmallDevice(got); small != (tc.want > 0) {
				t.Errorf("isSmallDevice = %v with %d bytes", small, tc.want)
			}
		})
	}
	if !isSmallDevice(SmallDevice) || isSmallDevice(SmallDevice+1) {
		t.Errorf("SmallDevice is not the largest small device")
	}
}

// A machine's memory is shared: half of it. A cgroup's limit is
// kubestore's own: all of it but a quarter (at least 32 MiB) for the
// binary's pages and the page cache. Never below the smallest limit.
func TestDerivedLimit(t *testing.T) {
	const mi = 1 << 20
	cgroup := "/sys/fs/cgroup/memory.max"
	for _, tc := range []struct {
		device int64
		from   string
		want   int64
	}{
		{1024 * mi, memTotalSource, 512 * mi},
		{64 * mi, memTotalSource, config.MinMemoryLimit},
		{64 * mi, cgroup, config.MinMemoryLimit},
		{96 * mi, cgroup, 64 * mi},
		{128 * mi, cgroup, 96 * mi},
		{512 * mi, cgroup, 384 * mi},
		{2048 * mi, cgroup, 1536 * mi},
	} {
		got, how := derivedLimit(tc.device, tc.from)
		if got != tc.want || how == "" {
			t.Errorf("derivedLimit(%s, %s) = %s (%s), want %s", config.ByteSize(tc.device), tc.from, config.ByteSize(got), how, config.ByteSize(tc.want))
		}
	}
}

// The limit is --memory-limit, else GOMEMLIMIT's, else derived from the
// device; the watermarks are shares of it, and a small device's
// collector runs at GOGC=50 unless GOGC is set.
func TestNewLimits(t *testing.T) {
	const mi = 1 << 20
	root := writeFiles(t, map[string]string{
		"proc/meminfo": "MemTotal:        1015808 kB\n", "proc/self/cgroup": "0::/edge\n",
		"sys/fs/cgroup/edge/memory.max": "134217728\n",
	})
	t.Setenv("GOGC", "")
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(math.MaxInt64))
	for _, tc := range []struct {
		name      string
		flag      config.ByteSize
		env       int64 // GOMEMLIMIT, as the runtime applied it; 0 unset
		want      int64
		wantFrom  string
		wantGuard uint64
	}{
		{"derived from the cgroup", 0, 0, 96 * mi, "the cgroup's 128Mi less 32Mi for the binary's pages and the page cache, from /sys/fs/cgroup/edge/memory.max; set --memory-limit to change it", 96 * mi / 100 * 80},
		{"GOMEMLIMIT", 0, 64 * mi, 64 * mi, "GOMEMLIMIT", 64 * mi / 100 * 80},
		{"the flag wins", 200 * mi, 64 * mi, 200 * mi, "--memory-limit=200Mi", 200 * mi / 100 * 80},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.env > 0 {
				t.Setenv("GOMEMLIMIT", "set")
				debug.SetMemoryLimit(tc.env)
			}
			l := NewLimits(config.Memory{Limit: tc.flag}, root)
			if l.Device != 128*mi || l.DeviceFrom != "/sys/fs/cgroup/edge/memory.max" || !l.SmallDevice() {
				t.Errorf("device %d from %q, small %v; want 128 MiB from the cgroup, small", l.Device, l.DeviceFrom, l.SmallDevice())
			}
			if l.Limit != tc.want || l.LimitFrom != tc.wantFrom {
				t.Errorf("limit %s (%s), want %s (%s)", config.ByteSize(l.Limit), l.LimitFrom, config.ByteSize(tc.want), tc.wantFrom)
			}
			if got := l.HeapGuardWatermark(); got != tc.wantGuard {
				t.Errorf("HeapGuardWatermark = %d, want %d", got, tc.wantGuard)
			}
			if got, want := l.pressureHeapWatermark(), uint64(tc.want)/100*70; got != want {
				t.Errorf("pressureHeapWatermark = %d, want %d", got, want)
			}
			// GOGC is set (empty) in this test: the runtime's stays.
			if l.GCPercent != 0 {
				t.Errorf("GCPercent = %d with GOGC set", l.GCPercent)
			}
			if l.cgroup == nil || !strings.HasSuffix(l.cgroup.LimitFile(), "memory.max") {
				t.Errorf("cgroup %+v, want the limiting one", l.cgroup)
			}
		})
	}
	var none Limits
	if none.HeapGuardWatermark() != 0 || none.pressureHeapWatermark() != 0 {
		t.Error("a watermark without a limit")
	}
}

// Without GOGC, a small device's collector runs at GOGC=50; a large one's
// and one of unknown memory keep the runtime's.
func TestSmallDeviceGOGC(t *testing.T) {
	if v, set := os.LookupEnv("GOGC"); set {
		t.Skipf("GOGC=%s is set for the tests", v)
	}
	for _, tc := range []struct {
		meminfo string
		want    int
	}{
		{"MemTotal:        1015808 kB\n", smallDeviceGOGC},
		{"MemTotal:        4194304 kB\n", 0},
		{"", 0},
	} {
		root := writeFiles(t, map[string]string{"proc/meminfo": tc.meminfo})
		if got := NewLimits(config.Memory{}, root).GCPercent; got != tc.want {
			t.Errorf("GCPercent = %d with %q, want %d", got, tc.meminfo, tc.want)
		}
	}
}
