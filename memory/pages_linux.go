package memory

import (
	"bufio"
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// releaseStartupPages drops the page-table entries of the process's
// read-only file mappings: the executable's (code, read-only data, the
// function table) and the embedded etcd's database. Start-up
// (initialising ~1,400 packages, etcd's recovery, building the API)
// touches most of a 67 MB binary once, and the kernel's fault-around
// keeps all of it mapped and counted in RSS. etcd maps its bbolt file with
// MAP_POPULATE (go.etcd.io/etcd/server/v3/storage/backend,
// config_linux.go), so after a restart the whole file is resident, 16 MiB
// for an empty store. The pages stay in the page cache, clean and shared,
// and fault back in without disk I/O while cached, so afterwards RSS shows
// the serving working set rather than the start-up path, and the kernel
// reclaims the rest first. Writable mappings, and private ones of other
// files, are never touched.
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
		// 7f0c00000000-7f0e80000000 r--s 00000000 08:01 5678 /data/etcd/member/snap/db
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 || strings.Contains(fields[1], "w") {
			continue
		}
		// A shared mapping has no private copies of its pages, and
		// kubestore's static executable has none in its read-only
		// ones; a dynamic library's may (relocations made read-only
		// after), which the kernel would drop.
		if shared := strings.HasSuffix(fields[1], "s"); !shared && fields[5] != exe || !strings.HasPrefix(fields[5], "/") {
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
