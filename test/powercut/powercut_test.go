//go:build linux

package powercut

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
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

func unmount(t *testing.T, f *FS) {
	t.Helper()
	if err := f.Unmount(); err != nil {
		t.Fatal(err)
	}
}

// cutAndUnmount cuts with tear, its choices made by seed, and unmounts.
func cutAndUnmount(t *testing.T, f *FS, tear Tear, seed uint64) Effect {
	t.Helper()
	e := f.CutWith(tear, rand.New(rand.NewPCG(seed, 2)))
	t.Log(e)
	unmount(t, f)
	return e
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
	// The first form of a cut, which the end-to-end tests call.
	if e := f.Cut(false, rand.New(rand.NewPCG(1, 2))); e.Tear != LoseUnsynced || !e.Acted {
		t.Errorf("Cut(false): %v, want an acting %v", e, LoseUnsynced)
	}
	unmount(t, f)

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
	cutAndUnmount(t, f, LoseUnsynced, 1)
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
	cutAndUnmount(t, f, LoseUnsynced, 1)
	if got, _ := content(t, filepath.Join(f.Real, "tree", "sub", "file")); got != "new" {
		t.Errorf("after the cut: %q, want the new tree's %q", got, "new")
	}
}

// A torn cut writes a prefix of the last unsynced write, in whole 512-byte
// sectors and short of all of it, and nothing else that was not synced:
// the synced bytes before the write stay, an earlier unsynced write in
// another file is lost. The write starts on a page boundary or inside a
// sector; either way the kept part ends on a sector boundary. (The kernel
// sends a write that starts inside a page it does not hold as two, the
// rest of that page first: the one inside a sector stays in its page, so
// that it reaches the file system as one write.)
func TestTornWriteKeepsWholeSectors(t *testing.T) {
	synced := strings.Repeat("s", 1000)
	for _, tc := range []struct {
		name      string
		off, size int64
		seed      uint64
	}{
		{"on a page boundary", pageSize, 4 * pageSize, 1},
		{"on a page boundary, another tear", pageSize, 4 * pageSize, 2},
		{"inside a sector", 1300, pageSize - 1300, 3},
		{"inside a sector, another tear", 1300, pageSize - 1300, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := make([]byte, tc.size)
			for i := range data {
				data[i] = byte('A' + i/sectorSize%26) // a sector out of place shows
			}
			f := mount(t)
			path, other := filepath.Join(f.Dir, "log"), filepath.Join(f.Dir, "other")
			write(t, path, synced, true).Close()
			write(t, other, "other", true).Close()
			syncDir(t, f.Dir)
			o := write(t, other, "", false)
			if _, err := o.WriteAt([]byte("OTHER"), 0); err != nil {
				t.Fatal(err)
			}
			o.Close()
			w := write(t, path, "", false)
			if _, err := w.WriteAt(data, tc.off); err != nil {
				t.Fatal(err)
			}
			w.Close()
			e := cutAndUnmount(t, f, TornWrite, tc.seed)

			first := tc.off / sectorSize
			sectors := int((tc.off+int64(len(data))-1)/sectorSize - first + 1)
			if !e.Acted || e.Sectors != sectors || e.SectorsKept < 1 || e.SectorsKept >= sectors {
				t.Fatalf("%v: want 1 to %d of %d sectors kept", e, sectors-1, sectors)
			}
			got, _ := content(t, filepath.Join(f.Real, "log"))
			if len(got)%sectorSize != 0 {
				t.Errorf("the torn write left %d bytes, not a whole number of sectors", len(got))
			}
			kept := (first+int64(e.SectorsKept))*sectorSize - tc.off
			want := synced + strings.Repeat("\x00", int(tc.off)-len(synced)) + string(data[:kept])
			if got != want {
				t.Errorf("after the torn write the file differs from the synced bytes and the first %d bytes of the write (%d bytes, want %d)", kept, len(got), len(want))
			}
			if got, _ := content(t, filepath.Join(f.Real, "other")); got != "other" {
				t.Errorf("the other file after the torn write: %q, want its synced %q", got, "other")
			}
		})
	}
}

