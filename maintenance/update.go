package maintenance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/kubestore/kubestore/records/family"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/klog/v2"

	"github.com/kubestore/kubestore/config"
	"github.com/kubestore/kubestore/datadir"
	"github.com/kubestore/kubestore/records"
)

// The records of an update's commit in etcd, among kubestore's own
// (package records).
var (
	// dataFormatRecord is the data's own record of its format, written at
	// the commit of an update that raises it; absent, the data is of
	// format 1. A snapshot carries it, so a restore knows what it holds.
	dataFormatRecord = family.DataFormat.Name()
	// commitRequestRecord asks the server that runs on the data to commit
	// its update (kubestore update commit). The server deletes it once
	// the update is committed, or writes the error there.
	commitRequestRecord = family.CommitRequest.Name()
)

// What a commit request holds.
const (
	commitRequested = "requested"
	commitFailed    = "error: "
)

// Release is a member's record of what it runs, family.Releases.For(member):
// the release and the newest data format it reads, written at each start:
// a site's commit raises the format only once every member reads it.
type Release struct {
	Version string `json:"version"`
	// Reads is the newest data format the release reads.
	Reads int `json:"reads"`
}

// recordRelease records that member runs u's version, which reads up to
// datadir.Format.
func (u *Update) recordRelease(ctx context.Context, member string) error {
	data, err := json.Marshal(Release{Version: u.version, Reads: datadir.Format})
	if err != nil {
		return err
	}
	if err := u.st.PutState(ctx, family.Releases.For(member), data); err != nil {
		return fmt.Errorf("recording this member's release: %w", err)
	}
	return nil
}

// membersNotReading names the members of the site of c whose release
// (in st, on c) does not read format, with what they run; nil on a
// gateway of its own.
func membersNotReading(ctx context.Context, c *clientv3.Client, st *records.Store, format int) ([]string, error) {
	list, err := c.MemberList(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing the site's members: %w", err)
	}
	if len(list.Members) < 2 {
		return nil, nil
	}
	var behind []string
	for _, m := range list.Members {
		name := m.Name
		if name == "" {
			name = fmt.Sprintf("%x (not started yet)", m.ID)
		}
		rec, err := st.GetState(ctx, family.Releases.For(m.Name))
		if err != nil {
			return nil, err
		}
		var r Release
		switch {
		case m.Name == "" || rec == nil:
			behind = append(behind, name+" (no release recorded)")
		case json.Unmarshal(rec, &r) != nil:
			behind = append(behind, name+" (an unreadable release record)")
		case r.Reads < format:
			behind = append(behind, fmt.Sprintf("%s (kubestore %s, reads format %d)", name, r.Version, r.Reads))
		}
	}
	slices.Sort(behind)
	return behind, nil
}

// StopOnNewerFormat calls stop once the data is of a newer format than
// this release reads (another member of the site committed an update this
// one does not run): it stops serving rather than misread the data. It
// returns when ctx is done.
func (u *Update) StopOnNewerFormat(ctx context.Context, stop func(error)) {
	watchDataFormat(ctx, u.st, func(f int) bool {
		if f <= datadir.Format {
			return true
		}
		stop(fmt.Errorf("the data is now of format %d, which kubestore %s does not read (it reads up to %d): another member committed an update; start this gateway on that release", f, u.version, datadir.Format))
		return false
	})
}

// watchDataFormat calls fn with the format the data's record holds now,
// then with each it is given, until fn returns false or ctx is done. The
// watch starts from the revision of the read, and a broken one resumes
// after the last revision it saw: a format raised between the read and
// the watch, or while the watch was down, is never missed. A watch whose
// revision was compacted meanwhile reads the record again.
func watchDataFormat(ctx context.Context, st *records.Store, fn func(format int) bool) {
	rec := st.Record(dataFormatRecord)
	var seen int64 // the revision up to which fn has been told
	for ctx.Err() == nil {
		if seen == 0 {
			data, rev, err := rec.Current(ctx)
			if err != nil {
				sleep(ctx, time.Second)
				continue
			}
			if f, err := strconv.Atoi(string(data)); err == nil && !fn(f) {
				return
			}
			seen = rev
		}
		if !watchFormatFrom(ctx, rec, &seen, fn) {
			return
		}
		sleep(ctx, time.Second)
	}
}

