//go:build linux

package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kubestore/kubestore/test/powercut"
)

// TestPowerCut runs kubestore on a file system that loses what was not
// fsynced when the power goes (test/powercut) and cuts the power under the
// crash test's clients, and during a first start, a compaction, an online
// defrag, a snapshot save and a burst of Lease writes, each cut with the
// next of the honest tears at the first moment it has something to tear.
// After every cut the server must start on what reached the disk
// with nothing acknowledged lost and nothing unacknowledged present,
// resourceVersions must not go back, watchers must converge, and every
// generated file must be whole.
func TestPowerCut(t *testing.T) {
	pc, base := newPowerCuts(t, honestTears)
	dir, rng := pc.dir, pc.rng
	port := strconv.Itoa(freePort(t))
	// A small snapshot count makes etcd write raft snapshots and release
	// WAL segments for purging within the test, as it does every 5,000
	// entries on the defaults.
	args := []string{"--secure-port", port, "--etcd-snapshot-count", "200"}

	// First starts: the CA, certificates, keys, kubeconfig and etcd member
	// are made. Each on a fresh disk; the last one is kept for the rest.
	for i := range 3 {
		pc.mount(filepath.Join(base, fmt.Sprintf("r%d", i)))
		p := launch(t, binary(t), nil, dir, args...)
		time.Sleep(time.Duration(rng.Int64N(int64(1500 * time.Millisecond))))
		pc.cutAtNext(p, "first start")
		pc.checkFiles()
		pc.mount(pc.real)
		if i < 2 {
			// It starts on what survived; then the next first start.
			start(t, dir, args...).kill()
			if err := pc.fs.Unmount(); err != nil {
				t.Fatal(err)
			}
		}
	}
	p := start(t, dir, args...)
	ch := startChurn(t, p)

	phases := []string{"compaction", "defrag", "snapshot save", "lease burst"}
	// KUBESTORE_CRASH_CYCLES counts every cut, the three first starts too.
	n := max(cycles()-3, 1)
	for cycle := 1; cycle <= n; cycle++ {
		phase := "writes"
		if cycle <= 2*len(phases) {
			phase = phases[(cycle-1)%len(phases)]
		}
		if only := os.Getenv("KUBESTORE_POWERCUT_PHASE"); only != "" {
			phase = only // every cut in one phase, to hunt a failure
		}
		var after func()
		switch phase {
		case "writes":
			time.Sleep(time.Duration(rng.Int64N(int64(time.Second))))
		case "compaction":
			if !pc.duringCompaction() {
				phase += " (it had ended)"
			}
		case "defrag":
			if !pc.duringCommand(filepath.Join(pc.real, "etcd", "member", "snap", "db.tmp.*"), "defrag", "--data-dir", dir) {
				phase += " (it had ended)"
			}
		case "snapshot save":
			after = pc.duringSnapshotSave()
		case "lease burst":
			after = pc.duringLeaseBurst(p, cycle)
		default:
			t.Fatalf("KUBESTORE_POWERCUT_PHASE=%s: not a phase (writes, %s)", phase, strings.Join(phases, ", "))
		}
		pc.cutAtNext(p, phase)
		pc.checkFiles()
		pc.mount(pc.real)
		p = start(t, dir, args...)
		ch.c.cycles++
		ch.check(t, cycle, p)
		if after != nil {
			after()
		}
	}
	ch.finish(t, "power-cut test")
	summary := fmt.Sprintf("power cuts: %s, acknowledged Lease writes %d, snapshots checked %d", pc.tally(), pc.leaseAcks, pc.snapshots)
	fmt.Println(summary)
	t.Log(summary)
}

