package etcdembed

import (
	"fmt"
	"os"
	"strconv"

	"go.etcd.io/etcd/etcdutl/v3/snapshot"
	"go.etcd.io/etcd/server/v3/storage/backend"

	"github.com/kubestore/kubestore/config"
	"github.com/kubestore/kubestore/datadir"
)

// Restore creates the embedded member of dir from a snapshot file, as
// etcdutl snapshot restore does, with the identity Start gives the member.
// The revision is raised by bump and, when bump is not 0, marked compacted.
// The caller holds dir's lock. <data-dir>/etcd must be absent or empty; on
// error what Restore wrote there is removed.
func Restore(c config.Config, file string, bump uint64) error {
	dir := datadir.Dir(c.DataDir)
	if entries, err := os.ReadDir(dir.Etcd()); err == nil && len(entries) > 0 {
		return fmt.Errorf("--%s %s already holds etcd data in %s: restore into a fresh data directory", config.FlagDataDir, string(dir), dir.Etcd())
	}
	lg, err := Logger(c.Log)
	if err != nil {
		return err
	}
	rc, err := restoreConfig(c, file, bump)
	if err != nil {
		return err
	}
	defer boundRevisionBumpMmap(rc.InitialMmapSize)()
	if err := snapshot.NewV3(lg).Restore(rc); err != nil {
		os.RemoveAll(dir.Etcd())
		return fmt.Errorf("restoring %s: %w", file, err)
	}
	if err := os.Remove(dir.SiteJoin()); err != nil && !os.IsNotExist(err) {
		return err
	}
	return os.Chmod(dir.Etcd(), 0o700)
}

// restoreConfig is the member of embedConfig, restored from file.
func restoreConfig(c config.Config, file string, bump uint64) (snapshot.RestoreConfig, error) {
	ec, err := embedConfig(c)
	if err != nil {
		return snapshot.RestoreConfig{}, err
	}
	// A restored member is alone in a new cluster: a site's member that
	// had joined another founds a new site, which the others join again.
	ec.InitialCluster = ec.InitialClusterFromName(ec.Name)
	peers := make([]string, 0, len(ec.AdvertisePeerUrls))
	for _, u := range ec.AdvertisePeerUrls {
		peers = append(peers, u.String())
	}
	return snapshot.RestoreConfig{
		SnapshotPath:        file,
		Name:                ec.Name,
		OutputDataDir:       ec.Dir,
		PeerURLs:            peers,
		InitialCluster:      ec.InitialCluster,
		InitialClusterToken: ec.InitialClusterToken,
		InitialMmapSize:     restoreMmapSize(c.Etcd.QuotaBackendBytes),
		RevisionBump:        bump,
		MarkCompacted:       bump > 0,
	}, nil
}

// restoreMmapSize is how much of the database a restore maps: on a 32-bit
// system what the server maps for the quota, 10% over it, since etcd's
// default (backend.InitialMmapSize, 10 GiB) does not fit the address space;
// elsewhere etcd's default, as etcdutl uses.
//
// etcdutl v3.7.3 opens the database once more for the revision bump
// (modifyLatestRevision) without this size, at backend.InitialMmapSize; see
// boundRevisionBumpMmap.
func restoreMmapSize(quota config.ByteSize) uint64 {
	if strconv.IntSize == 32 && quota > 0 {
		return uint64(quota) + uint64(quota)/10
	}
	return backend.InitialMmapSize
}

// boundRevisionBumpMmap makes the one step of a restore that ignores
// RestoreConfig.InitialMmapSize — etcdutl v3.7.3's modifyLatestRevision
// opens the database with backend.NewDefaultBackend, which maps
// backend.InitialMmapSize (10 GiB) — map size instead, on a 32-bit system,
// and returns the function that puts etcd's value back. Without it the
// 10 GiB only works there because its conversion to int wraps negative and
// bbolt then ignores it. Restore is an offline command with no server in
// the process, so for its duration nothing else reads the variable; a
// 64-bit system keeps etcd's default and the variable is not touched.
func boundRevisionBumpMmap(size uint64) (undo func()) {
	if strconv.IntSize != 32 {
		return func() {}
	}
	old := backend.InitialMmapSize
	backend.InitialMmapSize = size
	return func() { backend.InitialMmapSize = old }
}
