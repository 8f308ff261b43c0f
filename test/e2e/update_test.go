package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// formatRecord is <data-dir>/format as the tests read it.
type formatRecord struct {
	Format       int    `json:"format"`
	WrittenBy    string `json:"writtenBy"`
	OldestReader string `json:"oldestReader"`
	Snapshot     string `json:"snapshot"`
	Update       *struct {
		From      string     `json:"from"`
		To        string     `json:"to"`
		Committed *time.Time `json:"committed"`
	} `json:"update"`
	Migration *struct {
		From int `json:"from"`
		To   int `json:"to"`
	} `json:"migration"`
	Restoring bool `json:"restoring"`
}

func readFormatRecord(t *testing.T, dir string) formatRecord {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "format"))
	if err != nil {
		t.Fatal(err)
	}
	var r formatRecord
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("%s: %v\n%s", filepath.Join(dir, "format"), err, b)
	}
	return r
}

// wantConfigMaps wants exactly the named ConfigMaps in the default
// namespace (kube-root-ca.crt aside).
func wantConfigMaps(t *testing.T, p *proc, step string, names ...string) {
	t.Helper()
	if got := configMapNames(p); !slices.Equal(got, names) {
		t.Fatalf("%s: ConfigMaps %q, want %q", step, got, names)
	}
}