// TestPowerCutLostFsync reports what etcd and kubestore do on a device
// that acknowledges a flush and then loses it (powercut.LostFsync): each
// cut, under the crash test's clients, undoes the last fsync. It does not
// judge, since nothing on one device can tell such a cut from one just
// before the writes (every record that could say so sits on the same
// device): it reports, per cut, whether the server started, and what the
// crash test's check would have failed on. Run it by hand:
//
//	KUBESTORE_LYING_DEVICE=1 KUBESTORE_CRASH_CYCLES=20 go test -run TestPowerCutLostFsync ./test/e2e
func TestPowerCutLostFsync(t *testing.T) {
	if os.Getenv("KUBESTORE_LYING_DEVICE") != "1" {
		t.Skip("a report, not a test: KUBESTORE_LYING_DEVICE=1 runs it")
	}
	pc, base := newPowerCuts(t, []powercut.Tear{powercut.LostFsync})
	dir, rng := pc.dir, pc.rng
	args := []string{"--secure-port", strconv.Itoa(freePort(t))}
	pc.mount(filepath.Join(base, "disk"))
	p := start(t, dir, args...)
	ch := startChurn(t, p)
	report := &reportOnly{TB: t}
	wentBack := 0
	for cycle := 1; cycle <= cycles(); cycle++ {
		time.Sleep(time.Duration(rng.Int64N(int64(time.Second))))
		pc.cutAtNext(p, "writes")
		pc.mount(pc.real)
		p = launch(t, binary(t), nil, dir, args...)
		if !eventually(90*time.Second, func() bool { return p.hasExited() || p.ready() }) || p.hasExited() {
			lines := strings.Split(strings.TrimSpace(p.logs()), "\n")
			t.Logf("REPORT: cut %d: the server did not start: %v: %s", cycle, p.err, lines[len(lines)-1])
			break
		}
		before := report.failures
		ch.c.cycles++
		ch.check(report, cycle, p)
		if report.failures > before {
			wentBack++
		}
	}
	ch.finish(report, "lying device")
	summary := fmt.Sprintf("lying device: %s; %d cuts went back (the crash test's check failed %d times)", pc.tally(), wentBack, report.failures)
	fmt.Println(summary)
	t.Log(summary)
}

// honestTears are what a device that keeps its promises may do at a power
// cut (test/powercut); a cut takes each in turn.
var honestTears = []powercut.Tear{powercut.LoseUnsynced, powercut.TornWrite, powercut.ReorderedPair, powercut.JournaledEntries}

// powerCuts mounts the data directory on a power-cut file system and cuts.
type powerCuts struct {
	t    *testing.T
	dir  string // the mount point: kubestore's --data-dir
	real string // the directory behind it: the disk
	fs   *powercut.FS
	rng  *rand.Rand

	// commands are kubestore commands running on the data directory;
	// the cut kills them with the server.
	commands []command

	// tears are taken in turn, from a random one.
	tears []powercut.Tear
	next  int
	// effects are what each tear did, by tear.
	effects map[powercut.Tear][]powercut.Effect

	cuts, leaseAcks, snapshots int
}

// newPowerCuts skips the test where no power-cut file system can be
// mounted, and makes the data directory of base/d, where the disks to
// mount behind it go (base/<name>); it cuts with tears in turn.
func newPowerCuts(t *testing.T, tears []powercut.Tear) (pc *powerCuts, base string) {
	t.Helper()
	if err := powercut.Available(); err != nil {
		powercut.Skip(t, err)
	}
	base = shortTempDir(t)
	dir := filepath.Join(base, "d")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), uint64(len(t.Name()))))
	return &powerCuts{t: t, dir: dir, rng: rng, tears: tears, next: rng.IntN(len(tears)), effects: map[powercut.Tear][]powercut.Effect{}}, base
}

// command is a kubestore command started by the test; done is closed when
// it has ended.
type command struct {
	*exec.Cmd
	done chan struct{}
}

// mount mounts dir over real (a disk that survived a cut, or a new one).
func (pc *powerCuts) mount(real string) {
	pc.t.Helper()
	f, err := powercut.Mount(pc.dir, real)
	if err != nil {
		pc.t.Fatal(err)
	}
	pc.fs, pc.real = f, real
	pc.t.Cleanup(func() { f.Unmount() })
}

