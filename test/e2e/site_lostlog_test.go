package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSiteMemberLostRaftLog: a follower's disk loses what etcd had synced
// and acknowledged (its etcd data goes back to an earlier copy, as after a
// failed flash), and etcd refuses it for good: raft panics, "Was the raft
// log corrupted, truncated, or lost?". kubestore records that before the
// process ends, and at the next start (as a supervisor or PID 1 mode
// starts it again) moves the data to etcd.log-lost and rejoins the site
// wiped, under its name, with every write made; nothing is wiped by hand.
func TestSiteMemberLostRaftLog(t *testing.T) {
	// Parallel: it waits more than it computes (leases, elections, polls),
	// with windows of tens of seconds (make test runs the waiting suites
	// side by side).
	t.Parallel()
	a, b, c := newGateway(t, "gw-a"), newGateway(t, "gw-b"), newGateway(t, "gw-c")
	token := foundSite(t, a, b, c)
	// The follower whose log is lost: raft's leader keeps what each
	// follower acknowledged only while it leads.
	list := a.memberList(t)
	victim, others := c, []*siteGateway{a, b}
	if strings.Contains(row(list, "gw-c"), "leader") {
		victim, others = b, []*siteGateway{a, c}
	}
	must(t, victim.p.stop(30*time.Second))
	etcdDir := filepath.Join(victim.dir, "etcd")
	earlier := filepath.Join(t.TempDir(), "etcd")
	mustRun(t, "cp", "-a", etcdDir, earlier)
	victim.start(t, a.url(), token)
	for i := range 50 {
		others[i%2].p.mustKubectl("create", "configmap", fmt.Sprintf("acked-%02d", i))
	}
	victim.p.mustKubectl("get", "configmap", "acked-49")
	must(t, victim.p.stop(30*time.Second))
	must(t, os.RemoveAll(etcdDir))
	must(t, os.Rename(earlier, etcdDir))

	victim.launch(t, a.url(), token)
	if err := victim.p.wait(60 * time.Second); err == nil {
		t.Fatalf("%s served with a raft log shorter than it acknowledged", victim.name)
	}
	if !strings.Contains(victim.p.logs(), "Was the raft log corrupted, truncated, or lost?") {
		t.Fatalf("%s exited, but not on raft's refusal of its lost log:\n%s", victim.name, victim.p.logs())
	}
	if _, err := os.Stat(filepath.Join(victim.dir, "etcd-log-lost")); err != nil {
		t.Fatalf("the lost log is not recorded: %v", err)
	}
	others[0].p.mustKubectl("create", "configmap", "while-down")

	victim.start(t, a.url(), token)
	for _, name := range []string{"acked-00", "acked-49", "while-down"} {
		victim.p.mustKubectl("get", "configmap", name)
	}
	if _, err := os.Stat(filepath.Join(aside(t, victim.dir, "etcd.log-lost"), "member")); err != nil {
		t.Errorf("the data of the lost log is not kept in etcd.log-lost: %v", err)
	}
	if _, err := os.Stat(filepath.Join(victim.dir, "etcd-log-lost")); !os.IsNotExist(err) {
		t.Errorf("the record of the lost log is still there after the rejoin: %v", err)
	}
	if !eventually(30*time.Second, func() bool { return voters(a.memberList(t), "gw-a", "gw-b", "gw-c") }) {
		t.Fatalf("the site is not three reachable voters after the rejoin:\n%s", a.memberList(t))
	}
}
