package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/kubestore/kubestore/serviceaccount"
	"github.com/kubestore/kubestore/test/link"
)

// A real node (issue 49): the kubelet 1.37 with containerd 2.4, runc and
// the CNI reference plugins, built by make upstream-bins in the test
// module, running real containers from images the test makes itself, on
// kubestore alone and on a gateway mirroring kube-apiserver with
// kube-controller-manager. The whole node lives in namespaces of its own
// (network, mount, PID) that TestRealNode makes by running itself again
// under unshare: when the run ends, the kernel kills every process in it
// and drops every mount and interface; what outlives a namespace (the
// cgroups, the kernel sysctls the kubelet sets) is undone by the outer
// test, which then checks that nothing is left.

const (
	// realNodeInnerEnv, set, is the directory of the run inside the
	// namespaces: TestRealNode runs the node there.
	realNodeInnerEnv = "KUBESTORE_REAL_NODE_DIR"
	// realNodeCgroupEnv is the cgroup, under every hierarchy's root,
	// that the kubelets' cgroups go under.
	realNodeCgroupEnv = "KUBESTORE_REAL_NODE_CGROUP"
	// realNodeIP is the node's address, on the loopback interface of the
	// node's own network namespace (the kubelet refuses a loopback
	// address; the kernels here have no dummy interfaces); 192.0.2.0/24
	// is TEST-NET-1 (RFC 5737), routed nowhere.
	realNodeIP = "192.0.2.10"
)

// realNodeBinaries are the upstream binaries a real node runs
// (make upstream-bins).
var realNodeBinaries = []string{"kubelet", "kube-proxy", "containerd", "containerd-shim-runc-v2", "runc", "ctr", "crictl", "bridge", "host-local", "loopback"}

// kernelTunables are the sysctls the kubelet sets on the host
// (pkg/kubelet/cm/container_manager_linux.go, setupKernelTunables) when
// protectKernelDefaults is off: not namespaced, restored after the run.
var kernelTunables = []string{"vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops", "kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes"}

// TestRealNode runs the real-node suites inside namespaces of their own
// and checks that the host is as before: no process, mount, interface or
// cgroup left, the kernel's tunables restored. It needs root and the
// binaries of make upstream-bins: without KUBESTORE_UPSTREAM_BIN_DIR it
// skips; with it (make release-check), a missing prerequisite fails it in
// one line naming it.
func TestRealNode(t *testing.T) {
	if dir := os.Getenv(realNodeInnerEnv); dir != "" {
		runRealNode(t, dir)
		return
	}
	realNodePrerequisites(t)
	t.Parallel()
	base, err := os.MkdirTemp("", "ksnode")
	must(t, err)
	cgroup := fmt.Sprintf("kubestore-realnode-%d", os.Getpid())
	tunables := map[string]string{}
	for _, k := range kernelTunables {
		if v, err := os.ReadFile(filepath.Join("/proc/sys", k)); err == nil {
			tunables[k] = string(v)
		}
	}
	for _, mnt := range cgroupMounts(t) {
		must(t, os.MkdirAll(filepath.Join(mnt, cgroup), 0o755))
	}
	// kube-proxy's and the kubelet's iptables chains are the node's
	// network namespace's: none may appear on the host.
	hostChains := kubeChains()

	// The test binary again, as the first process of new network, mount
	// and PID namespaces: --kill-child kills it if unshare dies, and its
	// end kills every other process there.
	deadline, _ := t.Deadline()
	timeout := time.Until(deadline) - time.Minute
	if deadline.IsZero() {
		timeout = 30 * time.Minute
	}
	// -run TestRealNode/standalone picks the inner run's subtest.
	pattern := "^TestRealNode$"
	if f := flag.Lookup("test.run"); f != nil && strings.Contains(f.Value.String(), "/") {
		pattern = f.Value.String()
	}
	cmd := exec.Command("unshare", "--net", "--mount", "--pid", "--fork", "--kill-child", "--mount-proc",
		os.Args[0], "-test.run", pattern, "-test.v", "-test.timeout", timeout.String())
	cmd.Env = append(os.Environ(), realNodeInnerEnv+"="+base, realNodeCgroupEnv+"="+cgroup)
	var out bytes.Buffer
	log, err := os.Create(filepath.Join(base, "run.log"))
	must(t, err)
	cmd.Stdout = io.MultiWriter(&out, log)
	cmd.Stderr = cmd.Stdout
	began := time.Now()
	runErr := cmd.Run()
	log.Close()
	t.Logf("the real node's run took %s", time.Since(began).Round(time.Second))

	// What outlives the namespaces.
	for k, v := range tunables {
		if now, err := os.ReadFile(filepath.Join("/proc/sys", k)); err == nil && string(now) != v {
			if err := os.WriteFile(filepath.Join("/proc/sys", k), []byte(v), 0o644); err != nil {
				t.Errorf("restoring the sysctl %s to %s: %v", k, strings.TrimSpace(v), err)
			}
		}
	}
	leftCgroups := removeCgroups(t, cgroup)
	// The run's report: its tests' own messages; and when it failed,
	// everything it printed (its processes' logs), as a process's output.
	own := ownMessages(out.String())
	if runErr != nil {
		logOutput(t, "the real node's run", tail(out.String(), 256<<10))
		t.Errorf("the real node's run inside its namespaces failed (%v), run.log in %s; its tests said:\n%s", runErr, base, strings.Join(own, "\n"))
	} else {
		t.Logf("the real node's run said:\n%s", strings.Join(own, "\n"))
	}
	var left []string
	for _, c := range kubeChains() {
		if !slices.Contains(hostChains, c) {
			left = append(left, "the iptables chain "+c)
		}
	}
	left = append(left, leftCgroups...)
	left = append(left, mountsUnder(t, base)...)
	left = append(left, processesNaming(base)...)
	if ifaces, err := os.ReadDir("/sys/class/net"); err == nil {
		for _, i := range ifaces {
			if strings.HasPrefix(i.Name(), realNodeBridgePrefix) {
				left = append(left, "the network interface "+i.Name())
			}
		}
	}
	if len(left) > 0 {
		t.Errorf("the real node left on the host:\n%s", strings.Join(left, "\n"))
	}
	if !t.Failed() {
		os.RemoveAll(base)
	} else {
		t.Logf("kept %s", base)
	}
}

// ownMessages are the lines a go test -v output's tests logged
// themselves (file.go:line: and what follows, indented further), and
// their results, without the processes' logs that proc_test.go dumps: as
// scripts/testsummary picks them.
func ownMessages(out string) []string {
	var own []string
	in := false
	for _, line := range strings.Split(out, "\n") {
		switch {
		case ownLine.MatchString(line):
			in = !strings.Contains(line, "proc_test.go:")
		case strings.HasPrefix(strings.TrimSpace(line), "--- "):
			in = true
		case in && indentedMore.MatchString(line):
		default:
			in = false
		}
		if in {
			own = append(own, line)
		}
	}
	return own
}

var (
	ownLine      = regexp.MustCompile(`^\s{4,}[\w.-]+\.go:\d+: `)
	indentedMore = regexp.MustCompile(`^\s{8,}\S`)
)