// cut cuts the power under p at once, with the next tear: the file system
// drops what was not synced (test/powercut) and p is killed at the same
// instant; then the file system is unmounted.
func (pc *powerCuts) cut(p *proc, phase string) {
	pc.t.Helper()
	pc.cutWith(p, phase, func(t powercut.Tear) powercut.Effect { return pc.fs.CutWith(t, pc.rng) })
}

// cutAtNext cuts the power under p at the first moment within 2 s that the
// next tear has something to tear (powercut.CutAtNext): at a random instant
// etcd, which syncs before it answers, mostly leaves nothing unsynced.
func (pc *powerCuts) cutAtNext(p *proc, phase string) {
	pc.t.Helper()
	pc.cutWith(p, phase, func(t powercut.Tear) powercut.Effect { return pc.fs.CutAtNext(t, pc.rng, 2*time.Second) })
}

func (pc *powerCuts) cutWith(p *proc, phase string, cut func(powercut.Tear) powercut.Effect) {
	pc.t.Helper()
	tear := pc.tears[pc.next%len(pc.tears)]
	pc.next++
	e := cut(tear)
	p.kill()
	for _, c := range pc.commands {
		c.Process.Kill()
		<-c.done
	}
	pc.commands = nil
	if err := pc.fs.Unmount(); err != nil {
		pc.t.Fatal(err)
	}
	pc.cuts++
	pc.effects[tear] = append(pc.effects[tear], e)
	pc.t.Logf("cut %d during %s: %s", pc.cuts, phase, e)
}

// tally sums the cuts' effects by tear: how many of each, how many had
// something to tear, and what they kept.
func (pc *powerCuts) tally() string {
	var out []string
	dropped := 0
	for _, tear := range []powercut.Tear{powercut.LoseUnsynced, powercut.TornWrite, powercut.ReorderedPair, powercut.JournaledEntries, powercut.LostFsync} {
		es := pc.effects[tear]
		if len(es) == 0 {
			continue
		}
		acted, sectors, entries, reverted := 0, 0, 0, 0
		for _, e := range es {
			if e.Acted {
				acted++
			}
			sectors += e.SectorsKept
			entries += e.EntriesKept
			reverted += e.PagesReverted
			dropped += e.Dropped
		}
		line := fmt.Sprintf("%d %s (%d acted", len(es), tear, acted)
		switch tear {
		case powercut.TornWrite:
			line += fmt.Sprintf(", %d sectors kept", sectors)
		case powercut.JournaledEntries:
			line += fmt.Sprintf(", %d entries kept", entries)
		case powercut.LostFsync:
			line += fmt.Sprintf(", %d pages reverted", reverted)
		}
		out = append(out, line+")")
	}
	return fmt.Sprintf("%d: %s; dirty pages dropped %d", pc.cuts, strings.Join(out, ", "), dropped)
}

