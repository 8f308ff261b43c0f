package e2e

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubestore/kubestore/datadir"
	"github.com/kubestore/kubestore/test/ports"
)

// goBinary is a program of this module built once per test run.
type goBinary struct {
	pkg     string // relative to the module root
	name    string
	ldflags string   // passed to go build when set
	env     []string // added to go build's environment
	// commit, when set, is the commit of this repository to build (its
	// tree from git archive, in a temporary directory) instead of the
	// checkout.
	commit string
	once   sync.Once
	path   string
	err    error
}

func (b *goBinary) get(t *testing.T) string {
	t.Helper()
	b.once.Do(func() {
		dir, err := os.MkdirTemp("", "kubestore-e2e")
		if err != nil {
			b.err = err
			return
		}
		b.path = filepath.Join(dir, b.name)
		_, file, _, _ := runtime.Caller(0)
		src := filepath.Join(filepath.Dir(file), "..", "..")
		if b.commit != "" {
			tree := filepath.Join(dir, "src")
			archive := exec.Command("sh", "-c", `mkdir "$1" && git archive "$2" | tar -x -C "$1"`, "sh", tree, b.commit)
			archive.Dir = src
			if out, err := archive.CombinedOutput(); err != nil {
				b.err = fmt.Errorf("the tree of commit %s: %v\n%s", b.commit, err, out)
				return
			}
			defer os.RemoveAll(tree)
			src = tree
		}
		args := []string{"build", "-o", b.path}
		if b.ldflags != "" {
			args = append(args, "-ldflags", b.ldflags)
		}
		cmd := exec.Command("go", append(args, "./"+b.pkg)...)
		cmd.Dir = src
		cmd.Env = append(os.Environ(), b.env...)
		if out, err := cmd.CombinedOutput(); err != nil {
			b.err = fmt.Errorf("go build ./%s: %v\n%s", b.pkg, err, out)
		}
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}

var kubestoreBinary = &goBinary{pkg: ".", name: "kubestore"}

// binary returns the kubestore binary under test: KUBESTORE_BIN, or one
// built from this checkout.
func binary(t *testing.T) string {
	t.Helper()
	if b := os.Getenv("KUBESTORE_BIN"); b != "" {
		return b
	}
	return kubestoreBinary.get(t)
}

// shortTempDir is a temporary directory with a short path: the etcd socket
// path inside it must stay under 108 bytes. It is kept, and named in the
// log, when the test fails, so that the data and logs can be inspected.
func shortTempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "ks")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("kept %s", dir)
			return
		}
		os.RemoveAll(dir)
	})
	return dir
}

// freePorts are n loopback ports free now, none returned before.
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	return ports.Free(t, n)
}

// freePort is a TCP port on loopback that nothing listens on right now
// (freePorts).
func freePort(t *testing.T) int {
	t.Helper()
	return freePorts(t, 1)[0]
}

// eventually polls cond until it holds or timeout has passed, and reports
// whether it held.
func eventually(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(100 * time.Millisecond)
	}
	return true
}

// process is a program running for a test: kubestore (proc), an upstream
// binary (run), the operator (startReplica).
type process struct {
	t    *testing.T
	name string
	cmd  *exec.Cmd
	out  output
	// exited is closed once the process has exited; err is its status.
	exited chan struct{}
	err    error
}

// output is what a process writes, kept for the test: a serverLog or a
// lockedWriter.
type output interface {
	io.Writer
	String() string
}

// owner is what a process belongs to: the test that started it or, for
// what the tests share, the suite.
type owner interface {
	Cleanup(func())
	Failed() bool
	Logf(format string, args ...any)
	Errorf(format string, args ...any)
}

// startProcess starts cmd, its stdout and stderr already pointed at out
// (or not). When o ends the process is killed, and what it wrote is logged
// if o failed: the last logLimit bytes, or all of it when logLimit is 0. A
// serverLog that flooded fails o.
func startProcess(t *testing.T, o owner, name string, cmd *exec.Cmd, out output, logLimit int) *process {
	t.Helper()
	p := &process{t: t, name: name, cmd: cmd, out: out, exited: make(chan struct{})}
	must(t, cmd.Start())
	go func() { p.err = cmd.Wait(); close(p.exited) }()
	o.Cleanup(func() {
		p.kill()
		if l, ok := out.(*serverLog); ok && l.flood() != "" {
			o.Errorf("%s wrote more than %d MiB of log: %s", name, maxServerLog>>20, l.flood())
		} else if o.Failed() && logLimit > 0 {
			o.Logf("%s output (last %d KiB):\n%s", name, logLimit>>10, tail(p.logs(), logLimit))
		} else if o.Failed() {
			o.Logf("%s output:\n%s", name, p.logs())
		}
	})
	return p
}

