//go:build linux

package e2e

import (
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// releaseCuts is how many power cuts a release check makes: the count in
// the variable env, which make release-e2e sets; without it the test skips
// (a minute or more of cuts does not belong in the everyday run).
func releaseCuts(t *testing.T, env, what string) int {
	n, err := strconv.Atoi(os.Getenv(env))
	if err != nil || n <= 0 {
		t.Skipf("%s says how many %s to cut (make release-e2e sets it)", env, what)
	}
	return n
}

// releaseOnly skips t outside make release-e2e (which sets
// KUBESTORE_RELEASE_E2E): a suite whose minutes the everyday make test
// cannot afford, of a failure path that other suites already cover in
// part.
func releaseOnly(t *testing.T) {
	if os.Getenv("KUBESTORE_RELEASE_E2E") == "" {
		t.Skip("a release check: make release-e2e runs it")
	}
}

// TestPowerCutDuringUpdate cuts the power during the commit of an update
// to a newer data format (newerKubestore), at a random point before or
// after its commit point, and during the way back the previous release
// takes by itself (--restore-on-newer-data). After every cut the data is
// before the commit (format 1: the previous release serves it, and etcd's
// own record of the format says 1) or after it (format 2: the previous
// release refuses it, and the newer one finishes the migration, so that
// every stored key is rewritten), never between; nothing acknowledged is
// lost, but what the way back gives up (the writes since the update).
func TestPowerCutDuringUpdate(t *testing.T) {
	cuts := releaseCuts(t, "KUBESTORE_UPDATE_CUTS", "update commits")
	pc, base := newPowerCuts(t, honestTears)
	dir, rng := pc.dir, pc.rng
	newer := newerBinary(t)
	pc.mount(filepath.Join(base, "r"))

	// acked are the ConfigMaps acknowledged, by name; an update's commit
	// keeps them all, its way back those from before the update.
	acked := map[string]bool{}
	p := start(t, dir)
	createConfigMaps(t, p, "before-", 1000, acked)
	stopGracefully(t, p)

	var before, during, after, restoring, midRestore int
	for cycle := 1; cycle <= cuts; cycle++ {
		kept := maps.Clone(acked)
		n := startBinary(t, newer, nil, dir)
		if r := readFormatRecord(t, dir); r.Format != 1 || r.Update == nil || r.Update.Committed != nil {
			t.Fatalf("cycle %d: record of the update on trial: %+v", cycle, r)
		}
		createConfigMaps(t, n, fmt.Sprintf("trial-%d-", cycle), 20, acked)
		resp, err := n.etcdClient().Get(t.Context(), "revision-probe")
		if err != nil {
			t.Fatal(err)
		}
		rev := resp.Header.Revision

		pc.duringCommit(newer)
		pc.cut(n, "update commit")
		pc.mount(pc.real)

		r := readFormatRecord(t, dir)
		switch {
		case r.Format == 1 && r.Migration == nil:
			before++
			p := start(t, dir)
			checkConfigMaps(t, p, acked, fmt.Sprintf("cycle %d, cut before the commit point", cycle))
			if f := dataFormatInEtcd(t, p); f != "" {
				t.Errorf("cycle %d: cut before the commit point, but etcd says the data is of format %s", cycle, f)
			}
			stopGracefully(t, p)
			continue
		case r.Format == 2 && r.Migration != nil:
			during++
		case r.Format == 2:
			after++
		default:
			t.Fatalf("cycle %d: record after a cut during the commit: %+v", cycle, r)
		}

		// After the commit point: the previous release refuses the data,
		// and the newer one finishes the migration.
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		out, err := exec.CommandContext(ctx, binary(t), "--data-dir", dir, "--secure-port", "0").CombinedOutput()
		cancel()
		if !strings.Contains(string(out), "holds data format 2") || strings.Count(strings.TrimSpace(string(out)), "\n") > 0 {
			t.Fatalf("cycle %d: the previous release after the commit point: %v\n%s", cycle, err, out)
		}
		n = startBinary(t, newer, nil, dir)
		if !eventually(30*time.Second, func() bool { r := readFormatRecord(t, dir); return r.Migration == nil && r.Update.Committed != nil }) {
			t.Fatalf("cycle %d: the newer release did not finish the commit: %+v\n%s", cycle, readFormatRecord(t, dir), n.logs())
		}
		checkConfigMaps(t, n, acked, fmt.Sprintf("cycle %d, commit finished after a cut", cycle))
		if f := dataFormatInEtcd(t, n); f != "2" {
			t.Errorf("cycle %d: after the commit etcd says the data is of format %q", cycle, f)
		}
		checkRewritten(t, n.etcdClient(), rev, cycle)
		stopGracefully(t, n)

		// The way back by itself, cut once: half the time at a random
		// moment of its start, else in the restore.
		restoring++
		p = launch(t, binary(t), nil, dir, "--restore-on-newer-data")
		if rng.IntN(2) == 0 {
			time.Sleep(time.Duration(rng.Int64N(int64(1500 * time.Millisecond))))
		} else {
			eventually(10*time.Second, func() bool {
				b, _ := os.ReadFile(filepath.Join(dir, "format"))
				return strings.Contains(string(b), `"restoring"`) || p.hasExited()
			})
			time.Sleep(time.Duration(rng.Int64N(int64(100 * time.Millisecond))))
		}
		pc.cut(p, "restore of the pre-update snapshot")
		pc.mount(pc.real)
		if readFormatRecord(t, dir).Restoring {
			midRestore++
		}
		p = start(t, dir, "--restore-on-newer-data")
		acked = kept
		checkConfigMaps(t, p, acked, fmt.Sprintf("cycle %d, the way back after a cut", cycle))
		stopGracefully(t, p)
		if r := readFormatRecord(t, dir); r.Format != 1 || r.Restoring {
			t.Fatalf("cycle %d: record after the way back: %+v", cycle, r)
		}
	}
	summary := fmt.Sprintf("update commits cut: %d before the commit point, %d in the migration, %d after it; ways back cut: %d (%d in the restore)", before, during, after, restoring, midRestore)
	fmt.Println(summary)
	t.Log(summary)
}

// duringCommit runs kubestore update commit with the newer release and
// returns at a random moment of it: half the time in its first 60 ms
// (before the commit point, mostly), else up to 80 ms after the record
// names the migration.
func (pc *powerCuts) duringCommit(newer string) {
	pc.t.Helper()
	cmd := exec.Command(newer, "update", "commit", "--data-dir", pc.dir)
	if err := cmd.Start(); err != nil {
		pc.t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	pc.commands = append(pc.commands, command{cmd, done})
	if pc.rng.IntN(2) == 0 {
		time.Sleep(time.Duration(pc.rng.Int64N(int64(60 * time.Millisecond))))
		return
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if b, _ := os.ReadFile(filepath.Join(pc.dir, "format")); strings.Contains(string(b), `"migration"`) {
			break
		}
		select {
		case <-done:
			return
		case <-time.After(200 * time.Microsecond):
		}
	}
	time.Sleep(time.Duration(pc.rng.Int64N(int64(80 * time.Millisecond))))
}

// createConfigMaps creates n ConfigMaps named prefix0... of 512 bytes
// each, 8 at a time, and adds them to acked.
func createConfigMaps(t *testing.T, p *proc, prefix string, n int, acked map[string]bool) {
	t.Helper()
	cs := p.clientset()
	var mu sync.Mutex
	if _, err := parallelDo(t, 8, n, func(i int) error {
		name := prefix + strconv.Itoa(i)
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"v": strings.Repeat("x", 512)}}
		if _, err := cs.CoreV1().ConfigMaps("default").Create(t.Context(), cm, metav1.CreateOptions{}); err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		acked[name] = true
		return nil
	}); err != nil {
		t.Fatalf("creating ConfigMaps: %v", err)
	}
}

