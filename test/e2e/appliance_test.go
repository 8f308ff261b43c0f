package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// requireRootTools skips a test that needs root and the given commands.
func requireRootTools(t *testing.T, tools ...string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root for namespaces")
	}
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs %s", tool)
		}
	}
}

// procInfo is what /proc/PID/stat says about a process.
type procInfo struct {
	pid, ppid int
	comm      string
	state     string
}

// processes lists every process the test can see.
func processes(t *testing.T) []procInfo {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var ps []procInfo
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...; comm may hold spaces and parentheses.
		s := string(data)
		open, close := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || close < open {
			continue
		}
		f := strings.Fields(s[close+1:])
		if len(f) < 2 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		ps = append(ps, procInfo{pid: pid, ppid: ppid, comm: s[open+1 : close], state: f[0]})
	}
	return ps
}

func children(t *testing.T, ppid int) []procInfo {
	t.Helper()
	var cs []procInfo
	for _, p := range processes(t) {
		if p.ppid == ppid {
			cs = append(cs, p)
		}
	}
	return cs
}

// As PID 1 of a PID namespace kubestore reaps orphans (one left by the
// shell that exec'd it, one orphaned into the namespace later), stops
// with status 0 on SIGTERM, and a restart finds every acknowledged write.
func TestPID1ReapsOrphansAndStopsCleanly(t *testing.T) {
	requireRootTools(t, "unshare", "nsenter", "sh", "sleep")
	requireKubectl(t)
	dir := shortTempDir(t)
	p := startWrapped(t, []string{"unshare", "--pid", "--fork", "--mount-proc", "sh", "-c", `sleep 0.2 & exec "$0" "$@"`}, dir)

	kids := children(t, p.cmd.Process.Pid)
	if len(kids) != 1 {
		t.Fatalf("unshare has %d children, want kubestore only: %+v", len(kids), kids)
	}
	pid := kids[0].pid
	status, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if !strings.Contains(string(status), "\nNSpid:\t"+strconv.Itoa(pid)+"\t1\n") {
		t.Fatalf("kubestore is not PID 1 of its namespace:\n%s", status)
	}
	noChildren := func(what string) {
		t.Helper()
		if !eventually(10*time.Second, func() bool { return len(children(t, pid)) == 0 }) {
			t.Fatalf("%s: kubestore (PID 1) still has children: %+v", what, children(t, pid))
		}
	}
	noChildren("the shell's background sleep")

	// An orphan made inside the namespace after the start: the shell exits
	// at once and its sleep is re-parented to PID 1.
	if out, err := exec.Command("nsenter", "-t", strconv.Itoa(pid), "-p", "--", "sh", "-c", "sleep 2 </dev/null >/dev/null 2>&1 &").CombinedOutput(); err != nil {
		t.Fatalf("nsenter: %v\n%s", err, out)
	}
	adopted := false
	for _, c := range children(t, pid) {
		adopted = adopted || c.comm == "sleep"
	}
	if !adopted {
		t.Errorf("the orphan was not re-parented to kubestore: %+v", children(t, pid))
	}
	noChildren("the orphaned sleep")

	for i := range 5 {
		p.mustKubectl("create", "configmap", fmt.Sprintf("cm-%d", i))
	}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := p.wait(30 * time.Second); err != nil {
		t.Fatalf("exit after SIGTERM: %v\n%s", err, p.logs())
	}

	r := start(t, dir)
	names := r.mustKubectl("get", "configmaps", "-o", "name")
	for i := range 5 {
		if !strings.Contains(names, fmt.Sprintf("configmap/cm-%d\n", i)) {
			t.Errorf("cm-%d lost across the stop:\n%s", i, names)
		}
	}
}

// kubestore needs nothing writable but --data-dir: in a mount namespace
// where every mount is read-only except the data dir, with no HOME and no
// TMPDIR, it starts, serves writes and reads, and stops with status 0.
func TestReadOnlyRoot(t *testing.T) {
	requireRootTools(t, "unshare", "mount", "sh", "awk", "sort", "env", "touch")
	requireKubectl(t)
	dir := shortTempDir(t)
	script := `set -e
D='` + dir + `'
mount --make-rprivate /
mount --bind "$D" "$D"
for m in $(awk '{print $5}' /proc/self/mountinfo | sort -r); do
  [ "$m" = "$D" ] && continue
  mount -o remount,bind,ro "$m" 2>/dev/null || true
done
for probe in /probe /tmp/probe /var/tmp/probe /dev/shm/probe /run/probe; do
  if touch "$probe" 2>/dev/null; then echo "$probe is writable" >&2; exit 97; fi
done
touch "$D/probe" && rm "$D/probe"
exec env -u TMPDIR -u XDG_DATA_HOME HOME=/nonexistent "$0" "$@"`
	p := startWrapped(t, []string{"unshare", "--mount", "sh", "-c", script}, dir)
	p.mustKubectl("create", "namespace", "ro")
	p.mustKubectl("create", "configmap", "-n", "ro", "written")
	if out := p.mustKubectl("get", "configmaps", "-n", "ro", "-o", "name"); !strings.Contains(out, "configmap/written") {
		t.Errorf("list after create: %s", out)
	}
	stopGracefully(t, p)
}

