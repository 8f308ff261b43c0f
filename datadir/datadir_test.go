package datadir_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kubestore/kubestore/datadir"
)

func TestLayout(t *testing.T) {
	d := datadir.Dir("/var/lib/kubestore")
	for _, tc := range []struct{ name, got, want string }{
		{"etcd", d.Etcd(), "/var/lib/kubestore/etcd"},
		{"pki", d.PKI(), "/var/lib/kubestore/pki"},
		{"kubeconfig", d.Kubeconfig(), "/var/lib/kubestore/admin.kubeconfig"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.got != tc.want {
				t.Errorf("got %q, want %q", tc.got, tc.want)
			}
		})
	}
}

func lock(t *testing.T, d datadir.Dir) func() {
	t.Helper()
	l, err := d.Lock()
	if err != nil {
		t.Fatalf("Lock(%s): %v", d, err)
	}
	return l.Unlock
}

func TestLockCreatesPrivateDir(t *testing.T) {
	cases := []struct {
		name string
		path func(base string) string
	}{
		{"new dir", func(base string) string { return filepath.Join(base, "data") }},
		{"new nested dir", func(base string) string { return filepath.Join(base, "a", "b", "data") }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := datadir.Dir(tc.path(t.TempDir()))
			unlock := lock(t, d)
			defer unlock()
			fi, err := os.Stat(string(d))
			if err != nil {
				t.Fatal(err)
			}
			if !fi.IsDir() || fi.Mode().Perm() != 0o700 {
				t.Errorf("%s has mode %v, want a directory with 0700", d, fi.Mode())
			}
		})
	}
	t.Run("existing dir is kept", func(t *testing.T) {
		d := datadir.Dir(t.TempDir())
		marker := filepath.Join(string(d), "keep")
		if err := os.WriteFile(marker, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
		lock(t, d)()
		if _, err := os.Stat(marker); err != nil {
			t.Errorf("Lock lost existing content: %v", err)
		}
	})
	t.Run("path is a file", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "file")
		if err := os.WriteFile(path, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if l, err := datadir.Dir(path).Lock(); err == nil {
			l.Unlock()
			t.Fatal("Lock on a regular file succeeded")
		}
	})
}

func TestLockIsExclusive(t *testing.T) {
	d := datadir.Dir(filepath.Join(t.TempDir(), "data"))
	unlock := lock(t, d)

	for i := range 2 {
		_, err := d.Lock()
		if !errors.Is(err, datadir.ErrLocked) {
			t.Fatalf("second Lock (try %d) = %v, want ErrLocked", i, err)
		}
		if !strings.Contains(err.Error(), string(d)) {
			t.Errorf("error %q does not name the directory %s", err, d)
		}
	}

	unlock()
	unlock2 := lock(t, d)
	if _, err := d.Lock(); !errors.Is(err, datadir.ErrLocked) {
		t.Errorf("Lock after re-locking = %v, want ErrLocked", err)
	}
	unlock2()
	lock(t, d)()
}

// TestLockAcrossProcesses runs Lock in a child process, as a second
// kubestore would.
func TestLockAcrossProcesses(t *testing.T) {
	if dir := os.Getenv("DATADIR_TEST_LOCK_CHILD"); dir != "" {
		l, err := datadir.Dir(dir).Lock()
		switch {
		case errors.Is(err, datadir.ErrLocked):
			os.Exit(3)
		case err != nil:
			os.Exit(4)
		}
		l.Unlock()
		os.Exit(0)
	}

	d := datadir.Dir(filepath.Join(t.TempDir(), "data"))
	child := func() int {
		t.Helper()
		cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestLockAcrossProcesses$")
		cmd.Env = append(os.Environ(), "DATADIR_TEST_LOCK_CHILD="+string(d))
		err := cmd.Run()
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return exit.ExitCode()
		}
		if err != nil {
			t.Fatalf("running the child: %v", err)
		}
		return 0
	}

	unlock := lock(t, d)
	if code := child(); code != 3 {
		t.Errorf("child Lock while the parent holds it exited %d, want 3 (ErrLocked)", code)
	}
	unlock()
	if code := child(); code != 0 {
		t.Errorf("child Lock after the parent released it exited %d, want 0", code)
	}
}

