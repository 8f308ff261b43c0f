package datadir

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	utilversion "k8s.io/apimachinery/pkg/util/version"
)

// Format is the data format this kubestore writes and the newest it can
// read: what the files of the directory and the etcd database in it mean
// (etcd's storage version, the API versions objects are stored in,
// kubestore's own records). A release that writes anything an older
// release could not read raises it, and records the release that
// introduced it in formatSince.
const Format = 1

// formatSince is the first kubestore release that reads each format.
var formatSince = map[int]string{1: "0.1.0"}

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
	return fmt.Sprintf("data directory %s holds data format %d, written by kubestore %s and readable from kubestore %s; kubestore %s reads formats up to %d: start kubestore %s or newer on it, or move %s aside and restore %s snapshot taken before the update: kubestore snapshot restore --data-dir %s %s",
		e.Dir, r.Format, r.WrittenBy, r.OldestReader, e.Reader, Format, r.OldestReader, e.Dir.Etcd(), which, e.Dir, file)
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
	// Snapshot is the pre-update snapshot: PreUpdateSnapshot, holding the
	// data as From left it.
	Snapshot string `json:"-"`
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

// RecordStart records that version, a kubestore of this Format, started
// on the directory and, after an update, the update and its snapshot.
// The record is written atomically, and only when it changes: a restart
// of the same release writes nothing.
func (d Dir) RecordStart(version string, update *Update) error {
	fields, _, _, err := d.readRecord()
	if err != nil {
		return err
	}
	// Format 1 is the first: there is no older format to convert yet.
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
	return d.record(fields, version)
}

// RecordRestore records that version restored a snapshot into the
// directory: its data is of this Format now, and the update and snapshot
// the record named (if any) are spent.
func (d Dir) RecordRestore(version string) error {
	fields, _, _, err := d.readRecord()
	if err != nil {
		// A record that cannot be read is replaced: the restore is the
		// way back from whatever wrote it.
		fields = map[string]json.RawMessage{}
	}
	delete(fields, "snapshot")
	delete(fields, "update")
	return d.record(fields, version)
}

// record writes the record's fields with this Format, written by version.
func (d Dir) record(fields map[string]json.RawMessage, version string) error {
	if err := setFields(fields, map[string]any{"format": Format, "writtenBy": version, "oldestReader": formatSince[Format]}); err != nil {
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