// configMapNames are the names of the default namespace's ConfigMaps
// that the test made (kube-root-ca.crt aside), sorted.
func configMapNames(p *proc) []string {
	p.t.Helper()
	var names []string
	for _, n := range strings.Fields(p.mustKubectl("get", "configmaps", "-o", "jsonpath={.items[*].metadata.name}")) {
		if n != "kube-root-ca.crt" {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	return names
}

// An update to a release of a newer data format (newerKubestore, format
// 2) is on trial: the data keeps the previous release's format, so the
// A/B fallback to it serves every write; kubestore update commit, through
// the running server, converts the data; from then on the previous
// release refuses it in one line naming the pre-update snapshot, or with
// --restore-on-newer-data restores that snapshot by itself. The commit
// also comes by itself after --update-trial-period of healthy service,
// and from the command on a stopped data directory.
func TestUpdateTrialCommitAndWayBack(t *testing.T) {
	requireKubectl(t)
	dir := shortTempDir(t)
	newer := newerBinary(t)
	want := func(p *proc, step string, names ...string) { t.Helper(); wantConfigMaps(t, p, step, names...) }

	p := start(t, dir)
	p.mustKubectl("create", "configmap", "a-before")
	stopGracefully(t, p)
	oldest := readFormatRecord(t, dir).OldestReader

	// The update, on trial.
	n := startBinary(t, newer, nil, dir)
	n.mustKubectl("create", "configmap", "b-trial")
	if out := mustRun(t, newer, "update", "status", "--data-dir", dir); !strings.Contains(out, "data format 1,") || !strings.Contains(out, "on trial") {
		t.Errorf("kubestore update status on trial: %s", out)
	}
	stopGracefully(t, n)
	if r := readFormatRecord(t, dir); r.Format != 1 || r.OldestReader != oldest || r.WrittenBy != "99.0.0" || r.Update == nil || r.Update.Committed != nil {
		t.Fatalf("record on trial: %+v; want format 1, readable from %s, the update not committed", r, oldest)
	}

	// The fallback serves what the trial wrote.
	p = start(t, dir)
	want(p, "the previous release after the trial", "a-before", "b-trial")
	p.mustKubectl("create", "configmap", "c-fallback")
	stopGracefully(t, p)

	// The update again, committed through the server.
	n = startBinary(t, newer, nil, dir)
	n.mustKubectl("create", "configmap", "d-trial")
	if out := mustRun(t, newer, "update", "commit", "--data-dir", dir); !strings.Contains(out, "data format 2,") || !strings.Contains(out, "committed at") {
		t.Errorf("kubestore update commit: %s", out)
	}
	if !eventually(10*time.Second, func() bool {
		return strings.Contains(n.logs(), "Update committed") && strings.Contains(n.logs(), "data format 1 to 2")
	}) {
		t.Errorf("the server did not log the commit and its migration:\n%s", n.logs())
	}
	want(n, "the new release after the commit", "a-before", "b-trial", "c-fallback", "d-trial")
	n.mustKubectl("create", "configmap", "e-committed")
	stopGracefully(t, n)
	if r := readFormatRecord(t, dir); r.Format != 2 || r.OldestReader != "99.0.0" || r.Migration != nil || r.Update == nil || r.Update.Committed == nil {
		t.Fatalf("record after the commit: %+v; want format 2, committed", r)
	}

	// The previous release refuses the committed data in one line.
	wantRefusal(t, binary(t), dir)

	// ...or restores the pre-update snapshot by itself: the data as it
	// was when the update started the second time.
	p = start(t, dir, "--restore-on-newer-data")
	want(p, "the previous release after restoring the pre-update snapshot", "a-before", "b-trial", "c-fallback")
	if _, err := os.Stat(filepath.Join(aside(t, dir, "etcd.newer"), "member")); err != nil {
		t.Errorf("the newer data was not kept aside: %v", err)
	}
	stopGracefully(t, p)
	if r := readFormatRecord(t, dir); r.Format != 1 || r.Snapshot != "" || r.Update != nil || r.Restoring {
		t.Errorf("record after the restore: %+v; want format 1, the update and snapshot spent", r)
	}

	// A commit after the trial period.
	n = startBinary(t, newer, nil, dir, "--update-trial-period", "2s")
	if !eventually(30*time.Second, func() bool { return readFormatRecord(t, dir).Format == 2 }) {
		t.Fatalf("no commit after a trial period of 2 s: %+v\n%s", readFormatRecord(t, dir), n.logs())
	}
	if !eventually(10*time.Second, func() bool { return strings.Contains(n.logs(), "served healthily") }) {
		t.Errorf("the commit after the trial period did not say why:\n%s", n.logs())
	}
	want(n, "the new release after its trial period", "a-before", "b-trial", "c-fallback")
	stopGracefully(t, n)

	// A commit on a stopped data directory.
	start(t, dir, "--restore-on-newer-data").stop(30 * time.Second)
	stopGracefully(t, startBinary(t, newer, nil, dir))
	if out := mustRun(t, newer, "update", "commit", "--data-dir", dir); !strings.Contains(out, "data format 1 to 2") {
		t.Errorf("kubestore update commit on a stopped directory: %s", out)
	}
	if r := readFormatRecord(t, dir); r.Format != 2 || r.Update == nil || r.Update.Committed == nil {
		t.Errorf("record after an offline commit: %+v", r)
	}
	if out := mustRun(t, newer, "update", "commit", "--data-dir", dir); !strings.Contains(out, "nothing to commit") {
		t.Errorf("a second commit: %s", out)
	}

	// A restore of the pre-update snapshot that a power cut interrupted
	// (the record says restoring, etcd/ holds part of it, here nothing):
	// the newer release finishes it too, rather than serve what is there.
	if readFormatRecord(t, dir).Snapshot == "" {
		t.Fatal("no pre-update snapshot recorded to restore")
	}
	raw, err := os.ReadFile(filepath.Join(dir, "format"))
	must(t, err)
	var fields map[string]any
	must(t, json.Unmarshal(raw, &fields))
	fields["restoring"] = true
	raw, err = json.Marshal(fields)
	must(t, err)
	must(t, os.WriteFile(filepath.Join(dir, "format"), raw, 0o600))
	must(t, os.RemoveAll(filepath.Join(dir, "etcd")))
	n = startBinary(t, newer, nil, dir)
	want(n, "the newer release after finishing an interrupted restore", "a-before", "b-trial", "c-fallback")
	stopGracefully(t, n)
	if r := readFormatRecord(t, dir); r.Restoring || r.Format != 1 {
		t.Errorf("record after the newer release finished the restore: %+v; want format 1, not restoring", r)
	}
}

// wantRefusal wants kubestore bin to refuse dir, of data format 2, with
// exit status 1 and one line naming the pre-update snapshot and the
// command that restores it.
func wantRefusal(t *testing.T, bin, dir string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "--data-dir", dir, "--secure-port", "0").CombinedOutput()
	var exit *exec.ExitError
	line := strings.TrimSpace(string(out))
	if !errors.As(err, &exit) || exit.ExitCode() != 1 || strings.Contains(line, "\n") ||
		!strings.Contains(line, "data format 2") || !strings.Contains(line, "kubestore snapshot restore --data-dir "+dir+" "+filepath.Join(dir, "pre-update.db")) {
		t.Fatalf("%s on committed data of format 2: %v\n%s\nwant exit 1 and one line naming the pre-update snapshot", filepath.Base(bin), err, out)
	}
}

// olderKubestore is an older commit of kubestore, KUBESTORE_OLDER_COMMIT
// (make release-e2e names one), built from its own tree and stamped as
// its Makefile stamps a development build.
func olderKubestore(t *testing.T) string {
	t.Helper()
	commit := os.Getenv("KUBESTORE_OLDER_COMMIT")
	if commit == "" {
		t.Skip("KUBESTORE_OLDER_COMMIT names no older commit to update from (make release-e2e sets it)")
	}
	full, err := exec.Command("git", "rev-parse", "--verify", commit+"^{commit}").Output()
	if err != nil {
		t.Skipf("KUBESTORE_OLDER_COMMIT %s is not in this clone (a shallow one?): %v", commit, err)
	}
	sha := strings.TrimSpace(string(full))
	b := &goBinary{pkg: ".", name: "kubestore-" + sha[:12], commit: sha,
		ldflags: "-X github.com/kubestore/kubestore/server.version=0.1.0-dev+" + sha[:12]}
	return b.get(t)
}

// An update from an older commit of kubestore, one that was in the field
// before the trial boot existed, to a release of a newer data format
// (newerKubestore), and back: the older commit serves what the update
// wrote on trial (its A/B fallback); once the update is committed it
// refuses the data in one line, and its own snapshot restore of the
// pre-update snapshot gives the data back as it was when the update
// started; this build reads what the older one wrote.
func TestUpdateAcrossReleases(t *testing.T) {
	requireKubectl(t)
	older := olderKubestore(t)
	newer := newerBinary(t)
	dir := shortTempDir(t)
	run := func(bin, step string, want []string, create string, args ...string) {
		t.Helper()
		p := startBinary(t, bin, nil, dir, args...)
		wantConfigMaps(t, p, step, want...)
		if create != "" {
			p.mustKubectl("create", "configmap", create)
		}
		stopGracefully(t, p)
	}

	run(older, "the older commit's first start", nil, "a-older")
	run(newer, "the update", []string{"a-older"}, "b-trial")
	run(older, "the older commit on the trial's data", []string{"a-older", "b-trial"}, "c-fallback")

	n := startBinary(t, newer, nil, dir)
	n.mustKubectl("create", "configmap", "d-trial")
	mustRun(t, newer, "update", "commit", "--data-dir", dir)
	n.mustKubectl("create", "configmap", "e-committed")
	wantConfigMaps(t, n, "the update committed", "a-older", "b-trial", "c-fallback", "d-trial", "e-committed")
	stopGracefully(t, n)

	wantRefusal(t, older, dir)
	if err := os.Rename(filepath.Join(dir, "etcd"), filepath.Join(t.TempDir(), "etcd.newer")); err != nil {
		t.Fatal(err)
	}
	mustRun(t, older, "snapshot", "restore", "--data-dir", dir, filepath.Join(dir, "pre-update.db"))
	run(older, "the older commit after restoring the pre-update snapshot", []string{"a-older", "b-trial", "c-fallback"}, "f-restored")
	run(binary(t), "this build after the older commit", []string{"a-older", "b-trial", "c-fallback", "f-restored"}, "")
}