// realNodePrerequisites skips the test outside the release checks and
// fails it, in one line naming what is missing, inside them; but for
// the iptables commands of kube-proxy, a package of the machine's rather
// than a binary of make upstream-bins: without them it skips, saying so.
func realNodePrerequisites(t *testing.T) {
	t.Helper()
	dir := os.Getenv(upstreamBinDirEnv)
	if dir == "" {
		t.Skipf("%s is not set: make upstream-bins builds the kubelet, kube-proxy, containerd, runc and the CNI plugins, make release-check runs this", upstreamBinDirEnv)
	}
	requireKubectl(t)
	for _, b := range realNodeBinaries {
		if _, err := os.Stat(filepath.Join(dir, b)); err != nil {
			t.Fatalf("a real node needs %s: %v (make upstream-bins builds it)", b, err)
		}
	}
	if os.Geteuid() != 0 {
		t.Fatalf("a real node needs root (its namespaces, mounts and cgroups); running as uid %d", os.Geteuid())
	}
	for _, c := range []string{"unshare", "ip", "mount"} {
		if _, err := exec.LookPath(c); err != nil {
			t.Fatalf("a real node needs the command %s (util-linux, iproute2): %v", c, err)
		}
	}
	for _, c := range kubeProxyIPTables {
		if _, err := exec.LookPath(c); err != nil {
			t.Fatalf("a real node's kube-proxy needs the command %s (the Debian package iptables, which .ci/run installs): %v", c, err)
		}
	}
	// runc is built with seccomp (cgo, libseccomp): without it, every
	// pod sandbox fails ("seccomp: config provided but seccomp not
	// supported"), since containerd gives sandboxes the runtime's
	// default profile.
	out, err := exec.Command(filepath.Join(dir, "runc"), "features").Output()
	var features struct {
		Linux struct {
			Seccomp struct {
				Enabled bool `json:"enabled"`
			} `json:"seccomp"`
		} `json:"linux"`
	}
	if err != nil || json.Unmarshal(out, &features) != nil || !features.Linux.Seccomp.Enabled {
		t.Fatalf("a real node needs runc with seccomp (make upstream-bins builds it with libseccomp-dev): runc features: %v: %s", err, bytes.TrimSpace(out))
	}
	if len(cgroupMounts(t)) == 0 {
		t.Fatal("a real node needs cgroups: no cgroup file system is mounted")
	}
}

// cgroupMounts are the mount points of the host's cgroup hierarchies (v1:
// one per controller; v2: one).
func cgroupMounts(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile("/proc/self/mountinfo")
	must(t, err)
	var mnts []string
	for _, line := range strings.Split(string(data), "\n") {
		// ... mount-point ... - fstype source options
		pre, post, ok := strings.Cut(line, " - ")
		if !ok {
			continue
		}
		fields, fs := strings.Fields(pre), strings.Fields(post)
		if len(fields) > 4 && len(fs) > 0 && (fs[0] == "cgroup" || fs[0] == "cgroup2") {
			mnts = append(mnts, fields[4])
		}
	}
	return mnts
}

// removeCgroups removes the run's cgroups, deepest first, once the
// processes in them are gone, and returns those it could not.
func removeCgroups(t *testing.T, cgroup string) []string {
	var left []string
	for _, mnt := range cgroupMounts(t) {
		root := filepath.Join(mnt, cgroup)
		var dirs []string
		filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error { //nolint:errcheck // best effort, checked below
			if err == nil && d.IsDir() {
				dirs = append(dirs, path)
			}
			return nil
		})
		slices.Reverse(dirs)
		for _, d := range dirs {
			// A process killed with its namespace leaves its cgroup a
			// moment later.
			var err error
			eventually(10*time.Second, func() bool { err = syscall.Rmdir(d); return err == nil || os.IsNotExist(err) })
			if err != nil && !os.IsNotExist(err) {
				left = append(left, fmt.Sprintf("the cgroup %s: %v", d, err))
			}
		}
	}
	return left
}

// mountsUnder are the host's mounts under dir.
func mountsUnder(t *testing.T, dir string) []string {
	data, err := os.ReadFile("/proc/self/mountinfo")
	must(t, err)
	var left []string
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) > 4 && strings.HasPrefix(f[4], dir) {
			left = append(left, "the mount "+f[4])
		}
	}
	return left
}

// processesNaming are the host's processes whose command line names dir.
func processesNaming(dir string) []string {
	var left []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && bytes.Contains(cmdline, []byte(dir)) {
			left = append(left, fmt.Sprintf("the process %s: %s", e.Name(), bytes.ReplaceAll(cmdline, []byte{0}, []byte{' '})))
		}
	}
	return left
}

// runRealNode is the run inside the namespaces: the node's network (the
// loopback and the node's address), its private /run, /var/log and
// /var/lib/kubelet (where containerd's shims, the kubelet's log links and
// its device plugins go whatever their configuration says), the images,
// then the suites, one node at a time.
func runRealNode(t *testing.T, base string) {
	for _, args := range [][]string{
		{"link", "set", "lo", "up"},
		{"addr", "add", realNodeIP + "/32", "dev", "lo"},
	} {
		mustRun(t, "ip", args...)
	}
	// /var/lib/kubelet: the kubelet's device-plugin sockets, whatever its
	// --root-dir.
	must(t, os.MkdirAll("/var/lib/kubelet", 0o755))
	for _, dir := range []string{"/run", "/var/log", "/var/lib/kubelet"} {
		if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "mode=755"); err != nil {
			t.Fatalf("mounting a tmpfs on %s in the node's mount namespace: %v", dir, err)
		}
	}
	images := realNodeImages(t, base)
	t.Run("standalone", func(t *testing.T) { realNodeStandalone(t, base, images) })
	t.Run("through-the-mirror", func(t *testing.T) { realNodeThroughMirror(t, base, images) })
}

// The images of the real node: the pause image of every sandbox and the
// workload image of every container, both of one static binary
// (testdata/workload), and the in-cluster client's (incluster).
const (
	pauseImage    = "kubestore.test/pause:1"
	workloadImage = "kubestore.test/workload:1"
)

// workloadBinary is static: the images hold nothing else.
var workloadBinary = &goBinary{pkg: "test/e2e/testdata/workload", name: "workload", env: []string{"CGO_ENABLED=0"}}

// realNodeImages writes the images' archives in base and returns their
// paths.
func realNodeImages(t *testing.T, base string) []string {
	t.Helper()
	bin := workloadBinary.get(t)
	var archives []string
	for _, im := range []ociImage{
		{ref: pauseImage, binary: bin, entrypoint: []string{"/workload", "pause"}},
		{ref: workloadImage, binary: bin, entrypoint: []string{"/workload"}},
		{ref: inClusterImage, binary: inClusterBinary.get(t), entrypoint: []string{"/incluster"}},
	} {
		path := filepath.Join(base, strings.NewReplacer("/", "-", ":", "-").Replace(im.ref)+".tar")
		must(t, im.writeArchive(path))
		archives = append(archives, path)
	}
	return archives
}

// realNodeBridge is the CNI bridge of the node of subnet (the host is
// checked for its prefix after the run).
func realNodeBridge(subnet int) string { return fmt.Sprintf("%s%d", realNodeBridgePrefix, subnet) }

const realNodeBridgePrefix = "kst"

// realNode is a node: containerd with its runc shim, the CNI plugins, and
// the kubelet, under one directory.
type realNode struct {
	t          *testing.T
	name       string
	dir        string
	bins       string
	sock       string
	kubeconfig string
	// podCIDR is the range of the node's pods (its CNI bridge's).
	podCIDR string
	// kubeletConfig is the README's (docs/node/kubelet.yaml).
	kubeletConfig string
	containerd    *process
	kubelet       *process
}

