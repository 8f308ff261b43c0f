package etcdembed

import (
	"fmt"
	"path/filepath"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/kubestore/kubestore/datadir"
)

// syncSnapDir fsyncs the member's snap directory whenever etcd adds,
// renames or removes a name in it, until stop is closed. etcd writes each
// raft snapshot file with a sync of the file but not of the directory, and
// an online defrag renames the new database over the old without one; its
// WAL directory, where it purges old segments, it does sync. Without this
// a power cut could keep the purge of WAL segments and drop the snapshot
// that replaced them, or bring back the database from before a defrag
// (docs/RELIABILITY.md). It costs one directory sync per raft snapshot
// (--etcd-snapshot-count entries), per purge and per defrag.
func syncSnapDir(dir datadir.Dir, lg *zap.Logger, stop <-chan struct{}) (done <-chan struct{}, err error) {
	snap := filepath.Join(dir.Etcd(), "member", "snap")
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("watching %s: %w", snap, err)
	}
	if _, err := unix.InotifyAddWatch(fd, snap, unix.IN_CLOSE_WRITE|unix.IN_MOVED_TO|unix.IN_MOVED_FROM|unix.IN_CREATE|unix.IN_DELETE); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("watching %s: %w", snap, err)
	}
	// A pipe wakes the poll below when stop is closed.
	var wake [2]int
	if err := unix.Pipe2(wake[:], unix.O_CLOEXEC); err != nil {
		unix.Close(fd)
		return nil, err
	}
	ended := make(chan struct{})
	go func() {
		<-stop
		unix.Write(wake[1], []byte{0})
	}()
	go func() {
		defer close(ended)
		defer unix.Close(fd)
		defer unix.Close(wake[0])
		defer unix.Close(wake[1])
		buf := make([]byte, 4096)
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}, {Fd: int32(wake[0]), Events: unix.POLLIN}}
		for {
			if _, err := unix.Poll(fds, -1); err != nil && err != unix.EINTR {
				return
			}
			if fds[1].Revents != 0 {
				return
			}
			// Drain every event queued so far: one sync covers them all.
			changed := false
			for {
				n, err := unix.Read(fd, buf)
				if n <= 0 || err != nil {
					break
				}
				changed = true
			}
			if changed {
				if err := datadir.SyncDir(snap); err != nil {
					lg.Error("a power cut may lose etcd's latest snapshot", zap.Error(err))
				}
			}
		}
	}()
	return ended, nil
}