// A server that starts itself again (exec) keeps the directory locked all
// along: a command that tries the lock meanwhile finds it taken at every
// try, and the new process holds it, then releases it.
func TestLockKeptAcrossExec(t *testing.T) {
	switch os.Getenv("DATADIR_TEST_EXEC") {
	case "before":
		d := datadir.Dir(os.Getenv("DATADIR_TEST_DIR"))
		l, err := d.Lock()
		if err != nil {
			os.Exit(4)
		}
		if err := l.KeepAcrossExec(); err != nil {
			os.Exit(5)
		}
		os.Stdout.WriteString("exec\n")
		time.Sleep(100 * time.Millisecond) // the parent is trying the lock
		os.Setenv("DATADIR_TEST_EXEC", "after")
		syscall.Exec(os.Args[0], os.Args, os.Environ())
		os.Exit(6)
	case "after":
		l, err := datadir.Dir(os.Getenv("DATADIR_TEST_DIR")).Lock()
		if err != nil {
			os.Stdout.WriteString(err.Error() + "\n")
			os.Exit(7)
		}
		if os.Getenv("KUBESTORE_DATA_DIR_LOCK_FD") != "" {
			os.Exit(8) // handed on to whatever this process starts
		}
		os.Stdout.WriteString("held\n")
		time.Sleep(200 * time.Millisecond) // the parent is trying the lock
		l.Unlock()
		os.Exit(0)
	}

	d := datadir.Dir(filepath.Join(t.TempDir(), "data"))
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestLockKeptAcrossExec$")
	cmd.Env = append(os.Environ(), "DATADIR_TEST_EXEC=before", "DATADIR_TEST_DIR="+string(d))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string)
	go func() {
		defer close(lines)
		buf := make([]byte, 256)
		var acc string
		for {
			n, err := out.Read(buf)
			acc += string(buf[:n])
			for strings.Contains(acc, "\n") {
				line, rest, _ := strings.Cut(acc, "\n")
				lines <- line
				acc = rest
			}
			if err != nil {
				return
			}
		}
	}()
	if l := <-lines; l != "exec" {
		t.Fatalf("the child said %q before its exec", l)
	}
	// From before the exec until the new process says it holds the lock,
	// every try finds it taken.
	tries := 0
	for held := false; !held; {
		select {
		case l := <-lines:
			if l != "held" {
				t.Fatalf("the process after the exec: %q", l)
			}
			held = true
		default:
		}
		if l, err := d.Lock(); err == nil {
			l.Unlock()
			t.Fatalf("the lock was free during the exec, after %d tries", tries)
		} else if !errors.Is(err, datadir.ErrLocked) {
			t.Fatal(err)
		}
		tries++
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the child: %v", err)
	}
	lock(t, d)()
	t.Logf("%d tries found the lock taken", tries)
}

func stat(t *testing.T, path string) (os.FileInfo, *syscall.Stat_t) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi, fi.Sys().(*syscall.Stat_t)
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// noTemporaries fails if dir holds anything but want.
func noTemporaries(t *testing.T, dir string, want ...string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if strings.Join(names, ",") != strings.Join(want, ",") {
		t.Errorf("%s holds %q, want %q", dir, names, want)
	}
}

