package e2e

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// approveServing approves the node's kubelet-serving CSR as the README
// says (kubectl certificate approve, as the gateway's admin) and waits
// until the kubelet serves the certificate kubestore's signer issued.
func approveServing(t *testing.T, g *realGateway, n *realNode) {
	t.Helper()
	ctx := t.Context()
	csrs := g.p.clientset().CertificatesV1().CertificateSigningRequests()
	var name string
	if !eventually(120*time.Second, func() bool {
		list, err := csrs.List(ctx, metav1.ListOptions{})
		if err != nil {
			return false
		}
		for _, c := range list.Items {
			if c.Spec.SignerName == certificatesv1.KubeletServingSignerName && c.Spec.Username == "system:node:"+n.name {
				name = c.Name
				return true
			}
		}
		return false
	}) {
		t.Fatalf("the kubelet of %s asked for no serving certificate in 120 s; its log on certificates:\n%s", n.name, grepLines(n.kubelet.logs(), "certificate"))
	}
	g.p.mustKubectl("certificate", "approve", name)
	if !eventually(60*time.Second, func() bool {
		_, err := g.p.kubectl("get", "--raw", "/api/v1/nodes/"+n.name+"/proxy/healthz")
		return err == nil
	}) {
		out, err := g.p.kubectl("get", "--raw", "/api/v1/nodes/"+n.name+"/proxy/healthz")
		t.Fatalf("the kubelet of %s does not answer through nodes/proxy 60 s after its serving certificate was approved: %v\n%s", n.name, err, out)
	}
}

// operatorCase is what checkOperator checks on one gateway.
type operatorCase struct {
	// kubelet is the kubeconfig of the node's kubelet, on its own
	// identity.
	kubelet string
	// viewer, when set, is the kubeconfig of a user the gateway's policy
	// lets read pods and their logs in appsNS, and nothing more.
	viewer string
	// app and crash are the pods' names.
	app, crash string
	// sessions: 100 exec and port-forward sessions, a terminal's
	// resizes, and attach to talk.
	sessions bool
}

// viewerPolicy is the gateway's --authorization-policy-file for the
// viewer of operatorCase.viewer (token viewerToken).
const (
	viewerToken  = "viewer-0123456789abcdef"
	viewerPolicy = `rules:
- users: ["viewer"]
  verbs: ["get", "list", "watch"]
  resources: ["pods", "pods/log"]
  namespaces: ["` + appsNS + `"]
`
)

// viewerAccess is the gateway's flags that make viewer (viewerPolicy),
// with the policy's further rules, and the path of viewer's kubeconfig,
// once the gateway's own is written (writeViewerKubeconfig).
func viewerAccess(t *testing.T, rules ...string) []string {
	t.Helper()
	dir := t.TempDir()
	tokens, policy := filepath.Join(dir, "tokens.csv"), filepath.Join(dir, "policy.yaml")
	must(t, os.WriteFile(tokens, []byte(viewerToken+",viewer,2001\n"), 0o600))
	must(t, os.WriteFile(policy, []byte(viewerPolicy+strings.Join(rules, "")), 0o600))
	return []string{"--token-auth-file", tokens, "--authorization-policy-file", policy}
}

// writeViewerKubeconfig is the gateway's admin kubeconfig with viewer's
// token instead of the admin's certificate.
func writeViewerKubeconfig(t *testing.T, g *realGateway) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "viewer.kubeconfig")
	writeEdgeKubeconfig(t, g.p.kubeconfig, strings.TrimPrefix(restConfigOf(t, g.p.kubeconfig).Host, "https://"), viewerToken, path)
	return path
}