// checkFiles checks that every file kubestore generated (certificates,
// keys, kubeconfig, a site's join secret and join record) is whole on the disk: the old or the new version, never
// a partial one.
func (pc *powerCuts) checkFiles() {
	pc.t.Helper()
	pki := filepath.Join(pc.real, "pki")
	entries, err := os.ReadDir(pki)
	if err != nil && !os.IsNotExist(err) { // none yet: cut before the first
		pc.t.Fatalf("reading %s: %v", pki, err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") || !e.Type().IsRegular() {
			continue
		}
		data, err := os.ReadFile(filepath.Join(pki, e.Name()))
		if err != nil {
			pc.t.Fatal(err)
		}
		if e.Name() == "join-secret" {
			// A site's join secret: one line of at least 16 characters.
			if line := strings.TrimSpace(string(data)); len(line) < 16 || strings.Count(string(data), "\n") != 1 {
				pc.t.Errorf("pki/%s after a cut is not whole (%d bytes)", e.Name(), len(data))
			}
			continue
		}
		if strings.HasSuffix(e.Name(), ".yaml") {
			var doc map[string]any
			if err := yaml.Unmarshal(data, &doc); err != nil || len(doc) == 0 {
				pc.t.Errorf("pki/%s after a cut is not whole: %v (%d bytes)", e.Name(), err, len(data))
			}
			continue
		}
		blocks := 0
		for rest := data; ; {
			var b *pem.Block
			if b, rest = pem.Decode(rest); b == nil {
				if len(bytes.TrimSpace(rest)) > 0 {
					pc.t.Errorf("pki/%s after a cut: %d bytes that are not PEM", e.Name(), len(rest))
				}
				break
			}
			blocks++
		}
		if blocks == 0 {
			pc.t.Errorf("pki/%s after a cut holds no PEM block (%d bytes)", e.Name(), len(data))
		}
	}
	if data, err := os.ReadFile(filepath.Join(pc.real, "site-join.json")); err == nil {
		var j map[string]any
		if err := json.Unmarshal(data, &j); err != nil || j["memberID"] == nil {
			pc.t.Errorf("site-join.json after a cut is not whole: %v (%d bytes)", err, len(data))
		}
	}
	kc := filepath.Join(pc.real, "admin.kubeconfig")
	if data, err := os.ReadFile(kc); err == nil {
		if cfg, err := clientcmd.Load(data); err != nil || len(cfg.Clusters) == 0 {
			pc.t.Errorf("admin.kubeconfig after a cut is not whole: %v (%d bytes)", err, len(data))
		}
	}
}

