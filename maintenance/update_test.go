package maintenance

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/etcdutl/v3/snapshot"

	"github.com/kubestore/kubestore/cacher/cachertest"
	"github.com/kubestore/kubestore/config"
	"github.com/kubestore/kubestore/datadir"
	"github.com/kubestore/kubestore/etcdembed"
	"github.com/kubestore/kubestore/records"
)

// embeddedEtcd is the real embedded etcd behind cacher.Backend, on a temp
// data directory, and the update of that directory to version on it, as
// the server's after Record.
func embeddedEtcd(t *testing.T, version string) (*clientv3.Client, *Update) {
	t.Helper()
	var cfg config.Config
	b := cachertest.Open(t, func(c *config.Config) { c.Etcd.QuotaBackendBytes = 64 << 20; cfg = *c })
	cc, err := cfg.Complete()
	if err != nil {
		t.Fatal(err)
	}
	return b.Client(), newUpdate(cc, version, b.Client(), cachertest.Records(b))
}

// A commit to a newer format converts the data whole: the commit point
// first (the record names the migration), then etcd's own record of the
// format, then every stored key rewritten with its value and lease, over
// more pages than one, kubestore's own records aside; the record of the
// commit last. A commit that a power cut stopped at its commit point is
// finished the same way.
func TestCommitRewritesEveryKey(t *testing.T) {
	c, u := embeddedEtcd(t, "0.2.0")
	dir := u.dir
	ctx := t.Context()
	const prefix, objects = config.DefaultEtcdPrefix, 600
	for i := range objects {
		if _, err := c.Put(ctx, fmt.Sprintf("%s/configmaps/ns/cm-%04d", prefix, i), fmt.Sprint("value-", i)); err != nil {
			t.Fatal(err)
		}
	}
	lease, err := c.Grant(ctx, 3600)
	if err != nil {
		t.Fatal(err)
	}
	leased := prefix + "/events/ns/e"
	if _, err := c.Put(ctx, leased, "event", clientv3.WithLease(lease.ID)); err != nil {
		t.Fatal(err)
	}
	own := records.Prefix(prefix) + "some-record"
	if _, err := c.Put(ctx, own, "kubestore's"); err != nil {
		t.Fatal(err)
	}

	datadir.Format, migrations[2] = 2, rewriteEveryKey
	t.Cleanup(func() { datadir.Format = 1; delete(migrations, 2) })

	for run := range 2 {
		// Run 0 is a commit a power cut interrupted at its commit point
		// (the record names the migration; the next start runs it); run 1
		// the same data's commit again from its trial, restored as the
		// pre-update snapshot holds it (no format record: format 1).
		if err := dir.RecordRestore("0.1.0", 1); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Delete(ctx, records.Prefix(prefix)+dataFormatRecord); err != nil {
			t.Fatal(err)
		}
		if err := dir.RecordStart("0.2.0", &datadir.Update{From: "0.1.0", To: "0.2.0"}); err != nil {
			t.Fatal(err)
		}
		if run == 0 {
			if _, err := dir.BeginCommit("0.2.0"); err != nil {
				t.Fatal(err)
			}
		}
		start, err := c.Get(ctx, "revision-probe")
		if err != nil {
			t.Fatal(err)
		}
		rev := start.Header.Revision
		done, err := u.Commit(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if done.Migration == nil || done.Migration.From != 1 || done.Migration.To != 2 || done.Rewritten != objects+1 {
			t.Fatalf("run %d: Commit = %+v (migration %+v), want format 1 to 2 with %d keys rewritten", run, done, done.Migration, objects+1)
		}
		resp, err := c.Get(ctx, prefix+"/", clientv3.WithPrefix())
		if err != nil {
			t.Fatal(err)
		}
		for _, kv := range resp.Kvs {
			switch key := string(kv.Key); {
			case key == own:
				if kv.ModRevision > rev {
					t.Errorf("run %d: kubestore's own record %s was rewritten", run, key)
				}
			case kv.ModRevision <= rev && key != records.Prefix(prefix)+dataFormatRecord:
				t.Errorf("run %d: %s not rewritten (mod revision %d, the commit began after %d)", run, key, kv.ModRevision, rev)
			case key == leased && kv.Lease != int64(lease.ID):
				t.Errorf("run %d: %s lost its lease: %x, want %x", run, key, kv.Lease, lease.ID)
			}
		}
		if f, err := DataFormat(ctx, u.st); err != nil || f != 2 {
			t.Errorf("run %d: the data says format %d (%v), want 2", run, f, err)
		}
		r, _, err := dir.Record()
		if err != nil || r.Format != 2 || r.Migration != nil || r.Update == nil || r.Update.Committed == nil {
			t.Fatalf("run %d: record after the commit %+v (%v)", run, r, err)
		}
	}
	if done, err := u.Commit(ctx); err != nil || done.Update != nil || done.Migration != nil {
		t.Errorf("a commit of committed data = %+v, %v; want nothing to commit", done, err)
	}
	// Another member of a site converted the data already: this member's
	// commit ends its own trial and writes nothing.
	if err := dir.RecordRestore("0.1.0", 1); err != nil {
		t.Fatal(err)
	}
	if err := dir.RecordStart("0.2.0", &datadir.Update{From: "0.1.0", To: "0.2.0"}); err != nil {
		t.Fatal(err)
	}
	if done, err := u.Commit(ctx); err != nil || done.Rewritten != 0 {
		t.Errorf("a member's commit of data another converted = %+v, %v; want no key rewritten", done, err)
	}
	if r, _, err := dir.Record(); err != nil || r.Format != 2 || r.Update == nil || r.Update.Committed == nil {
		t.Errorf("record after a member's commit of data another converted: %+v (%v)", r, err)
	}
}

// A running member that meets data of a newer format than it reads (a
// member of its site committed an update it does not run) stops; the
// format it reads does not stop it.
func TestStopOnNewerFormat(t *testing.T) {
	_, u := embeddedEtcd(t, "0.1.0")
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	stopped := make(chan error, 1)
	go u.StopOnNewerFormat(ctx, func(err error) { stopped <- err })
	time.Sleep(200 * time.Millisecond) // the watch is set
	if err := SetDataFormat(ctx, u.st, datadir.Format); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-stopped:
		t.Fatalf("stopped on the format it reads: %v", err)
	case <-time.After(time.Second):
	}
	if err := SetDataFormat(ctx, u.st, datadir.Format+1); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-stopped:
		if !strings.Contains(err.Error(), fmt.Sprintf("format %d", datadir.Format+1)) {
			t.Errorf("the stop says %q, want the format it met", err)
		}
	case <-ctx.Done():
		t.Fatal("did not stop on a newer format")
	}
}

