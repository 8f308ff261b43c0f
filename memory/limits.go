package memory

import (
	"fmt"
	"math"
	"os"
	"runtime/debug"

	"k8s.io/klog/v2"

	"github.com/kubestore/kubestore/config"
)

// The watermarks, each a share of a limit.
const (
	// HeapGuardPercent is the share of the Go memory limit the live heap
	// may reach before new objects are refused (cacher.HeapGuard). Above
	// it the garbage collector has less than a fifth of the limit to work
	// in and runs ever more often (at 128Mi with 10,000 ConfigMaps and
	// 1,000 Pods it took a whole core, docs/PERFORMANCE.md); refusing
	// creates keeps the server serving reads, updates and the deletes
	// that make room.
	HeapGuardPercent = 80
	// pressureHeapPercent is the share of the Go memory limit at which
	// the live heap puts the process under pressure (Pressure): below
	// the heap guard's watermark, so that the guard refuses creates only
	// once nothing rebuildable is left.
	pressureHeapPercent = 70
	// pressureCgroupPercent is the share of the cgroup's limit at which
	// its working set (cgroup.WorkingSet) puts the process under
	// pressure: the kernel is about to reclaim from it, then kill.
	pressureCgroupPercent = 90
)

// smallDeviceGOGC is the collector's setting on a small device
// (docs/PERFORMANCE.md measures both).
const smallDeviceGOGC = 50

// cgroupHeadroom is what a cgroup's limit keeps, at least, beyond the
// heap: the binary's pages the server touches (its code and data, file
// pages the cgroup counts, ~20-40 MiB) and the page cache of the data it
// reads.
const cgroupHeadroom = 32 << 20

// Limits are the process's memory and what bounds it, read once at the
// start (NewLimits) and handed whole to what enforces them: the Go
// runtime (SetRuntime), the heap guard (cacher.NewHeapGuard) and the
// pressure mode (NewPressure).
type Limits struct {
	// Device is the memory the device gives the process: the smaller of
	// the limiting cgroup's limit and the machine's MemTotal; 0 when
	// neither can be read. DeviceFrom names the file it was read from.
	Device     int64
	DeviceFrom string
	// Limit is the Go runtime's soft memory limit, 0 for none. LimitFrom
	// says where it comes from, for messages: --memory-limit, GOMEMLIMIT,
	// or how it was derived from Device.
	Limit     int64
	LimitFrom string
	// GCPercent is the collector's GOGC to set; 0 leaves it as it is.
	GCPercent int

	source limitSource
	// cgroup is the memory cgroup that limits the process; nil when none.
	cgroup *cgroup
}

// limitSource is where Limits.Limit comes from.
type limitSource int

const (
	noLimit limitSource = iota
	limitFlag
	limitEnv
	limitDerived
)

// NewLimits reads the device's memory and the cgroup that limits the
// process (root is "/" except in tests) and derives the limits of m:
// the Go memory limit is --memory-limit; else GOMEMLIMIT, which the
// runtime has already applied; else derived from the device's memory
// (derivedLimit), so that a device is tuned without a flag. Only
// --memory-limit gives resources their default byte budgets. On a small
// device (SmallDevice), unless GOGC is set, the collector runs at
// GOGC=50: the heap grows by half the live heap between collections
// instead of all of it.
func NewLimits(m config.Memory, root string) Limits {
	l := Limits{cgroup: limitingCgroup(root)}
	l.Device, l.DeviceFrom = deviceMemory(root, l.cgroup)
	if _, set := os.LookupEnv("GOGC"); !set && l.SmallDevice() {
		l.GCPercent = smallDeviceGOGC
	}
	switch env := goMemLimit(); {
	case m.Limit > 0:
		l.Limit, l.source = int64(m.Limit), limitFlag
		l.LimitFrom = fmt.Sprintf("--%s=%s", config.FlagMemoryLimit, m.Limit)
	case env > 0:
		l.Limit, l.LimitFrom, l.source = env, "GOMEMLIMIT", limitEnv
	case l.Device > 0:
		limit, how := derivedLimit(l.Device, l.DeviceFrom)
		l.Limit, l.source = limit, limitDerived
		l.LimitFrom = fmt.Sprintf("%s, from %s; set --%s to change it", how, l.DeviceFrom, config.FlagMemoryLimit)
	}
	return l
}

