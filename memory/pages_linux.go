package memory

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
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
//
// MADV_DONTNEED on a private mapping discards the process's own copies of
// its pages: the next access reads the file again. So a private mapping
// is dropped only while it has no such copy (smaps: no Anonymous and no
// Swap pages), whatever its protection says now. A -buildmode=pie
// executable (the default of several distributions' Go packages) has
// one that does: its RELRO segment (the type descriptors, itabs and
// pointer tables) is relocated by the dynamic loader, then made read-only,
// and dropping it leaves unrelocated pointers that crash the process at
// its next interface call. A read-only mapping gains no copy after it is
// read here: only a write (mprotect, ptrace, /proc/self/mem) makes one.
func releaseStartupPages() (released int64, err error) {
	exe, err := os.Executable()
	if err != nil {
		return 0, err
	}
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	// A mapping's header line, then its "Key: value kB" lines:
	// 00400000-02156000 r-xp 00000000 08:01 1234 /usr/bin/kubestore
	// 7f0c00000000-7f0e80000000 r--s 00000000 08:01 5678 /data/etcd/member/snap/db
	var m mapping
	drop := func() error {
		if !m.droppable(exe) {
			return nil
		}
		if _, _, errno := unix.Syscall(unix.SYS_MADVISE, m.start, m.end-m.start, unix.MADV_DONTNEED); errno != 0 {
			return fmt.Errorf("madvise %x-%x: %w", m.start, m.end, errno)
		}
		released += int64(m.end - m.start)
		return nil
	}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		if key, ok := strings.CutSuffix(fields[0], ":"); ok {
			if (key == "Anonymous" || key == "Swap") && len(fields) > 1 && fields[1] != "0" {
				m.copied = true
			}
			continue
		}
		if err := drop(); err != nil {
			return released, err
		}
		m = mapping{}
		if len(fields) < 2 {
			return released, fmt.Errorf("reading /proc/self/smaps line %q", line)
		}
		start, end, ok := strings.Cut(fields[0], "-")
		s, err1 := strconv.ParseUint(start, 16, 64)
		e, err2 := strconv.ParseUint(end, 16, 64)
		if !ok || err1 != nil || err2 != nil {
			return released, fmt.Errorf("reading /proc/self/smaps line %q", line)
		}
		m = mapping{start: uintptr(s), end: uintptr(e), perms: fields[1], valid: true}
		if len(fields) >= 6 {
			m.path = fields[5]
		}
	}
	if err := sc.Err(); err != nil {
		return released, err
	}
	return released, drop()
}

// mapping is one mapping of /proc/self/smaps.
type mapping struct {
	start, end uintptr
	perms      string // "r-xp", "r--s"
	path       string
	valid      bool
	// copied is set when the mapping holds pages of its own (Anonymous or
	// Swap): a private mapping's copies of the file's pages.
	copied bool
}

// droppable reports whether dropping m's pages loses nothing: a
// read-only file mapping, shared or the executable's, with no page of
// its own.
func (m mapping) droppable(exe string) bool {
	if !m.valid || len(m.perms) != 4 || strings.Contains(m.perms, "w") || !strings.HasPrefix(m.path, "/") {
		return false
	}
	// A shared mapping has no private copies of its pages; a private one
	// may have (relocations made read-only after, a debugger's
	// breakpoints). Private mappings of other files than the executable
	// (dynamic libraries) are left alone.
	if shared := m.perms[3] == 's'; !shared && (m.path != exe || m.copied) {
		return false
	}
	return true
}