// The newer-format backstop sees a format raised before it watched: it
// reads the record first and watches from the revision of its read. It
// watched from "now", and a commit of another member between the start's
// check and the watch was never seen; a format raised while it watches
// stops it too.
func TestStopOnNewerFormatSeesAFormatRaisedBeforeItWatched(t *testing.T) {
	_, u := embeddedEtcd(t, "test")
	for _, raise := range []string{"before", "while"} {
		t.Run(raise, func(t *testing.T) {
			st := u.st
			if err := st.PutState(t.Context(), dataFormatRecord, []byte(fmt.Sprint(datadir.Format))); err != nil {
				t.Fatal(err)
			}
			newer := []byte(fmt.Sprint(datadir.Format + 1))
			if raise == "before" {
				if err := st.PutState(t.Context(), dataFormatRecord, newer); err != nil {
					t.Fatal(err)
				}
			}
			stopped := make(chan error, 1)
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			go u.StopOnNewerFormat(ctx, func(err error) { stopped <- err })
			if raise == "while" {
				time.Sleep(time.Second)
				if err := st.PutState(t.Context(), dataFormatRecord, newer); err != nil {
					t.Fatal(err)
				}
			}
			select {
			case err := <-stopped:
				if !strings.Contains(err.Error(), "does not read") {
					t.Errorf("stopped with %v", err)
				}
			case <-time.After(5 * time.Second):
				t.Errorf("a format raised %s the watch did not stop the server", raise)
			}
		})
	}
}

// The server's start after an update saves the pre-update snapshot
// through the server's own client, whose one endpoint is the embedded
// member: no client is dialled for it. The snapshot holds what the
// previous release wrote.
func TestRecordAfterAnUpdateSnapshotsOnTheServersClient(t *testing.T) {
	c, u := embeddedEtcd(t, "0.2.0")
	ctx := t.Context()
	if _, err := c.Put(ctx, config.DefaultEtcdPrefix+"/configmaps/ns/before", "0.1.0's"); err != nil {
		t.Fatal(err)
	}
	if err := u.dir.RecordStart("0.1.0", nil); err != nil {
		t.Fatal(err)
	}
	last, _, err := u.dir.RefuseNewerFormat(u.version)
	if err != nil {
		t.Fatal(err)
	}
	u.before = dataBefore{record: last}
	if err := u.Record(ctx, u.client, u.st); err != nil {
		t.Fatal(err)
	}
	r, _, err := u.dir.Record()
	if err != nil || r.WrittenBy != "0.2.0" || r.Update == nil || r.Update.From != "0.1.0" || r.Snapshot != u.dir.PreUpdateSnapshot() {
		t.Fatalf("record after the update's start: %+v (%v), want the update from 0.1.0 with its snapshot", r, err)
	}
	lg, err := etcdembed.Logger(u.cc.Config().Log)
	if err != nil {
		t.Fatal(err)
	}
	st, err := snapshot.NewV3(lg).Status(r.Snapshot)
	if err != nil || st.TotalKey == 0 {
		t.Errorf("the pre-update snapshot %s: %+v (%v), want etcd's data", r.Snapshot, st, err)
	}
}
