package maintenance

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/klog/v2"

	"github.com/kubestore/kubestore/config"
	"github.com/kubestore/kubestore/datadir"
	"github.com/kubestore/kubestore/etcdembed"
)

// The start of a server on its data directory, as an update sees it:
// before etcd opens (CheckDataFormat), then once it has (AgreeOnDataFormat,
// RecordStart). The update's commit and way back are in update.go.

// DataBefore is what serve learns of the data directory before etcd
// opens (CheckDataFormat).
type DataBefore struct {
	record datadir.Record
	// fresh: no kubestore has served the directory yet.
	fresh bool
}

// CheckDataFormat refuses, before etcd opens, data of a newer format than
// this release reads, unless --restore-on-newer-data says to restore the
// pre-update snapshot instead.
func CheckDataFormat(ctx context.Context, cc config.Completed, dir datadir.Dir, version string) (DataBefore, error) {
	r, ok, err := dir.RefuseNewerFormat(version)
	var refused *datadir.FormatError
	if err == nil && r.Restoring {
		// A restore of the pre-update snapshot a power cut interrupted:
		// etcd/ holds part of it. Whichever release starts finishes it,
		// as it was asked for.
		refused = &datadir.FormatError{Dir: dir, Record: r, Reader: version}
		if err := RestorePreUpdate(ctx, cc, refused, version); err != nil {
			return DataBefore{}, err
		}
		r, ok, err = dir.RefuseNewerFormat(version)
	}
	if errors.As(err, &refused) && cc.Config().Update.RestoreOnNewerData {
		if err := RestorePreUpdate(ctx, cc, refused, version); err != nil {
			return DataBefore{}, err
		}
		r, ok, err = dir.RefuseNewerFormat(version)
	}
	if err != nil {
		return DataBefore{}, err
	}
	return DataBefore{record: r, fresh: !ok && !dir.HasEtcdData()}, nil
}

// AgreeOnDataFormat, with etcd just opened, makes the record agree with
// the format the data itself says it is of (a new directory is of this
// release's Format), or refuses data of a newer format than this release
// reads.
func AgreeOnDataFormat(ctx context.Context, prefix string, c *clientv3.Client, dir datadir.Dir, data DataBefore, version string) error {
	format, err := DataFormat(ctx, c, prefix)
	if err != nil {
		return err
	}
	if data.fresh && format < datadir.Format {
		if err := SetDataFormat(ctx, c, prefix, datadir.Format); err != nil {
			return err
		}
		format = datadir.Format
	}
	return dir.RecordDataFormat(version, format)
}

// RecordStart records in the data directory that this version serves
// it (data.record is what it said before: CheckDataFormat).
// After an update (a newer release than the one that last wrote it) it
// first saves the data as the older release left it, etcd just opened and
// nothing served yet, to dir.PreUpdateSnapshot: the way back for that
// release, one snapshot, replaced at the next update. Until the record
// says so, a restart takes it again. A device without room for it (the
// database's size above --etcd-reserved-disk-bytes) or a snapshot that
// fails still starts, with an error logged and no snapshot: the previous
// release reads the same format, so the A/B fallback works without one.
func RecordStart(ctx context.Context, cc config.Completed, dir datadir.Dir, data DataBefore, version string) error {
	last := data.record
	if !datadir.IsUpdate(last.WrittenBy, version) {
		return dir.RecordStart(version, nil)
	}
	start := time.Now()
	update := &datadir.Update{From: last.WrittenBy, To: version, At: start.UTC()}
	snapshot := dir.PreUpdateSnapshot()
	// The previous update's snapshot is not this one's way back, and a
	// snapshot a power cut interrupted (its temporary file) is nothing.
	parts, err := filepath.Glob(filepath.Join(filepath.Dir(snapshot), "."+filepath.Base(snapshot)+".part*"))
	if err != nil {
		return err
	}
	for _, f := range append(parts, snapshot) {
		if err := os.Remove(f); err != nil && !os.IsNotExist(err) {
			return err
		}
	}
	err = roomForSnapshot(dir, int64(cc.Config().Etcd.ReservedDiskBytes))
	if err == nil {
		err = SnapshotSave(ctx, cc, snapshot, version, io.Discard)
	}
	if err != nil {
		klog.ErrorS(err, "Updated without a pre-update snapshot", "from", last.WrittenBy, "to", version)
		return dir.RecordStart(version, update)
	}
	update.Snapshot = snapshot
	klog.InfoS("Updated: saved the data as the previous release left it", "from", last.WrittenBy, "to", version, "snapshot", snapshot, "took", time.Since(start).Round(time.Millisecond))
	return dir.RecordStart(version, update)
}

// roomForSnapshot says whether the data directory's file system holds a
// snapshot of etcd's database (at most its file's size) and still keeps
// reserved bytes free.
func roomForSnapshot(dir datadir.Dir, reserved int64) error {
	db, err := os.Stat(etcdembed.DBPath(dir))
	if err != nil {
		return err
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(string(dir), &st); err != nil {
		return err
	}
	if free := int64(st.Bavail) * int64(st.Bsize); free-db.Size() < reserved {
		return fmt.Errorf("no room for a pre-update snapshot: the database takes %s and %s is free, of which --%s keeps %s",
			config.ByteSize(db.Size()), config.ByteSize(free), config.FlagEtcdReservedDiskBytes, config.ByteSize(reserved))
	}
	return nil
}