// goMemLimit is the limit GOMEMLIMIT gave the runtime, 0 when none: the
// runtime parsed it at the process's start, so it is read back from the
// runtime, only while the variable is set.
func goMemLimit() int64 {
	if _, set := os.LookupEnv("GOMEMLIMIT"); !set {
		return 0
	}
	if limit := debug.SetMemoryLimit(-1); limit != math.MaxInt64 {
		return limit
	}
	return 0
}

// derivedLimit is the soft memory limit for a device of device bytes
// found at from, and how it was derived, at least config.MinMemoryLimit.
// A machine's MemTotal is shared with the agents beside kubestore: half of
// it. A cgroup's limit is what was given to kubestore alone: all of it but
// the headroom of its pages and cache, a quarter and at least
// cgroupHeadroom, never less than half. In a 96 MiB cgroup half (48 MiB)
// refused the gateway set x1 at its live heap of 38 MiB; 64 MiB serves it
// with the cgroup's peak at 80 MiB (docs/PERFORMANCE.md, issue 39).
func derivedLimit(device int64, from string) (int64, string) {
	size := config.ByteSize(device)
	if from == memTotalSource {
		if limit := device / 2; limit >= config.MinMemoryLimit {
			return limit, fmt.Sprintf("half of the device's %s", size)
		}
	} else {
		headroom := max(device/4, cgroupHeadroom)
		if limit := max(device-headroom, device/2); limit >= config.MinMemoryLimit {
			return limit, fmt.Sprintf("the cgroup's %s less %s for the binary's pages and the page cache", size, config.ByteSize(device-limit))
		}
	}
	return config.MinMemoryLimit, fmt.Sprintf("the smallest limit, for a device of %s", size)
}

// SmallDevice reports whether the device's memory is known and at most
// SmallDevice: the defaults that trade CPU for memory apply.
func (l Limits) SmallDevice() bool { return isSmallDevice(l.Device) }

// HeapGuardWatermark is the live heap above which creates are refused
// (HeapGuardPercent of Limit); 0 without a limit.
func (l Limits) HeapGuardWatermark() uint64 { return l.share(HeapGuardPercent) }

// pressureHeapWatermark is the live heap above which the process is under
// pressure (pressureHeapPercent of Limit); 0 without a limit.
func (l Limits) pressureHeapWatermark() uint64 { return l.share(pressureHeapPercent) }

func (l Limits) share(percent uint64) uint64 {
	if l.Limit <= 0 {
		return 0
	}
	return uint64(l.Limit) / 100 * percent
}

// SetRuntime gives the Go runtime the limit (GOMEMLIMIT's it applied
// itself) and, on a small device, GOGC=50.
func (l Limits) SetRuntime() {
	if l.GCPercent > 0 {
		debug.SetGCPercent(l.GCPercent)
		klog.V(2).InfoS("Garbage collector tuned for a small device", "GOGC", l.GCPercent, "device", config.ByteSize(l.Device), "from", l.DeviceFrom)
	}
	switch l.source {
	case limitFlag:
		debug.SetMemoryLimit(l.Limit)
		limit := config.ByteSize(l.Limit)
		klog.InfoS("Memory limit", "limit", limit, "defaultByteBudget", limit/config.DefaultBudgetFraction)
	case limitDerived:
		debug.SetMemoryLimit(l.Limit)
		klog.V(2).InfoS("Memory limit derived from the device", "limit", config.ByteSize(l.Limit), "device", config.ByteSize(l.Device), "from", l.DeviceFrom)
	}
}
