// Package maintenance holds the operator's commands on kubestore's etcd:
// defragmentation, snapshot save and snapshot restore; a site's member
// list, remove and cluster reset (members.go); the CA's rotation (ca.go;
// each server's part is package carotation); and an update's start checks
// (start.go), commit and way back (update.go), with the server's part in
// each (Update).
//
// Online commands talk to the running server's embedded etcd over the unix
// socket in its data directory (or to --etcd-servers). When no server runs
// on the data directory (its lock is free) they take the lock and start the
// embedded etcd briefly, so the WAL is replayed and what they read is
// exactly what a server would serve.
package maintenance

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/etcdutl/v3/snapshot"
	"go.uber.org/zap"
	"k8s.io/klog/v2"

	"github.com/kubestore/kubestore/config"
	"github.com/kubestore/kubestore/datadir"
	"github.com/kubestore/kubestore/etcdembed"
	"github.com/kubestore/kubestore/records"
)

// DefaultRevisionBump is how much a restore raises etcd's revision, and so
// every resourceVersion: more than the writes a device makes between a
// snapshot and its restore, so clients never see a resourceVersion go back.
const DefaultRevisionBump = 1_000_000_000

// conn is a command's etcd client on one or more members, and the store
// of kubestore's records on it.
type conn struct {
	client    *clientv3.Client
	records   *records.Store
	endpoints []string
	logger    *zap.Logger
	close     func()
	// online: a running server's etcd; otherwise one started for the
	// command.
	online bool
}

// connect reaches the etcd of cfg: --etcd-servers, the embedded etcd of a
// running server on its socket, or, when no server holds the data
// directory, the embedded etcd started for the command's duration, unless
// the directory holds a newer data format than kubestore version reads
// (the server, when one runs, checked that at its start).
func connect(ctx context.Context, cfg config.Config, version string) (*conn, error) {
	lg, err := etcdembed.Logger(cfg.Log)
	if err != nil {
		return nil, err
	}
	dir := datadir.Dir(cfg.DataDir)
	if cfg.Etcd.External() {
		return dial(cfg, etcdembed.Endpoints(dir, cfg.Etcd), lg, func() {})
	}
	if !dir.HasEtcdData() {
		return nil, fmt.Errorf("no etcd data in --%s %s", config.FlagDataDir, cfg.DataDir)
	}
	lock, err := dir.Lock()
	if errors.Is(err, datadir.ErrLocked) {
		// A server runs on the directory: use its etcd.
		c, err := dial(cfg, etcdembed.Endpoints(dir, cfg.Etcd), lg, func() {})
		if err == nil {
			c.online = true
		}
		return c, err
	}
	if err != nil {
		return nil, err
	}
	if _, _, err := dir.RefuseNewerFormat(version); err != nil {
		lock.Unlock()
		return nil, err
	}
	srv, err := etcdembed.Start(ctx, cfg)
	if err != nil {
		lock.Unlock()
		return nil, err
	}
	return dial(cfg, srv.Endpoints(), lg, func() { srv.Close(); lock.Unlock() })
}

func dial(cfg config.Config, endpoints []string, lg *zap.Logger, closeFn func()) (*conn, error) {
	kc, err := etcdembed.Dial(endpoints, cfg.Etcd, cfg.Log)
	if err != nil {
		closeFn()
		return nil, err
	}
	c := kc.Client
	// A command composes its own connection, after what it checks
	// without etcd: its client and the store of the records on it.
	return &conn{client: c, records: records.New(c, cfg.Etcd.Prefix), endpoints: endpoints, logger: lg, close: func() { c.Close(); closeFn() }}, nil
}

