package e2e

import (
	"bufio"
	"crypto/x509/pkix"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// The node's pods find the API as in any cluster (README, "The node's pods
// find the API"): the real kube-proxy 1.37 leads the Service
// default/kubernetes to its endpoint, and an unmodified in-cluster
// client-go program (test/e2e/incluster) reaches the API through the
// Service's cluster IP with its pod's projected token.

// kubeProxyIPTables are the commands kube-proxy's iptables mode runs (the
// Debian package iptables; .ci/run installs it).
var kubeProxyIPTables = []string{"iptables", "iptables-save", "iptables-restore", "ip6tables", "ip6tables-save", "ip6tables-restore"}

// kubeProxyPolicy is upstream's ClusterRole system:node-proxier, bound to
// the user system:kube-proxy as upstream binds it
// (plugin/pkg/auth/authorizer/rbac/bootstrappolicy/policy.go), in the
// terms of kubestore's --authorization-policy-file.
const kubeProxyPolicy = `- users: ["system:kube-proxy"]
  verbs: ["list", "watch"]
  resources: ["services", "endpoints", "endpointslices.discovery.k8s.io", "servicecidrs.networking.k8s.io"]
  namespaces: ["*"]
- users: ["system:kube-proxy"]
  verbs: ["get", "list", "watch"]
  resources: ["nodes"]
  namespaces: ["*"]
- users: ["system:kube-proxy"]
  verbs: ["create", "update", "patch"]
  resources: ["events", "events.events.k8s.io"]
  namespaces: ["*"]
`

// kubeProxyConfig is the node's kube-proxy's configuration: iptables mode,
// the node's pods' range as the cluster's (no masquerade for them), its
// ports on loopback, NodePorts on the node's address only (not on
// loopback: no route_localnet), and no conntrack setting: nf_conntrack_max and the
// conntrack table's hash size (a module parameter, in /sys) are the
// host's, not the node's network namespace's, so the node leaves them
// as they are.
const kubeProxyConfig = `apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: %s}
hostnameOverride: %s
mode: iptables
clusterCIDR: %s
healthzBindAddress: 127.0.0.1:%d
metricsBindAddress: 127.0.0.1:%d
nodePortAddresses: [primary]
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
`

// kubeletChains are the iptables chains the kubelet makes itself
// (pkg/kubelet/kubelet_network_linux.go), which kube-proxy --cleanup
// leaves.
var kubeletChains = []string{"KUBE-IPTABLES-HINT", "KUBE-KUBELET-CANARY", "KUBE-FIREWALL"}

// kubeProxyAccess is the gateway's flags that grant kube-proxy
// kubeProxyPolicy, where the gateway has no other policy.
func kubeProxyAccess(t *testing.T) []string {
	t.Helper()
	policy := filepath.Join(t.TempDir(), "policy.yaml")
	must(t, os.WriteFile(policy, []byte("rules:\n"+kubeProxyPolicy), 0o600))
	return []string{"--authorization-policy-file", policy}
}

// startKubeProxy starts the real kube-proxy on the node, in the node's
// network namespace, on its own identity: a client certificate for
// system:kube-proxy from the gateway's kubernetes.io/kube-apiserver-client
// signer, approved by the gateway's admin, as an operator provisions it
// by hand (the gateway's policy grants it kubeProxyPolicy). It returns
// once kube-proxy wrote its rules for default/kubernetes. When the test
// ends, kube-proxy is stopped and its rules removed by kube-proxy
// --cleanup: the next node of the run shares the network namespace.
func startKubeProxy(t *testing.T, g *realGateway, n *realNode) *process {
	t.Helper()
	dir := filepath.Join(n.dir, "kube-proxy")
	must(t, os.MkdirAll(dir, 0o755))
	kc, err := g.p.issueClientKubeconfig("kube-proxy-"+n.name, pkix.Name{CommonName: "system:kube-proxy"}, "kubernetes.io/kube-apiserver-client", dir)
	must(t, err)
	ports := freePorts(t, 2)
	config := filepath.Join(dir, "config.yaml")
	must(t, os.WriteFile(config, []byte(fmt.Sprintf(kubeProxyConfig, kc, n.name, n.podCIDR, ports[0], ports[1])), 0o644))
	// Registered first, so run after the process is killed.
	t.Cleanup(func() { cleanUpKubeProxy(t, n) })
	p := n.run("kube-proxy", "kube-proxy", "--config", config, "--v", "2")
	var rules string
	if !eventually(60*time.Second, func() bool {
		rules = iptablesSave("iptables-save")
		return p.hasExited() || strings.Contains(rules, `"default/kubernetes:https`)
	}) || p.hasExited() {
		t.Fatalf("kube-proxy wrote no rule for default/kubernetes in 60 s (exited: %t); its rules:\n%s\nits log:\n%s", p.hasExited(), rules, tail(p.logs(), 8<<10))
	}
	return p
}

// cleanUpKubeProxy runs kube-proxy --cleanup, as an operator does when
// taking kube-proxy off a node, and checks that no chain of kube-proxy's
// is left in the node's network namespace.
func cleanUpKubeProxy(t *testing.T, n *realNode) {
	cmd := exec.Command(filepath.Join(n.bins, "kube-proxy"), "--cleanup", "--v", "2")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("kube-proxy --cleanup: %v\n%s", err, tail(string(out), 8<<10))
	}
	var left []string
	for _, c := range kubeChains() {
		if !slices.Contains(kubeletChains, c[strings.LastIndex(c, " ")+1:]) {
			left = append(left, c)
		}
	}
	if len(left) > 0 {
		t.Errorf("after kube-proxy --cleanup, the node's network namespace has kube-proxy's chains:\n%s", strings.Join(left, "\n"))
	}
}