// logOutput logs what a process wrote, as startProcess does when its
// owner failed: from this file, so that scripts/testsummary leaves it out
// of the test's own messages.
func logOutput(o owner, name, out string) { o.Logf("%s output:\n%s", name, out) }

// logs is what the process wrote (a kubestore's stderr: its last MiB once
// it flooded).
func (p *process) logs() string { return p.out.String() }

func (p *process) hasExited() bool {
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM and waits for the exit status.
func (p *process) stop(timeout time.Duration) error {
	p.t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	return p.wait(timeout)
}

// kill sends SIGKILL, unless the process has exited, and waits for the
// exit.
func (p *process) kill() {
	if !p.hasExited() {
		p.cmd.Process.Kill() //nolint:errcheck // it may have exited
	}
	<-p.exited
}

// wait returns the exit status of the process, or an error if it is still
// running after timeout.
func (p *process) wait(timeout time.Duration) error {
	select {
	case <-p.exited:
		return p.err
	case <-time.After(timeout):
		return fmt.Errorf("did not exit within %s", timeout)
	}
}

// tail is the last n bytes of s.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}

// suite owns what the tests share (the mirror tests' upstream); TestMain
// ends it once they have run.
var suite = &suiteOwner{}

type suiteOwner struct {
	mu       sync.Mutex
	cleanups []func()
	failed   bool // a test that used what the suite owns failed
	errored  bool // a cleanup reported an error
}

func (s *suiteOwner) Cleanup(f func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cleanups = append(s.cleanups, f)
}

func (s *suiteOwner) Failed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.failed || s.errored
}

func (s *suiteOwner) Logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
}

func (s *suiteOwner) Errorf(format string, args ...any) {
	s.Logf(format, args...)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.errored = true
}

// sharedBy records that t uses what the suite owns: if t fails, the
// suite's processes are logged and its directories kept at the end.
func (s *suiteOwner) sharedBy(t *testing.T) {
	t.Cleanup(func() {
		if t.Failed() {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.failed = true
		}
	})
}

// end runs the cleanups, the last registered first, and reports whether
// one reported an error.
func (s *suiteOwner) end() bool {
	s.mu.Lock()
	cleanups := s.cleanups
	s.cleanups = nil
	s.mu.Unlock()
	for i := len(cleanups) - 1; i >= 0; i-- {
		cleanups[i]()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.errored
}

func TestMain(m *testing.M) {
	code := m.Run()
	if suite.end() && code == 0 {
		code = 1
	}
	os.Exit(code)
}

// proc is a running kubestore: the process, its data dir and its admin
// kubeconfig.
type proc struct {
	*process
	dataDir    string
	kubeconfig string
}

// start runs kubestore serve on dataDir with a free port and waits until
// /readyz answers ok. args come after the defaults, so "--secure-port N"
// among them picks the port.
func start(t *testing.T, dataDir string, args ...string) *proc {
	t.Helper()
	return startWrapped(t, nil, dataDir, args...)
}

// startWrapped is start with the binary run by a wrapper command (unshare,
// qemu), whose last argument is followed by the binary and its arguments.
func startWrapped(t *testing.T, wrap []string, dataDir string, args ...string) *proc {
	t.Helper()
	return startBinary(t, binary(t), wrap, dataDir, args...)
}

// startBinary is startWrapped with a binary other than the one under test
// (a cross-compiled one). The process is killed when the test ends, and
// its stderr logged if the test failed.
func startBinary(t *testing.T, bin string, wrap []string, dataDir string, args ...string) *proc {
	t.Helper()
	p := launch(t, bin, wrap, dataDir, args...)
	p.waitReady()
	return p
}

// launch starts the process as startBinary does, without waiting for it to
// be ready.
func launch(t *testing.T, bin string, wrap []string, dataDir string, args ...string) *proc {
	t.Helper()
	return launchOwned(t, t, bin, wrap, dataDir, args...)
}

// launchOwned is launch with the process owned by o (startProcess).
func launchOwned(t *testing.T, o owner, bin string, wrap []string, dataDir string, args ...string) *proc {
	t.Helper()
	all := append([]string{"--data-dir", dataDir, "--secure-port", "0", "--shutdown-timeout", "20s"}, args...)
	argv := append(append(append([]string{}, wrap...), bin), all...)
	cmd := exec.Command(argv[0], argv[1:]...)
	stderr := &serverLog{}
	cmd.Stderr = stderr
	p := &proc{dataDir: dataDir, kubeconfig: filepath.Join(dataDir, "admin.kubeconfig")}
	// A kubeconfig from a previous run names an old port.
	os.Remove(p.kubeconfig)
	p.process = startProcess(t, o, "kubestore", cmd, stderr, 0)
	return p
}

// waitReady waits until /readyz answers ok, at most 90 s.
func (p *proc) waitReady() {
	p.t.Helper()
	if !eventually(90*time.Second, func() bool { return p.hasExited() || p.ready() }) {
		p.t.Fatalf("kubestore not ready within 90s\n%s", p.logs())
	}
	if p.hasExited() {
		p.t.Fatalf("kubestore exited before ready: %v\n%s", p.err, p.logs())
	}
}

type lockedWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

func (l *lockedWriter) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.String()
}