// watchFormatFrom tells fn each format the record is given after
// revision *seen, which it moves on, until the watch ends (seen is 0 if
// it ended compacted) or fn returns false (then it reports false).
func watchFormatFrom(ctx context.Context, rec records.Record, seen *int64, fn func(format int) bool) bool {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	for resp := range rec.Watch(wctx, *seen+1) {
		if resp.CompactRevision > 0 {
			*seen = 0
			return true
		}
		for _, ev := range resp.Events {
			if f, err := strconv.Atoi(string(ev.Kv.Value)); ev.Type == clientv3.EventTypePut && err == nil && !fn(f) {
				return false
			}
			*seen = ev.Kv.ModRevision
		}
	}
	return true
}

// localMember is the id, in hex, of the etcd member c's first endpoint
// is (localMemberID).
func localMember(ctx context.Context, c *clientv3.Client) (string, error) {
	id, err := localMemberID(ctx, c)
	return strconv.FormatUint(id, 16), err
}

// localMemberID is the id of the etcd member c's first endpoint is: the
// local one, for a client of a data directory's etcd.
func localMemberID(ctx context.Context, c *clientv3.Client) (uint64, error) {
	st, err := c.Status(ctx, c.Endpoints()[0])
	if err != nil {
		return 0, fmt.Errorf("asking the local etcd who it is: %w", err)
	}
	return st.Header.MemberId, nil
}

// ErrMembersBehind refuses a commit that would raise the site's data
// format while a member's release does not read it.
var ErrMembersBehind = errors.New("members run a release that does not read the data format the commit writes")

// A migration converts the data from the format before its own to its
// own, with etcd serving it, and returns how many keys it wrote. It is run
// again from the start after a power cut at any point, so it must be
// idempotent.
type migration func(ctx context.Context, c *clientv3.Client, prefix string) (int, error)

// migrations are the steps to each Format from the one before. No release
// has raised the format yet; a test build's simulated format
// (datadir.Simulated) gets rewriteEveryKey, the step a stored version's
// change needs.
var migrations = map[int]migration{}

func init() {
	if datadir.Simulated() {
		migrations[datadir.Format] = rewriteEveryKey
	}
}

// DataFormat is the format the data in etcd says it is of, in its records
// st.
func DataFormat(ctx context.Context, st *records.Store) (int, error) {
	rec, err := st.GetState(ctx, dataFormatRecord)
	if err != nil {
		return 0, fmt.Errorf("reading the data's format: %w", err)
	}
	if rec == nil {
		return 1, nil
	}
	f, err := strconv.Atoi(string(rec))
	if err != nil || f < 1 {
		return 0, fmt.Errorf("the data's format record %s is %q: only kubestore writes it", dataFormatRecord, rec)
	}
	return f, nil
}

// SetDataFormat records in etcd, in its records st, that the data is of
// format.
func SetDataFormat(ctx context.Context, st *records.Store, format int) error {
	if err := st.PutState(ctx, dataFormatRecord, []byte(strconv.Itoa(format))); err != nil {
		return fmt.Errorf("recording the data's format: %w", err)
	}
	return nil
}

// Committed is what a commit did.
type Committed struct {
	// Update is the update committed; nil when the data was not on trial.
	Update *datadir.Update
	// Migration is the format's change, when the update raised it.
	Migration *datadir.Migration
	// Rewritten is how many keys the migration wrote.
	Rewritten int
	Took      time.Duration
}

func (c Committed) String() string {
	if c.Update == nil && c.Migration == nil {
		return "nothing to commit: the data is not on trial"
	}
	s := "committed"
	if c.Update != nil {
		s += fmt.Sprintf(" the update from kubestore %s to %s", c.Update.From, c.Update.To)
	}
	if m := c.Migration; m != nil {
		s += fmt.Sprintf(", data format %d to %d (%d keys rewritten)", m.From, m.To, c.Rewritten)
	}
	return s + fmt.Sprintf(" in %s", c.Took.Round(time.Millisecond))
}