// checkOperator is what an operator types on the gateway, with kubectl,
// as its admin: logs (of the running container, followed, and of the
// previous one of crash), exec with stdin and an exit code, the node
// proxy, the pod proxy to app's port, port-forward to app's port, and with sessions 100 sessions of
// exec and port-forward each; what a viewer may (logs) and may not do
// (exec, port-forward); and what the kubelet's own identity may not do:
// exec into a pod of its own node.
func checkOperator(t *testing.T, g *realGateway, n *realNode, o operatorCase) {
	t.Helper()
	app, crash := o.app, o.crash
	if out, err := g.p.kubectl("logs", "-n", appsNS, app); err != nil || !strings.Contains(out, "env WORKLOAD_PASSWORD="+appPassword) {
		t.Errorf("kubectl logs app: %v\n%s", err, out)
	}
	// Right after a crash-looping container ends, and until its next
	// sync, the kubelet's own status names the container before it as the
	// previous one, which it has just removed: the kubelet answers
	// "unable to retrieve container logs" (pkg/kubelet/kubelet_pods.go,
	// validateContainerLogStatus). An operator asks again. The kubelet's
	// next sync of a crash-looping pod waits for its back-off, which
	// grows to minutes: the test asks for two.
	previous := regexp.MustCompile(`(?m)^\S+Z exiting with 3 in 3s$`)
	var out string
	var err error
	if !eventually(2*time.Minute, func() bool {
		out, err = g.p.kubectl("logs", "-n", appsNS, crash, "--previous", "--timestamps")
		return err == nil && previous.MatchString(out)
	}) {
		t.Errorf("kubectl logs crash --previous --timestamps: %v\n%s", err, out)
	}
	// Followed: the stream stays open until kubectl is stopped.
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	followed, err := exec.CommandContext(ctx, "kubectl", "--kubeconfig", g.p.kubeconfig, "logs", "-f", "--tail", "1", "-n", appsNS, app).CombinedOutput()
	cancel()
	if ctx.Err() == nil || !strings.Contains(string(followed), "=") {
		t.Errorf("kubectl logs -f app ended before its deadline (%v) or printed no line:\n%s", err, followed)
	}

	// Every kubectl below ends in a minute at most (the sessions keep
	// their own).
	ctx, cancel = context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "kubectl", "--kubeconfig", g.p.kubeconfig, "exec", "-i", "-n", appsNS, app, "--", "/workload", "cat", "7")
	cmd.Stdin = strings.NewReader("from the operator\n")
	echoed, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 7 || !strings.Contains(string(echoed), "from the operator") {
		t.Errorf("kubectl exec -i app -- /workload cat 7: %v, want exit code 7 and stdin echoed:\n%s", err, echoed)
	}
	if out, err := g.p.kubectl("get", "--raw", "/api/v1/nodes/"+n.name+"/proxy/healthz"); err != nil || out != "ok" {
		t.Errorf("the node proxy's healthz: %v\n%s", err, out)
	}
	if out, err := g.p.kubectl("get", "--raw", fmt.Sprintf("/api/v1/namespaces/%s/pods/%s:%d/proxy/healthz", appsNS, app, appPort)); err != nil || strings.TrimSpace(out) != "ok" {
		t.Errorf("app's healthz through pods/proxy: %v\n%s", err, out)
	}
	portForwardOnce(t, kubectlClient{"kubectl 1.32", "kubectl", g.p.kubeconfig}, app, false)
	if o.sessions {
		checkTerminal(t, g, app)
		checkAttach(t, g)
		checkSessions(t, g, kubectlClient{"kubectl 1.32", "kubectl", g.p.kubeconfig}, app, 100)
	}
	if o.viewer != "" {
		checkViewer(t, o.viewer, app)
	}

	// The kubelet's own identity: the Node authorizer gives it no exec.
	ctx, cancel = context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	refused, err := exec.CommandContext(ctx, "kubectl", "--kubeconfig", o.kubelet, "exec", "-n", appsNS, app, "--", "/workload", "cat", "0").CombinedOutput()
	if err == nil || !strings.Contains(string(refused), "Forbidden") && !strings.Contains(string(refused), "forbidden") {
		t.Errorf("the kubelet's identity execs into app: %v\n%s", err, refused)
	}
}

// checkViewer: the viewer reads app's log; its exec and port-forward are
// refused with 403, as kube-apiserver's authorizer refuses create on
// pods/exec and pods/portforward to whom no rule grants it.
func checkViewer(t *testing.T, kubeconfig, app string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	kubectl := func(args ...string) (string, error) {
		out, err := exec.CommandContext(ctx, "kubectl", append([]string{"--kubeconfig", kubeconfig, "-n", appsNS}, args...)...).CombinedOutput()
		return string(out), err
	}
	if out, err := kubectl("logs", app); err != nil || !strings.Contains(out, "env WORKLOAD_PASSWORD=") {
		t.Errorf("the viewer's kubectl logs app: %v\n%s", err, out)
	}
	for _, args := range [][]string{
		{"exec", app, "--", "/workload", "cat", "0"},
		{"port-forward", "pod/" + app, fmt.Sprintf(":%d", appPort)},
	} {
		if out, err := kubectl(args...); err == nil || !strings.Contains(out, `cannot create resource "pods/`) {
			t.Errorf("the viewer's kubectl %s: %v, want forbidden:\n%s", args[0], err, out)
		}
	}
}

