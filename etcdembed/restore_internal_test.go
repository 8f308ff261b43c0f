package etcdembed

import (
	"strconv"
	"strings"
	"testing"

	"github.com/kubestore/kubestore/config"
)

// The restored member is the one Start configures, and the numbers the
// 32-bit build depends on stay what they are: 256Mi maps 10% more there,
// a 64-bit build keeps etcd's 10 GiB.
func TestRestoreConfig(t *testing.T) {
	cfg := config.Default()
	cfg.DataDir = "/data"
	cfg.Etcd.QuotaBackendBytes = 256 << 20
	rc, err := restoreConfig(cfg, "/snap.db", 7)
	if err != nil {
		t.Fatal(err)
	}
	ec, err := embedConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}

	var peers []string
	for _, u := range ec.AdvertisePeerUrls {
		peers = append(peers, u.String())
	}
	if rc.Name != "kubestore" || rc.Name != ec.Name || rc.OutputDataDir != "/data/etcd" || rc.OutputDataDir != ec.Dir ||
		rc.InitialCluster != ec.InitialCluster || rc.InitialClusterToken != ec.InitialClusterToken ||
		strings.Join(rc.PeerURLs, ",") != strings.Join(peers, ",") {
		t.Errorf("restore identity %+v differs from the started member's: name %s, dir %s, cluster %s, token %s, peers %v",
			rc, ec.Name, ec.Dir, ec.InitialCluster, ec.InitialClusterToken, peers)
	}
	if rc.RevisionBump != 7 || !rc.MarkCompacted || rc.SnapshotPath != "/snap.db" {
		t.Errorf("restore config %+v, want bump 7, compacted, from /snap.db", rc)
	}
	if noBump, _ := restoreConfig(cfg, "/snap.db", 0); noBump.MarkCompacted {
		t.Errorf("without a bump the revision is marked compacted")
	}

	want := uint64(10 << 30)
	if strconv.IntSize == 32 {
		want = 295279001 // 256Mi + 256Mi/10
	}
	if rc.InitialMmapSize != want {
		t.Errorf("restore maps %d bytes on a %d-bit system, want %d", rc.InitialMmapSize, strconv.IntSize, want)
	}
}
