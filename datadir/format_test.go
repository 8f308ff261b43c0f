package datadir_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kubestore/kubestore/datadir"
)

func readFields(t *testing.T, dir string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "format"))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func writeRecord(t *testing.T, dir, content string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, "format"), []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// start is what a server does with the record: refuse a newer format,
// then record itself.
func start(d datadir.Dir, version string) error {
	if _, _, err := d.RefuseNewerFormat(version); err != nil {
		return err
	}
	return d.RecordStart(version, nil)
}

// A server records its version and format; a restart of the same version
// writes nothing; a later version of the same format keeps the fields it
// does not know; an update records itself and its snapshot.
func TestRecordStart(t *testing.T) {
	dir := t.TempDir()
	d := datadir.Dir(dir)
	if err := start(d, "0.1.0"); err != nil {
		t.Fatal(err)
	}
	r, ok, err := d.RefuseNewerFormat("0.1.0")
	if err != nil || !ok || r != (datadir.Record{Format: datadir.Format, WrittenBy: "0.1.0", OldestReader: "0.1.0"}) {
		t.Fatalf("record after the first start = %+v, %v, %v", r, ok, err)
	}
	path := filepath.Join(dir, "format")
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(path, old, old); err != nil {
		t.Fatal(err)
	}
	if err := start(d, "0.1.0"); err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(path); !st.ModTime().Equal(old) {
		t.Error("a restart of the same version rewrote the record")
	}

	writeRecord(t, dir, `{"format":1,"writtenBy":"0.4.0","oldestReader":"0.1.0","update":{"from":"0.3.0"},"snapshot":"/data/pre-update.db"}`)
	if err := start(d, "0.2.0"); err != nil {
		t.Fatal(err)
	}
	m := readFields(t, dir)
	if m["writtenBy"] != "0.2.0" || m["update"] == nil || m["snapshot"] != "/data/pre-update.db" {
		t.Errorf("record after an older release of the same format started: %v; want writtenBy 0.2.0 and the other fields kept", m)
	}

	at := time.Date(2026, 11, 26, 8, 0, 0, 0, time.UTC)
	if err := d.RecordStart("0.3.0", &datadir.Update{From: "0.2.0", To: "0.3.0", At: at, Snapshot: d.PreUpdateSnapshot()}); err != nil {
		t.Fatal(err)
	}
	m = readFields(t, dir)
	u, _ := m["update"].(map[string]any)
	if m["writtenBy"] != "0.3.0" || m["snapshot"] != d.PreUpdateSnapshot() || u["from"] != "0.2.0" || u["to"] != "0.3.0" || u["at"] != "2026-11-26T08:00:00Z" {
		t.Errorf("record after an update: %v", m)
	}
}

func TestIsUpdate(t *testing.T) {
	for _, tc := range []struct {
		from, to string
		want     bool
	}{
		{"0.1.0", "0.2.0", true},
		{"0.1.0-dev+abc", "0.1.0", true},
		{"0.1.0", "0.1.1-dev+abc", true},
		{"0.2.0", "0.1.0", false},
		{"0.1.0", "0.1.0", false},
		{"0.1.0-dev+abc", "0.1.0-dev+def", false},
		{"", "0.1.0", false},
		{"a287bf5-dirty", "0.1.0", false},
		{"0.1.0", "0.0.0-dev", false},
	} {
		if got := datadir.IsUpdate(tc.from, tc.to); got != tc.want {
			t.Errorf("IsUpdate(%q, %q) = %v, want %v", tc.from, tc.to, got, tc.want)
		}
	}
}

// Data of a newer format is refused, by the server and the maintenance
// commands alike, with one line that names the format, who wrote it, the
// oldest release that reads it and the way back; the record is left as it
// was.
func TestRefusesNewerFormat(t *testing.T) {
	for _, tc := range []struct {
		name, record string
		want         []string
	}{
		{"without snapshot", `{"format":2,"writtenBy":"0.5.0","oldestReader":"0.5.0"}`,
			[]string{"data format 2", "written by kubestore 0.5.0", "readable from kubestore 0.5.0", "kubestore 0.1.0 reads formats up to 1",
				"start kubestore 0.5.0 or newer", "kubestore snapshot restore --data-dir", " FILE"}},
		{"with the pre-update snapshot", `{"format":2,"writtenBy":"0.5.0","oldestReader":"0.5.0","snapshot":"/data/pre-update.db"}`,
			[]string{"data format 2", "kubestore snapshot restore --data-dir", "/data/pre-update.db"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			d := datadir.Dir(dir)
			writeRecord(t, dir, tc.record)
			for name, check := range map[string]func(string) error{"start": func(v string) error { return start(d, v) },
				"RefuseNewerFormat": func(v string) error { _, _, err := d.RefuseNewerFormat(v); return err }} {
				err := check("0.1.0")
				var fe *datadir.FormatError
				if !errors.As(err, &fe) {
					t.Fatalf("%s = %v, want a FormatError", name, err)
				}
				msg := err.Error()
				if strings.Contains(msg, "\n") {
					t.Errorf("%s: more than one line: %q", name, msg)
				}
				for _, w := range append(tc.want, d.Etcd()) {
					if !strings.Contains(msg, w) {
						t.Errorf("%s: %q lacks %q", name, msg, w)
					}
				}
			}
			if b, _ := os.ReadFile(filepath.Join(dir, "format")); string(b) != tc.record {
				t.Errorf("the refusal changed the record: %s", b)
			}
		})
	}
}

// A directory without a record (new, or of a release before records)
// holds format 1; a record that is not one is refused, naming the file;
// a restore makes the data this release's format and spends the snapshot.
func TestFormatRecordEdges(t *testing.T) {
	dir := t.TempDir()
	d := datadir.Dir(dir)
	if _, ok, err := d.RefuseNewerFormat("0.1.0"); ok || err != nil {
		t.Fatalf("RefuseNewerFormat without a record: %v, %v", ok, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "format")); !errors.Is(err, os.ErrNotExist) {
		t.Error("RefuseNewerFormat wrote a record")
	}
	for _, bad := range []string{"", "{", `{"format":0}`, `["format"]`} {
		writeRecord(t, dir, bad)
		if err := start(d, "0.1.0"); err == nil || !strings.Contains(err.Error(), filepath.Join(dir, "format")) {
			t.Errorf("a start with record %q = %v, want an error naming the file", bad, err)
		}
	}
	writeRecord(t, dir, `{"format":2,"writtenBy":"0.5.0","oldestReader":"0.5.0","snapshot":"/data/pre-update.db","update":{},"later":true}`)
	if err := d.RecordRestore("0.1.0", 1); err != nil {
		t.Fatal(err)
	}
	m := readFields(t, dir)
	if m["format"] != float64(datadir.Format) || m["writtenBy"] != "0.1.0" || m["snapshot"] != nil || m["update"] != nil || m["later"] != true {
		t.Errorf("record after a restore: %v; want this format, written by 0.1.0, no update or snapshot, other fields kept", m)
	}
	if err := start(d, "0.1.0"); err != nil {
		t.Errorf("a start after the restore: %v", err)
	}
}
