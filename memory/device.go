package memory

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// SmallDevice is the most memory a device may have for the defaults that
// trade CPU for memory (GOGC=50, no cache snapshots, ConfigMaps and
// Secrets read from etcd) to apply.
const SmallDevice = 1 << 30

// isSmallDevice reports whether a device's memory (deviceMemory) is known
// and at most SmallDevice.
func isSmallDevice(memory int64) bool { return memory > 0 && memory <= SmallDevice }

// memTotalSource is where deviceMemory found the memory when no cgroup
// limits the process: the machine's, shared with whatever else runs on it.
const memTotalSource = "MemTotal in /proc/meminfo"

// deviceMemory is the memory the device gives this process: the smaller of
// its cgroup's limit (cg, v2 memory.max, v1 memory.limit_in_bytes; nil
// when none) and the machine's MemTotal, with where it comes from; 0 when
// neither can be read. root is "/" except in tests.
func deviceMemory(root string, cg *cgroup) (int64, string) {
	total := memTotal(filepath.Join(root, "proc/meminfo"))
	if cg != nil && (total == 0 || cg.Limit() < total) {
		return cg.Limit(), cg.LimitFile()
	}
	if total > 0 {
		return total, memTotalSource
	}
	return 0, ""
}

func memTotal(path string) int64 {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "MemTotal:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				return 0
			}
			return kb << 10
		}
	}
	return 0
}