// checkConfigMaps wants exactly the acknowledged ConfigMaps (the test's
// own: kube-root-ca.crt aside).
func checkConfigMaps(t *testing.T, p *proc, acked map[string]bool, when string) {
	t.Helper()
	list, err := p.clientset().CoreV1().ConfigMaps("default").List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, cm := range list.Items {
		if cm.Name != "kube-root-ca.crt" {
			got[cm.Name] = true
		}
	}
	var lost, extra []string
	for name := range acked {
		if !got[name] {
			lost = append(lost, name)
		}
	}
	for name := range got {
		if !acked[name] {
			extra = append(extra, name)
		}
	}
	if len(lost)+len(extra) > 0 {
		slices.Sort(lost)
		slices.Sort(extra)
		t.Fatalf("%s: %d acknowledged ConfigMaps lost (%q), %d never acknowledged present (%q)", when,
			len(lost), lost[:min(5, len(lost))], len(extra), extra[:min(5, len(extra))])
	}
}

// dataFormatInEtcd is etcd's own record of the data's format, "" when it
// has none (format 1).
func dataFormatInEtcd(t *testing.T, p *proc) string {
	t.Helper()
	resp, err := p.etcdClient().Get(t.Context(), "/registry/-kubestore/data-format")
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) == 0 {
		return ""
	}
	return string(resp.Kvs[0].Value)
}

// checkRewritten wants every stored object (kubestore's own records
// aside) written after revision rev: the simulated format's migration
// rewrote each.
func checkRewritten(t *testing.T, c *clientv3.Client, rev int64, cycle int) {
	t.Helper()
	resp, err := c.Get(t.Context(), "/registry/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		t.Fatal(err)
	}
	var stale []string
	for _, kv := range resp.Kvs {
		if kv.ModRevision <= rev && !strings.HasPrefix(string(kv.Key), "/registry/-kubestore/") {
			stale = append(stale, string(kv.Key))
		}
	}
	if len(stale) > 0 {
		t.Errorf("cycle %d: %d of %d keys not rewritten by the finished commit: %.5q", cycle, len(stale), len(resp.Kvs), stale)
	}
}