// duringCompaction starts a physical compaction of etcd at its current
// revision and returns while it runs, or false if it had ended.
func (pc *powerCuts) duringCompaction() bool {
	pc.t.Helper()
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{"unix://" + filepath.Join(pc.dir, "etcd", "etcd.sock")}, DialTimeout: 5 * time.Second})
	if err != nil {
		pc.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(pc.t.Context(), 10*time.Second)
	resp, err := c.Get(ctx, "compact-revision-probe")
	if err != nil {
		pc.t.Fatalf("reading etcd's revision: %v", err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer cancel()
		defer c.Close()
		c.Compact(ctx, resp.Header.Revision, clientv3.WithCompactPhysical())
	}()
	time.Sleep(time.Duration(pc.rng.Int64N(int64(20 * time.Millisecond))))
	// The cut comes now; the client sees the connection go.
	select {
	case <-done:
		return false
	default:
		return true
	}
}

// duringCommand runs kubestore with args and returns once a file matching
// glob appears on the disk (the command's work is under way), after a
// random part of a millisecond more, or false once the command has ended.
func (pc *powerCuts) duringCommand(glob string, args ...string) bool {
	pc.t.Helper()
	cmd := exec.Command(binary(pc.t), args...)
	if err := cmd.Start(); err != nil {
		pc.t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	pc.commands = append(pc.commands, command{cmd, done})
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if m, _ := filepath.Glob(glob); len(m) > 0 {
			break
		}
		select {
		case <-done:
			return false
		case <-time.After(200 * time.Microsecond):
		}
	}
	time.Sleep(time.Duration(pc.rng.Int64N(int64(time.Millisecond))))
	select {
	case <-done:
		return false
	default:
		return true
	}
}

// duringSnapshotSave saves one snapshot to completion, then starts a second
// one and returns while it is written. The check it returns, run after the
// restart, wants the first whole and the second absent or whole.
func (pc *powerCuts) duringSnapshotSave() func() {
	pc.t.Helper()
	saved := filepath.Join(pc.dir, fmt.Sprintf("saved-%d.db", pc.cuts))
	mustRunKubestore(pc.t, "snapshot", "save", "--data-dir", pc.dir, saved)
	interrupted := filepath.Join(pc.dir, fmt.Sprintf("interrupted-%d.db", pc.cuts))
	underWay := pc.duringCommand(filepath.Join(pc.real, "."+filepath.Base(interrupted)+".part*"), "snapshot", "save", "--data-dir", pc.dir, interrupted)
	pc.t.Logf("the second snapshot save was under way at the cut: %v", underWay)
	return func() {
		pc.t.Helper()
		for _, f := range []string{saved, interrupted} {
			data, err := os.ReadFile(filepath.Join(pc.real, filepath.Base(f)))
			if err != nil {
				if f == saved || !os.IsNotExist(err) {
					pc.t.Errorf("snapshot %s after a cut: %v", filepath.Base(f), err)
				}
				continue
			}
			// etcd ends a snapshot with the sha256 of what precedes it.
			if sum := sha256.Sum256(data[:max(0, len(data)-sha256.Size)]); len(data) < sha256.Size || !bytes.Equal(sum[:], data[len(data)-sha256.Size:]) {
				pc.t.Errorf("snapshot %s after a cut is not whole (%d bytes)", filepath.Base(f), len(data))
			}
			pc.snapshots++
		}
	}
}

// duringLeaseBurst starts 8 writers that create and renew Leases as fast
// as they can, as node agents do after a reconnection, and returns while
// they run. The check it returns compares the Leases after the restart with
// what was acknowledged.
func (pc *powerCuts) duringLeaseBurst(p *proc, cycle int) func() {
	pc.t.Helper()
	cfg := p.restConfig()
	cfg.Timeout = 5 * time.Second
	leases := kubernetes.NewForConfigOrDie(cfg).CoordinationV1().Leases(crashNamespace)
	m := &model{names: map[string]outcome{}}
	ctx, cancel := context.WithCancel(pc.t.Context())
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := 0; ctx.Err() == nil; i++ {
				name := fmt.Sprintf("burst-%d-%d-%d", cycle, w, i%10)
				holder := fmt.Sprintf("holder-%d", i)
				var got *coordinationv1.Lease
				var err error
				if i < 10 {
					got, err = leases.Create(ctx, &coordinationv1.Lease{
						ObjectMeta: metav1.ObjectMeta{Name: name},
						Spec:       coordinationv1.LeaseSpec{HolderIdentity: &holder},
					}, metav1.CreateOptions{})
				} else {
					got, err = leases.Update(ctx, &coordinationv1.Lease{
						ObjectMeta: metav1.ObjectMeta{Name: name},
						Spec:       coordinationv1.LeaseSpec{HolderIdentity: &holder},
					}, metav1.UpdateOptions{})
				}
				if err != nil {
					// The power went: this write may or may not have landed.
					m.unanswered(name, holder)
					return
				}
				m.ack(name, holder, got.ResourceVersion)
			}
		})
	}
	time.Sleep(200*time.Millisecond + time.Duration(pc.rng.Int64N(int64(800*time.Millisecond))))
	return func() {
		pc.t.Helper()
		cancel()
		wg.Wait()
		list, err := p.clientset().CoordinationV1().Leases(crashNamespace).List(pc.t.Context(), metav1.ListOptions{})
		if err != nil {
			pc.t.Fatalf("listing Leases after a cut: %v", err)
		}
		stored := map[string]string{}
		prefix := fmt.Sprintf("burst-%d-", cycle)
		for _, l := range list.Items {
			if strings.HasPrefix(l.Name, prefix) && l.Spec.HolderIdentity != nil {
				stored[l.Name] = *l.Spec.HolderIdentity
			}
		}
		m.compare(pc.t, stored, cycle)
		pc.leaseAcks += int(m.acked)
		if m.lost+m.phantom > 0 {
			pc.t.Errorf("lease burst of cycle %d: %d acknowledged writes lost, %d phantoms", cycle, m.lost, m.phantom)
		}
	}
}
