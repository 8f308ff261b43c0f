package memory

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// mappedRSS is the resident bytes of this process's mapping at addr.
func mappedRSS(t *testing.T, addr uintptr) int64 {
	t.Helper()
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	want := fmt.Sprintf("%x-", addr)
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if fields := strings.Fields(line); len(fields) > 0 && !strings.HasSuffix(fields[0], ":") {
			in = strings.HasPrefix(line, want)
			continue
		}
		if v, ok := strings.CutPrefix(line, "Rss:"); ok && in {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(v, "kB")), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no mapping at %#x in /proc/self/smaps", addr)
	return 0
}

// mapFile maps a new file of size bytes, each byte its offset mod 251,
// with prot and MAP_SHARED|MAP_POPULATE, as etcd maps its database.
func mapFile(t *testing.T, name string, size, prot int) []byte {
	t.Helper()
	data := make([]byte, size)
	for i := range data {
		data[i] = byte(i % 251)
	}
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	flag := os.O_RDONLY
	if prot&unix.PROT_WRITE != 0 {
		flag = os.O_RDWR
	}
	f, err := os.OpenFile(path, flag, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m, err := unix.Mmap(int(f.Fd()), 0, size, prot, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Munmap(m) }) //nolint:errcheck
	return m
}

// A read-only file mapping populated at its start leaves RSS and keeps
// its contents; a writable one is not touched.
func TestReleaseStartupPages(t *testing.T) {
	const size = 4 << 20
	db := mapFile(t, "db", size, unix.PROT_READ)
	rw := mapFile(t, "rw", size, unix.PROT_READ|unix.PROT_WRITE)
	dbAt, rwAt := unsafePointer(db), unsafePointer(rw)
	if rss := mappedRSS(t, dbAt); rss < size/2 {
		t.Fatalf("the populated mapping holds %d bytes resident, want most of %d", rss, size)
	}
	rwBefore := mappedRSS(t, rwAt)
	if _, err := releaseStartupPages(); err != nil {
		t.Fatal(err)
	}
	if rss := mappedRSS(t, dbAt); rss != 0 {
		t.Errorf("the read-only mapping holds %d bytes resident after the release, want 0", rss)
	}
	if rss := mappedRSS(t, rwAt); rss != rwBefore {
		t.Errorf("the writable mapping holds %d bytes resident after the release, was %d", rss, rwBefore)
	}
	for _, i := range []int{0, 4095, size / 2, size - 1} {
		if db[i] != byte(i%251) || rw[i] != byte(i%251) {
			t.Fatalf("byte %d after the release: %d and %d, want %d", i, db[i], rw[i], i%251)
		}
	}
}

func unsafePointer(b []byte) uintptr { return uintptr(unsafe.Pointer(&b[0])) }