// Defrag defragments every etcd member of cfg, reports the database size
// before and after on w, and, when etcd raised its NOSPACE alarm and the
// database is now below its quota, disarms the alarm so that writes work
// again without a restart. Under the alarm it compacts first. version is
// the running kubestore's (the data format check).
func Defrag(ctx context.Context, cc config.Completed, version string, w io.Writer) error {
	cfg := cc.Config()
	c, err := connect(ctx, cfg, version)
	if err != nil {
		return err
	}
	defer c.close()
	if err := compactIfNoSpace(ctx, c, w); err != nil {
		return err
	}
	for _, ep := range c.endpoints {
		before, err := c.client.Status(ctx, ep)
		if err != nil {
			return fmt.Errorf("etcd %s status: %w", ep, err)
		}
		start := time.Now()
		if _, err := c.client.Defragment(ctx, ep); err != nil {
			return fmt.Errorf("defragmenting etcd %s: %w", ep, err)
		}
		after, err := c.client.Status(ctx, ep)
		if err != nil {
			return fmt.Errorf("etcd %s status: %w", ep, err)
		}
		fmt.Fprintf(w, "defragmented %s in %s: database size %s -> %s (in use %s, quota %s)\n", ep,
			time.Since(start).Round(time.Millisecond), config.ByteSize(before.DbSize), config.ByteSize(after.DbSize),
			config.ByteSize(after.DbSizeInUse), config.ByteSize(quota(cfg, after)))
	}
	return disarmNoSpace(ctx, cfg, c, w)
}

// compactIfNoSpace compacts etcd at its current revision when a NOSPACE
// alarm is armed, as etcd's maintenance guide does before a defrag. The
// server's own compactor cannot then: each of its compactions is a
// transaction that also writes compact_rev_key, which etcd refuses under
// the alarm. Without it the values of deleted objects stay and the
// database cannot get below its quota.
func compactIfNoSpace(ctx context.Context, c *conn, w io.Writer) error {
	alarms, err := c.client.AlarmList(ctx)
	if err != nil {
		return fmt.Errorf("listing etcd alarms: %w", err)
	}
	if !slices.ContainsFunc(alarms.Alarms, func(a *etcdserverpb.AlarmMember) bool { return a.Alarm == etcdserverpb.AlarmType_NOSPACE }) {
		return nil
	}
	// Any read tells the current revision.
	resp, err := c.client.Get(ctx, "compact_rev_key")
	if err != nil {
		return fmt.Errorf("reading etcd's revision: %w", err)
	}
	rev := resp.Header.Revision
	_, err = c.client.Compact(ctx, rev, clientv3.WithCompactPhysical())
	switch {
	case errors.Is(err, rpctypes.ErrCompacted):
		fmt.Fprintf(w, "etcd is already compacted at revision %d\n", rev)
	case err != nil:
		return fmt.Errorf("compacting etcd at revision %d: %w", rev, err)
	default:
		fmt.Fprintf(w, "compacted etcd at revision %d: the NOSPACE alarm stops the server's own compaction\n", rev)
	}
	return nil
}

// quota is a member's space quota: the one it reports, else the configured
// one of the embedded etcd.
func quota(cfg config.Config, st *clientv3.StatusResponse) int64 {
	if st.DbSizeQuota > 0 {
		return st.DbSizeQuota
	}
	return int64(cfg.Etcd.QuotaBackendBytes)
}

// disarmNoSpace disarms the NOSPACE alarms of members whose database is now
// below their quota.
func disarmNoSpace(ctx context.Context, cfg config.Config, c *conn, w io.Writer) error {
	alarms, err := c.client.AlarmList(ctx)
	if err != nil {
		return fmt.Errorf("listing etcd alarms: %w", err)
	}
	for _, a := range alarms.Alarms {
		if a.Alarm != etcdserverpb.AlarmType_NOSPACE {
			continue
		}
		// The member of the alarm answers its own status; with one member
		// (the embedded etcd) that is the only endpoint.
		var st *clientv3.StatusResponse
		for _, ep := range c.endpoints {
			s, err := c.client.Status(ctx, ep)
			if err == nil && s.Header.MemberId == a.MemberID {
				st = s
				break
			}
		}
		if st == nil {
			fmt.Fprintf(w, "NOSPACE alarm of etcd member %x left armed: its status is not reachable\n", a.MemberID)
			continue
		}
		if q := quota(cfg, st); q > 0 && st.DbSize >= q {
			fmt.Fprintf(w, "NOSPACE alarm left armed: the database (%s) is still not below its quota (%s); delete objects or raise --%s\n",
				config.ByteSize(st.DbSize), config.ByteSize(q), config.FlagEtcdQuotaBackendBytes)
			continue
		}
		if _, err := c.client.AlarmDisarm(ctx, (*clientv3.AlarmMember)(a)); err != nil {
			return fmt.Errorf("disarming the NOSPACE alarm: %w", err)
		}
		fmt.Fprintf(w, "disarmed the NOSPACE alarm: writes work again\n")
	}
	return nil
}