// What the harness keeps of a server's stderr: a server caught in a busy
// loop once logged 3.8 GB, and the test process keeping it was OOM-killed.
const (
	maxServerLog  = 64 << 20 // written beyond it, the server flooded its log
	keptServerLog = 1 << 20  // what is kept of a flooded log: its last MiB
)

// serverLog is a process's stderr: all of it up to maxServerLog; once more
// was written, its last keptServerLog bytes from the start of a line, and
// the line the server repeats. It goes on taking what the server writes: a
// server that cannot write to its stderr dies of SIGPIPE.
type serverLog struct {
	mu      sync.Mutex
	buf     []byte
	written int64
	flooded string // the line repeated, once flooded
}

func (l *serverLog) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.written += int64(len(b))
	if l.flooded != "" {
		return len(b), nil
	}
	l.buf = append(l.buf, b...)
	if l.written > maxServerLog {
		tail := l.buf[len(l.buf)-keptServerLog:]
		if i := bytes.IndexByte(tail, '\n'); i >= 0 {
			tail = tail[i+1:]
		}
		l.buf = append([]byte(nil), tail...)
		l.flooded = mostRepeated(l.buf)
	}
	return len(b), nil
}

func (l *serverLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return string(l.buf)
}

// flood says which line the server repeated once it wrote more than
// maxServerLog, or is empty.
func (l *serverLog) flood() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.flooded
}

// mostRepeated describes the line of log most repeated: lines alike but for
// their digits (times, counts) are one.
func mostRepeated(log []byte) string {
	lines := strings.Split(strings.TrimSpace(string(log)), "\n")
	count := map[string]int{}
	first := map[string]string{}
	var most string
	for _, l := range lines {
		k := strings.Map(func(r rune) rune {
			if r >= '0' && r <= '9' {
				return '#'
			}
			return r
		}, l)
		if count[k]++; count[k] == 1 {
			first[k] = l
		}
		if count[k] > count[most] {
			most = k
		}
	}
	line := first[most]
	if len(line) > 1000 {
		line = line[:1000] + "…"
	}
	return fmt.Sprintf("%d of its last %d lines are like %q", count[most], len(lines), line)
}

// A server's log is kept whole up to 64 MiB; past it the process is
// flooded, named by the line it repeats, and only its last MiB is kept.
func TestServerLog(t *testing.T) {
	var l serverLog
	fmt.Fprintf(&l, "first line\n")
	for i := 0; l.written < 3*keptServerLog; i++ {
		fmt.Fprintf(&l, "line %d\n", i)
	}
	if logs := l.String(); !strings.HasPrefix(logs, "first line\n") || int64(len(logs)) != l.written || l.flood() != "" {
		t.Fatalf("after 3 MiB: kept %d bytes of %d from %.20q, flood %q", len(logs), l.written, logs, l.flood())
	}
	chunk := []byte(strings.Repeat(`{"level":"warn","ts":"2025-01-01T00:00:00.000Z","msg":"failed to publish local member to cluster through raft"}`+"\n", 40))
	for l.written <= maxServerLog+keptServerLog {
		l.Write(chunk)
	}
	flood, logs := l.flood(), l.String()
	if !strings.Contains(flood, `failed to publish local member`) || len(logs) > keptServerLog || !strings.HasPrefix(logs, `{"level"`) || cap(l.buf) > 2*keptServerLog {
		t.Errorf("after 65 MiB: flood %q, kept %d bytes in %d from %.20q", flood, len(logs), cap(l.buf), logs)
	}
	t.Logf("the server wrote more than %d MiB of log: %s", maxServerLog>>20, flood)
}

// server is the https URL from the kubeconfig, once written.
func (p *proc) server() string {
	kc, err := clientcmd.LoadFromFile(p.kubeconfig)
	if err != nil {
		return ""
	}
	for _, c := range kc.Clusters {
		return c.Server
	}
	return ""
}