// Commit commits the update of the data directory, on u's etcd: the
// commit point (datadir.BeginCommit), then the data's own record of its
// new format, each migration's step, and the record that it is done. From
// the commit point on, older releases refuse the data; a power cut
// anywhere after it is finished by running Commit again, which the server
// does at its start (ServeCommits).
func (u *Update) Commit(ctx context.Context) (Committed, error) {
	c, st, dir, prefix, version := u.client, u.st, u.dir, u.cc.Config().Etcd.Prefix, u.version
	start := time.Now()
	r, _, err := dir.Record()
	if err != nil || !r.OnTrial(version) {
		return Committed{}, err
	}
	done := Committed{Update: r.Update}
	current, err := DataFormat(ctx, st)
	if err != nil {
		return done, err
	}
	if r.Migration == nil && current < datadir.Format {
		// The commit point raises the site's format: every member must
		// read it, or it would misread the data (it stops instead).
		behind, err := membersNotReading(ctx, c, st, datadir.Format)
		if err != nil {
			return done, err
		}
		if len(behind) > 0 {
			return done, fmt.Errorf("%w (format %d): %s; update them first, then commit", ErrMembersBehind, datadir.Format, strings.Join(behind, ", "))
		}
	}
	if done.Migration, err = dir.BeginCommit(version); err != nil {
		return done, err
	}
	m := done.Migration
	if m != nil && current >= m.To && r.Migration == nil {
		// Another member of the site converted the data already: this
		// member's commit is its own record's.
		m = nil
	}
	if m != nil {
		if err := SetDataFormat(ctx, st, m.To); err != nil {
			return done, err
		}
		for f := m.From + 1; f <= m.To; f++ {
			step, ok := migrations[f]
			if !ok {
				continue
			}
			n, err := step(ctx, c, prefix)
			done.Rewritten += n
			if err != nil {
				return done, fmt.Errorf("converting the data to format %d: %w", f, err)
			}
		}
	}
	if err := dir.EndCommit(version); err != nil {
		return done, err
	}
	done.Took = time.Since(start)
	return done, nil
}

