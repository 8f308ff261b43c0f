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
	"github.com/kubestore/kubestore/records"
)

// Update is the server's side of an update of its data directory, one
// value from its start to its stop, its steps in their order: Check,
// before etcd opens; Record, once it has, on the server's etcd client and
// the store of its records; then, while the server runs, ServeCommits
// and StopOnNewerFormat. A command that commits builds one on its own
// client (UpdateCommit).
type Update struct {
	cc      config.Completed
	dir     datadir.Dir
	version string
	// before is what the directory said before etcd opened (Check).
	before dataBefore
	// client and st are etcd's and kubestore's records on it: the
	// server's from Record on.
	client *clientv3.Client
	st     *records.Store
}

// NewUpdate is the update, if any, of cc's data directory to the
// release version (the binary's).
func NewUpdate(cc config.Completed, version string) *Update {
	return newUpdate(cc, version, nil, nil)
}

func newUpdate(cc config.Completed, version string, client *clientv3.Client, st *records.Store) *Update {
	return &Update{cc: cc, dir: datadir.Dir(cc.Config().DataDir), version: version, client: client, st: st}
}

// dataBefore is what the data directory says before etcd opens (Check).
type dataBefore struct {
	record datadir.Record
	// fresh: no kubestore has served the directory yet.
	fresh bool
}

// Check refuses, before etcd opens, data of a newer format than this
// release reads, unless --restore-on-newer-data says to restore the
// pre-update snapshot instead.
func (u *Update) Check(ctx context.Context) error {
	dir, version := u.dir, u.version
	r, ok, err := dir.RefuseNewerFormat(version)
	var refused *datadir.FormatError
	if err == nil && r.Restoring {
		// A restore of the pre-update snapshot a power cut interrupted:
		// etcd/ holds part of it. Whichever release starts finishes it,
		// as it was asked for.
		refused = &datadir.FormatError{Dir: dir, Record: r, Reader: version}
		if err := RestorePreUpdate(ctx, u.cc, refused, version); err != nil {
			return err
		}
		r, ok, err = dir.RefuseNewerFormat(version)
	}
	if errors.As(err, &refused) && u.cc.Config().Update.RestoreOnNewerData {
		if err := RestorePreUpdate(ctx, u.cc, refused, version); err != nil {
			return err
		}
		r, ok, err = dir.RefuseNewerFormat(version)
	}
	if err != nil {
		return err
	}
	u.before = dataBefore{record: r, fresh: !ok && !dir.HasEtcdData()}
	return nil
}

// Record, with etcd just opened on client, the server's, and st, the
// store of kubestore's records on it, records that this release serves
// the data: the directory's record agrees with the format the data says
// it is of (agree), then records this start (recordStart: after an
// update, with the pre-update snapshot), and a site's member records its
// release in etcd (recordRelease). The steps after it use client and st.
func (u *Update) Record(ctx context.Context, client *clientv3.Client, st *records.Store) error {
	u.client, u.st = client, st
	if err := u.agree(ctx); err != nil {
		return err
	}
	if err := u.recordStart(ctx); err != nil {
		return err
	}
	if cfg := u.cc.Config(); cfg.Site.Enabled() {
		return u.recordRelease(ctx, cfg.Site.Name())
	}
	return nil
}

// agree makes the record agree with the format the data itself says it
// is of (a new directory is of this release's Format), or refuses data
// of a newer format than this release reads.
func (u *Update) agree(ctx context.Context) error {
	format, err := DataFormat(ctx, u.st)
	if err != nil {
		return err
	}
	if u.before.fresh && format < datadir.Format {
		if err := SetDataFormat(ctx, u.st, datadir.Format); err != nil {
			return err
		}
		format = datadir.Format
	}
	return u.dir.RecordDataFormat(u.version, format)
}

// recordStart records in the data directory that this version serves
// it (u.before.record is what it said before: Check).
// After an update (a newer release than the one that last wrote it) it
// first saves the data as the older release left it, etcd just opened and
// nothing served yet, to dir.PreUpdateSnapshot: the way back for that
// release, one snapshot, replaced at the next update. Until the record
// says so, a restart takes it again. A device without room for it (the
// database's size above --etcd-reserved-disk-bytes) or a snapshot that
// fails still starts, with an error logged and no snapshot: the previous
// release reads the same format, so the A/B fallback works without one.
// The snapshot is taken through the server's client: its one endpoint is
// the embedded member, the one whose data the snapshot is.
func (u *Update) recordStart(ctx context.Context) error {
	dir, version, last := u.dir, u.version, u.before.record
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
	err = roomForSnapshot(dir, int64(u.cc.Config().Etcd.ReservedDiskBytes))
	if err == nil {
		err = u.saveSnapshot(ctx, snapshot)
	}
	if err != nil {
		klog.ErrorS(err, "Updated without a pre-update snapshot", "from", last.WrittenBy, "to", version)
		return dir.RecordStart(version, update)
	}
	update.Snapshot = snapshot
	klog.InfoS("Updated: saved the data as the previous release left it", "from", last.WrittenBy, "to", version, "snapshot", snapshot, "took", time.Since(start).Round(time.Millisecond))
	return dir.RecordStart(version, update)
}

// saveSnapshot saves the data of the server's etcd to file (saveSnapshot).
func (u *Update) saveSnapshot(ctx context.Context, file string) error {
	lg, err := etcdembed.Logger(u.cc.Config().Log)
	if err != nil {
		return err
	}
	return saveSnapshot(ctx, u.client, u.client.Endpoints()[0], lg, file, io.Discard)
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