// iptablesSave is what save (iptables-save or ip6tables-save) prints of
// every table, with the rules' counters, or "" when it fails.
func iptablesSave(save string) string {
	out, err := exec.Command(save, "-c").Output()
	if err != nil {
		return ""
	}
	return string(out)
}

// kubeChains are the iptables chains named KUBE-* in the network
// namespace of the caller, each as "<command> <table> <chain>".
func kubeChains() []string {
	var chains []string
	for _, save := range []string{"iptables-save", "ip6tables-save"} {
		chains = append(chains, kubeChainsIn(save, iptablesSave(save))...)
	}
	return chains
}

// kubeChainsIn are the chains named KUBE-* of what save printed.
func kubeChainsIn(save, rules string) []string {
	var chains []string
	table := ""
	sc := bufio.NewScanner(strings.NewReader(rules))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "*"):
			table = line[1:]
		case strings.HasPrefix(line, ":KUBE-"):
			chain, _, _ := strings.Cut(line[1:], " ")
			chains = append(chains, save+" "+table+" "+chain)
		}
	}
	return chains
}

// dnatPackets is the number of packets kube-proxy's rules led from the
// Service port svc ("namespace/name:port") to endpoint ("ip:port"), by
// the counter of its DNAT rule; false when there is no such rule.
func dnatPackets(rules, svc, endpoint string) (int, bool) {
	for _, line := range strings.Split(rules, "\n") {
		// [12:720] -A KUBE-SEP-... -m comment --comment "default/kubernetes:https" ... -j DNAT --to-destination 192.0.2.10:6443
		counters, rule, ok := strings.Cut(line, " ")
		if !ok || !strings.HasPrefix(rule, "-A KUBE-SEP-") || !strings.Contains(rule, `"`+svc+`"`) || !strings.HasSuffix(rule, "-j DNAT --to-destination "+endpoint) {
			continue
		}
		packets, _, _ := strings.Cut(strings.Trim(counters, "[]"), ":")
		n, err := strconv.Atoi(packets)
		return n, err == nil
	}
	return 0, false
}

// The in-cluster client of the real node: its image, its pod and
// ServiceAccount, the ConfigMap it writes what it saw to, and the one the
// test changes under it.
const (
	inClusterImage  = "kubestore.test/incluster:1"
	inClusterPod    = "incluster"
	inClusterSA     = "lister"
	inClusterReport = "incluster-report"
	inClusterProbe  = "probe"
)

var inClusterBinary = &goBinary{pkg: "test/e2e/incluster", name: "incluster", env: []string{"CGO_ENABLED=0"}}

// inClusterUser is the in-cluster client's user, by its ServiceAccount.
const inClusterUser = "system:serviceaccount:" + appsNS + ":" + inClusterSA

// inClusterPolicy grants the in-cluster client's ServiceAccount the
// ConfigMaps of its namespace and its widgets with their status, and
// nothing else.
const inClusterPolicy = `- users: ["` + inClusterUser + `"]
  verbs: ["get", "list", "watch", "create", "update", "patch"]
  resources: ["configmaps"]
  namespaces: ["` + appsNS + `"]
- users: ["` + inClusterUser + `"]
  verbs: ["get", "list", "watch", "patch"]
  resources: ["widgets.example.com", "widgets.example.com/status"]
  namespaces: ["` + appsNS + `"]
`

