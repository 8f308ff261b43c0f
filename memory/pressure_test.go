package memory

import (
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// writeFiles writes files (path under root: content) into a new root.
func writeFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for name, content := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// The working set is the usage less the inactive file pages, read from
// v2's and v1's own files; the pressure begins above 90 % of the limit.
func TestCgroupPressure(t *testing.T) {
	for _, tc := range []struct {
		name       string
		files      map[string]string
		workingSet int64
		under      bool
	}{
		{"v2, below", map[string]string{
			"proc/self/cgroup": "0::/edge\n", "sys/fs/cgroup/edge/memory.max": "100000\n",
			"sys/fs/cgroup/edge/memory.current": "95000\n",
			"sys/fs/cgroup/edge/memory.stat":    "anon 50000\nfile 45000\nactive_file 15000\ninactive_file 30000\n",
		}, 65000, false},
		{"v2, above", map[string]string{
			"proc/self/cgroup": "0::/edge\n", "sys/fs/cgroup/edge/memory.max": "100000\n",
			"sys/fs/cgroup/edge/memory.current": "99000\n",
			"sys/fs/cgroup/edge/memory.stat":    "anon 90000\ninactive_anon 1000\ninactive_file 5000\n",
		}, 94000, true},
		{"v1, above", map[string]string{
			"proc/self/cgroup": "4:memory:/a\n", "sys/fs/cgroup/memory/a/memory.limit_in_bytes": "100000\n",
			"sys/fs/cgroup/memory/a/memory.usage_in_bytes": "98000\n",
			// v1 gives the cgroup's own and, with total_, its subtree's.
			"sys/fs/cgroup/memory/a/memory.stat": "inactive_file 90000\ntotal_inactive_file 4000\n",
		}, 94000, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := writeFiles(t, tc.files)
			cg := limitingCgroup(root)
			if cg == nil {
				t.Fatal("no limiting cgroup found")
			}
			ws, err := cg.WorkingSet()
			if err != nil || ws != tc.workingSet {
				t.Errorf("WorkingSet = %d, %v; want %d", ws, err, tc.workingSet)
			}
			why := NewPressure(Limits{cgroup: cg}).under()
			if (why != "") != tc.under || tc.under && !strings.Contains(why, cg.LimitFile()) {
				t.Errorf("under = %q, want pressure %v naming %s", why, tc.under, cg.LimitFile())
			}
		})
	}
}

// A live heap above 70 % of the Go memory limit is pressure.
func TestHeapPressure(t *testing.T) {
	if why := NewPressure(Limits{}).under(); why != "" {
		t.Fatalf("under = %q without a memory limit or cgroup", why)
	}
	runtime.GC()
	live := LiveHeap()
	if why := NewPressure(Limits{Limit: int64(live * 2)}).under(); why != "" {
		t.Errorf("under = %q with the live heap at half the limit", why)
	}
	if why := NewPressure(Limits{Limit: int64(live * 5 / 4)}).under(); !strings.Contains(why, "live heap") {
		t.Errorf("under = %q with the live heap at 80 %% of the limit", why)
	}
}

// Relieve drops every registered part and names those that held anything.
func TestRelieve(t *testing.T) {
	p := NewPressure(Limits{})
	var calls []string
	for _, d := range []struct {
		name string
		held bool
	}{{"a", true}, {"b", false}, {"c", true}} {
		p.Droppable(d.name, func() bool { calls = append(calls, d.name); return d.held })
	}
	if got := p.Relieve("a test", false); !slices.Equal(got, []string{"a", "c"}) {
		t.Errorf("Relieve dropped %v, want [a c]", got)
	}
	if !slices.Equal(calls, []string{"a", "b", "c"}) {
		t.Errorf("drops called %v, want each once", calls)
	}
}
