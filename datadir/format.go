package datadir

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	utilversion "k8s.io/apimachinery/pkg/util/version"
)

// Format is the data format this kubestore writes once an update to it is
// committed, and the newest it can read: what the files of the directory
// and the etcd database in it mean (etcd's storage version, the API
// versions objects are stored in, kubestore's own records). A release that
// writes anything an older release could not read raises it, records the
// release that introduced it in formatSince, and gives the step from the
// format before a migration (maintenance.Commit).
var Format = 1

// formatSince is the first kubestore release that reads each format.
var formatSince = map[int]string{1: "0.1.0"}

// simulatedFormat, set at link time to "N@VERSION" (-ldflags -X
// github.com/kubestore/kubestore/datadir.simulatedFormat=2@99.0.0), makes
// a test build whose Format is N, first read by release VERSION: a newer
// format than any release has yet, so that updates to it, their commit and
// the way back are tested before a release needs one. Release builds never
// set it.
var simulatedFormat string

func init() {
	if simulatedFormat == "" {
		return
	}
	n, since, ok := strings.Cut(simulatedFormat, "@")
	f, err := strconv.Atoi(n)
	if !ok || err != nil || f <= Format {
		panic(fmt.Sprintf("datadir.simulatedFormat %q: want N@VERSION with N above %d", simulatedFormat, Format))
	}
	Format, formatSince[f] = f, since
}

// Simulated reports whether this is a test build with a simulated Format.
func Simulated() bool { return simulatedFormat != "" }

// Record is <data-dir>/format: which data format the directory holds, the
// kubestore that last started on it, and the oldest release that reads
// it. Every release reads the record of every other: fields are only
// ever added, and one a release does not know is kept as it is.
type Record struct {
	Format int `json:"format"`
	// WrittenBy is the version of the kubestore that last started on the
	// directory.
	WrittenBy string `json:"writtenBy"`
	// OldestReader is the first release that reads Format.
	OldestReader string `json:"oldestReader"`
	// Snapshot, when set, is a snapshot of the data taken before a
	// kubestore of a newer format changed it: the way back for an older
	// one.
	Snapshot string `json:"snapshot,omitempty"`
	// Update is the last update, when there was one.
	Update *Update `json:"update,omitempty"`
	// Migration is a commit to Format under way.
	Migration *Migration `json:"migration,omitempty"`
	// Restoring says that a restore of the pre-update snapshot is under
	// way: what etcd/ holds is not the data.
	Restoring bool `json:"restoring,omitempty"`
}

// OnTrial reports whether the data is on trial for version: an update to
// it that is not committed yet, or data of an older format than it writes.
// Until the commit the data stays readable by the release it came from.
func (r Record) OnTrial(version string) bool {
	return r.Format < Format || r.Migration != nil || (r.Update != nil && r.Update.To == version && r.Update.Committed == nil)
}

func (d Dir) formatFile() string { return filepath.Join(string(d), "format") }

// FormatError is the refusal of a kubestore to start on data of a newer
// format than it reads. Its message is one line that says what to do.
type FormatError struct {
	Dir    Dir
	Record Record
	// Reader is the version of the kubestore refusing.
	Reader string
}

func (e *FormatError) Error() string {
	r := e.Record
	which, file := "a", "FILE"
	if r.Snapshot != "" {
		which, file = "the", r.Snapshot
	}
	by, oldest := "", reader(r.OldestReader)
	if r.WrittenBy != "" {
		by = " written by kubestore " + r.WrittenBy + " and"
	}
	return fmt.Sprintf("data directory %s holds data format %d,%s readable from %s; kubestore %s reads formats up to %d: start %s on it, or move %s aside and restore %s snapshot taken before the update: kubestore snapshot restore --data-dir %s %s",
		e.Dir, r.Format, by, oldest, e.Reader, Format, oldest, e.Dir.Etcd(), which, e.Dir, file)
}

