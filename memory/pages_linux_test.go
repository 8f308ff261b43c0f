package memory

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
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

// relocatedProgram calls releaseStartupPages (pages.go, a copy of
// pages_linux.go in package main), then what a Go program reads from its
// relocated pages: itabs (interface calls), type descriptors (a type
// switch, fmt, a map), the module data the collector walks. It exits 3
// when the executable has no relocated read-only pages to keep.
const relocatedProgram = `package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"runtime"
	"sort"
	"strings"
)

type shape interface{ area() float64 }
type square struct{ side float64 }
type disc struct{ r float64 }

func (s square) area() float64 { return s.side * s.side }
func (d *disc) area() float64  { return 3 * d.r * d.r }

var (
	shapes  = []shape{square{2}, &disc{1}}
	names   = map[string]shape{"unit": square{1}}
	errGone = errors.New("gone")
)

// relocated reports whether a private read-only mapping of the
// executable holds pages of its own: the relocated RELRO segment.
func relocated() bool {
	exe, _ := os.Executable()
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		return false
	}
	defer f.Close()
	mine := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		switch {
		case len(fields) >= 6 && !strings.HasSuffix(fields[0], ":"):
			mine = fields[1] == "r--p" && fields[5] == exe
		case len(fields) > 1 && fields[0] == "Anonymous:" && mine && fields[1] != "0":
			return true
		}
	}
	return false
}

func main() {
	if !relocated() {
		os.Exit(3)
	}
	released, err := releaseStartupPages()
	if err != nil || released == 0 {
		fmt.Println("releaseStartupPages:", released, err)
		os.Exit(2)
	}
	var sum float64
	for _, s := range shapes {
		sum += s.area()
	}
	for _, s := range shapes {
		switch s.(type) {
		case square:
			sum++
		}
	}
	words := []string{"b", "a", strings.Repeat("c", 2)}
	sort.Strings(words)
	runtime.GC()
	err = fmt.Errorf("wrapped: %w", errGone)
	fmt.Println("ok", sum, names["unit"].area(), words, errors.Is(err, errGone))
}
`

// A -buildmode=pie executable's relocated read-only pages (RELRO) are
// its own, not the file's: dropping them crashed the process at its next
// interface call, 10 s after each start. They are kept; the rest of the
// executable is released.
func TestReleaseKeepsRelocatedPages(t *testing.T) {
	if runtime.GOARCH != "amd64" && runtime.GOARCH != "arm64" {
		t.Skipf("-buildmode=pie without cgo is not built on %s", runtime.GOARCH)
	}
	src, err := os.ReadFile("pages_linux.go")
	if err != nil {
		t.Fatal(err)
	}
	pages, ok := strings.CutPrefix(string(src), "package memory\n")
	if !ok {
		t.Fatal("pages_linux.go does not begin with its package clause")
	}
	dir := t.TempDir()
	for name, content := range map[string]string{"main.go": relocatedProgram, "pages.go": "package main\n" + pages} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// Built from this package's directory, the program resolves
	// golang.org/x/sys in kubestore's module.
	bin := filepath.Join(dir, "pie")
	build := exec.Command("go", "build", "-buildmode=pie", "-o", bin, filepath.Join(dir, "main.go"), filepath.Join(dir, "pages.go"))
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build -buildmode=pie: %v\n%s", err, out)
	}
	out, err := exec.Command(bin).CombinedOutput()
	var exit *exec.ExitError
	if errors.As(err, &exit) && exit.ExitCode() == 3 {
		t.Skip("the pie executable has no relocated read-only pages")
	}
	if err != nil || !strings.HasPrefix(string(out), "ok ") {
		t.Fatalf("the pie executable after releaseStartupPages: %v\n%s", err, out)
	}
}
