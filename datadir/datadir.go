// Package datadir owns the layout of kubestore's data directory, the only
// place kubestore writes:
//
//	<data-dir>/etcd/             embedded etcd member data and its unix socket
//	<data-dir>/pki/              generated CA, serving and admin certificates (0600)
//	<data-dir>/admin.kubeconfig  kubeconfig of the admin identity
//	<data-dir>/lock              held while a server uses the directory
//	<data-dir>/format            the data format the directory holds, and who wrote it (format.go)
//	<data-dir>/pre-update.db     the data as it was before the last update (format.go)
//	<data-dir>/etcd.newer.<time>/ data of a newer format, moved aside by a way back
//	<data-dir>/etcd.<why>.<time>/ data set aside by a rejoin or a reset (removed,
//	                             log-lost, before-reset): never deleted by kubestore
package datadir

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Dir is a data directory.
type Dir string

func (d Dir) Etcd() string       { return filepath.Join(string(d), "etcd") }
func (d Dir) PKI() string        { return filepath.Join(string(d), "pki") }
func (d Dir) Kubeconfig() string { return filepath.Join(string(d), "admin.kubeconfig") }

// The files of <data-dir>/pki that etcd reads as well as kubestore: the
// site's CA and this member's peer certificate (access.PKI writes them).
func (d Dir) CACert() string   { return filepath.Join(d.PKI(), "ca.crt") }
func (d Dir) PeerCert() string { return filepath.Join(d.PKI(), "peer.crt") }
func (d Dir) PeerKey() string  { return filepath.Join(d.PKI(), "peer.key") }

// MoveEtcdAside renames <data-dir>/etcd to a new <data-dir>/<name>.<time>,
// durably, and returns its path: data kept, never deleted, when a newer
// release's data is given up or a removed member joins its site again. An
// earlier copy is never replaced: a boot loop between two releases, or a
// second failure, keeps what the first one set aside.
func (d Dir) MoveEtcdAside(name string) (string, error) {
	aside, err := d.AsidePath(name)
	if err != nil {
		return "", err
	}
	if err := os.Rename(d.Etcd(), aside); err != nil {
		return "", err
	}
	return aside, SyncDir(string(d))
}

// AsidePath is a path for a copy of the etcd data set aside as name that
// no copy has yet: <data-dir>/<name>.<UTC time>, with a counter when one
// of that second exists.
func (d Dir) AsidePath(name string) (string, error) {
	base := filepath.Join(string(d), name+"."+time.Now().UTC().Format("20060102T150405Z"))
	for i := 1; ; i++ {
		path := base
		if i > 1 {
			path = fmt.Sprintf("%s-%d", base, i)
		}
		_, err := os.Lstat(path)
		if errors.Is(err, os.ErrNotExist) {
			return path, nil
		}
		if err != nil {
			return "", err
		}
	}
}

// Aside lists the copies of the etcd data set aside as name, oldest first.
func (d Dir) Aside(name string) ([]string, error) {
	paths, err := filepath.Glob(filepath.Join(string(d), name+".*"))
	sort.Strings(paths)
	return paths, err
}

// RaftLogLost, when present, says etcd found its raft log shorter than
// what this member had acknowledged to its site (its disk lost synced
// writes): the member must rejoin wiped (site.Prepare).
func (d Dir) RaftLogLost() string { return filepath.Join(string(d), "etcd-log-lost") }

// EtcdRemoved, when present, says etcd found this member removed from its
// site: the next start with --join asks the site to take it back, even a
// founder's (site.Prepare).
func (d Dir) EtcdRemoved() string { return filepath.Join(string(d), "etcd-removed") }

// SiteJoin records how this member joined its site (etcdembed.Join).
func (d Dir) SiteJoin() string { return filepath.Join(string(d), "site-join.json") }
func (d Dir) lockFile() string { return filepath.Join(string(d), "lock") }

// HasEtcdData reports whether the directory holds an etcd member: its
// WAL, which is how etcd itself decides (wal.Exist). A member directory
// without one is a first start cut short before etcd acknowledged
// anything: etcd creates member/ and its database before the WAL, and
// starts such a member afresh. Taking it for a member made a site's joiner
// killed in that moment found a site of its own at its next start
// (TestSitePowerCutOneMember found it).
func (d Dir) HasEtcdData() bool {
	names, err := os.ReadDir(filepath.Join(d.Etcd(), "member", "wal"))
	if err != nil {
		return false
	}
	for _, n := range names {
		if !n.IsDir() && strings.HasSuffix(n.Name(), ".wal") {
			return true
		}
	}
	return false
}