// startInCluster creates, through cs, the in-cluster client's
// ServiceAccount, the ConfigMap the test will change, and the client's
// pod on node, with the program's args. It returns when the pod was
// created.
func startInCluster(t *testing.T, cs kubernetes.Interface, node string, args ...string) time.Time {
	t.Helper()
	ctx := t.Context()
	_, err := cs.CoreV1().ServiceAccounts(appsNS).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: inClusterSA}}, metav1.CreateOptions{})
	must(t, err)
	_, err = cs.CoreV1().ConfigMaps(appsNS).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: inClusterProbe}, Data: map[string]string{"n": "0"}}, metav1.CreateOptions{})
	must(t, err)
	created := time.Now()
	_, err = cs.CoreV1().Pods(appsNS).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: inClusterPod}, Spec: corev1.PodSpec{
		NodeName: node, ServiceAccountName: inClusterSA, TerminationGracePeriodSeconds: ptr(int64(1)),
		Containers: []corev1.Container{{Name: inClusterPod, Image: inClusterImage, ImagePullPolicy: corev1.PullNever, Args: append([]string{"--report", inClusterReport}, args...)}},
	}}, metav1.CreateOptions{})
	must(t, err)
	return created
}

// inClusterLog is the in-cluster client's log: the time and the rest of
// the first line of each word (START, LISTED, WHOAMI, ...).
type inClusterLog map[string]struct {
	at   time.Time
	rest string
}

func parseInClusterLog(log string) inClusterLog {
	l := inClusterLog{}
	for _, line := range strings.Split(log, "\n") {
		f := strings.SplitN(line, " ", 3)
		if len(f) < 2 {
			continue
		}
		at, err := time.Parse(time.RFC3339Nano, f[0])
		if _, seen := l[f[1]]; err != nil || seen {
			continue
		}
		rest := ""
		if len(f) == 3 {
			rest = f[2]
		}
		l[f[1]] = struct {
			at   time.Time
			rest string
		}{at, rest}
	}
	return l
}

// checkInCluster checks the in-cluster client that startInCluster
// created, from outside: by its log (from the runtime) and by what it
// wrote (read through cs). It called the API at api (the cluster IP and
// port of default/kubernetes in the node's view), listed the ConfigMaps
// of its namespace as inClusterUser, was refused the Secrets (403), saw
// the test's change of a ConfigMap within 5 s through its watch and wrote
// it back. created is when its pod was created.
func checkInCluster(t *testing.T, n *realNode, cs kubernetes.Interface, api string, created time.Time) {
	t.Helper()
	ctx := t.Context()
	var c runtimeContainer
	var err error
	var log inClusterLog
	var raw string
	if !eventually(90*time.Second, func() bool {
		if c, err = n.running(appsNS, inClusterPod, inClusterPod); err != nil {
			return false
		}
		raw = n.logs(c.ID)
		log = parseInClusterLog(raw)
		_, secrets := log["SECRETS"]
		return secrets
	}) {
		t.Errorf("the in-cluster client did not list, ask who it is and try the Secrets in 90 s after its pod's create (%v); its log:\n%s", err, tail(raw, 8<<10))
		return
	}
	if c.Attempt != 0 {
		t.Errorf("the in-cluster client's container restarted (attempt %d); it never exits by itself", c.Attempt)
	}
	if got, want := log["START"].rest, "host=https://"+api+" namespace="+appsNS; got != want {
		t.Errorf("the in-cluster client's rest.InClusterConfig: %q, want %q", got, want)
	}
	if got := log["WHOAMI"].rest; got != inClusterUser {
		t.Errorf("the in-cluster client is %q to the API, want %s", got, inClusterUser)
	}
	if got := log["SECRETS"].rest; got != "403" {
		t.Errorf("the in-cluster client's list of Secrets answered %q, want 403: its ServiceAccount is granted ConfigMaps only", got)
	}
	listed := log["LISTED"]
	if started, err := n.startedAt(c.ID); err != nil {
		t.Errorf("the in-cluster client's container: %v", err)
	} else {
		t.Logf("the in-cluster client listed %s after its container started, %s after its pod's create (%s)",
			listed.at.Sub(started).Round(time.Millisecond), listed.at.Sub(created).Round(100*time.Millisecond), listed.rest)
	}

	// The watch: a change of the test's is seen and written back.
	nonce := strconv.FormatInt(time.Now().UnixNano(), 10)
	want, _ := json.Marshal(map[string]string{"n": nonce})
	changed := time.Now()
	probe, err := cs.CoreV1().ConfigMaps(appsNS).Get(ctx, inClusterProbe, metav1.GetOptions{})
	must(t, err)
	probe.Data = map[string]string{"n": nonce}
	_, err = cs.CoreV1().ConfigMaps(appsNS).Update(ctx, probe, metav1.UpdateOptions{})
	must(t, err)
	var report *corev1.ConfigMap
	if !eventually(5*time.Second, func() bool {
		report, err = cs.CoreV1().ConfigMaps(appsNS).Get(ctx, inClusterReport, metav1.GetOptions{})
		return err == nil && report.Data["seen."+inClusterProbe] == string(want)
	}) {
		t.Errorf("5 s after the test changed the ConfigMap %s to %s, the in-cluster client's report says %v (%v); its log:\n%s",
			inClusterProbe, want, report.Data, err, tail(n.logs(c.ID), 8<<10))
		return
	}
	t.Logf("the in-cluster client saw a ConfigMap's change through its watch and wrote it back %s after it", time.Since(changed).Round(time.Millisecond))
	if report.Data["user"] != inClusterUser || report.Data["secrets"] != "403" {
		t.Errorf("the in-cluster client's report: %v, want user %s and secrets 403", report.Data, inClusterUser)
	}
}