// anonymous is an HTTPS client without a client certificate.
var anonymous = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}

func (p *proc) ready() bool { return p.readyAt("/readyz") }

// readyAt reports whether the health endpoint path (with its query)
// answers 200.
func (p *proc) readyAt(path string) bool {
	url := p.server()
	if url == "" {
		return false
	}
	resp, err := anonymous.Get(url + path)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// kubectl runs kubectl against the process and returns its output.
func (p *proc) kubectl(args ...string) (string, error) {
	return runCommand(60*time.Second, "kubectl", append([]string{"--kubeconfig", p.kubeconfig}, args...)...)
}

func (p *proc) mustKubectl(args ...string) string {
	p.t.Helper()
	out, err := p.kubectl(args...)
	if err != nil {
		p.t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// restConfig is the client config of the process's admin kubeconfig,
// without client-side rate limiting.
func (p *proc) restConfig() *rest.Config {
	p.t.Helper()
	rc, err := clientcmd.BuildConfigFromFlags("", p.kubeconfig)
	if err != nil {
		p.t.Fatal(err)
	}
	rc.QPS, rc.Burst = -1, -1
	return rc
}

func (p *proc) clientset() *kubernetes.Clientset {
	p.t.Helper()
	return kubernetes.NewForConfigOrDie(p.restConfig())
}

// etcdClient is a client of the process's embedded etcd, on its socket,
// closed when the test ends.
func (p *proc) etcdClient() *clientv3.Client {
	p.t.Helper()
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{"unix://" + filepath.Join(p.dataDir, "etcd", "etcd.sock")}, DialTimeout: 5 * time.Second})
	if err != nil {
		p.t.Fatal(err)
	}
	p.t.Cleanup(func() { c.Close() })
	return c
}

// rv returns the resourceVersion of an object as a number.
func (p *proc) rv(args ...string) int64 {
	p.t.Helper()
	out := p.mustKubectl(append(args, "-o", "jsonpath={.metadata.resourceVersion}")...)
	return mustRV(p.t, strings.TrimSpace(out))
}

// stopGracefully stops p with SIGTERM and fails the test, with p's log,
// unless it exits 0 within 30 s.
func stopGracefully(t *testing.T, p *proc) {
	t.Helper()
	if err := p.stop(30 * time.Second); err != nil {
		t.Fatalf("graceful stop: %v\n%s", err, p.logs())
	}
}

// runKubestore runs a kubestore command to completion and returns its
// output.
func runKubestore(t *testing.T, args ...string) (string, error) {
	t.Helper()
	out, err := exec.Command(binary(t), args...).CombinedOutput()
	return string(out), err
}

func mustRunKubestore(t *testing.T, args ...string) string {
	t.Helper()
	return mustRun(t, binary(t), args...)
}

// mustRun runs a command to completion and returns its output; a failure
// fails the test with the output.
func mustRun(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", filepath.Base(name), strings.Join(args, " "), err, out)
	}
	return string(out)
}

// mustRV is a resourceVersion as a number.
func mustRV(t *testing.T, rv string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(rv, 10, 64)
	if err != nil {
		t.Fatalf("resourceVersion %q: %v", rv, err)
	}
	return n
}

func requireKubectl(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("kubectl"); err != nil {
		t.Fatal("kubectl is required by the end-to-end tests (.ci/run installs it)")
	}
}

// mapDiff lists how got differs from want, sorted, the first limit
// entries and how many more.
func mapDiff(want, got map[string]string, limit int) string {
	var out []string
	for k, w := range want {
		if g, ok := got[k]; !ok {
			out = append(out, fmt.Sprintf("%s: absent, want %q", k, w))
		} else if g != w {
			out = append(out, fmt.Sprintf("%s: %q, want %q", k, g, w))
		}
	}
	for k, g := range got {
		if _, ok := want[k]; !ok {
			out = append(out, fmt.Sprintf("%s: %q, want absent", k, g))
		}
	}
	sort.Strings(out)
	if len(out) > limit {
		out = append(out[:limit], fmt.Sprintf("and %d more", len(out)-limit))
	}
	return strings.Join(out, "; ")
}

// aside is the one copy of the etcd data dir set aside as name (etcd.removed,
// etcd.newer, ...), failing the test when there is none; with several, the
// latest.
func aside(t *testing.T, dir, name string) string {
	t.Helper()
	paths, err := datadir.Dir(dir).Aside(name)
	if err != nil || len(paths) == 0 {
		t.Fatalf("no copy of the data set aside as %s in %s (%v)", name, dir, err)
	}
	return paths[len(paths)-1]
}