// startRealNode starts containerd for node, imports the images, and
// starts the kubelet on kubeconfig (the node's own identity). The pods
// are stopped and removed, and the processes killed, when the test ends.
func startRealNode(t *testing.T, base, node string, subnet int, images []string, kubeconfig, clientCA string) *realNode {
	t.Helper()
	n := &realNode{t: t, name: node, dir: filepath.Join(base, node), bins: os.Getenv(upstreamBinDirEnv), kubeconfig: kubeconfig,
		podCIDR: fmt.Sprintf("10.88.%d.0/24", subnet)}
	n.sock = filepath.Join(n.dir, "containerd.sock")
	for _, d := range []string{"cni/bin", "cni/conf", "kubelet", "kubelet.conf.d"} {
		must(t, os.MkdirAll(filepath.Join(n.dir, d), 0o755))
	}
	for _, p := range []string{"bridge", "host-local", "loopback"} {
		must(t, os.Symlink(filepath.Join(n.bins, p), filepath.Join(n.dir, "cni/bin", p)))
	}
	docs, err := filepath.Abs("../../docs/node")
	must(t, err)
	cgroupRoot := "/" + os.Getenv(realNodeCgroupEnv) + "/" + node
	files := map[string]string{
		"cni/conf/10-kubestore.conflist": realNodeCNI(t, filepath.Join(docs, "10-kubestore.conflist"), n.dir, realNodeBridge(subnet), n.podCIDR),
		"containerd.toml":                fmt.Sprintf("version = 3\nimports = [%q, %q]\n", filepath.Join(docs, "containerd.toml"), filepath.Join(n.dir, "containerd-test.toml")),
		"containerd-test.toml":           fmt.Sprintf(realNodeContainerd, n.dir, pauseImage, n.bins),
		"kubelet.conf.d/10-test.conf":    fmt.Sprintf(realNodeKubelet, cgroupRoot, n.sock, clientCA),
		"crictl.yaml":                    fmt.Sprintf("runtime-endpoint: unix://%s\ntimeout: 20\n", n.sock),
	}
	n.kubeletConfig = filepath.Join(docs, "kubelet.yaml")
	for name, content := range files {
		must(t, os.WriteFile(filepath.Join(n.dir, name), []byte(content), 0o644))
	}
	for _, mnt := range cgroupMounts(t) {
		must(t, os.MkdirAll(filepath.Join(mnt, os.Getenv(realNodeCgroupEnv), node), 0o755))
	}
	n.containerd = n.run("containerd", "containerd", "--config", filepath.Join(n.dir, "containerd.toml"))
	if !eventually(30*time.Second, func() bool { _, err := os.Stat(n.sock); return err == nil || n.containerd.hasExited() }) || n.containerd.hasExited() {
		t.Fatalf("containerd did not start in 30 s:\n%s", tail(n.containerd.logs(), 8<<10))
	}
	for _, im := range images {
		n.ctr("images", "import", im)
	}
	t.Cleanup(func() {
		// The kubelet first, or it starts what is stopped.
		n.kubelet.kill()
		if out, err := n.crictl("rmp", "--all", "--force"); err != nil {
			t.Errorf("removing the pods of %s: %v: %s", node, err, out)
		}
	})
	n.startKubelet()
	return n
}

// realNodeCNI is the README's CNI network (docs/node) for a node: its own
// bridge and pods' range, the IPAM's records under the node's directory,
// and no masquerade: the node's network namespace has no way out to
// masquerade to.
func realNodeCNI(t *testing.T, path, dir, bridgeName, podCIDR string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	must(t, err)
	var conf map[string]any
	must(t, json.Unmarshal(data, &conf))
	bridge := conf["plugins"].([]any)[0].(map[string]any)
	bridge["bridge"], bridge["ipMasq"] = bridgeName, false
	ipam := bridge["ipam"].(map[string]any)
	ipam["dataDir"] = filepath.Join(dir, "cni/ipam")
	ipam["ranges"] = [][]map[string]string{{{"subnet": podCIDR}}}
	out, err := json.MarshalIndent(conf, "", "  ")
	must(t, err)
	return string(out)
}

// realNodeContainerd is what the node's containerd adds to the README's
// configuration (docs/node/containerd.toml, imported first): everything
// under the node's directory, the pause image the test imported, and
// runc's binary from make upstream-bins (the shim from PATH).
const realNodeContainerd = `version = 3
root = "%[1]s/containerd/root"
state = "%[1]s/containerd/state"
[grpc]
  address = "%[1]s/containerd.sock"
[plugins.'io.containerd.cri.v1.images'.pinned_images]
  sandbox = %[2]q
[plugins.'io.containerd.cri.v1.runtime'.cni]
  bin_dirs = ["%[1]s/cni/bin"]
  conf_dir = "%[1]s/cni/conf"
[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
  BinaryName = "%[3]s/runc"
  Root = "%[1]s/runc"
`

// realNodeKubelet is what the node's kubelet adds to the README's
// configuration (docs/node/kubelet.yaml), in its drop-in directory: its
// cgroups under the run's own, its runtime's socket, the gateway's CA
// where it is, and no eviction or image collection for the host's disk
// filling.
const realNodeKubelet = `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupRoot: %s
containerRuntimeEndpoint: unix://%s
authentication: {x509: {clientCAFile: %s}}
evictionHard: {memory.available: "1Mi", nodefs.available: "1%%", imagefs.available: "1%%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
`

// run starts one of the node's binaries, with the upstream binaries first
// on PATH (containerd finds its shim there).
func (n *realNode) run(name, bin string, args ...string) *process {
	n.t.Helper()
	cmd := exec.Command(filepath.Join(n.bins, bin), args...)
	out := &lockedWriter{w: &bytes.Buffer{}}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.Env = append(os.Environ(), "PATH="+n.bins+":"+os.Getenv("PATH"))
	return startProcess(n.t, n.t, name+" of "+n.name, cmd, out, 16<<10)
}

// startKubelet starts the kubelet (again).
func (n *realNode) startKubelet() {
	n.t.Helper()
	n.kubelet = n.run("kubelet", "kubelet", "--config", n.kubeletConfig, "--config-dir", filepath.Join(n.dir, "kubelet.conf.d"), "--kubeconfig", n.kubeconfig,
		"--root-dir", filepath.Join(n.dir, "kubelet"), "--cert-dir", filepath.Join(n.dir, "kubelet", "pki"), "--hostname-override", n.name, "--node-ip", realNodeIP, "--v", "2")
}

