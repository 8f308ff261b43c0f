package maintenance

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kubestore/kubestore/config"
	"github.com/kubestore/kubestore/datadir"
	"github.com/kubestore/kubestore/etcdembed"
)

// An update on a device without room for the pre-update snapshot (the
// database's size above the reserved free space) still starts: the
// previous update's snapshot and what a power cut left of one are
// dropped, and the update is recorded without one. (TestUpdateKeepsPreUpdateSnapshot
// in test/e2e takes one on a device with room.)
func TestUpdateWithoutRoomForSnapshot(t *testing.T) {
	dir := datadir.Dir(t.TempDir())
	db := etcdembed.DBPath(dir)
	if err := os.MkdirAll(filepath.Dir(db), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(db, make([]byte, 4096), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dir.PreUpdateSnapshot(), []byte("the update before"), 0o600); err != nil {
		t.Fatal(err)
	}
	// What a power cut during an earlier snapshot leaves.
	if err := os.WriteFile(filepath.Join(string(dir), ".pre-update.db.part123"), []byte("half"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := dir.RecordStart("0.1.0", &datadir.Update{From: "0.0.9", To: "0.1.0", Snapshot: dir.PreUpdateSnapshot()}); err != nil {
		t.Fatal(err)
	}
	c := config.Default()
	c.DataDir = string(dir)
	c.Etcd.ReservedDiskBytes = config.ByteSize(1 << 60)
	cc, err := c.Complete()
	if err != nil {
		t.Fatal(err)
	}
	if err := roomForSnapshot(dir, 1<<60); err == nil || !strings.Contains(err.Error(), config.FlagEtcdReservedDiskBytes) {
		t.Errorf("roomForSnapshot with all the disk reserved = %v, want an error naming --%s", err, config.FlagEtcdReservedDiskBytes)
	}
	if err := roomForSnapshot(dir, 0); err != nil {
		t.Errorf("roomForSnapshot of a 4 KiB database, nothing reserved: %v", err)
	}

	last, _, err := dir.RefuseNewerFormat("0.2.0")
	if err != nil {
		t.Fatal(err)
	}
	update := NewUpdate(cc, "0.2.0")
	update.before = dataBefore{record: last}
	if err := update.recordStart(t.Context()); err != nil {
		t.Fatalf("an update without room: %v, want a start", err)
	}
	if _, err := os.Stat(dir.PreUpdateSnapshot()); !os.IsNotExist(err) {
		t.Errorf("the previous update's snapshot is still there: %v", err)
	}
	b, err := os.ReadFile(filepath.Join(string(dir), "format"))
	if err != nil {
		t.Fatal(err)
	}
	var r map[string]any
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	u, _ := r["update"].(map[string]any)
	if r["writtenBy"] != "0.2.0" || r["snapshot"] != nil || u["from"] != "0.1.0" || u["to"] != "0.2.0" {
		t.Errorf("record after an update without room: %s", b)
	}
	if parts, _ := filepath.Glob(filepath.Join(string(dir), ".pre-update.db.part*")); len(parts) > 0 {
		t.Errorf("partial snapshot files left: %v", parts)
	}
}
