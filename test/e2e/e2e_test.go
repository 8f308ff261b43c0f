// Package e2e runs the built kubestore binary as a separate process and
// drives it with kubectl, client-go and plain HTTPS, as a user on a device
// would, signals and kills it, and runs the cross-built binaries under
// qemu. make test sets KUBESTORE_BIN to the binary it built; without it the
// tests build one. The process helpers are in proc_test.go.
package e2e

import (
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

const manifest = `apiVersion: v1
kind: Namespace
metadata:
  name: demo
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
  namespace: demo
  labels: {app: gateway}
data:
  mode: eco
---
apiVersion: v1
kind: Pod
metadata:
  name: agent
  namespace: demo
spec:
  containers:
  - name: agent
    image: registry.local/agent:1.0
`

// The README's kubectl walkthrough, as a user types it.
func TestKubectlWalkthrough(t *testing.T) {
	requireKubectl(t)
	p := start(t, shortTempDir(t))

	out := p.mustKubectl("get", "namespaces")
	for _, ns := range []string{"default", "kube-system", "kube-public", "kube-node-lease"} {
		if !strings.Contains(out, ns) {
			t.Errorf("kubectl get namespaces lacks %s:\n%s", ns, out)
		}
	}
	p.mustKubectl("create", "configmap", "hello", "--from-literal=a=b")
	if out := p.mustKubectl("get", "cm", "hello", "-o", "jsonpath={.data.a}"); out != "b" {
		t.Errorf("configmap data %q", out)
	}

	file := filepath.Join(t.TempDir(), "app.yaml")
	if err := os.WriteFile(file, []byte(manifest), 0o600); err != nil {
		t.Fatal(err)
	}
	if out := p.mustKubectl("apply", "-f", file); !strings.Contains(out, "configmap/settings created") {
		t.Errorf("first apply:\n%s", out)
	}
	if out := p.mustKubectl("apply", "-f", file); !strings.Contains(out, "configmap/settings unchanged") {
		t.Errorf("second apply must change nothing:\n%s", out)
	}
	if err := os.WriteFile(file, []byte(strings.Replace(manifest, "mode: eco", "mode: turbo", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	if out := p.mustKubectl("apply", "-f", file); !strings.Contains(out, "configmap/settings configured") {
		t.Errorf("apply of a change:\n%s", out)
	}
	if out := p.mustKubectl("apply", "--server-side", "-f", file); !strings.Contains(out, "serverside-applied") {
		t.Errorf("server-side apply:\n%s", out)
	}
	if out := p.mustKubectl("get", "cm", "settings", "-n", "demo", "-o", "jsonpath={.data.mode}"); out != "turbo" {
		t.Errorf("applied value %q", out)
	}

	out = p.mustKubectl("get", "po", "-n", "demo", "-o", "wide")
	for _, col := range []string{"NAME", "READY", "STATUS", "RESTARTS", "AGE", "IP", "NODE"} {
		if !strings.Contains(out, col) {
			t.Errorf("kubectl get pods -o wide lacks column %s:\n%s", col, out)
		}
	}
	if !strings.Contains(out, "agent") || !strings.Contains(out, "0/1") || !strings.Contains(out, "Pending") {
		t.Errorf("pod row:\n%s", out)
	}
	if out := p.mustKubectl("explain", "pod.spec.nodeName"); !strings.Contains(out, "nodeName") {
		t.Errorf("kubectl explain:\n%s", out)
	}
	if out := p.mustKubectl("api-resources"); !strings.Contains(out, "leases") || !strings.Contains(out, "endpointslices") {
		t.Errorf("api-resources:\n%s", out)
	}

	// Refusals read as on a cluster.
	out, err := p.kubectl("create", "configmap", "x", "-n", "missing")
	if err == nil || !strings.Contains(out, `namespaces "missing" not found`) {
		t.Errorf("create in a missing namespace: %v\n%s", err, out)
	}
	out, err = p.kubectl("delete", "namespace", "default")
	if err == nil || !strings.Contains(out, "Forbidden") {
		t.Errorf("deleting default: %v\n%s", err, out)
	}

	p.mustKubectl("delete", "namespace", "demo", "--timeout=60s")
	if out, err := p.kubectl("get", "cm", "settings", "-n", "demo"); err == nil || !strings.Contains(out, "NotFound") {
		t.Errorf("content of a deleted namespace is still there: %v\n%s", err, out)
	}

	// Anonymous requests: 401, except health.
	resp, err := anonymous.Get(p.server() + "/api/v1/namespaces")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("anonymous list: %d, want 401", resp.StatusCode)
	}
	for _, path := range []string{"/healthz", "/livez", "/readyz"} {
		resp, err := anonymous.Get(p.server() + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("anonymous %s: %d, want 200", path, resp.StatusCode)
		}
	}
	if out := p.mustKubectl("get", "--raw", "/version"); !strings.Contains(out, `"gitVersion": "v1.`) {
		t.Errorf("/version:\n%s", out)
	}
	if out := p.mustKubectl("get", "--raw", "/metrics"); !strings.Contains(out, "apiserver_watch_cache_consistent_read_total") {
		t.Error("/metrics lacks the watch cache metrics")
	}
}

// A graceful stop exits 0 and a restart finds every acknowledged write.
func TestStopAndRestart(t *testing.T) {
	requireKubectl(t)
	dir := shortTempDir(t)
	p := start(t, dir)
	for i := range 10 {
		p.mustKubectl("create", "configmap", fmt.Sprintf("cm-%d", i), fmt.Sprintf("--from-literal=i=%d", i))
	}
	started := time.Now()
	stopGracefully(t, p)
	t.Logf("graceful stop took %s", time.Since(started).Round(time.Millisecond))

	p = start(t, dir)
	out := p.mustKubectl("get", "configmaps", "-o", "name")
	for i := range 10 {
		if !strings.Contains(out, fmt.Sprintf("configmap/cm-%d\n", i)) {
			t.Errorf("cm-%d lost across a restart:\n%s", i, out)
		}
	}
}

// A second server on the same data directory refuses to start.
func TestDataDirIsLocked(t *testing.T) {
	dir := shortTempDir(t)
	start(t, dir)
	out, err := exec.Command(binary(t), "--data-dir", dir, "--secure-port", "0").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "in use by another kubestore process") {
		t.Errorf("second server on a locked data dir: %v\n%s", err, out)
	}
}

// Bad configuration fails at start with one line naming the flag and the
// value; commands print what they should.
func TestCommands(t *testing.T) {
	bin := binary(t)
	run := func(env []string, args ...string) (string, error) {
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	cases := []struct {
		name string
		env  []string
		args []string
		want []string
	}{
		{"bad flag value", nil, []string{"--secure-port", "70000"}, []string{"--secure-port", "70000"}},
		{"bad env value", []string{"KUBESTORE_WATCH_CACHE_SIZES=pods"}, nil, []string{"--watch-cache-sizes", "pods"}},
		{"bad duration", nil, []string{"--shutdown-timeout", "soon"}, []string{"shutdown-timeout", "soon"}},
		{"positional argument", nil, []string{"serve", "extra"}, []string{"extra"}},
		// Flags may follow a command's FILE (snapshot restore FILE --data-dir DIR).
		{"bad flag after FILE", nil, []string{"snapshot", "restore", "backup.db", "--bump-revision", "lots"}, []string{"bump-revision", "lots"}},
		{"unknown flag after FILE", nil, []string{"snapshot", "save", "backup.db", "--no-such-flag"}, []string{"-no-such-flag", "not defined"}},
		{"two FILEs", nil, []string{"snapshot", "restore", "a.db", "b.db"}, []string{"snapshot restore needs exactly one argument, FILE", `"b.db"`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, err := run(tc.env, append(tc.args, "--data-dir", shortTempDir(t))...)
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != 1 {
				t.Fatalf("want exit status 1, got %v\n%s", err, out)
			}
			if lines := strings.Split(strings.TrimSpace(out), "\n"); len(lines) > 2 {
				t.Errorf("want a short error, got %d lines:\n%s", len(lines), out)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
		})
	}

	out, err := run(nil, "version")
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"kubestore", "go1.", "etcd: v3.", "kubernetes API: v1."} {
		if !strings.Contains(out, w) {
			t.Errorf("version output lacks %q:\n%s", w, out)
		}
	}

	dir := shortTempDir(t)
	p := start(t, dir)
	got, err := run(nil, "kubeconfig", "--data-dir", dir)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := os.ReadFile(p.kubeconfig)
	if got != string(want) {
		t.Errorf("kubestore kubeconfig printed something else than %s", p.kubeconfig)
	}
}

// SIGHUP rereads the token file: a token added after the start works, a
// removed one stops working, and a broken file keeps the previous tokens.
func TestSIGHUPReloadsTokens(t *testing.T) {
	dir := shortTempDir(t)
	tokens := filepath.Join(dir, "tokens.csv")
	policy := filepath.Join(dir, "policy.yaml")
	write := func(path, data string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(tokens, "old-token-123456,agent,1\n")
	write(policy, "rules:\n- users: [agent]\n  verbs: [list]\n  resources: [configmaps]\n  namespaces: [default]\n")
	p := start(t, filepath.Join(dir, "data"), "--token-auth-file", tokens, "--authorization-policy-file", policy)
	status := func(token string) int {
		req, _ := http.NewRequest(http.MethodGet, p.server()+"/api/v1/namespaces/default/configmaps", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := anonymous.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	hangup := func(want string) {
		t.Helper()
		if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		if !eventually(10*time.Second, func() bool { return strings.Contains(p.logs(), want) }) {
			t.Fatalf("no %q in the log after SIGHUP", want)
		}
	}
	if got := status("old-token-123456"); got != http.StatusOK {
		t.Fatalf("old token before the reload: %d", got)
	}
	write(tokens, "new-token-123456,agent,1\n")
	hangup("SIGHUP: reloaded")
	if got := status("new-token-123456"); got != http.StatusOK {
		t.Errorf("new token after SIGHUP: %d, want 200", got)
	}
	if got := status("old-token-123456"); got != http.StatusUnauthorized {
		t.Errorf("removed token after SIGHUP: %d, want 401", got)
	}
	write(tokens, "lonely-field\n")
	hangup("SIGHUP: keeping the previous")
	if got := status("new-token-123456"); got != http.StatusOK {
		t.Errorf("token after a refused reload: %d, want 200", got)
	}
	if strings.Contains(p.logs(), "new-token-123456") || strings.Contains(p.logs(), "old-token-123456") {
		t.Errorf("a token appears in the log")
	}
	if err := p.stop(30 * time.Second); err != nil {
		t.Errorf("stop: %v", err)
	}
}

// On its defaults kubestore listens on loopback only (the embedded etcd on
// a unix socket), and its TLS listener refuses anything below TLS 1.2.
func TestListenersLoopbackOnlyAndTLS12(t *testing.T) {
	p := start(t, filepath.Join(shortTempDir(t), "data"))
	for _, addr := range listeningTCP(t, p.cmd.Process.Pid) {
		if !strings.HasPrefix(addr, "127.0.0.1:") {
			t.Errorf("listening on %s, want loopback only", addr)
		}
	}
	host := strings.TrimPrefix(p.server(), "https://")
	for _, v := range []uint16{tls.VersionTLS10, tls.VersionTLS11} {
		conn, err := tls.Dial("tcp", host, &tls.Config{InsecureSkipVerify: true, MinVersion: v, MaxVersion: v})
		if err == nil {
			conn.Close()
			t.Errorf("a TLS %s handshake succeeded", tls.VersionName(v))
		}
	}
	conn, err := tls.Dial("tcp", host, &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12, MaxVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatalf("TLS 1.2: %v", err)
	}
	conn.Close()
}

// listeningTCP returns the local addresses of the TCP sockets in LISTEN
// state that process pid holds open.
func listeningTCP(t *testing.T, pid int) []string {
	t.Helper()
	inodes := map[string]bool{}
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	for _, fd := range fds {
		link, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name()))
		if ino, ok := strings.CutPrefix(link, "socket:["); ok {
			inodes[strings.TrimSuffix(ino, "]")] = true
		}
	}
	var out []string
	for _, file := range []string{"tcp", "tcp6"} {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/%s", pid, file))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(data), "\n")[1:] {
			f := strings.Fields(line)
			// sl local_address rem_address st ... inode (the 10th field)
			if len(f) < 10 || f[3] != "0A" || !inodes[f[9]] {
				continue
			}
			out = append(out, procNetAddr(t, f[1]))
		}
	}
	if len(out) == 0 {
		t.Fatalf("found no listening TCP socket of pid %d", pid)
	}
	return out
}

// procNetAddr decodes /proc/net/tcp's hex "0100007F:1F90" (IPv4 or IPv6
// in host-order 32-bit words) into "127.0.0.1:8080".
func procNetAddr(t *testing.T, s string) string {
	ipHex, portHex, _ := strings.Cut(s, ":")
	raw, err := hex.DecodeString(ipHex)
	if err != nil {
		t.Fatalf("bad address %q", s)
	}
	for i := 0; i+4 <= len(raw); i += 4 {
		raw[i], raw[i+1], raw[i+2], raw[i+3] = raw[i+3], raw[i+2], raw[i+1], raw[i]
	}
	port, _ := strconv.ParseUint(portHex, 16, 16)
	ip := net.IP(raw)
	if v4 := ip.To4(); v4 != nil {
		ip = v4
	}
	return net.JoinHostPort(ip.String(), strconv.FormatUint(port, 10))
}

// The binary's version is a semantic version, the same in `kubestore
// version`, /version (as the Kubernetes version's build metadata) and the
// kubestore_build_info metric; a binary the Makefile built is the VERSION
// file's release or a development build of it.
func TestVersions(t *testing.T) {
	out, err := exec.Command(binary(t), "version").Output()
	if err != nil {
		t.Fatal(err)
	}
	first, _, _ := strings.Cut(string(out), "\n")
	version, ok := strings.CutPrefix(first, "kubestore ")
	if !ok || !semanticVersion.MatchString(version) {
		t.Fatalf("first line of kubestore version %q: want kubestore <semantic version>", first)
	}
	if os.Getenv("KUBESTORE_BIN") != "" {
		release, err := os.ReadFile("../../VERSION")
		if err != nil {
			t.Fatal(err)
		}
		r := strings.TrimSpace(string(release))
		if version != r && !strings.HasPrefix(version, r+"-dev+") {
			t.Errorf("make's binary says %q; want the VERSION file's %s or %s-dev+<commit>", version, r, r)
		}
	}

	p := start(t, shortTempDir(t))
	var info struct {
		GitVersion string `json:"gitVersion"`
	}
	if err := json.Unmarshal([]byte(p.mustKubectl("get", "--raw", "/version")), &info); err != nil {
		t.Fatal(err)
	}
	meta := strings.NewReplacer("+", "-").Replace(version)
	if !strings.HasPrefix(info.GitVersion, "v1.") || !strings.HasSuffix(info.GitVersion, "+kubestore."+meta) {
		t.Errorf("/version gitVersion %q; want v1.<minor>.<patch>+kubestore.%s", info.GitVersion, meta)
	}
	if metrics := p.mustKubectl("get", "--raw", "/metrics"); !strings.Contains(metrics, `version="`+version+`"`) ||
		!strings.Contains(metrics, "kubestore_build_info{") {
		t.Errorf("/metrics has no kubestore_build_info with version %q", version)
	}
}

// semanticVersion is semver.org 2.0.0's grammar, without a leading v.
var semanticVersion = regexp.MustCompile(`^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?(\+[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?$`)