func (n *realNode) ctr(args ...string) string {
	n.t.Helper()
	out, err := exec.Command(filepath.Join(n.bins, "ctr"), append([]string{"--address", n.sock, "--namespace", "k8s.io"}, args...)...).CombinedOutput()
	if err != nil {
		n.t.Fatalf("ctr %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// crictl runs crictl on the node's runtime: its output, and its error
// with what it wrote on stderr.
func (n *realNode) crictl(args ...string) (string, error) {
	cmd := exec.Command(filepath.Join(n.bins, "crictl"), append([]string{"--config", filepath.Join(n.dir, "crictl.yaml")}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		err = fmt.Errorf("%w: %s", err, bytes.TrimSpace(stderr.Bytes()))
	}
	return string(out), err
}

// runtimeContainer is a container as the runtime has it (crictl), not as
// the API says.
type runtimeContainer struct {
	ID       string
	Pod      string // namespace/name
	Name     string
	Attempt  int
	State    string // CONTAINER_RUNNING, CONTAINER_EXITED, ...
	ExitCode int
	Pid      int
}

// containers are the runtime's containers of the pod ns/pod's container
// name, by attempt.
func (n *realNode) containers(ns, pod, name string) ([]runtimeContainer, error) {
	out, err := n.crictl("ps", "--all", "--output", "json", "--name", "^"+name+"$", "--label", "io.kubernetes.pod.namespace="+ns, "--label", "io.kubernetes.pod.name="+pod)
	if err != nil {
		return nil, fmt.Errorf("crictl ps: %v: %s", err, out)
	}
	var list struct {
		Containers []struct {
			ID       string `json:"id"`
			Metadata struct {
				Name    string `json:"name"`
				Attempt int    `json:"attempt"`
			} `json:"metadata"`
			State string `json:"state"`
		} `json:"containers"`
	}
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		return nil, fmt.Errorf("crictl ps: %v: %s", err, out)
	}
	var cs []runtimeContainer
	for _, c := range list.Containers {
		rc := runtimeContainer{ID: c.ID, Pod: ns + "/" + pod, Name: c.Metadata.Name, Attempt: c.Metadata.Attempt, State: c.State}
		out, err := n.crictl("inspect", "--output", "json", c.ID)
		if err != nil {
			return nil, fmt.Errorf("crictl inspect %s: %v: %s", c.ID, err, out)
		}
		var in struct {
			Status struct {
				ExitCode int `json:"exitCode"`
			} `json:"status"`
			Info struct {
				Pid int `json:"pid"`
			} `json:"info"`
		}
		if err := json.Unmarshal([]byte(out), &in); err != nil {
			return nil, fmt.Errorf("crictl inspect %s: %v: %s", c.ID, err, out)
		}
		rc.ExitCode, rc.Pid = in.Status.ExitCode, in.Info.Pid
		cs = append(cs, rc)
	}
	slices.SortFunc(cs, func(a, b runtimeContainer) int { return a.Attempt - b.Attempt })
	return cs, nil
}

// running is the pod's container running in the runtime now, or an error
// saying what the runtime has.
func (n *realNode) running(ns, pod, name string) (runtimeContainer, error) {
	cs, err := n.containers(ns, pod, name)
	if err != nil {
		return runtimeContainer{}, err
	}
	for _, c := range cs {
		if c.State == "CONTAINER_RUNNING" {
			return c, nil
		}
	}
	return runtimeContainer{}, fmt.Errorf("no container %s of %s/%s runs: the runtime has %+v", name, ns, pod, cs)
}

// logs is what the runtime logged of a container.
func (n *realNode) logs(id string) string {
	out, _ := n.crictl("logs", id)
	return out
}

// The workloads of the real-node suites, in namespace apps: app serves
// its ConfigMap, Secret and projected ServiceAccount token volumes (and
// an environment variable from the Secret) and is Ready by an HTTP probe
// that reads them; crash exits with code 3 three seconds after each
// start; doomed runs until it is deleted.
const (
	appsNS         = "apps"
	appGreeting    = "hello from the cluster"
	appPassword    = "s3cret-of-the-cluster"
	appTokenAud    = "kubestore-real-node"
	appPort        = 8080
	appGracePeriod = 5
)

func appsObjects() (*corev1.ConfigMap, *corev1.Secret) {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: appsNS, Name: "settings"}, Data: map[string]string{"greeting": appGreeting}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: appsNS, Name: "credentials"}, StringData: map[string]string{"password": appPassword}}
}

// appSpec is the pod spec of app on node.
func appSpec(node string) corev1.PodSpec {
	return corev1.PodSpec{
		NodeName:                      node,
		TerminationGracePeriodSeconds: ptr(int64(appGracePeriod)),
		Containers: []corev1.Container{{
			Name: "app", Image: workloadImage, ImagePullPolicy: corev1.PullNever,
			Args: []string{"serve", strconv.Itoa(appPort), "/etc/settings/greeting", "/etc/credentials/password", "/var/run/app-token/token",
				serviceaccount.TokenMountPath + "/namespace"},
			Env: []corev1.EnvVar{{Name: "WORKLOAD_PASSWORD", ValueFrom: &corev1.EnvVarSource{
				SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "credentials"}, Key: "password"}}}},
			ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(appPort)}}, PeriodSeconds: 2},
			VolumeMounts: []corev1.VolumeMount{
				{Name: "settings", MountPath: "/etc/settings"},
				{Name: "credentials", MountPath: "/etc/credentials"},
				{Name: "app-token", MountPath: "/var/run/app-token"},
			},
		}},
		Volumes: []corev1.Volume{
			{Name: "settings", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}}}},
			{Name: "credentials", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "credentials"}}},
			{Name: "app-token", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{{
				ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Audience: appTokenAud, ExpirationSeconds: ptr(int64(3600)), Path: "token"}}}}}},
		},
	}
}

// crashSpec is the pod spec of crash on node.
func crashSpec(node string) corev1.PodSpec {
	return corev1.PodSpec{NodeName: node, TerminationGracePeriodSeconds: ptr(int64(1)), Containers: []corev1.Container{{
		Name: "crash", Image: workloadImage, ImagePullPolicy: corev1.PullNever, Args: []string{"exit", "3", "3s"}}}}
}

// talkSpec is the pod spec of talk on node: it echoes what is attached
// to its stdin, once, then exits (kubectl attach -i).
func talkSpec(node string) corev1.PodSpec {
	return corev1.PodSpec{NodeName: node, TerminationGracePeriodSeconds: ptr(int64(1)), Containers: []corev1.Container{{
		Name: "talk", Image: workloadImage, ImagePullPolicy: corev1.PullNever, Args: []string{"cat", "0"}, Stdin: true, StdinOnce: true}}}
}

// doomedSpec is the pod spec of doomed on node.
func doomedSpec(node string) corev1.PodSpec {
	return corev1.PodSpec{NodeName: node, TerminationGracePeriodSeconds: ptr(int64(appGracePeriod)), Containers: []corev1.Container{{
		Name: "doomed", Image: workloadImage, ImagePullPolicy: corev1.PullNever, Args: []string{"serve", strconv.Itoa(appPort)}}}}
}

// podOf is the pod of ns named by prefix (a Deployment's pod has a
// generated name), or nil.
func podOf(ctx context.Context, cs kubernetes.Interface, ns, prefix string) *corev1.Pod {
	pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if (p.Name == prefix || strings.HasPrefix(p.Name, prefix+"-")) && p.DeletionTimestamp == nil {
			return p
		}
	}
	return nil
}

