package memory

import (
	"bufio"
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// releaseStartupPages drops the page-table entries of the executable's
// read-only mappings (code, read-only data, the function table). Start-up
// (initialising ~1,400 packages, etcd's recovery, building the API) touches
// most of a 67 MB binary once, and the kernel's fault-around keeps all of it
// mapped and counted in RSS. The pages stay in the page cache, clean and
// shared, and fault back in without disk I/O while cached, so afterwards RSS
// shows the serving working set rather than the start-up path. Writable
// mappings are never touched.
func releaseStartupPages() (released int64, err error) {
	exe, err := os.Executable()
	if err != nil {
		return 0, err
	}
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// 00400000-02156000 r-xp 00000000 08:01 1234 /usr/bin/kubestore
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 || fields[5] != exe || strings.Contains(fields[1], "w") {
			continue
		}
		var start, end uintptr
		if _, err := fmt.Sscanf(fields[0], "%x-%x", &start, &end); err != nil {
			return released, fmt.Errorf("reading /proc/self/maps line %q: %w", sc.Text(), err)
		}
		if _, _, errno := unix.Syscall(unix.SYS_MADVISE, start, end-start, unix.MADV_DONTNEED); errno != 0 {
			return released, fmt.Errorf("madvise %s: %w", fields[0], errno)
		}
		released += int64(end - start)
	}
	return released, sc.Err()
}