// Of the last two unsynced writes on different pages, a reordered cut
// writes the later and not the earlier. A write between them on the later
// one's page makes no pair with it, and is lost too.
func TestReorderedPairKeepsTheLaterWrite(t *testing.T) {
	f := mount(t)
	path := filepath.Join(f.Dir, "log")
	synced := strings.Repeat("s", 1000)
	write(t, path, synced, true).Close()
	syncDir(t, f.Dir)
	w := write(t, path, "", false)
	for _, at := range []struct {
		data string
		off  int64
	}{{"earlier", pageSize}, {"between", 3 * pageSize}, {"later", 3*pageSize + 100}} {
		if _, err := w.WriteAt([]byte(at.data), at.off); err != nil {
			t.Fatal(err)
		}
	}
	w.Close()
	e := cutAndUnmount(t, f, ReorderedPair, 1)
	if !e.Acted {
		t.Fatalf("%v: the pair was not found", e)
	}
	want := []byte(synced + strings.Repeat("\x00", 3*pageSize+105-len(synced)))
	copy(want[3*pageSize+100:], "later")
	if got, _ := content(t, filepath.Join(f.Real, "log")); got != string(want) {
		t.Errorf("after the cut the file has the later write %v, the earlier %v, the one between %v, %d bytes; want only the later, %d bytes",
			strings.Contains(got, "later"), strings.Contains(got, "earlier"), strings.Contains(got, "between"), len(got), len(want))
	}
}

// A journaled cut keeps a prefix, in order, of the unsynced directory
// changes, never a later change without every earlier one. The files'
// data was synced but for the last file's, which comes back empty when its
// entry made it. Several seeds check prefixes of several lengths.
func TestJournaledEntriesKeepAPrefix(t *testing.T) {
	// after[k] is the directory once the first k changes reached the
	// disk, each name with its content.
	after := []map[string]string{
		{},
		{"a": "a"},                    // create a
		{"a": "a", "b": "b"},          // create b
		{"a": "a", "c": "b"},          // rename b to c
		{"a": "a", "c": "b", "d": ""}, // create d, its data not synced
		{"c": "b", "d": ""},           // remove a
	}
	lengths := map[int]bool{}
	for seed := range uint64(8) {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			f := mount(t)
			dir := filepath.Join(f.Dir, "dir")
			if err := os.Mkdir(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			syncDir(t, f.Dir)
			write(t, filepath.Join(dir, "a"), "a", true).Close()
			write(t, filepath.Join(dir, "b"), "b", true).Close()
			if err := os.Rename(filepath.Join(dir, "b"), filepath.Join(dir, "c")); err != nil {
				t.Fatal(err)
			}
			write(t, filepath.Join(dir, "d"), "d", false).Close()
			if err := os.Remove(filepath.Join(dir, "a")); err != nil {
				t.Fatal(err)
			}
			e := cutAndUnmount(t, f, JournaledEntries, seed)
			if !e.Acted || e.EntriesPending != 5 || e.EntriesKept < 1 || e.EntriesKept > 5 {
				t.Fatalf("%v: want 1 to 5 of 5 directory changes kept", e)
			}
			lengths[e.EntriesKept] = true
			entries, err := os.ReadDir(filepath.Join(f.Real, "dir"))
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			for _, entry := range entries {
				got[entry.Name()], _ = content(t, filepath.Join(f.Real, "dir", entry.Name()))
			}
			if want := after[e.EntriesKept]; !maps.Equal(got, want) {
				t.Errorf("%v: the directory holds %v, want %v", e, got, want)
			}
		})
	}
	if len(lengths) < 2 {
		t.Errorf("the seeds kept prefixes of one length only, %v: choose others", lengths)
	}
}