// checkApp checks what app's container reads from its volumes, in the
// container itself (its HTTP endpoint, on the pod's address), and what it
// printed of its environment (its log, from the runtime).
func checkApp(t *testing.T, n *realNode, pod *corev1.Pod) {
	t.Helper()
	c, err := n.running(appsNS, pod.Name, "app")
	if err != nil {
		t.Errorf("app: %v", err)
		return
	}
	client := &http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get(fmt.Sprintf("http://%s:%d/files", pod.Status.PodIP, appPort))
	if err != nil {
		t.Errorf("app's files, from its container at %s: %v", pod.Status.PodIP, err)
		return
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	files := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(body))
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), "="); ok {
			files[k] = v
		}
	}
	// The ServiceAccount admission's token volume, kube-apiserver's or
	// kubestore's.
	if ns := files[serviceaccount.TokenMountPath+"/namespace"]; ns != appsNS {
		t.Errorf("app's kube-api-access volume says the namespace is %q, want %q (%s)", ns, appsNS, body)
	}
	if files["/etc/settings/greeting"] != appGreeting || files["/etc/credentials/password"] != appPassword {
		t.Errorf("app's ConfigMap and Secret volumes hold %q and %q, want %q and %q (%s)", files["/etc/settings/greeting"],
			files["/etc/credentials/password"], appGreeting, appPassword, body)
	}
	claims, err := jwtClaims(files["/var/run/app-token/token"])
	if err != nil {
		t.Errorf("app's projected token: %v", err)
	} else if claims.Subject != "system:serviceaccount:"+appsNS+":default" || !slices.Contains(claims.Audience, appTokenAud) || claims.Kubernetes.Pod.Name != pod.Name {
		t.Errorf("app's projected token is for %s, audience %v, pod %s; want system:serviceaccount:%s:default, audience %s, pod %s",
			claims.Subject, claims.Audience, claims.Kubernetes.Pod.Name, appsNS, appTokenAud, pod.Name)
	}
	if log := n.logs(c.ID); !strings.Contains(log, "env WORKLOAD_PASSWORD="+appPassword) {
		t.Errorf("app's environment variable from its Secret is not in its log:\n%s", log)
	}
}

type jwtPayload struct {
	Subject    string   `json:"sub"`
	Audience   []string `json:"aud"`
	Kubernetes struct {
		Pod struct {
			Name string `json:"name"`
		} `json:"pod"`
	} `json:"kubernetes.io"`
}

// jwtClaims reads a token's claims (its signature is its issuer's
// business: the container only holds it).
func jwtClaims(token string) (jwtPayload, error) {
	var p jwtPayload
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return p, fmt.Errorf("not a JWT: %q", token)
	}
	raw, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return p, err
	}
	return p, json.Unmarshal(raw, &p)
}

// checkCrash checks that the API's status of crash says what the runtime
// has: its restart count the attempt of its latest container, its last
// termination the exit code 3 of the container before.
func checkCrash(t *testing.T, n *realNode, cs kubernetes.Interface, where string) {
	t.Helper()
	var why string
	if !eventually(90*time.Second, func() bool {
		why = crashAgrees(t.Context(), n, cs)
		return why == ""
	}) {
		t.Errorf("crash on %s: %s", where, why)
	}
}

func crashAgrees(ctx context.Context, n *realNode, cs kubernetes.Interface) string {
	p := podOf(ctx, cs, appsNS, "crash")
	if p == nil || len(p.Status.ContainerStatuses) == 0 {
		return "no pod with a container status"
	}
	st := p.Status.ContainerStatuses[0]
	if st.RestartCount < 2 || st.LastTerminationState.Terminated == nil {
		return fmt.Sprintf("restarted %d times, last termination %+v; want 2 or more restarts", st.RestartCount, st.LastTerminationState.Terminated)
	}
	rcs, err := n.containers(appsNS, p.Name, "crash")
	if err != nil {
		return err.Error()
	}
	var last, previous *runtimeContainer
	for i := range rcs {
		switch rcs[i].Attempt {
		case int(st.RestartCount):
			last = &rcs[i]
		case int(st.RestartCount) - 1:
			previous = &rcs[i]
		}
	}
	switch {
	case last == nil || previous == nil:
		return fmt.Sprintf("the status says %d restarts, the runtime has %+v", st.RestartCount, rcs)
	case "containerd://"+last.ID != st.ContainerID:
		return fmt.Sprintf("the status names the container %s, the runtime's attempt %d is %s", st.ContainerID, last.Attempt, last.ID)
	case previous.State != "CONTAINER_EXITED" || previous.ExitCode != 3:
		return fmt.Sprintf("the runtime's attempt %d is %s with exit code %d, want exited with 3", previous.Attempt, previous.State, previous.ExitCode)
	case "containerd://"+previous.ID != st.LastTerminationState.Terminated.ContainerID || st.LastTerminationState.Terminated.ExitCode != 3:
		return fmt.Sprintf("the status's last termination is %s with exit code %d, the runtime's is %s with 3",
			st.LastTerminationState.Terminated.ContainerID, st.LastTerminationState.Terminated.ExitCode, previous.ID)
	}
	return ""
}

// realGateway is the kubestore the node's kubelet talks to, on a fixed
// port (the kubelet's kubeconfig names it), restarted, killed and updated
// under the running node.
type realGateway struct {
	t    *testing.T
	dir  string
	args []string
	bin  string
	p    *proc
}

func startRealGateway(t *testing.T, args ...string) *realGateway {
	t.Helper()
	g := &realGateway{t: t, dir: filepath.Join(shortTempDir(t), "data"), args: append([]string{"--secure-port", strconv.Itoa(freePort(t))}, args...), bin: binary(t)}
	g.p = startBinary(t, g.bin, nil, g.dir, g.args...)
	return g
}

// restart stops the gateway (with SIGKILL when kill) and starts bin on
// its data.
func (g *realGateway) restart(bin string, kill bool) {
	g.t.Helper()
	if kill {
		g.p.kill()
	} else if err := g.p.stop(30 * time.Second); err != nil {
		g.t.Errorf("stopping kubestore: %v", err)
	}
	g.bin = bin
	g.p = startBinary(g.t, g.bin, nil, g.dir, g.args...)
}

// ca is the gateway's CA file, which the kubelet trusts for kubestore's
// client certificate.
func (g *realGateway) ca() string { return filepath.Join(g.dir, "pki", "ca.crt") }

// port is the gateway's --secure-port.
func (g *realGateway) port() string { return g.args[slices.Index(g.args, "--secure-port")+1] }

// kubeletIdentity is the kubelet's own identity on the gateway, made as
// the README says (docs/node/kubelet-identity.sh): a CSR to kubestore's
// signer, approved by the gateway's admin. The kubeconfig's path.
func kubeletIdentity(t *testing.T, g *realGateway, node string) string {
	t.Helper()
	return strings.TrimSpace(mustRun(t, "sh", "../../docs/node/kubelet-identity.sh", node, g.p.kubeconfig, t.TempDir()))
}

// reconnected waits until the node's kubelet renews its Lease on the
// gateway after since: it reconnected by itself.
func (g *realGateway) reconnected(node string, since time.Time) bool {
	return eventually(45*time.Second, func() bool {
		l, err := g.p.clientset().CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(g.t.Context(), node, metav1.GetOptions{})
		return err == nil && l.Spec.RenewTime != nil && l.Spec.RenewTime.After(since)
	})
}