// SnapshotSave writes a consistent snapshot of etcd to file: through a
// temporary file in the same directory, synced and renamed, so file is
// either absent or complete. version is the running kubestore's (the data
// format check).
func SnapshotSave(ctx context.Context, cc config.Completed, file, version string, w io.Writer) error {
	cfg := cc.Config()
	c, err := connect(ctx, cfg, version)
	if err != nil {
		return err
	}
	defer c.close()
	ep := c.endpoints[0]
	// A snapshot is the state of one member: ask that one only.
	one, err := dial(cfg, []string{ep}, c.logger, func() {})
	if err != nil {
		return err
	}
	defer one.close()
	return saveSnapshot(ctx, one.client, ep, c.logger, file, w)
}

// saveSnapshot writes a snapshot of the etcd member client reaches, ep,
// to file (SnapshotSave) and reports it on w.
func saveSnapshot(ctx context.Context, client *clientv3.Client, ep string, lg *zap.Logger, file string, w io.Writer) error {
	tmp, err := os.CreateTemp(filepath.Dir(file), "."+filepath.Base(file)+".part*")
	if err != nil {
		return fmt.Errorf("creating the snapshot file: %w", err)
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	resp, err := client.SnapshotWithVersion(ctx)
	if err != nil {
		return fmt.Errorf("etcd %s snapshot: %w", ep, err)
	}
	defer resp.Snapshot.Close()
	n, err := io.Copy(tmp, resp.Snapshot)
	if err != nil {
		return fmt.Errorf("etcd %s snapshot: %w", ep, err)
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("writing %s: %w", file, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", file, err)
	}
	if err := os.Rename(tmp.Name(), file); err != nil {
		return err
	}
	if err := datadir.SyncDir(filepath.Dir(file)); err != nil {
		return fmt.Errorf("writing %s: %w", file, err)
	}
	st, err := snapshot.NewV3(lg).Status(file)
	if err != nil {
		return fmt.Errorf("checking %s: %w", file, err)
	}
	fmt.Fprintf(w, "saved snapshot %s: %s, revision %d, %d keys\n", file, config.ByteSize(n), st.Revision, st.TotalKey)
	return nil
}

// SnapshotRestore creates the etcd of cfg.DataDir from a snapshot file, as
// etcdutl snapshot restore does for the embedded etcd's single member. The
// revision is raised by bump and marked compacted, so resourceVersions keep
// increasing past any the old server handed out and watchers from before
// relist. The data directory must not hold etcd data yet. Its data format
// record then says that kubestore version restored it, and the format the
// data says it is of; data of a newer format than version reads is
// removed again, with an error naming the release that reads it.
func SnapshotRestore(ctx context.Context, cc config.Completed, file string, bump uint64, version string, w io.Writer) error {
	cfg := cc.Config()
	if cfg.Etcd.External() {
		return fmt.Errorf("snapshot restore is for the embedded etcd; restore an external etcd (--%s) with etcdutl", config.FlagEtcdServers)
	}
	if _, err := os.Stat(file); err != nil {
		return err
	}
	dir := datadir.Dir(cfg.DataDir)
	lock, err := dir.Lock()
	if err != nil {
		return err
	}
	defer lock.Unlock()
	format, err := restore(ctx, cfg, dir, file, bump, version)
	if err != nil {
		return err
	}
	lg, err := etcdembed.Logger(cfg.Log)
	if err != nil {
		return err
	}
	st, err := snapshot.NewV3(lg).Status(file)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "restored %s into %s: revision %d (+%d), %d keys, data format %d\n", file, cfg.DataDir, st.Revision, bump, st.TotalKey, format)
	return nil
}

// restore restores file into dir, whose lock the caller holds, and
// records the format of its data, which it returns.
func restore(ctx context.Context, cfg config.Config, dir datadir.Dir, file string, bump uint64, version string) (int, error) {
	if err := etcdembed.Restore(cfg, file, bump); err != nil {
		return 0, err
	}
	format, err := func() (int, error) {
		srv, err := etcdembed.Start(ctx, cfg)
		if err != nil {
			return 0, err
		}
		lg, err := etcdembed.Logger(cfg.Log)
		if err != nil {
			srv.Close()
			return 0, err
		}
		c, err := dial(cfg, srv.Endpoints(), lg, srv.Close)
		if err != nil {
			return 0, err
		}
		defer c.close()
		return DataFormat(ctx, c.records)
	}()
	if err == nil && format > datadir.Format {
		err = fmt.Errorf("snapshot %s holds data format %d; kubestore %s reads formats up to %d: restore it with %s", file, format, version, datadir.Format, datadir.Reader(format))
	}
	if err != nil {
		os.RemoveAll(dir.Etcd())
		return 0, err
	}
	return format, dir.RecordRestore(version, format)
}

// RestorePreUpdate is the way back of a device with nobody to type it
// (--restore-on-newer-data): when the data is of a newer format than
// version reads (refused, the FormatError), it restores the snapshot the
// newer release took before its update, the data as this release's
// format left it. The newer data is moved aside to a new
// <data-dir>/etcd.newer.<time> (an earlier one stays: a boot loop between
// the two releases keeps every copy). The caller holds dir's lock. A power cut
// at any point leaves a directory on which the next start does the same
// again, or is done.
func RestorePreUpdate(ctx context.Context, cc config.Completed, refused *datadir.FormatError, version string) error {
	cfg := cc.Config()
	dir, snap := refused.Dir, refused.Record.Snapshot
	if snap == "" {
		return fmt.Errorf("%w; --%s: the record names no pre-update snapshot to restore", refused, config.FlagRestoreOnNewerData)
	}
	if _, err := os.Stat(snap); err != nil {
		return fmt.Errorf("%w; --%s: %w", refused, config.FlagRestoreOnNewerData, err)
	}
	aside := ""
	switch {
	case refused.Record.Restoring:
		// A restore a power cut interrupted: what it wrote is nothing.
		if err := os.RemoveAll(dir.Etcd()); err != nil {
			return err
		}
	case dir.HasEtcdData():
		var err error
		if aside, err = dir.MoveEtcdAside("etcd.newer"); err != nil {
			return err
		}
	}
	if err := dir.BeginRestore(); err != nil {
		return err
	}
	format, err := restore(ctx, cfg, dir, snap, DefaultRevisionBump, version)
	if err != nil {
		return fmt.Errorf("--%s: restoring %s: %w", config.FlagRestoreOnNewerData, snap, err)
	}
	since := "the update"
	if u := refused.Record.Update; u != nil {
		since = fmt.Sprintf("the update to kubestore %s at %s", u.To, u.At.Format(time.RFC3339))
	}
	why := fmt.Sprintf("restored the pre-update snapshot %s (data format %d) because the data was of format %d, which kubestore %s does not read: every write since %s is only in the copy", snap, format, refused.Record.Format, version, since)
	if aside == "" {
		klog.InfoS("Restored the pre-update snapshot", "why", why)
		return nil
	}
	datadir.SetAside("etcd.newer", aside, why)
	return nil
}
