package etcdembed

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"go.etcd.io/etcd/server/v3/storage/wal"
	"go.uber.org/zap"

	"github.com/kubestore/kubestore/datadir"
)

// finishSnapshotRename completes, before etcd starts, the rename of a
// database snapshot that a power cut undid. A member that receives a
// snapshot from its leader (a joiner catching up, a follower fallen
// behind) saves it as snap/<index>.snap.db, records it in its WAL, then
// renames it over snap/db without syncing the directory
// (serverstorage.OpenSnapshotBackend in etcd 3.7.3); closing the old
// database afterwards commits the snapshot's index into it
// (BackendHooks.OnPreCommitUnsafe). A cut that loses the rename (fsync(2)
// makes it durable only with a sync of the directory; the old database's
// own fdatasync need not carry it) leaves snap/db the old file claiming
// the snapshot's index: etcd keeps it and replays only what follows, so
// the member silently lacks what the snapshot held, or panics on a member
// it never learned of (test/e2e TestSitePowerCutOneMember found it:
// "failed to update; member unknown").
// etcd's own restart renames the file only when snap/db's index is older.
//
// snap/<index>.snap.db outlives its rename only in that case: for the
// snapshot etcd starts from (the newest the WAL records: etcd 3.7 needs
// no .snap file, whose creation the same cut may have undone;
// recoverSnapshot in etcdserver/bootstrap.go) the file is renamed into
// place and the directory synced, which is what etcd would have done. A
// .snap.db of an older snapshot stays for etcd, which removes it. The WAL
// is read only when such a file exists.
func finishSnapshotRename(dir datadir.Dir, lg *zap.Logger) error {
	member := filepath.Join(dir.Etcd(), "member")
	snapDir, walDir := filepath.Join(member, "snap"), filepath.Join(member, "wal")
	names, err := os.ReadDir(snapDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if !hasSnapshotDB(names) || !wal.Exist(walDir) {
		return nil
	}
	walSnaps, err := wal.ValidSnapshotEntries(lg, walDir)
	if err != nil {
		return fmt.Errorf("reading the snapshots etcd's WAL in %s records: %w", walDir, err)
	}
	if len(walSnaps) == 0 {
		return nil
	}
	index := walSnaps[len(walSnaps)-1].GetIndex()
	received := filepath.Join(snapDir, fmt.Sprintf("%016x.snap.db", index))
	if _, err := os.Stat(received); errors.Is(err, os.ErrNotExist) {
		return nil
	} else if err != nil {
		return err
	}
	db := filepath.Join(snapDir, "db")
	if err := os.Rename(received, db); err != nil {
		return fmt.Errorf("putting etcd's received snapshot %s in place: %w", received, err)
	}
	if err := datadir.SyncDir(snapDir); err != nil {
		return err
	}
	lg.Warn("etcd's database was the one from before a snapshot its WAL records (a power cut undid the rename): the snapshot's database is put in place",
		zap.String("snapshot", received), zap.Uint64("index", index), zap.String("db", db))
	return nil
}

// hasSnapshotDB reports whether names hold a received database snapshot.
func hasSnapshotDB(names []os.DirEntry) bool {
	for _, n := range names {
		if strings.HasSuffix(n.Name(), ".snap.db") {
			return true
		}
	}
	return false
}