// storeChanges restarts, kills and updates the gateway under the running
// node, offline when the gateway mirrors: kill -9 and restart, an update
// on trial, the fallback to the previous release, the update again and
// its commit. After each, the kubelet reconnects by itself and no
// container has restarted (the running ones are those of want).
func storeChanges(t *testing.T, g *realGateway, n *realNode, want map[string]string) {
	t.Helper()
	previous, newer := g.bin, newerBinary(t)
	steps := []struct {
		name string
		bin  string
		kill bool
	}{
		{"killed with SIGKILL and restarted", previous, true},
		{"updated (on trial)", newer, false},
		{"fallen back to the previous release", previous, false},
		{"updated again", newer, false},
	}
	for _, s := range steps {
		at := time.Now()
		g.restart(s.bin, s.kill)
		if !g.reconnected(n.name, at) {
			t.Errorf("kubestore %s: the kubelet did not renew its Lease in 45 s", s.name)
		}
		sameContainers(t, n, want, "kubestore "+s.name)
	}
	out, err := exec.Command(newer, "update", "commit", "--data-dir", g.dir).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "committed at") {
		t.Errorf("kubestore update commit under the node: %v: %s", err, out)
	}
	sameContainers(t, n, want, "kubestore's update committed")
}

// rebootOffline stops the gateway and the kubelet and starts both again,
// as after the gateway's power came back (the runtime keeps the
// containers): the node is Ready from local data, the containers are
// found again.
func rebootOffline(t *testing.T, g *realGateway, n *realNode, want map[string]string) {
	t.Helper()
	n.kubelet.kill()
	at := time.Now()
	g.restart(g.bin, true)
	n.startKubelet()
	if !g.reconnected(n.name, at) {
		t.Errorf("after the reboot, the kubelet did not renew its Lease in 45 s")
	}
	var why string
	if !eventually(60*time.Second, func() bool {
		why = readyOn(t.Context(), g.p.clientset(), n.name, "app")
		return why == ""
	}) {
		t.Errorf("after the reboot, on the gateway: %s", why)
	}
	sameContainers(t, n, want, "the reboot")
}

// readyOn says why the node or the pod named by prefix is not Ready on
// cs, or "".
func readyOn(ctx context.Context, cs kubernetes.Interface, node, prefix string) string {
	if !nodeReady(ctx, cs, node) {
		return "the node is not Ready"
	}
	p := podOf(ctx, cs, appsNS, prefix)
	if p == nil || !podReady(p) {
		return "the pod " + prefix + " is not Ready"
	}
	return ""
}

// sameContainers checks that the containers of want (pod name to
// container ID) run in the runtime still, none restarted.
func sameContainers(t *testing.T, n *realNode, want map[string]string, after string) {
	t.Helper()
	for pod, id := range want {
		c, err := n.running(appsNS, pod, "app")
		if err != nil {
			t.Errorf("after %s: %v", after, err)
		} else if c.ID != id {
			t.Errorf("after %s: %s's container is %s (attempt %d), was %s: it restarted", after, pod, c.ID, c.Attempt, id)
		}
	}
}

// The node on kubestore alone: the kubelet on its own identity (a CSR
// approved on the gateway) runs app, crash and doomed, created as a user
// creates pods; kube-proxy on its own identity leads default/kubernetes
// to the gateway, where an in-cluster client in a pod finds the API;
// kubestore is killed, updated, fallen back from and committed under it;
// the gateway reboots; doomed is deleted and stops.
func realNodeStandalone(t *testing.T, base string, images []string) {
	ctx := t.Context()
	const node = "gateway-1"
	// The gateway listens on every address of the node and advertises the
	// node's, where its pods reach it (README, "The node's pods find the
	// API").
	g := startRealGateway(t, append(viewerAccess(t, kubeProxyPolicy, inClusterPolicy), "--bind-address", "0.0.0.0", "--advertise-address", realNodeIP)...)
	identity := kubeletIdentity(t, g, node)
	n := startRealNode(t, base, node, 1, images, identity, g.ca())
	cs := g.p.clientset()
	ready := time.Now()
	if !eventually(60*time.Second, func() bool { return nodeReady(ctx, cs, node) }) {
		t.Fatal("the node is not Ready on kubestore in 60 s")
	}
	t.Logf("standalone: the node is Ready %s after the kubelet started", time.Since(ready).Round(100*time.Millisecond))
	proxy := startKubeProxy(t, g, n)
	_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: appsNS}}, metav1.CreateOptions{})
	must(t, err)
	if !eventually(30*time.Second, func() bool {
		_, err := cs.CoreV1().ServiceAccounts(appsNS).Get(ctx, "default", metav1.GetOptions{})
		return err == nil
	}) {
		t.Fatal("no default ServiceAccount in 30 s")
	}
	cm, secret := appsObjects()
	_, err = cs.CoreV1().ConfigMaps(appsNS).Create(ctx, cm, metav1.CreateOptions{})
	must(t, err)
	_, err = cs.CoreV1().Secrets(appsNS).Create(ctx, secret, metav1.CreateOptions{})
	must(t, err)
	created := time.Now()
	for name, spec := range map[string]corev1.PodSpec{"app": appSpec(node), "crash": crashSpec(node), "doomed": doomedSpec(node), "talk": talkSpec(node)} {
		_, err := cs.CoreV1().Pods(appsNS).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}, metav1.CreateOptions{})
		must(t, err)
	}
	var why string
	if !eventually(60*time.Second, func() bool { why = readyOn(ctx, cs, node, "app"); return why == "" }) {
		t.Fatalf("60 s after its create: %s", why)
	}
	t.Logf("standalone: app is Ready %s after its create", time.Since(created).Round(100*time.Millisecond))
	app := podOf(ctx, cs, appsNS, "app")
	checkApp(t, n, app)
	// The in-cluster client, led by kube-proxy from default/kubernetes to
	// the gateway's advertised address.
	applyInClusterCustom(t, g.p.mustKubectl)
	createWidget(t, g.p.mustKubectl)
	created = startInCluster(t, cs, node, "--custom", inClusterCustom+"/v1")
	checkInCluster(t, n, cs, serviceAddress(t, cs, "default", "kubernetes"), created)
	checkInClusterCustom(t, g.p.mustKubectl)
	checkKubeProxyLed(t, "default/kubernetes:https", net.JoinHostPort(realNodeIP, g.port()))
	checkCrash(t, n, cs, "kubestore")
	approveServing(t, g, n)
	checkOperator(t, g, n, operatorCase{kubelet: identity, viewer: writeViewerKubeconfig(t, g), app: "app", crash: "crash", sessions: true})
	// kubectl 1.37, as kubectl 1.32 above: its WebSocket and SPDY
	// streams of exec and port-forward.
	checkSessions(t, g, kubectlClient{"kubectl 1.37", upstreamBinary(t, "kubectl"), g.p.kubeconfig}, "app", 40)
	c, err := n.running(appsNS, "app", "app")
	must(t, err)
	want := map[string]string{"app": c.ID}

	storeChanges(t, g, n, want)
	rebootOffline(t, g, n, want)
	cs = g.p.clientset()
	checkApp(t, n, podOf(ctx, cs, appsNS, "app"))

	// doomed, deleted, stops on the node and is gone from the API.
	must(t, cs.CoreV1().Pods(appsNS).Delete(ctx, "doomed", metav1.DeleteOptions{}))
	if !eventually(30*time.Second, func() bool {
		_, err := cs.CoreV1().Pods(appsNS).Get(ctx, "doomed", metav1.GetOptions{})
		_, running := n.running(appsNS, "doomed", "doomed")
		return apierrors.IsNotFound(err) && running != nil
	}) {
		t.Error("doomed, deleted, still runs on the node or is still in the API after 30 s")
	}
	checkServed(t, "the kubelet", n.kubelet.logs())
	checkKubeProxy(t, proxy)
}