// The first SIGTERM stops gracefully: an open watch ends (so its client
// reconnects elsewhere or later), /readyz stops answering ok, the process
// exits 0, and with --log-format=json every line it wrote is a JSON object,
// etcd's included.
func TestGracefulStopEndsWatchesAndLogsJSON(t *testing.T) {
	dir := shortTempDir(t)
	// At -v 4 etcd logs at info level: a normal start logs no etcd
	// warning to check the format of.
	p := start(t, dir, "--log-format", "json", "-v", "4")
	cms := p.clientset().CoreV1().ConfigMaps("default")
	if _, err := cms.Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "before-stop"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	w, err := cms.Watch(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	watchEnded := make(chan struct{})
	go func() {
		for range w.ResultChan() {
		}
		close(watchEnded)
	}()

	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-watchEnded:
	case <-time.After(15 * time.Second):
		t.Fatal("the open watch did not end within 15s of SIGTERM")
	}
	if p.ready() {
		t.Error("/readyz answers ok after the watches ended")
	}
	if err := p.wait(30 * time.Second); err != nil {
		t.Fatalf("exit after one SIGTERM: %v\n%s", err, p.logs())
	}

	lines := strings.Split(strings.TrimSpace(p.logs()), "\n")
	for _, line := range lines {
		var entry map[string]any
		if err := json.Unmarshal([]byte(line), &entry); err != nil {
			t.Errorf("--log-format=json wrote a line that is not JSON: %q", line)
		}
	}
	if logs := p.logs(); !strings.Contains(logs, "Stopping gracefully") || !strings.Contains(logs, `"logger":"etcd`) {
		t.Errorf("the JSON log lacks the stop message or etcd's lines:\n%s", logs)
	}
	t.Logf("%d JSON log lines", len(lines))

	r := start(t, dir)
	if out := r.mustKubectl("get", "configmap", "before-stop", "-o", "name"); !strings.Contains(out, "configmap/before-stop") {
		t.Errorf("lost across a graceful stop: %s", out)
	}
}

// A second signal exits at once, with status 1 where the graceful stop
// would exit 0; the data directory is usable afterwards and holds the
// acknowledged write.
func TestSecondSignalExitsAtOnce(t *testing.T) {
	dir := shortTempDir(t)
	p := start(t, dir, "--shutdown-timeout", "5m")
	p.mustKubectl("create", "configmap", "acknowledged")
	started := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	// The second signal as soon as the first is taken: a graceful stop
	// with nothing in flight can end within tens of milliseconds, and
	// two signals sent back to back may reach the process as one.
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(p.logs(), "Stopping gracefully"); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the first signal not taken within 10s\n%s", p.logs())
		}
	}
	if err := p.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	var exit *exec.ExitError
	if err := p.wait(10 * time.Second); !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("exit after two signals: %v, want status 1\n%s", err, p.logs())
	}
	t.Logf("exited %s after the first signal", time.Since(started).Round(time.Millisecond))
	if !strings.Contains(p.logs(), "Exiting at once") {
		t.Errorf("no message for the second signal:\n%s", p.logs())
	}

	r := start(t, dir)
	if out := r.mustKubectl("get", "configmap", "acknowledged", "-o", "name"); !strings.Contains(out, "configmap/acknowledged") {
		t.Errorf("lost after an immediate exit: %s", out)
	}
}

// As PID 1, kubestore does not exit on a failed start (the kernel would
// panic): it starts again in place, with the same PID, until the cause is
// gone, then serves, and still stops with status 0 on SIGTERM. The cause
// here is its port, held by another listener.
func TestPID1StartsAgainAfterAFailure(t *testing.T) {
	requireRootTools(t, "unshare", "sh")
	requireKubectl(t)
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	port := strconv.Itoa(busy.Addr().(*net.TCPAddr).Port)

	p := launch(t, binary(t), []string{"unshare", "--pid", "--fork", "--mount-proc"}, shortTempDir(t), "--secure-port", port)
	if !eventually(60*time.Second, func() bool { return strings.Count(p.logs(), "running as PID 1: starting again") >= 2 }) {
		t.Fatalf("kubestore did not start again twice while its port was taken:\n%s", p.logs())
	}
	kids := children(t, p.cmd.Process.Pid)
	if len(kids) != 1 {
		t.Fatalf("unshare has %d children, want kubestore only: %+v", len(kids), kids)
	}
	if !strings.Contains(p.logs(), "address already in use") {
		t.Errorf("the failure does not name its cause:\n%s", p.logs())
	}
	busy.Close()
	p.waitReady()
	if now := children(t, p.cmd.Process.Pid); len(now) != 1 || now[0].pid != kids[0].pid {
		t.Errorf("kubestore's process changed: before %+v, now %+v", kids, now)
	}
	p.mustKubectl("create", "configmap", "after-restarts")
	if err := syscall.Kill(kids[0].pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := p.wait(30 * time.Second); err != nil {
		t.Fatalf("exit after SIGTERM: %v\n%s", err, p.logs())
	}
}

// A SIGTERM while the server is still starting (its kubeconfig written,
// its post-start hooks not all done) is a graceful stop like any other:
// status 0, no fatal line, and the data dir serves again. Upstream's
// post-start hooks end the process when a stop cancels them, so the stop
// waits for them first.
func TestStopDuringStart(t *testing.T) {
	for _, delay := range []time.Duration{0, 300 * time.Millisecond} {
		t.Run(delay.String(), func(t *testing.T) {
			dir := shortTempDir(t)
			p := launch(t, binary(t), nil, dir)
			if !eventually(60*time.Second, func() bool {
				_, err := os.Stat(p.kubeconfig)
				return err == nil || p.hasExited()
			}) {
				t.Fatalf("no kubeconfig within 60s:\n%s", p.logs())
			}
			time.Sleep(delay)
			if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			if err := p.wait(60 * time.Second); err != nil {
				t.Fatalf("exit after a SIGTERM during the start: %v\n%s", err, p.logs())
			}
			for _, line := range strings.Split(p.logs(), "\n") {
				if strings.HasPrefix(line, "F") || strings.Contains(line, "PostStartHook") {
					t.Errorf("fatal line: %s", line)
				}
			}
			start(t, dir).mustKubectl("get", "namespaces")
		})
	}
}