// ErrLocked means another kubestore process is using the directory.
var ErrLocked = errors.New("data directory is in use by another kubestore process")

// Lock creates the directory (0700) if needed and takes an exclusive lock on
// it for the life of the process, so that two servers never share one etcd
// member; Unlock releases it. A process started in place of a kubestore
// that kept its lock across the exec (KeepAcrossExec) takes that lock
// over: it was never released.
func (d Dir) Lock() (*Lock, error) {
	if err := os.MkdirAll(string(d), 0o700); err != nil {
		return nil, fmt.Errorf("creating data directory: %w", err)
	}
	f, err := d.inheritedLock()
	if err != nil {
		return nil, err
	}
	if f == nil {
		if f, err = os.OpenFile(d.lockFile(), os.O_RDWR|os.O_CREATE, 0o600); err != nil {
			return nil, fmt.Errorf("opening data directory lock: %w", err)
		}
	}
	// On a lock inherited, flock succeeds: the open file holds it already.
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%s: %w", string(d), ErrLocked)
		}
		return nil, fmt.Errorf("locking data directory: %w", err)
	}
	return &Lock{f: f}, nil
}

// Lock is a data directory's lock this process holds.
type Lock struct{ f *os.File }

// Unlock releases the lock.
func (l *Lock) Unlock() { l.f.Close() }

// lockFDEnv names the descriptor of the data directory's lock that a
// kubestore hands to the process it starts in place of itself (exec).
const lockFDEnv = "KUBESTORE_DATA_DIR_LOCK_FD"

// KeepAcrossExec makes the lock pass to the process an exec starts in
// this one's place (a server starting itself again), so the directory is
// never unlocked between the two: a command run on it in that moment
// (kubestore ca finish --data-dir) found it free, started an etcd of its
// own on the member's data and held the server out (the model checker
// found it, issue 48). The lock is then not to be released.
func (l *Lock) KeepAcrossExec() error {
	if _, _, errno := syscall.Syscall(syscall.SYS_FCNTL, l.f.Fd(), syscall.F_SETFD, 0); errno != 0 {
		return fmt.Errorf("keeping the data directory's lock across exec: %w", errno)
	}
	return os.Setenv(lockFDEnv, strconv.Itoa(int(l.f.Fd())))
}

// inheritedLock is the lock file on d a kubestore that exec'd this process
// kept for it, or nil. The descriptor is closed on exec again, and not
// handed further.
func (d Dir) inheritedLock() (*os.File, error) {
	v, ok := os.LookupEnv(lockFDEnv)
	if !ok {
		return nil, nil
	}
	fd, err := strconv.Atoi(v)
	if err != nil || fd < 0 {
		return nil, fmt.Errorf("%s=%q: not a file descriptor", lockFDEnv, v)
	}
	// Compared before it becomes an *os.File, whose finalizer would close
	// a descriptor that is not the lock's.
	var got, want syscall.Stat_t
	if syscall.Fstat(fd, &got) != nil || syscall.Stat(d.lockFile(), &want) != nil || got.Dev != want.Dev || got.Ino != want.Ino {
		// Another directory's, or a stale variable: not this one's lock.
		return nil, nil
	}
	os.Unsetenv(lockFDEnv)
	syscall.CloseOnExec(fd)
	return os.NewFile(uintptr(fd), d.lockFile()), nil
}

// WriteFileAtomic writes data to path (0600) through a temporary file and a
// rename, so a power cut leaves either the old or the new content. A file
// that already holds data is left untouched, sparing the flash a write.
func WriteFileAtomic(path string, data []byte) error {
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, data) {
		return os.Chmod(path, 0o600)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	return SyncDir(filepath.Dir(path))
}

// SyncDir fsyncs directory dir, so that the entries made, renamed or
// removed in it survive a power cut: POSIX promises that for a new name
// only once its directory is synced, whatever was done to the file.
func SyncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return fmt.Errorf("syncing directory %s: %w", dir, err)
	}
	return nil
}