// The node on a gateway that mirrors kube-apiserver with
// kube-controller-manager (its deployment and replicaset controllers make
// app's and crash's pods, its node-lifecycle controller watches the
// node), the gateway on a ServiceAccount token of the cluster, the
// kubelet on its own identity on the gateway. The link hangs for a
// minute, then refuses for another: meanwhile a container is killed and
// restarted by the kubelet, kubestore is killed, updated, fallen back
// from and committed, the gateway reboots, and the cluster deletes
// doomed. The containers run on throughout; within 10 s of the link's
// return the cluster's view equals the node's, doomed stops and is gone
// from the cluster, and the node does not flap to NotReady.
func realNodeThroughMirror(t *testing.T, base string, images []string) {
	ctx := t.Context()
	const node = "gateway-2"
	// The cluster reaches the node's kubelet only through the gateway's
	// tunnel (kube-apiserver's egress selector).
	ct := newCloudTunnel(t)
	auditDir := shortTempDir(t)
	c := startClusterWith(t, clusterControllers+",deployment,replicaset", append(ct.apiserverArgs(), inClusterClusterArgs(t, auditDir)...)...)
	f := watchFlips(t, c.cs)
	// The gateway's identity on the cluster, as the README gives it.
	kubectl := func(args ...string) string {
		t.Helper()
		return mustRun(t, "kubectl", append([]string{"--kubeconfig", c.kubeconfig}, args...)...)
	}
	token := gatewayIdentity(t, c, node)
	defineInClusterCustom(t, kubectl, "kube-system:gateway-"+node)
	l := link.New(t, strings.TrimPrefix(c.url, "https://"))
	kc := filepath.Join(shortTempDir(t), "upstream.kubeconfig")
	writeEdgeKubeconfig(t, c.kubeconfig, l.Addr, token, kc)
	ct.start(t, c, kubectl, "gateway-"+node, node)
	tl := link.New(t, fmt.Sprintf("127.0.0.1:%d", ct.port))
	// The node's pods reach the gateway at the node's address, through the
	// cluster's Service address (its range, which the gateway's serving
	// certificate covers); the in-cluster client's ConfigMaps are
	// mirrored whole.
	g := startRealGateway(t, append(kubeProxyAccess(t), "--upstream-kubeconfig", kc, "--node-name", node, "--tunnel-endpoint", "https://"+tl.Addr, "--tunnel-ca-file", ct.endpointCA,
		"--bind-address", "0.0.0.0", "--advertise-address", realNodeIP, "--service-cluster-ip-range", "10.96.0.0/24", "--config", inClusterMirrorConfig(t))...)
	identity := kubeletIdentity(t, g, node)
	// The kubelet trusts the cluster's CA for kube-apiserver's client
	// certificate, beside kubestore's.
	clientCAs := filepath.Join(shortTempDir(t), "client-ca.crt")
	must(t, os.WriteFile(clientCAs, append(mustRead(t, g.ca()), mustRead(t, ct.clusterCA)...), 0o600))
	n := startRealNode(t, base, node, 2, images, identity, clientCAs)
	proxy := startKubeProxy(t, g, n)

	_, err := c.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: appsNS}}, metav1.CreateOptions{})
	must(t, err)
	if !eventually(60*time.Second, func() bool {
		_, err := c.cs.CoreV1().ServiceAccounts(appsNS).Get(ctx, "default", metav1.GetOptions{})
		return err == nil
	}) {
		t.Fatal("no default ServiceAccount on the cluster in 60 s")
	}
	grantInCluster(t, kubectl)
	cm, secret := appsObjects()
	_, err = c.cs.CoreV1().ConfigMaps(appsNS).Create(ctx, cm, metav1.CreateOptions{})
	must(t, err)
	_, err = c.cs.CoreV1().Secrets(appsNS).Create(ctx, secret, metav1.CreateOptions{})
	must(t, err)
	created := time.Now()
	inClusterCreated := startInCluster(t, c.cs, node, "--custom", inClusterCustom+"/v1")
	for name, spec := range map[string]corev1.PodSpec{"app": appSpec(node), "crash": crashSpec(node)} {
		labels := map[string]string{"app": name}
		_, err := c.cs.AppsV1().Deployments(appsNS).Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: appsv1.DeploymentSpec{Replicas: ptr(int32(1)), Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: spec}}}, metav1.CreateOptions{})
		must(t, err)
	}
	_, err = c.cs.CoreV1().Pods(appsNS).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "doomed"}, Spec: doomedSpec(node)}, metav1.CreateOptions{})
	must(t, err)
	var why string
	if !eventually(90*time.Second, func() bool { why = readyOn(ctx, c.cs, node, "app"); return why == "" }) {
		t.Fatalf("on the cluster, 90 s after the Deployments' create: %s", why)
	}
	t.Logf("through the mirror: app's pod is Ready on the cluster %s after its Deployment's create", time.Since(created).Round(100*time.Millisecond))
	app := podOf(ctx, c.cs, appsNS, "app")
	checkApp(t, n, app)
	checkCrash(t, n, c.cs, "the cluster")
	// The in-cluster client: through the node's view of the cluster's
	// Service to the gateway, as the cluster's ServiceAccount.
	checkInCluster(t, n, c.cs, serviceAddress(t, c.cs, "default", "kubernetes"), inClusterCreated)
	checkKubeProxyLed(t, "default/kubernetes:https", net.JoinHostPort(realNodeIP, g.port()))
	inClusterPodOnGateway, err := g.p.clientset().CoreV1().Pods(appsNS).Get(ctx, inClusterPod, metav1.GetOptions{})
	must(t, err)
	podToken := inClusterToken(t, n, inClusterPodOnGateway.UID)
	checkInClusterIdentity(t, c, g, filepath.Join(auditDir, "audit.log"), podToken)
	checkInClusterCustom(t, kubectl)
	approveServing(t, g, n)
	checkFromTheCloud(t, ct, c.kubeconfig, node, app.Name)
	compareExec(t, g.p.kubeconfig, c.kubeconfig, app.Name)
	checkTunnelClaims(t, ct, c, kubectl, token, node, app.Name)
	// Sessions from the cloud leave nothing behind on the gateway (its
	// goroutines and sockets) nor on the endpoint (its sockets).
	endpointSockets := openSockets(t, ct.endpoint.cmd.Process.Pid)
	checkSessions(t, g, kubectlClient{"kubectl 1.32 from the cloud", "kubectl", c.kubeconfig}, app.Name, 40)
	var after int
	if !eventually(30*time.Second, func() bool { after = openSockets(t, ct.endpoint.cmd.Process.Pid); return after <= endpointSockets+2 }) {
		t.Errorf("after the cloud's sessions the tunnel endpoint holds %d sockets, before %d", after, endpointSockets)
	}
	first, err := n.running(appsNS, app.Name, "app")
	must(t, err)
	if _, err := n.running(appsNS, "doomed", "doomed"); err != nil {
		t.Fatalf("doomed before the outage: %v", err)
	}

	// The outage: hung for a minute, then refused.
	const outage = 2 * time.Minute
	l.Hang()
	tl.Hang()
	down := time.Now()
	cut := time.AfterFunc(outage/2, func() { l.Cut(); tl.Cut() })
	defer cut.Stop()
	// The tunnel hung: the endpoint waits for the gateway's answer 5 s,
	// and kubectl exec tries twice (WebSockets, then SPDY).
	checkCloudDown(t, c.kubeconfig, app.Name, "node "+node+"'s gateway", 15*time.Second)
	must(t, c.cs.CoreV1().Pods(appsNS).Delete(ctx, "doomed", metav1.DeleteOptions{}))
	if !eventually(30*time.Second, func() bool { return !gatewayConnected(t, g) }) {
		t.Error("the gateway did not find its hung link down in 30 s")
	}
	checkInClusterOffline(t, g, podToken, "the link hung")
	// A container killed offline: the kubelet restarts it, from local
	// data.
	must(t, syscall.Kill(first.Pid, syscall.SIGKILL))
	var again runtimeContainer
	if !eventually(60*time.Second, func() bool {
		again, err = n.running(appsNS, app.Name, "app")
		if err != nil || again.ID == first.ID {
			return false
		}
		p := podOf(ctx, g.p.clientset(), appsNS, "app")
		return p != nil && podReady(p) && len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].ContainerID == "containerd://"+again.ID
	}) {
		t.Fatalf("app's container, killed offline, was not restarted and Ready on the gateway in 60 s (the runtime has %+v: %v)", again, err)
	}
	if again.Attempt != 1 {
		t.Errorf("app's container killed once runs as attempt %d, want 1", again.Attempt)
	}
	// The operator on the gateway, offline.
	checkOperator(t, g, n, operatorCase{kubelet: identity, app: app.Name, crash: podOf(ctx, g.p.clientset(), appsNS, "crash").Name})
	want := map[string]string{app.Name: again.ID}
	firstRestart := time.Now()
	storeChanges(t, g, n, want)
	rebootOffline(t, g, n, want)
	if why := readyOn(ctx, g.p.clientset(), node, "app"); why != "" {
		t.Errorf("offline, on the gateway: %s", why)
	}
	checkInClusterOffline(t, g, podToken, "the link refused, after a restart")
	firstReadAfterRestart(t, g, podToken, "offline")
	if d := time.Since(down); d > outage {
		t.Logf("the changes offline took %s, longer than the outage's %s", d.Round(time.Second), outage)
	}
	time.Sleep(time.Until(down.Add(outage/2 + 2*time.Second)))
	checkCloudDown(t, c.kubeconfig, app.Name, "no tunnel from node "+node, 5*time.Second)
	time.Sleep(time.Until(down.Add(outage)))
	l.Restore()
	tl.Restore()
	back := time.Now()
	tunnelBack := cloudReachesNode(c.kubeconfig, node)

	// Within 10 s of the return, the cluster's view is the node's.
	gcs := g.p.clientset()
	if !eventually(10*time.Second, func() bool { why = clusterAgrees(ctx, c.cs, gcs, n, node); return why == "" }) {
		t.Errorf("10 s after the link came back: %s", why)
	}
	t.Logf("through the mirror: the cluster agreed with the node %s after the link's return", time.Since(back).Round(100*time.Millisecond))
	var doomed string
	if !eventually(30*time.Second, func() bool {
		_, err := c.cs.CoreV1().Pods(appsNS).Get(ctx, "doomed", metav1.GetOptions{})
		_, running := n.running(appsNS, "doomed", "doomed")
		doomed = fmt.Sprintf("on the cluster: %v; on the node: %v", err, running)
		return apierrors.IsNotFound(err) && running != nil
	}) {
		t.Errorf("doomed, deleted on the cluster offline, 30 s after the return: %s", doomed)
	}
	t.Logf("through the mirror: doomed stopped and was gone from the cluster %s after the return", time.Since(back).Round(100*time.Millisecond))
	checkCrash(t, n, c.cs, "the cluster after the outage")
	// storeChanges restarts the gateway 4 times, rebootOffline once,
	// firstReadAfterRestart once.
	checkInClusterResumed(t, n, c, inClusterCreated, down, firstRestart, 6)
	// No flap: the node stays Ready on the cluster from its return on.
	time.Sleep(20 * time.Second)
	f.mu.Lock()
	for _, at := range f.at[node] {
		if at.After(back) {
			t.Errorf("the node went NotReady on the cluster at %s, %s after the link's return", at.Format(time.TimeOnly), at.Sub(back).Round(100*time.Millisecond))
		}
	}
	f.mu.Unlock()
	sameContainers(t, n, want, "the outage")
	if d := <-tunnelBack; d < 0 || d > 10*time.Second {
		t.Errorf("from the cloud, the node proxy answered %s after the link's return, want within 10 s", d)
	} else {
		t.Logf("from the cloud: the node proxy answered again %s after the link's return", d.Round(100*time.Millisecond))
	}
	checkFromTheCloud(t, ct, c.kubeconfig, node, podOf(ctx, c.cs, appsNS, "app").Name)
	checkServed(t, "the kubelet", n.kubelet.logs())
	checkKubeProxy(t, proxy)
}