func TestWriteFileAtomic(t *testing.T) {
	cases := []struct {
		name     string
		old      *string     // existing content, nil for none
		oldMode  os.FileMode // of the existing file
		data     string
		replaced bool // a new inode is expected
	}{
		{"new file", nil, 0, "hello", true},
		{"new empty file", nil, 0, "", true},
		{"different content", ptr("old"), 0o600, "new", true},
		{"shorter content", ptr("a longer old content"), 0o600, "x", true},
		{"different content of a world-readable file", ptr("old"), 0o644, "new", true},
		{"identical content", ptr("same"), 0o600, "same", false},
		{"identical empty content", ptr(""), 0o600, "", false},
		{"identical content of a world-readable file", ptr("same"), 0o644, "same", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "admin.kubeconfig")
			var before *syscall.Stat_t
			var beforeMtime time.Time
			if tc.old != nil {
				if err := os.WriteFile(path, []byte(*tc.old), tc.oldMode); err != nil {
					t.Fatal(err)
				}
				if err := os.Chmod(path, tc.oldMode); err != nil {
					t.Fatal(err)
				}
				// An old mtime, so that any rewrite shows.
				beforeMtime = time.Now().Add(-time.Hour).Truncate(time.Second)
				if err := os.Chtimes(path, beforeMtime, beforeMtime); err != nil {
					t.Fatal(err)
				}
				_, before = stat(t, path)
			}

			if err := datadir.WriteFileAtomic(path, []byte(tc.data)); err != nil {
				t.Fatalf("WriteFileAtomic: %v", err)
			}

			if got := readFile(t, path); got != tc.data {
				t.Errorf("content %q, want %q", got, tc.data)
			}
			fi, after := stat(t, path)
			noTemporaries(t, dir, "admin.kubeconfig")
			if !tc.replaced {
				if after.Ino != before.Ino || !fi.ModTime().Equal(beforeMtime) {
					t.Errorf("identical content was rewritten: inode %d -> %d, mtime %v -> %v", before.Ino, after.Ino, beforeMtime, fi.ModTime())
				}
				return
			}
			if fi.Mode().Perm() != 0o600 {
				t.Errorf("mode %v, want 0600", fi.Mode().Perm())
			}
			if before != nil && after.Ino == before.Ino {
				t.Errorf("file was changed in place (inode %d), want a rename of a new file", after.Ino)
			}
		})
	}
}

func TestWriteFileAtomicSequence(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	for i, data := range []string{"one", "two", "two", "three", ""} {
		if err := datadir.WriteFileAtomic(path, []byte(data)); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
		if got := readFile(t, path); got != data {
			t.Fatalf("after write %d: %q, want %q", i, got, data)
		}
	}
	noTemporaries(t, dir, "f")
}

func TestWriteFileAtomicMissingDir(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "absent", "f")
	if err := datadir.WriteFileAtomic(path, []byte("x")); err == nil {
		t.Fatal("WriteFileAtomic into a missing directory succeeded")
	}
	noTemporaries(t, dir)
}

func ptr(s string) *string { return &s }

// Data set aside is never replaced: two copies set aside under one name,
// within one second, are both kept (an A/B boot loop, a second failure).
func TestMoveEtcdAsideKeepsEveryCopy(t *testing.T) {
	d := datadir.Dir(t.TempDir())
	for i := range 3 {
		if err := os.MkdirAll(filepath.Join(d.Etcd(), "member"), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d.Etcd(), "member", "n"), []byte{byte('0' + i)}, 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := d.MoveEtcdAside("etcd.newer"); err != nil {
			t.Fatal(err)
		}
	}
	paths, err := d.Aside("etcd.newer")
	if err != nil || len(paths) != 3 {
		t.Fatalf("copies set aside: %v %v, want 3", paths, err)
	}
	seen := map[string]bool{}
	for _, p := range paths {
		data, err := os.ReadFile(filepath.Join(p, "member", "n"))
		if err != nil {
			t.Fatal(err)
		}
		seen[string(data)] = true
	}
	if len(seen) != 3 {
		t.Errorf("the copies hold %v, want each of the three", seen)
	}
}

// A member directory is etcd's data only once it holds a WAL, as etcd
// decides: a first start killed before etcd created the WAL left member/
// and its database, and etcd starts such a member afresh.
func TestHasEtcdDataIsTheWAL(t *testing.T) {
	d := datadir.Dir(t.TempDir())
	if d.HasEtcdData() {
		t.Error("an empty directory holds etcd data")
	}
	snap := filepath.Join(d.Etcd(), "member", "snap")
	if err := os.MkdirAll(snap, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(snap, "db"), []byte("bolt"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(d.Etcd(), "member", "wal.tmp"), 0o700); err != nil {
		t.Fatal(err)
	}
	if d.HasEtcdData() {
		t.Error("member/ with a database and no WAL holds etcd data: a joiner cut there founds a site of its own")
	}
	wal := filepath.Join(d.Etcd(), "member", "wal")
	if err := os.MkdirAll(wal, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(wal, "0000000000000000-0000000000000000.wal"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if !d.HasEtcdData() {
		t.Error("a member with a WAL holds no etcd data")
	}
}
