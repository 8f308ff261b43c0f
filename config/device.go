package config

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// SmallDevice is the most memory a device may have for the defaults that
// trade CPU for memory (GOGC=50, no cache snapshots, ConfigMaps and
// Secrets read from etcd) to apply.
const SmallDevice = 1 << 30

// IsSmallDevice reports whether a device's memory (DeviceMemory) is known
// and at most SmallDevice.
func IsSmallDevice(memory int64) bool { return memory > 0 && memory <= SmallDevice }

// SmallDeviceUncached are the resources a small device reads straight from
// etcd unless --watch-cache-sizes names them. Their caches hold a third of a
// gateway's heap (ConfigMaps and Secrets: 41 of 115 MB at five gateway
// sets), and what the cache buys is cheaper LISTs and watches of the whole
// resource, which a node's agents do not make: the kubelet reads the
// ConfigMaps and Secrets of its pods by name, and a GET by name reads etcd
// cached or not, a watch by name is a watch of one key in etcd
// (docs/PERFORMANCE.md, "Watch cache per resource"). Pods stay cached:
// the kubelet and the garbage collector list and watch them.
var SmallDeviceUncached = []schema.GroupResource{{Resource: "configmaps"}, {Resource: "secrets"}}

// OnDevice returns c with the defaults of a device with memory bytes
// (DeviceMemory; 0 when unknown): on a small one, SmallDeviceUncached.
func (c Completed) OnDevice(memory int64) Completed {
	cc := *c.completed
	cc.smallDevice = IsSmallDevice(memory)
	return Completed{&cc}
}

// SmallDevice reports whether OnDevice was given a small device.
func (c Completed) SmallDevice() bool { return c.smallDevice }

// MemTotalSource is where DeviceMemory found the memory when no cgroup
// limits the process: the machine's, shared with whatever else runs on it.
const MemTotalSource = "MemTotal in /proc/meminfo"

// DeviceMemory is the memory the device gives this process: the smaller of
// its cgroup's limit (v2 memory.max, v1 memory.limit_in_bytes) and the
// machine's MemTotal, with where it comes from; 0 when neither can be read.
// root is "/" except in tests.
func DeviceMemory(root string) (int64, string) {
	total := memTotal(filepath.Join(root, "proc/meminfo"))
	if cg, ok := LimitingCgroup(root); ok && (total == 0 || cg.Limit() < total) {
		return cg.Limit(), cg.LimitFile()
	}
	if total > 0 {
		return total, MemTotalSource
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
