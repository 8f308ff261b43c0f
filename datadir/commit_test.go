package datadir

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// raiseFormat makes this test's kubestore one of format 2, first read by
// release 0.2.0, as a build with a simulated format is.
func raiseFormat(t *testing.T) {
	t.Helper()
	Format, formatSince[2] = 2, "0.2.0"
	t.Cleanup(func() { Format = 1; delete(formatSince, 2) })
}

func mustRecord(t *testing.T, d Dir) Record {
	t.Helper()
	r, ok, err := d.Record()
	if err != nil || !ok {
		t.Fatalf("reading the record: %v, %v", ok, err)
	}
	return r
}

// An update to a release of a newer format is on trial: the data keeps
// the older format, readable by the release it came from, until the
// commit, whose first step (the commit point) makes it the newer one with
// the migration named, and whose last drops the migration and marks the
// update committed. An older release refuses the data from the commit
// point on.
func TestTrialAndCommit(t *testing.T) {
	d := Dir(t.TempDir())
	if err := d.RecordStart("0.1.0", nil); err != nil {
		t.Fatal(err)
	}
	raiseFormat(t)
	if err := d.RecordStart("0.2.0", &Update{From: "0.1.0", To: "0.2.0", At: time.Now()}); err != nil {
		t.Fatal(err)
	}
	r := mustRecord(t, d)
	if r.Format != 1 || r.OldestReader != "0.1.0" || !r.OnTrial("0.2.0") {
		t.Fatalf("record of the update on trial = %+v; want format 1, readable from 0.1.0, on trial for 0.2.0", r)
	}
	// The previous release starts on the trial's data: an A/B fallback.
	Format = 1
	if _, _, err := d.RefuseNewerFormat("0.1.0"); err != nil {
		t.Fatalf("the previous release on the trial's data: %v", err)
	}
	Format = 2

	m, err := d.BeginCommit("0.2.0")
	if err != nil || m == nil || m.From != 1 || m.To != 2 {
		t.Fatalf("BeginCommit = %+v, %v; want the migration from 1 to 2", m, err)
	}
	r = mustRecord(t, d)
	if r.Format != 2 || r.OldestReader != "0.2.0" || r.Migration == nil || !r.OnTrial("0.2.0") {
		t.Fatalf("record at the commit point = %+v; want format 2 with its migration", r)
	}
	again, err := d.BeginCommit("0.2.0")
	if err != nil || again == nil || !again.At.Equal(m.At) {
		t.Errorf("BeginCommit of a commit under way = %+v, %v; want the same migration", again, err)
	}
	// The data as the migration converts it is what the record says.
	if err := d.RecordDataFormat("0.2.0", 1); err != nil || mustRecord(t, d).Format != 2 {
		t.Errorf("RecordDataFormat during a commit changed the record (%v)", err)
	}
	Format = 1
	var refused *FormatError
	if _, _, err := d.RefuseNewerFormat("0.1.0"); !errors.As(err, &refused) {
		t.Errorf("the previous release after the commit point: %v; want a FormatError", err)
	}
	Format = 2

	if err := d.EndCommit("0.2.0"); err != nil {
		t.Fatal(err)
	}
	r = mustRecord(t, d)
	if r.Format != 2 || r.Migration != nil || r.Update == nil || r.Update.Committed == nil || r.OnTrial("0.2.0") {
		t.Fatalf("record after the commit = %+v (update %+v); want format 2, committed", r, r.Update)
	}
	if m, err := d.BeginCommit("0.2.0"); err != nil || m != nil {
		t.Errorf("BeginCommit after the commit = %+v, %v; want nothing to convert", m, err)
	}
}

// The data's own record of its format wins over the directory's when no
// commit is under way (a restore, a lost record), and data of a newer
// format than the release reads is refused with the one line, naming the
// release that reads it.
func TestRecordDataFormat(t *testing.T) {
	d := Dir(t.TempDir())
	if err := d.RecordStart("0.1.0", nil); err != nil {
		t.Fatal(err)
	}
	err := d.RecordDataFormat("0.1.0", 3)
	var refused *FormatError
	if !errors.As(err, &refused) || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), "data format 3") || !strings.Contains(err.Error(), "a newer kubestore") {
		t.Errorf("data of format 3 under a release of format 1: %v; want the one-line refusal", err)
	}
	if r := mustRecord(t, d); r.Format != 1 {
		t.Errorf("a refusal changed the record: %+v", r)
	}
	raiseFormat(t)
	if err := d.RecordDataFormat("0.2.0", 2); err != nil {
		t.Fatal(err)
	}
	if r := mustRecord(t, d); r.Format != 2 || r.OldestReader != "0.2.0" || r.WrittenBy != "0.2.0" {
		t.Errorf("record after the data said format 2: %+v", r)
	}
}

// A restore of the pre-update snapshot records its intent first, so that
// a power cut in it is seen; the restore's record drops it with the
// update, the snapshot and any migration.
func TestRestoreRecords(t *testing.T) {
	d := Dir(t.TempDir())
	raiseFormat(t)
	if err := d.RecordStart("0.2.0", &Update{From: "0.1.0", To: "0.2.0", Snapshot: d.PreUpdateSnapshot()}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.BeginCommit("0.2.0"); err != nil {
		t.Fatal(err)
	}
	if err := d.BeginRestore(); err != nil {
		t.Fatal(err)
	}
	if r := mustRecord(t, d); !r.Restoring || r.Format != 2 || r.WrittenBy != "0.2.0" {
		t.Errorf("record of a restore under way = %+v", r)
	}
	// The release of format 1 that restores keeps what format 2's record
	// says of its readers until the restore is done.
	Format = 1
	delete(formatSince, 2)
	if err := d.BeginRestore(); err != nil {
		t.Fatal(err)
	}
	if r := mustRecord(t, d); r.OldestReader != "0.2.0" {
		t.Errorf("record of a restore under way by a release of format 1 = %+v; want the oldest reader of format 2 kept", r)
	}
	if err := d.RecordRestore("0.1.0", 1); err != nil {
		t.Fatal(err)
	}
	if r := mustRecord(t, d); r != (Record{Format: 1, WrittenBy: "0.1.0", OldestReader: "0.1.0"}) {
		t.Errorf("record after the restore = %+v", r)
	}
}