// readRecord reads the directory's record, and every field of it, known
// or not; ok is false when it has none.
func (d Dir) readRecord() (fields map[string]json.RawMessage, r Record, ok bool, err error) {
	b, err := os.ReadFile(d.formatFile())
	if errors.Is(err, os.ErrNotExist) {
		return map[string]json.RawMessage{}, Record{}, false, nil
	}
	if err != nil {
		return nil, Record{}, false, err
	}
	if json.Unmarshal(b, &fields) != nil || json.Unmarshal(b, &r) != nil || r.Format < 1 {
		return nil, Record{}, false, fmt.Errorf("%s is not a kubestore data format record (%q): only kubestore writes it; restore it from a backup of the directory", d.formatFile(), b)
	}
	return fields, r, true, nil
}

// Update is what the record says of the last update: a kubestore of a
// newer release than the one before it started on the directory, and the
// snapshot it took first.
type Update struct {
	From string    `json:"from"`
	To   string    `json:"to"`
	At   time.Time `json:"at"`
	// Committed is when the update was committed: from then on the data
	// may be of the new release's format. Until then it is on trial.
	Committed *time.Time `json:"committed,omitempty"`
	// Snapshot is the pre-update snapshot: PreUpdateSnapshot, holding the
	// data as From left it.
	Snapshot string `json:"-"`
}

// Migration is a commit under way: from the moment the record names it
// (the commit point) the data is of format To, which older releases
// refuse, and a kubestore of format To finishes the step from From before
// the record drops it. A power cut leaves the data before the commit (the
// record without it) or after it, never between.
type Migration struct {
	From int       `json:"from"`
	To   int       `json:"to"`
	At   time.Time `json:"at"`
}

// PreUpdateSnapshot is where a server keeps the one snapshot taken before
// an update; the next update replaces it.
func (d Dir) PreUpdateSnapshot() string { return filepath.Join(string(d), "pre-update.db") }

// IsUpdate reports whether a kubestore of version to starting on data
// last written by version from is an update: both are semantic versions
// and to is the newer release (build metadata, and so two development
// builds of one release, compare equal).
func IsUpdate(from, to string) bool {
	f, err := utilversion.ParseSemantic(from)
	if err != nil {
		return false
	}
	t, err := utilversion.ParseSemantic(to)
	return err == nil && f.LessThan(t)
}

// RefuseNewerFormat returns a FormatError when the directory holds data
// of a newer format than Format, and otherwise its record (ok false: it
// has none; a new directory, or one of a release from before records,
// which holds format 1). It writes nothing.
func (d Dir) RefuseNewerFormat(version string) (r Record, ok bool, err error) {
	_, r, ok, err = d.readRecord()
	if err != nil {
		return Record{}, false, err
	}
	if ok && r.Format > Format {
		return Record{}, false, &FormatError{Dir: d, Record: r, Reader: version}
	}
	return r, ok, nil
}

// Record reads the directory's record; ok is false when it has none.
func (d Dir) Record() (r Record, ok bool, err error) {
	_, r, ok, err = d.readRecord()
	return r, ok, err
}

// RecordStart records that version, a kubestore of this Format, started
// on the directory and, after an update, the update (on trial until it is
// committed) and its snapshot. The data keeps its format: a new directory
// is of this Format, an older one stays readable by the release it came
// from until the update is committed. The record is written atomically,
// and only when it changes: a restart of the same release writes nothing.
func (d Dir) RecordStart(version string, update *Update) error {
	fields, r, ok, err := d.readRecord()
	if err != nil {
		return err
	}
	format := Format
	if ok {
		format = r.Format
	}
	if update != nil {
		delete(fields, "snapshot")
		values := map[string]any{"update": update}
		if update.Snapshot != "" {
			values["snapshot"] = update.Snapshot
		}
		if err := setFields(fields, values); err != nil {
			return err
		}
	}
	return d.record(fields, version, format)
}