// checkTerminal runs kubectl exec -it on a terminal of its own (a pty of
// 40 rows and 100 columns) and resizes that terminal to 50 by 120: the
// container's terminal has each size in turn (kubectl sends the resize on
// the stream's resize channel, which the API passes to the kubelet).
func checkTerminal(t *testing.T, g *realGateway, app string) {
	t.Helper()
	master, slave := openPTY(t)
	defer master.Close()
	size := func(rows, cols uint16) {
		must(t, unix.IoctlSetWinsize(int(master.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: rows, Col: cols}))
	}
	size(40, 100)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "kubectl", "--kubeconfig", g.p.kubeconfig, "exec", "-it", "-n", appsNS, app, "--", "/workload", "winsize")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	// kubectl's terminal is the pty: it is the session's controlling
	// terminal, whose resizes signal kubectl.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	must(t, cmd.Start())
	slave.Close()
	var out lockedWriter
	out.w = &bytes.Buffer{}
	go io.Copy(&out, master)
	saw := func(want string) bool {
		return eventually(20*time.Second, func() bool { return strings.Contains(out.String(), want) })
	}
	if !saw("size 40 100") {
		t.Errorf("kubectl exec -it on a terminal of 40x100: the container's terminal never was:\n%q", out.String())
	} else {
		size(50, 120)
		if !saw("size 50 120") {
			t.Errorf("kubectl exec -it, its terminal resized to 50x120: the container's terminal never was:\n%q", out.String())
		}
	}
	master.Write([]byte("q\r"))
	if err := cmd.Wait(); err != nil {
		t.Errorf("kubectl exec -it app -- /workload winsize: %v\n%q", err, out.String())
	}
}

// openPTY is a new pseudo-terminal's master and slave.
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	must(t, err)
	must(t, unix.IoctlSetPointerInt(int(master.Fd()), unix.TIOCSPTLCK, 0))
	n, err := unix.IoctlGetInt(int(master.Fd()), unix.TIOCGPTN)
	must(t, err)
	slave, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	must(t, err)
	return master, slave
}

// checkAttach attaches to talk's stdin and stdout with kubectl: what it
// sends comes back.
func checkAttach(t *testing.T, g *realGateway) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "kubectl", "--kubeconfig", g.p.kubeconfig, "attach", "-i", "-n", appsNS, "talk")
	cmd.Stdin = strings.NewReader("through attach\n")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "through attach") {
		t.Errorf("kubectl attach -i talk: %v\n%s", err, out)
	}
}

// kubectlSPDY is the environment in which kubectl 1.32 streams exec,
// attach and port-forward over SPDY, as kubectl before 1.30 did, instead of
// its default WebSockets (KEP-4006).
var kubectlSPDY = append(os.Environ(), "KUBECTL_REMOTE_COMMAND_WEBSOCKETS=false", "KUBECTL_PORT_FORWARD_WEBSOCKETS=false")

// portForwardOnce is one kubectl port-forward session to app's port (over
// SPDY with spdy, else WebSockets) that reads app's healthz through it,
// then ends; false, with the test's error, when it did not.
func portForwardOnce(t *testing.T, kc kubectlClient, app string, spdy bool) bool {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	cmd := exec.CommandContext(ctx, kc.bin, "--kubeconfig", kc.kubeconfig, "port-forward", "-n", appsNS, "pod/"+app, fmt.Sprintf(":%d", appPort))
	if spdy {
		cmd.Env = kubectlSPDY
	}
	stdout, err := cmd.StdoutPipe()
	must(t, err)
	var stderr lockedWriter
	stderr.w = &bytes.Buffer{}
	cmd.Stderr = &stderr
	must(t, cmd.Start())
	defer func() {
		cancel()
		cmd.Wait()
	}()
	ports := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		re := regexp.MustCompile(`Forwarding from 127\.0\.0\.1:(\d+) ->`)
		for sc.Scan() {
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				ports <- m[1]
			}
		}
	}()
	var port string
	select {
	case port = <-ports:
	case <-time.After(30 * time.Second):
		t.Errorf("kubectl port-forward did not forward in 30 s: %s", stderr.String())
		return false
	}
	client := &http.Client{Timeout: 10 * time.Second}
	resp, err := client.Get("http://127.0.0.1:" + port + "/healthz")
	if err != nil {
		t.Errorf("app's healthz through kubectl port-forward: %v (%s)", err, stderr.String())
		return false
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || strings.TrimSpace(string(body)) != "ok" {
		t.Errorf("app's healthz through kubectl port-forward: %d %q", resp.StatusCode, body)
		return false
	}
	return true
}