// A lost fsync takes back what the last file fsync wrote, and only that:
// the file holds what the fsync before it made durable, at that size, and
// an earlier fsync of another file is untouched. A directory sync after
// the last fsync flushed the device again, and then there is nothing to
// take back.
func TestLostFsyncUndoesTheLastSync(t *testing.T) {
	a := strings.Repeat("a", pageSize+100)
	b := strings.Repeat("b", 2*pageSize) // at pageSize/2: pages 0 to 2
	for _, tc := range []struct {
		name         string
		syncDirAfter bool
		acted        bool
		want         string
	}{
		{"the last sync is the file's", false, true, a},
		{"a directory sync came after it", true, false, a[:pageSize/2] + b},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := mount(t)
			path := filepath.Join(f.Dir, "file")
			write(t, filepath.Join(f.Dir, "other"), "other", true).Close()
			w := write(t, path, a, true)
			syncDir(t, f.Dir)
			if _, err := w.WriteAt([]byte(b), pageSize/2); err != nil {
				t.Fatal(err)
			}
			if err := w.Sync(); err != nil {
				t.Fatal(err)
			}
			if tc.syncDirAfter {
				syncDir(t, f.Dir)
			}
			if _, err := w.WriteAt([]byte("unsynced"), 0); err != nil {
				t.Fatal(err)
			}
			w.Close()
			e := cutAndUnmount(t, f, LostFsync, 1)
			if e.Acted != tc.acted || tc.acted && e.PagesReverted != 3 {
				t.Errorf("%v: want acted %v, 3 pages reverted", e, tc.acted)
			}
			if got, _ := content(t, filepath.Join(f.Real, "file")); got != tc.want {
				t.Errorf("after the cut the file has %d bytes, %d of them b; want %d bytes, %d b",
					len(got), strings.Count(got, "b"), len(tc.want), strings.Count(tc.want, "b"))
			}
			if got, _ := content(t, filepath.Join(f.Real, "other")); got != "other" {
				t.Errorf("the file synced earlier: %q, want %q", got, "other")
			}
		})
	}
}