// BeginCommit is the commit point of version's update: when the data is
// of an older format than this Format, the record says from now on that
// it is of this Format, with the Migration that converts it, which older
// releases refuse. It returns that Migration, or nil when there is
// nothing to convert. A commit already under way is returned as it is.
func (d Dir) BeginCommit(version string) (*Migration, error) {
	fields, r, ok, err := d.readRecord()
	if err != nil {
		return nil, err
	}
	if r.Migration != nil || (ok && r.Format >= Format) {
		return r.Migration, nil
	}
	from := r.Format
	if !ok {
		from = 1
	}
	m := &Migration{From: from, To: Format, At: time.Now().UTC()}
	if err := setFields(fields, map[string]any{"migration": m}); err != nil {
		return nil, err
	}
	return m, d.record(fields, version, Format)
}

// EndCommit records that version's update is committed: its migration, if
// any, is done.
func (d Dir) EndCommit(version string) error {
	fields, r, _, err := d.readRecord()
	if err != nil {
		return err
	}
	delete(fields, "migration")
	if u := r.Update; u != nil && u.Committed == nil {
		now := time.Now().UTC()
		u.Committed = &now
		if err := setFields(fields, map[string]any{"update": u}); err != nil {
			return err
		}
	}
	return d.record(fields, version, Format)
}

// RecordDataFormat makes the record agree with the format the data itself
// says it is of (maintenance.DataFormat): after a restore, or when the
// record was lost, the data is right. It returns a FormatError, and
// changes nothing, when that format is newer than version reads. A commit
// under way keeps its record: the data is of its format from the commit
// point on, whatever it says yet.
func (d Dir) RecordDataFormat(version string, format int) error {
	fields, r, _, err := d.readRecord()
	if err != nil {
		return err
	}
	if format > Format {
		if r.Format < format {
			// The record is older than the data: it says nothing of
			// the release that wrote it.
			r = Record{Format: format, OldestReader: formatSince[format], Snapshot: r.Snapshot}
		}
		return &FormatError{Dir: d, Record: r, Reader: version}
	}
	if r.Migration != nil || r.Format == format {
		return nil
	}
	return d.record(fields, version, format)
}

// RecordRestore records that version restored a snapshot of data of the
// given format into the directory: the update and snapshot the record
// named (if any) are spent.
func (d Dir) RecordRestore(version string, format int) error {
	fields, _, _, err := d.readRecord()
	if err != nil {
		// A record that cannot be read is replaced: the restore is the
		// way back from whatever wrote it.
		fields = map[string]json.RawMessage{}
	}
	delete(fields, "snapshot")
	delete(fields, "update")
	delete(fields, "migration")
	delete(fields, "restoring")
	return d.record(fields, version, format)
}

// BeginRestore records that a restore into the directory is under way.
func (d Dir) BeginRestore() error {
	fields, r, _, err := d.readRecord()
	if err != nil {
		return err
	}
	if err := setFields(fields, map[string]any{"restoring": true}); err != nil {
		return err
	}
	return d.record(fields, r.WrittenBy, r.Format)
}

// Reader names the releases that read format.
func Reader(format int) string { return reader(formatSince[format]) }

// reader names the releases from oldest on, when it is known.
func reader(oldest string) string {
	if oldest == "" {
		return "a newer kubestore"
	}
	return "kubestore " + oldest + " or newer"
}

// record writes the record's fields: data of format, written by version.
func (d Dir) record(fields map[string]json.RawMessage, version string, format int) error {
	values := map[string]any{"format": format, "writtenBy": version}
	// A format newer than this release's keeps the oldest reader its
	// writer recorded.
	if since, ok := formatSince[format]; ok {
		values["oldestReader"] = since
	}
	if err := setFields(fields, values); err != nil {
		return err
	}
	b, err := json.Marshal(fields)
	if err != nil {
		return err
	}
	if err := WriteFileAtomic(d.formatFile(), append(b, '\n')); err != nil {
		return fmt.Errorf("recording the data format in %s: %w", d.formatFile(), err)
	}
	return nil
}

func setFields(fields map[string]json.RawMessage, values map[string]any) error {
	for k, v := range values {
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		fields[k] = b
	}
	return nil
}