// clusterAgrees says how the cluster's view of the node and its pods
// differs from the gateway's and the runtime's, or "": the node Ready,
// the same pods (doomed aside: its delete is judged by itself), each with
// the same phase, readiness and container statuses (the runtime's
// container IDs, restart counts, states and exit codes).
func clusterAgrees(ctx context.Context, cluster, gateway kubernetes.Interface, n *realNode, node string) string {
	if !nodeReady(ctx, cluster, node) {
		return "the node is not Ready on the cluster"
	}
	views := [2]map[string]string{}
	for i, cs := range []kubernetes.Interface{cluster, gateway} {
		pods, err := cs.CoreV1().Pods(appsNS).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
		if err != nil {
			return err.Error()
		}
		views[i] = map[string]string{}
		for _, p := range pods.Items {
			if p.Name != "doomed" {
				views[i][p.Name] = podView(&p)
			}
		}
	}
	if d := mapDiff(views[1], views[0], 10); d != "" {
		return "the cluster's pods (+) against the gateway's (-): " + d
	}
	for name := range views[1] {
		prefix, _, _ := strings.Cut(name, "-")
		if prefix != "app" {
			continue
		}
		c, err := n.running(appsNS, name, "app")
		if err != nil {
			return err.Error()
		}
		if !strings.Contains(views[1][name], "containerd://"+c.ID) {
			return fmt.Sprintf("the pod %s's status (%s) does not name the runtime's container %s", name, views[1][name], c.ID)
		}
	}
	return ""
}

// podView is what the cluster and the node must agree on of a pod.
func podView(p *corev1.Pod) string {
	v := fmt.Sprintf("uid=%s phase=%s ready=%t", p.UID, p.Status.Phase, podReady(p))
	for _, c := range p.Status.ContainerStatuses {
		state := "waiting"
		switch {
		case c.State.Running != nil:
			state = "running"
		case c.State.Terminated != nil:
			state = fmt.Sprintf("terminated(%d)", c.State.Terminated.ExitCode)
		}
		last := ""
		if c.LastTerminationState.Terminated != nil {
			last = fmt.Sprintf(" last=%s(%d)", c.LastTerminationState.Terminated.ContainerID, c.LastTerminationState.Terminated.ExitCode)
		}
		v += fmt.Sprintf(" %s:%s restarts=%d ready=%t %s%s", c.Name, c.ContainerID, c.RestartCount, c.Ready, state, last)
	}
	return v
}