// rewriteEveryKey writes every key under prefix again with its own value
// and lease, as a storage version migration rewrites every object
// (KEP-4192): the simulated format's step, which touches all the data as a
// real one would. A key written since it was read is skipped (its writer
// wrote the new format), and so is one whose lease has expired; kubestore's
// own records are not objects.
func rewriteEveryKey(ctx context.Context, c *clientv3.Client, prefix string) (int, error) {
	const batchKeys, batchBytes = 64, 512 << 10
	own := records.Prefix(prefix)
	from, end := prefix+"/", clientv3.GetPrefixRangeEnd(prefix+"/")
	n := 0
	for {
		resp, err := c.Get(ctx, from, clientv3.WithRange(end), clientv3.WithLimit(4*batchKeys))
		if err != nil {
			return n, err
		}
		var batch []*clientv3.Op
		var compares []clientv3.Cmp
		size := 0
		flush := func() error {
			if len(batch) == 0 {
				return nil
			}
			ops := make([]clientv3.Op, len(batch))
			for i, op := range batch {
				ops[i] = *op
			}
			txn, err := c.Txn(ctx).If(compares...).Then(ops...).Commit()
			if err == nil && txn.Succeeded {
				n += len(batch)
			} else {
				// One by one: a key changed, or a lease expired.
				for i := range batch {
					txn, err := c.Txn(ctx).If(compares[i]).Then(ops[i]).Commit()
					switch {
					case errors.Is(err, rpctypes.ErrLeaseNotFound):
					case err != nil:
						return err
					case txn.Succeeded:
						n++
					}
				}
			}
			batch, compares, size = batch[:0], compares[:0], 0
			return nil
		}
		for _, kv := range resp.Kvs {
			if strings.HasPrefix(string(kv.Key), own) {
				continue
			}
			op := clientv3.OpPut(string(kv.Key), string(kv.Value), clientv3.WithLease(clientv3.LeaseID(kv.Lease)))
			batch = append(batch, &op)
			compares = append(compares, clientv3.Compare(clientv3.ModRevision(string(kv.Key)), "=", kv.ModRevision))
			if size += len(kv.Key) + len(kv.Value); len(batch) == batchKeys || size >= batchBytes {
				if err := flush(); err != nil {
					return n, err
				}
			}
		}
		if err := flush(); err != nil {
			return n, err
		}
		if !resp.More || len(resp.Kvs) == 0 {
			return n, nil
		}
		from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
}

// commitWait bounds how long kubestore update commit waits for the
// server's answer: a migration rewrites every stored object.
const commitWait = 30 * time.Minute

// requestCommit asks the server that runs on the data, whose etcd c
// serves (its records st), to commit its update, and waits until it has.
// On a site the request names the member (its etcd's id): the other
// members on trial end theirs once it has converted the data.
func requestCommit(ctx context.Context, c *clientv3.Client, st *records.Store) error {
	ctx, cancel := context.WithTimeout(ctx, commitWait)
	defer cancel()
	member, err := localMember(ctx, c)
	if err != nil {
		return err
	}
	rec := st.Record(commitRequestRecord)
	put, err := rec.Put(ctx, []byte(commitRequested+" by "+member))
	if err != nil {
		return fmt.Errorf("asking the server to commit: %w", err)
	}
	for resp := range rec.Watch(ctx, put+1) {
		if err := resp.Err(); err != nil {
			return err
		}
		for _, ev := range resp.Events {
			if ev.Type == clientv3.EventTypeDelete {
				return nil
			}
			if v := string(ev.Kv.Value); strings.HasPrefix(v, commitFailed) {
				return errors.New(strings.TrimPrefix(v, commitFailed))
			}
		}
	}
	return fmt.Errorf("waiting for the server to commit: %w (kubestore update status says where the data directory stands)", ctx.Err())
}

// commitRequests are the server's side of requestCommit: it calls commit
// for each request naming the member of its etcd (or of a release before
// the site's commit, which names none) and answers it. A request from
// before the server started is dropped: its command gave up when that
// server stopped, and the update it meant may have been left since (a
// fallback). It returns when ctx is done.
func (u *Update) commitRequests(ctx context.Context, commit func() error) {
	c, rec := u.client, u.st.Record(commitRequestRecord)
	var from int64
	var member string
	for from == 0 {
		var err error
		if member, err = localMember(ctx, c); err == nil {
			var deleted int64
			if deleted, err = rec.Delete(ctx); err == nil {
				from = deleted + 1
			}
		}
		if err != nil && !sleep(ctx, time.Second) {
			return
		}
	}
	for ctx.Err() == nil {
		for w := range rec.Watch(clientv3.WithRequireLeader(ctx), from) {
			if w.Err() != nil {
				break
			}
			for _, ev := range w.Events {
				from = ev.Kv.ModRevision + 1
				if v := string(ev.Kv.Value); ev.Type != clientv3.EventTypePut || v != commitRequested && v != commitRequested+" by "+member {
					continue
				}
				// The answer is written only if the request is still
				// the one answered.
				var err error
				if failed := commit(); failed != nil {
					_, err = rec.PutAt(ctx, []byte(commitFailed+failed.Error()), ev.Kv.ModRevision)
				} else {
					_, err = rec.DeleteAt(ctx, ev.Kv.ModRevision)
				}
				if err != nil {
					klog.ErrorS(err, "Answering kubestore update commit")
				}
			}
		}
		sleep(ctx, time.Second)
	}
}

// ServeCommits is the server's part in its update's commit: it commits
// at once when a commit was under way when the server last stopped (a
// power cut), on kubestore update commit, and after
// --update-trial-period of healthy service (check, etcd's health check,
// answering). It returns when ctx is done.
func (u *Update) ServeCommits(ctx context.Context, check func(context.Context) error) {
	cfg, dir, version := u.cc.Config(), u.dir, u.version
	var mu sync.Mutex
	commit := func(why string) error {
		mu.Lock()
		defer mu.Unlock()
		done, err := u.Commit(ctx)
		if err != nil {
			klog.ErrorS(err, "Committing the update", "why", why)
			return err
		}
		if done.Update != nil || done.Migration != nil {
			klog.InfoS("Update committed", "why", why, "what", done.String())
		}
		return nil
	}
	r, _, err := dir.Record()
	if err != nil {
		klog.ErrorS(err, "Reading the data format record")
		return
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	switch period := cfg.Update.TrialPeriod.Duration; {
	case r.Migration != nil:
		wg.Go(func() {
			for commit("a commit was under way when the server last stopped") != nil && sleep(ctx, time.Minute) {
			}
		})
	case r.OnTrial(version) && r.Update != nil:
		klog.InfoS("Update on trial: the previous release reads the data until kubestore update commit, or --"+config.FlagUpdateTrialPeriod+" of healthy service (0: only the command)",
			"from", r.Update.From, "to", version, "trialPeriod", period)
		if period > 0 {
			wg.Go(func() { commitAfterTrial(ctx, check, period, commit) })
		}
	}
	if r.OnTrial(version) {
		// Another member of the site committed: this one's trial ends.
		wg.Go(func() {
			watchDataFormat(ctx, u.st, func(f int) bool {
				return f < datadir.Format || commit("another member of the site committed the update") != nil
			})
		})
	}
	u.commitRequests(ctx, func() error { return commit("kubestore update commit") })
}

// commitAfterTrial commits once etcd has answered every health check for
// period, checked a tenth of it apart and at least once a minute; a failed
// check starts the period again.
func commitAfterTrial(ctx context.Context, check func(context.Context) error, period time.Duration, commit func(string) error) {
	step := min(period/10, time.Minute)
	healthy := time.Now()
	for sleep(ctx, step) {
		if err := check(ctx); err != nil {
			healthy = time.Now()
			continue
		}
		if time.Since(healthy) >= period && commit("served healthily for --"+config.FlagUpdateTrialPeriod) == nil {
			return
		}
	}
}

// sleep waits for d and reports whether ctx is still live.
func sleep(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}

// UpdateCommit commits the update of cfg's data directory: through the
// server when one runs on it, otherwise itself, with the embedded etcd
// started for the command. It reports what was committed on w.
func UpdateCommit(ctx context.Context, cc config.Completed, version string, w io.Writer) error {
	cfg := cc.Config()
	if cfg.Etcd.External() {
		return fmt.Errorf("an external etcd (--%s) is shared: no data directory's update to commit", config.FlagEtcdServers)
	}
	c, err := connect(ctx, cfg, version)
	if err != nil {
		return err
	}
	defer c.close()
	if c.online {
		if err := requestCommit(ctx, c.client, c.records); err != nil {
			return err
		}
		r, _, err := datadir.Dir(cfg.DataDir).Record()
		if err != nil {
			return err
		}
		fmt.Fprintln(w, Status(r))
		return nil
	}
	done, err := newUpdate(cc, version, c.client, c.records).Commit(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintln(w, done)
	return nil
}

// Status says in one line what the record says of the data and its last
// update.
func Status(r datadir.Record) string {
	s := fmt.Sprintf("data format %d, written by kubestore %s, readable from kubestore %s", r.Format, r.WrittenBy, r.OldestReader)
	if u := r.Update; u != nil {
		s += fmt.Sprintf("; update from %s to %s at %s", u.From, u.To, u.At.Format(time.RFC3339))
		if u.Committed != nil {
			s += ", committed at " + u.Committed.Format(time.RFC3339)
		} else {
			s += ", on trial"
		}
	}
	if m := r.Migration; m != nil {
		s += fmt.Sprintf("; commit to format %d under way since %s", m.To, m.At.Format(time.RFC3339))
	}
	if r.Snapshot != "" {
		s += "; pre-update snapshot " + r.Snapshot
	}
	return s
}