// serviceAddress is the cluster IP and port of the Service ns/name's
// first port.
func serviceAddress(t *testing.T, cs kubernetes.Interface, ns, name string) string {
	t.Helper()
	svc, err := cs.CoreV1().Services(ns).Get(t.Context(), name, metav1.GetOptions{})
	must(t, err)
	return net.JoinHostPort(svc.Spec.ClusterIP, strconv.Itoa(int(svc.Spec.Ports[0].Port)))
}

// startedAt is when the runtime started the container id.
func (n *realNode) startedAt(id string) (time.Time, error) {
	out, err := n.crictl("inspect", "--output", "json", id)
	if err != nil {
		return time.Time{}, err
	}
	var in struct {
		Status struct {
			StartedAt time.Time `json:"startedAt"`
		} `json:"status"`
	}
	if err := json.Unmarshal([]byte(out), &in); err != nil {
		return time.Time{}, fmt.Errorf("crictl inspect %s: %v", id, err)
	}
	return in.Status.StartedAt, nil
}

// checkKubeProxyLed checks that kube-proxy's rules led packets from the
// Service port svc to endpoint: what went there went through kube-proxy.
func checkKubeProxyLed(t *testing.T, svc, endpoint string) {
	t.Helper()
	rules := iptablesSave("iptables-save")
	if packets, ok := dnatPackets(rules, svc, endpoint); !ok || packets == 0 {
		t.Errorf("kube-proxy's DNAT rule from %s to %s counted %d packets (rule found: %t); the nat table:\n%s", svc, endpoint, packets, ok, grepLines(rules, "KUBE-"))
	}
}

// checkKubeProxy checks that kube-proxy runs still, and that the API
// served and allowed every request it made.
func checkKubeProxy(t *testing.T, p *process) {
	t.Helper()
	if p.hasExited() {
		t.Errorf("kube-proxy exited: %v\n%s", p.err, tail(p.logs(), 8<<10))
	}
	checkServed(t, "kube-proxy", p.logs())
	if refused := grepLines(strings.ToLower(p.logs()), "forbidden"); refused != "" {
		t.Errorf("kube-proxy was refused by the API:\n%s", refused)
	}
}

// What the real node's checks read of iptables-save's output, on lines
// iptables-save 1.8.9 (nf_tables) printed of kube-proxy 1.37's rules.
func TestKubeProxyRulesRead(t *testing.T) {
	const rules = `*filter
:INPUT ACCEPT [0:0]
:KUBE-FIREWALL - [0:0]
:KUBE-SERVICES - [0:0]
COMMIT
*nat
:PREROUTING ACCEPT [0:0]
:KUBE-SEP-XKFEVHE5A2X6ZDWS - [0:0]
[0:0] -A KUBE-SEP-XKFEVHE5A2X6ZDWS -s 192.0.2.10/32 -m comment --comment "default/kubernetes:https" -j KUBE-MARK-MASQ
[16:960] -A KUBE-SEP-XKFEVHE5A2X6ZDWS -p tcp -m comment --comment "default/kubernetes:https" -m tcp -j DNAT --to-destination 192.0.2.10:34857
[16:960] -A KUBE-SERVICES -d 10.0.0.1/32 -p tcp -m comment --comment "default/kubernetes:https cluster IP" -m tcp --dport 443 -j KUBE-SVC-NPX46M4PTMTKRN6Y
COMMIT
`
	for _, c := range []struct {
		name, svc, endpoint string
		packets             int
		found               bool
	}{
		{"the endpoint's DNAT", "default/kubernetes:https", "192.0.2.10:34857", 16, true},
		{"another port of the endpoint", "default/kubernetes:https", "192.0.2.10:3485", 0, false},
		{"another Service", "default/web:http", "192.0.2.10:34857", 0, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if packets, found := dnatPackets(rules, c.svc, c.endpoint); packets != c.packets || found != c.found {
				t.Errorf("dnatPackets: %d, %t; want %d, %t", packets, found, c.packets, c.found)
			}
		})
	}
	want := []string{"iptables-save filter KUBE-FIREWALL", "iptables-save filter KUBE-SERVICES", "iptables-save nat KUBE-SEP-XKFEVHE5A2X6ZDWS"}
	if got := kubeChainsIn("iptables-save", rules); !slices.Equal(got, want) {
		t.Errorf("kubeChainsIn: %q, want %q", got, want)
	}
}