// kubectlClient is the kubectl a check runs (1.32 on PATH, or upstream's
// 1.37) and the kubeconfig it runs with (the gateway's, or the
// cluster's: through the tunnel).
type kubectlClient struct{ name, bin, kubeconfig string }

// checkSessions runs sessions exec and as many port-forward sessions with
// kc, four at a time, half of them over WebSockets (kubectl's
// default) and half over SPDY, and counts what the gateway's kubestore
// holds before and after: its goroutines (go_goroutines of /metrics) and
// its open sockets. Neither may grow: a session's streams, and its
// connection to the kubelet, end with it. The time one kubectl exec
// takes is logged.
func checkSessions(t *testing.T, g *realGateway, kc kubectlClient, app string, sessions int) {
	t.Helper()
	before := gatewayHolds(t, g)
	var took [2][]time.Duration // WebSockets, SPDY
	var mu sync.Mutex
	var failed, raced atomic.Int32
	work := make(chan int)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for i := range work {
				spdy := i%2 == 1
				start := time.Now()
				ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
				cmd := exec.CommandContext(ctx, kc.bin, "--kubeconfig", kc.kubeconfig, "exec", "-i", "-n", appsNS, app, "--", "/workload", "cat", "0")
				cmd.Stdin = strings.NewReader(strconv.Itoa(i))
				if spdy {
					cmd.Env = kubectlSPDY
				}
				var stderr bytes.Buffer
				cmd.Stderr = &stderr
				out, err := cmd.Output()
				elapsed := time.Since(start)
				cancel()
				switch {
				case strings.Contains(stderr.String(), "Unknown stream id"):
					// kubectl 1.32's WebSocket client starts reading
					// before it has made its streams, and drops a frame
					// that comes first (kubernetes#131189, fixed in
					// client-go 0.34): the client's race, counted.
					raced.Add(1)
				case err != nil || string(out) != strconv.Itoa(i):
					if failed.Add(1) == 1 {
						t.Errorf("exec session %d (spdy %v): %v: %q, stderr %q", i, spdy, err, out, stderr.String())
					}
				}
				mu.Lock()
				took[i%2] = append(took[i%2], elapsed)
				mu.Unlock()
				if !portForwardOnce(t, kc, app, spdy) {
					failed.Add(1)
				}
			}
		})
	}
	for i := range sessions {
		work <- i
	}
	close(work)
	wg.Wait()
	for p, name := range []string{"WebSockets", "SPDY"} {
		d := took[p]
		slices.Sort(d)
		t.Logf("%d %s exec sessions over %s: median %s, 90th percentile %s", len(d), kc.name, name,
			d[len(d)/2].Round(time.Millisecond), d[len(d)*9/10].Round(time.Millisecond))
	}
	t.Logf("%s: %d exec and %d port-forward sessions, half over each protocol: %d failed, %d met kubectl 1.32's WebSocket race", kc.name, sessions, sessions, failed.Load(), raced.Load())
	var after holds
	if !eventually(30*time.Second, func() bool {
		after = gatewayHolds(t, g)
		return after.goroutines <= before.goroutines+10 && after.sockets <= before.sockets+4
	}) {
		t.Errorf("after %d exec and port-forward sessions kubestore holds %d goroutines and %d sockets, before %d and %d",
			sessions, after.goroutines, after.sockets, before.goroutines, before.sockets)
	}
	t.Logf("kubestore before the sessions: %d goroutines, %d sockets; after: %d, %d", before.goroutines, before.sockets, after.goroutines, after.sockets)
}

type holds struct{ goroutines, sockets int }

// gatewayHolds is the gateway's goroutines and open sockets now.
func gatewayHolds(t *testing.T, g *realGateway) holds {
	t.Helper()
	var h holds
	metrics := g.p.mustKubectl("get", "--raw", "/metrics")
	for _, l := range strings.Split(metrics, "\n") {
		if v, ok := strings.CutPrefix(l, "go_goroutines "); ok {
			h.goroutines, _ = strconv.Atoi(strings.TrimSpace(v))
		}
	}
	h.sockets = openSockets(t, g.p.cmd.Process.Pid)
	return h
}

// openSockets counts the sockets process pid holds open.
func openSockets(t *testing.T, pid int) int {
	t.Helper()
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	must(t, err)
	n := 0
	for _, fd := range fds {
		if l, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name())); err == nil && strings.HasPrefix(l, "socket:") {
			n++
		}
	}
	return n
}
