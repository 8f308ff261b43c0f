//go:build linux

package powercut

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// mount mounts a power-cut file system for a test; Available says when the
// machine cannot.
func mount(t *testing.T) *FS {
	t.Helper()
	if err := Available(); err != nil {
		Skip(t, err)
	}
	base := t.TempDir()
	mnt := filepath.Join(base, "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := Mount(mnt, filepath.Join(base, "real"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Unmount() })
	return f
}

func write(t *testing.T, path, data string, sync bool) *os.File {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(data); err != nil {
		t.Fatal(err)
	}
	if sync {
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

func syncDir(t *testing.T, dir string) {
	t.Helper()
	d, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		t.Fatal(err)
	}
}

func cutAndUnmount(t *testing.T, f *FS, tear bool) {
	t.Helper()
	f.Cut(tear, rand.New(rand.NewPCG(1, 2)))
	if err := f.Unmount(); err != nil {
		t.Fatal(err)
	}
}

func content(t *testing.T, path string) (string, bool) {
	t.Helper()
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return "", false
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(b), true
}

// What was synced survives a cut, what was not is gone: file data, new
// entries, renames and removals. Each case has a directory of its own, so
// that one case's directory sync does not make another's entries durable.
func TestCutKeepsOnlyWhatWasSynced(t *testing.T) {
	f := mount(t)
	for _, d := range []string{"a", "b", "c", "d", "e", "f"} {
		if err := os.Mkdir(filepath.Join(f.Dir, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	syncDir(t, f.Dir)
	in := func(parts ...string) string { return filepath.Join(append([]string{f.Dir}, parts...)...) }

	// a: durable, then an unsynced append (read back before the cut), then
	// an unsynced removal and re-creation: the durable content.
	write(t, in("a", "durable"), "one", true).Close()
	syncDir(t, in("a"))
	d := write(t, in("a", "durable"), "", false)
	d.WriteAt([]byte("-two"), 3)
	if got, _ := content(t, in("a", "durable")); got != "one-two" {
		t.Fatalf("read before the cut: %q, want %q", got, "one-two")
	}
	d.Close()
	if err := os.Remove(in("a", "durable")); err != nil {
		t.Fatal(err)
	}
	write(t, in("a", "durable"), "recreated", true).Close()
	// b: data synced, entry not: the file is gone.
	write(t, in("b", "entry-unsynced"), "x", true).Close()
	// c: entry synced, data not: an empty file.
	e := write(t, in("c", "data-unsynced"), "lost", false)
	syncDir(t, in("c"))
	e.Close()
	// d: an atomic replacement whose rename was not synced: the old content.
	write(t, in("d", "replaced"), "old", true).Close()
	syncDir(t, in("d"))
	write(t, in("d", "replaced.tmp"), "new", true).Close()
	if err := os.Rename(in("d", "replaced.tmp"), in("d", "replaced")); err != nil {
		t.Fatal(err)
	}
	// e: a truncation not synced: the old length.
	write(t, in("e", "truncated"), "0123456789", true).Close()
	syncDir(t, in("e"))
	if err := os.Truncate(in("e", "truncated"), 2); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(in("e", "truncated")); err != nil || fi.Size() != 2 {
		t.Fatalf("stat after truncating: %v %v, want size 2", fi, err)
	}
	// f: what etcd does to a WAL segment it reopens: cut it at the last
	// record, extend it again, append and sync. The synced bytes before
	// the cut stay, the bytes past it read as zeros.
	write(t, in("f", "wal"), "0123456789", true).Close()
	syncDir(t, in("f"))
	w := write(t, in("f", "wal"), "", false)
	if err := w.Truncate(5); err != nil {
		t.Fatal(err)
	}
	if err := w.Truncate(2 * pageSize); err != nil {
		t.Fatal(err)
	}
	if _, err := w.WriteAt([]byte("X"), 6); err != nil {
		t.Fatal(err)
	}
	if err := w.Sync(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	wal := "01234\x00X" + strings.Repeat("\x00", 2*pageSize-7)
	cutAndUnmount(t, f, false)

	for name, want := range map[string]string{"a/durable": "one", "c/data-unsynced": "", "d/replaced": "old", "e/truncated": "0123456789", "f/wal": wal} {
		if got, ok := content(t, filepath.Join(f.Real, name)); !ok || got != want {
			t.Errorf("%s after the cut: %q (exists %v), want %q", name, got, ok, want)
		}
	}
	for _, name := range []string{"b/entry-unsynced", "d/replaced.tmp"} {
		if _, ok := content(t, filepath.Join(f.Real, name)); ok {
			t.Errorf("%s exists after the cut; its entry was never synced", name)
		}
	}
	if _, dropped := f.Stats(); dropped == 0 {
		t.Error("the cut dropped no page")
	}
}

// A synced rename and directory: the new content, no stash left behind.
func TestSyncedReplacementSurvives(t *testing.T) {
	f := mount(t)
	sub := filepath.Join(f.Dir, "sub")
	if err := os.Mkdir(sub, 0o700); err != nil {
		t.Fatal(err)
	}
	syncDir(t, f.Dir)
	write(t, filepath.Join(sub, "file"), "old", true).Close()
	syncDir(t, sub)
	write(t, filepath.Join(sub, "file.tmp"), "new", true).Close()
	if err := os.Rename(filepath.Join(sub, "file.tmp"), filepath.Join(sub, "file")); err != nil {
		t.Fatal(err)
	}
	syncDir(t, sub)
	cutAndUnmount(t, f, false)
	if got, _ := content(t, filepath.Join(f.Real, "sub", "file")); got != "new" {
		t.Errorf("after the cut: %q, want %q", got, "new")
	}
	if _, err := os.Stat(f.stash); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the stash %s is left behind: %v", f.stash, err)
	}
}

// A tree removed and made again under the same names, its parent synced
// and the new tree synced, is the new tree after a cut: the removals of
// the old entries inside it, never synced themselves, cannot bring them
// back into the new directories (as etcd's member directory, removed and
// restored again, found).
func TestRemovedTreeStaysRemoved(t *testing.T) {
	f := mount(t)
	tree := filepath.Join(f.Dir, "tree")
	makeTree := func(content string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Join(tree, "sub"), 0o700); err != nil {
			t.Fatal(err)
		}
		write(t, filepath.Join(tree, "sub", "file"), content, true).Close()
		syncDir(t, filepath.Join(tree, "sub"))
		syncDir(t, tree)
		syncDir(t, f.Dir)
	}
	makeTree("old")
	if err := os.RemoveAll(tree); err != nil {
		t.Fatal(err)
	}
	makeTree("new")
	cutAndUnmount(t, f, false)
	if got, _ := content(t, filepath.Join(f.Real, "tree", "sub", "file")); got != "new" {
		t.Errorf("after the cut: %q, want the new tree's %q", got, "new")
	}
}

// A torn cut writes a prefix of the last unsynced write, in whole pages.
func TestTornWriteKeepsWholePages(t *testing.T) {
	f := mount(t)
	data := bytes.Repeat([]byte("a"), 4*pageSize)
	w := write(t, filepath.Join(f.Dir, "log"), "", true)
	syncDir(t, f.Dir)
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	w.Close()
	cutAndUnmount(t, f, true)
	got, _ := content(t, filepath.Join(f.Real, "log"))
	if len(got)%pageSize != 0 || len(got) >= len(data) || got != string(data[:len(got)]) {
		t.Errorf("torn write left %d bytes, want a whole number of pages of the write, short of all of it", len(got))
	}
}

// Full refuses space with ENOSPC, ReadOnly every change with EROFS; reads
// work under both, and Healthy brings writes back.
func TestFaults(t *testing.T) {
	f := mount(t)
	path := filepath.Join(f.Dir, "file")
	write(t, path, "data", true).Close()
	f.SetFault(Full)
	if err := os.WriteFile(filepath.Join(f.Dir, "new"), []byte("x"), 0o600); !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("creating a file on a full disk: %v, want ENOSPC", err)
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(f.Dir, &st); err != nil || st.Bavail != 0 {
		t.Errorf("statfs of a full disk: %v, %d blocks available, want 0", err, st.Bavail)
	}
	f.SetFault(ReadOnly)
	if err := os.Remove(path); !errors.Is(err, syscall.EROFS) {
		t.Errorf("removing on a read-only disk: %v, want EROFS", err)
	}
	if got, _ := content(t, path); got != "data" {
		t.Errorf("reading on a read-only disk: %q", got)
	}
	f.SetFault(Healthy)
	if err := os.WriteFile(filepath.Join(f.Dir, "new"), []byte("x"), 0o600); err != nil {
		t.Errorf("writing once healthy again: %v", err)
	}
}