// CutAtNext cuts inside the call that gives its tear material: that call
// succeeds, the next fails, and the tear acted. The operations run until
// one fails, so when the waiting goroutine arms the cut does not matter,
// and a CutAtNext that never fires fails the test at the end of its wait.
// Without material it cuts at the end of its wait, tearing nothing.
func TestCutAtNextFindsItsMoment(t *testing.T) {
	writeAt := func(w *os.File, b []byte, off int64) error {
		_, err := w.WriteAt(b, off)
		return err
	}
	record := func(i int) []byte { return fmt.Appendf(nil, "%07d\n", i) }
	for _, tc := range []struct {
		tear Tear
		// op is the i-th operation, on a synced empty file in the synced
		// directory dir.
		op func(w *os.File, dir string, i int) error
		// check looks further at the effect, after ok operations
		// succeeded and the next failed with err.
		check func(t *testing.T, f *FS, e Effect, ok int, err error)
	}{{
		tear: LoseUnsynced,
		op:   func(w *os.File, _ string, i int) error { return writeAt(w, []byte("x"), int64(i)) },
		check: func(t *testing.T, _ *FS, e Effect, _ int, _ error) {
			if e.Dropped < 1 {
				t.Errorf("%v: want a dirty page dropped", e)
			}
		},
	}, {
		tear: TornWrite,
		op: func(w *os.File, _ string, i int) error {
			return writeAt(w, bytes.Repeat([]byte("x"), 2*pageSize), int64(i)*2*pageSize)
		},
		check: func(t *testing.T, _ *FS, e Effect, _ int, _ error) {
			if e.Sectors != 16 || e.SectorsKept < 1 || e.SectorsKept >= 16 {
				t.Errorf("%v: want 1 to 15 of 16 sectors kept", e)
			}
		},
	}, {
		tear: ReorderedPair,
		op:   func(w *os.File, _ string, i int) error { return writeAt(w, []byte("x"), int64(i%2)*2*pageSize) },
	}, {
		tear: JournaledEntries,
		op:   func(_ *os.File, dir string, i int) error { return os.Mkdir(filepath.Join(dir, fmt.Sprint(i)), 0o700) },
		check: func(t *testing.T, _ *FS, e Effect, _ int, _ error) {
			if e.EntriesKept < 1 || e.EntriesKept > e.EntriesPending {
				t.Errorf("%v: want 1 to all of the pending changes kept", e)
			}
		},
	}, {
		tear: LostFsync,
		op: func(w *os.File, _ string, i int) error {
			if err := writeAt(w, record(i), int64(i*len(record(i)))); err != nil {
				return err
			}
			return w.Sync()
		},
		// The cut came right after the last fsync that succeeded, not at
		// the write after it, and took it back: the records of every
		// fsync before it are there.
		check: func(t *testing.T, f *FS, e Effect, ok int, err error) {
			if pe := (*os.PathError)(nil); !errors.As(err, &pe) || pe.Op != "write" {
				t.Errorf("the operation after the cut failed with %v, want at its write", err)
			}
			var want []byte
			for i := range ok - 1 {
				want = append(want, record(i)...)
			}
			if got, _ := content(t, filepath.Join(f.Real, "file")); got != string(want) {
				t.Errorf("%v: the file holds %d records, want %d of the %d synced", e, len(got)/len(record(0)), ok-1, ok)
			}
		},
	}} {
		t.Run(tc.tear.String(), func(t *testing.T) {
			f := mount(t)
			w := write(t, filepath.Join(f.Dir, "file"), "", true)
			defer w.Close()
			syncDir(t, f.Dir)
			done := make(chan Effect, 1)
			go func() { done <- f.CutAtNext(tc.tear, rand.New(rand.NewPCG(1, 2)), 30*time.Second) }()
			var err error
			ok := 0
			for ; err == nil; ok++ {
				err = tc.op(w, f.Dir, ok)
			}
			ok-- // the last one failed
			e := <-done
			t.Logf("%v, after %d operations", e, ok)
			if e.Tear != tc.tear || !e.Acted {
				t.Fatalf("%v: want %v to have acted", e, tc.tear)
			}
			if !errors.Is(err, syscall.EIO) {
				t.Errorf("the operation after the cut: %v, want EIO", err)
			}
			if err := tc.op(w, f.Dir, ok+1); !errors.Is(err, syscall.EIO) {
				t.Errorf("another operation after the cut: %v, want EIO", err)
			}
			if tc.check != nil {
				tc.check(t, f, e, ok, err)
			}
		})
		t.Run(tc.tear.String()+" without material", func(t *testing.T) {
			f := mount(t)
			if e := f.CutAtNext(tc.tear, rand.New(rand.NewPCG(1, 2)), 100*time.Millisecond); e.Tear != tc.tear || e.Acted {
				t.Errorf("%v: want %v, not acted", e, tc.tear)
			}
			if err := os.Mkdir(filepath.Join(f.Dir, "after"), 0o700); !errors.Is(err, syscall.EIO) {
				t.Errorf("an operation after the cut: %v, want EIO", err)
			}
		})
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

// replace writes data to path as kubestore's atomic writes do
// (datadir.WriteFileAtomic): a synced temporary file renamed over path,
// then the directory synced.
func replace(path, data string) error {
	tmp, err := os.Create(path + ".tmp")
	if err != nil {
		return err
	}
	_, err = tmp.WriteString(data)
	err = errors.Join(err, tmp.Sync(), tmp.Close(), os.Rename(path+".tmp", path))
	if err != nil {
		return err
	}
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// A file read while another process replaces it by a rename (the atomic
// write of kubestore's format record, read by a test that waits for it) is
// the old or the new content, never missing: on a disk, open resolves the
// name and opens its inode in one step. Through FUSE the kernel looks the
// name up, then opens the inode it found, which the rename may have
// orphaned in between; the file system answers ESTALE there, and the
// kernel looks the name up again (as on NFS), where ENOENT failed the read
// (TestPowerCutDuringUpdate: "open .../format: no such file or directory").
func TestReadDuringReplacementFindsTheFile(t *testing.T) {
	f := mount(t)
	file := filepath.Join(f.Dir, "format")
	write(t, file, "0", true).Close()
	stop := make(chan struct{})
	done := make(chan error)
	go func() {
		for i := 1; ; i++ {
			select {
			case <-stop:
				done <- nil
				return
			default:
			}
			if err := replace(file, fmt.Sprint(i)); err != nil {
				done <- err
				return
			}
		}
	}()
	deadline := time.Now().Add(2 * time.Second)
	reads := 0
	for ; time.Now().Before(deadline); reads++ {
		if _, err := os.ReadFile(file); err != nil {
			close(stop)
			<-done
			t.Fatalf("read %d while the file is replaced: %v", reads+1, err)
		}
	}
	close(stop)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	t.Logf("%d reads while the file was replaced", reads)
}
