package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kubestore/kubestore/test/ports"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
)

// The node-agents section's node: one kubelet with a full node's pods
// (the kubelet's default --max-pods), each mounting one of a few shared
// ConfigMaps and Secrets, as a node's workloads do.
const (
	agentNode       = "bench-node"
	agentNamespace  = "bench-node"
	agentPods       = 110
	agentMaxPods    = 120
	agentConfigMaps = 10
	agentSecrets    = 10
	// During the outage agentChanges/2 pods are deleted upstream and as
	// many created for the node.
	agentChanges = 10
	// agentPoll is how often the reconnect is checked.
	agentPoll = 200 * time.Millisecond
	// pendingMetric is the edge's count of the node's writes not yet
	// reconciled with the upstream (refreshed every second).
	pendingMetric = "kubestore_mirror_pending_objects"
)

// NodeAgentsResult is an edge kubestore serving one real kubelet
// (kubemark's hollow kubelet: the kubelet's code on a fake runtime) whose
// node and pods it mirrors, with the default rules, from an upstream
// kubestore through the TCP proxy.
type NodeAgentsResult struct {
	// Skipped says why the section did not run; nothing else is set then.
	Skipped string `json:"skipped,omitempty"`

	Pods       int     `json:"pods"`
	ConfigMaps int     `json:"configMaps"`
	Secrets    int     `json:"secrets"`
	WindowSec  float64 `json:"windowSec"`
	OutageSec  float64 `json:"outageSec"`
	// Deleted and Created are the pods changed upstream during the outage.
	Deleted int `json:"deleted"`
	Created int `json:"created"`

	// The start: from the kubelet's exec until the upstream shows the node
	// Ready and every pod Running and Ready (their statuses went through
	// the edge), and the requests meanwhile (agentCounts).
	StartMs        float64 `json:"startMs"`
	StartSent      float64 `json:"startSent"`
	StartServed    float64 `json:"startServed"`
	StartForwarded float64 `json:"startForwarded"`

	// The steady windows, each -idle after what came before: the edge in
	// sync with the node's objects before the kubelet starts, and with
	// the kubelet once the pods are Ready.
	WithoutKubelet AgentWindow `json:"withoutKubelet"`
	WithKubelet    AgentWindow `json:"withKubelet"`
	KubeletMem     Mem         `json:"kubeletMem"`
	// MirroredObjects is the sum of the edge's kubestore_mirror_objects.
	MirroredObjects float64 `json:"mirroredObjects"`
	// ManagedFields is what the upstream's managedFields take of the
	// node's mirrored objects on the edge, once the kubelet runs.
	ManagedFields ManagedFieldsShare `json:"managedFields"`

	// The outage: the node's writes the edge applied locally during it,
	// by write (kubestore_mirror_offline_writes_total), and the objects
	// pending just before the restore.
	OfflineWrites    map[string]float64 `json:"offlineWrites"`
	PendingAtRestore float64            `json:"pendingAtRestore"`

	// The reconnect, from the restore: /mirrorz answers 200, no pending
	// object (kubestore_mirror_pending_objects 0), the upstream shows the
	// node Ready and exactly the node's pods, Running and Ready; all
	// three at once (ReconnectMs). Each is polled every 200 ms.
	MirrorzOkMs     float64 `json:"mirrorzOkMs"`
	PendingZeroMs   float64 `json:"pendingZeroMs"`
	UpstreamReadyMs float64 `json:"upstreamReadyMs"`
	ReconnectMs     float64 `json:"reconnectMs"`
	// Bytes through the proxy from the restore to the reconnect: sent to
	// the upstream, received from it.
	SentBytes     int64 `json:"sentBytes"`
	ReceivedBytes int64 `json:"receivedBytes"`
	// Reconciled are the pending writes reconciled during the reconnect,
	// by outcome (kubestore_mirror_reconciled_total).
	Reconciled map[string]float64 `json:"reconciled"`
}

// AgentWindow is the edge over one steady window: the requests per
// second (agentCounts) the kubelet sent, by method, the edge served by
// its API handlers, by verb, and the edge forwarded upstream; the CPU of
// the edge and the kubelet; the edge's memory after it.
type AgentWindow struct {
	SentPerSec         float64            `json:"sentPerSec"`
	SentPerSecByMethod map[string]float64 `json:"sentPerSecByMethod"`
	ServedPerSec       float64            `json:"servedPerSec"`
	ServedPerSecByVerb map[string]float64 `json:"servedPerSecByVerb"`
	ForwardedPerSec    float64            `json:"forwardedPerSec"`
	EdgeCPUPercent     float64            `json:"edgeCPUPercent"`
	KubeletCPUPercent  float64            `json:"kubeletCPUPercent"`
	EdgeMem            Mem                `json:"edgeMem"`
}

// agentCounts are the request counters of one moment. Sent is the
// kubelet's own count of its requests (rest_client_requests_total on its
// read-only port: all go to the edge), by method. Served is the edge's
// apiserver_request_total, by verb: its own controllers' requests too (a
// Lease, ServiceCIDRs), and a write to a mirrored object, which the
// mirror's filter forwards upstream and then answers with a GET of the
// local copy through the API handlers, counted as that GET; forwarded
// counts those writes (kubestore_mirror_write_through_total).
type agentCounts struct {
	sent, served map[string]float64
	forwarded    float64
}

// nodeAgents measures an edge serving one kubelet with agentPods pods:
// the kubelet's start, a steady window without it and one with it, and
// the reconnect after an outage during which the kubelet goes on and pods
// change upstream.
func (b *bench) nodeAgents(ctx context.Context) error {
	r := &NodeAgentsResult{Pods: agentPods, ConfigMaps: agentConfigMaps, Secrets: agentSecrets,
		WindowSec: b.o.NodeWindow.Seconds(), OutageSec: b.o.NodeOutage.Seconds(), Deleted: agentChanges / 2, Created: agentChanges - agentChanges/2}
	b.res.NodeAgents = r
	if _, err := os.Stat(b.o.Kubemark); err != nil {
		r.Skipped = fmt.Sprintf("no kubemark at %q (make upstream-bins builds it)", b.o.Kubemark)
		b.logf("node-agents: skipped: %s", r.Skipped)
		return nil
	}
	var procs []*server
	defer func() {
		// The kubelet first: it is the edge's client.
		for _, p := range slices.Backward(procs) {
			p.kill()
		}
	}()

	// The upstream with the node's pods, and the proxy to it.
	up, _, err := b.startOn(ctx, filepath.Join(b.root, "agents-up"), "upstream")
	if err != nil {
		return err
	}
	procs = append(procs, up)
	upCS := b.clientsOf(up, b.o.Clients)
	if err := seedAgentPods(ctx, upCS); err != nil {
		return err
	}
	b.logf("node-agents: %d pods on node %s created upstream", agentPods, agentNode)
	proxy, kubeconfig, err := b.proxied(up)
	if err != nil {
		return err
	}
	defer proxy.cut()

	// The edge, with the default rules, in sync before the kubelet starts.
	edge, _, err := b.startOn(ctx, filepath.Join(b.root, "agents-edge"), "edge", "--upstream-kubeconfig", kubeconfig, "--node-name", agentNode)
	if err != nil {
		return err
	}
	procs = append(procs, edge)
	if _, err := waitMirrorz(ctx, edge, true); err != nil {
		return err
	}
	hc, err := rest.HTTPClientFor(edge.cfg)
	if err != nil {
		return err
	}
	if r.WithoutKubelet, err = b.agentWindow(ctx, edge, nil, ""); err != nil {
		return err
	}

	// The kubelet, until the upstream shows its node and pods Ready.
	want := map[string]bool{}
	for i := range agentPods {
		want[podName(i)] = true
	}
	counts, err := countAgents(ctx, edge, "")
	if err != nil {
		return err
	}
	execAt := time.Now()
	kubelet, kubeletMetrics, err := b.startKubelet(edge)
	if err != nil {
		return err
	}
	procs = append(procs, kubelet)
	if err := waitAgents(ctx, kubelet, mirrorDeadline, func() (bool, string, error) {
		diff, err := agentsDiff(ctx, upCS[0], want)
		return diff == "", diff, err
	}); err != nil {
		return fmt.Errorf("the kubelet's start: %w", err)
	}
	r.StartMs = ms(time.Since(execAt))
	now, err := countAgents(ctx, edge, kubeletMetrics)
	if err != nil {
		return err
	}
	r.StartSent, r.StartServed = sum(now.sent), sum(now.served)-sum(counts.served)
	r.StartForwarded = now.forwarded - counts.forwarded
	b.logf("node-agents: node and %d pods Running and Ready upstream %v after the kubelet's exec; requests meanwhile: the kubelet sent %.0f (%s), the edge's API served %.0f and it forwarded %.0f upstream",
		agentPods, time.Since(execAt).Round(time.Millisecond), r.StartSent, byKey(now.sent, "%.0f"), r.StartServed, r.StartForwarded)

	if r.WithKubelet, err = b.agentWindow(ctx, edge, kubelet, kubeletMetrics); err != nil {
		return err
	}
	if r.KubeletMem, err = readMem(kubelet.pid()); err != nil {
		return err
	}
	objects, err := metricsOf(ctx, edge, "kubestore_mirror_objects{")
	if err != nil {
		return err
	}
	for _, n := range objects {
		r.MirroredObjects += n
	}
	if r.ManagedFields, err = managedFieldsShare(ctx, b.clientsOf(edge, 1)[0]); err != nil {
		return err
	}
	b.logf("node-agents: kubelet RSS %s; %.0f objects mirrored; managedFields %s", mib(r.KubeletMem.VmRSS), r.MirroredObjects, r.ManagedFields)

	// The outage: the kubelet goes on against the edge; pods change
	// upstream.
	before, err := metricsOf(ctx, edge, "kubestore_mirror_offline_writes_total", "kubestore_mirror_reconciled_total")
	if err != nil {
		return err
	}
	cutAt := time.Now()
	proxy.cut()
	if _, err := waitMirrorz(ctx, edge, false); err != nil {
		return fmt.Errorf("after cutting the link: %w", err)
	}
	for k := range r.Deleted {
		name := podName(changedIndex(k, agentPods, r.Deleted))
		// Graceful, as a controller deletes: the kubelet ends the pod
		// once the edge has seen the delete.
		if err := upCS[0].CoreV1().Pods(agentNamespace).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			return fmt.Errorf("deleting pod %s upstream during the outage: %w", name, err)
		}
		delete(want, name)
	}
	for k := range r.Created {
		name := podName(agentPods + k)
		if _, err := upCS[0].CoreV1().Pods(agentNamespace).Create(ctx, agentPod(agentPods+k), metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating pod %s upstream during the outage: %w", name, err)
		}
		want[name] = true
	}
	b.logf("node-agents: link cut; %d pods deleted and %d created upstream; link restored in %v", r.Deleted, r.Created, time.Until(cutAt.Add(b.o.NodeOutage)).Round(time.Second))
	if err := sleep(ctx, time.Until(cutAt.Add(b.o.NodeOutage))); err != nil {
		return err
	}
	if ended, err := kubelet.exited(); ended {
		return fmt.Errorf("the kubelet exited during the outage: %v\n%s", err, tail(kubelet.logPath))
	}
	offline, err := metricsOf(ctx, edge, "kubestore_mirror_offline_writes_total", pendingMetric)
	if err != nil {
		return err
	}
	r.PendingAtRestore = offline[pendingMetric]
	r.OfflineWrites = labelDeltas(offline, before, "kubestore_mirror_offline_writes_total", "write")

	// The reconnect.
	sent, received := proxy.bytes()
	restoredAt := time.Now()
	if err := proxy.restore(); err != nil {
		return err
	}
	since := func() float64 { return ms(time.Since(restoredAt)) }
	err = waitAgents(ctx, kubelet, mirrorDeadline, func() (bool, string, error) {
		ok, _, err := mirrorz(ctx, hc, edge)
		if err != nil {
			return false, "", err
		}
		if ok && r.MirrorzOkMs == 0 {
			r.MirrorzOkMs = since()
		}
		m, err := metricsOf(ctx, edge, pendingMetric)
		if err != nil {
			return false, "", err
		}
		pending, found := m[pendingMetric]
		if found && pending == 0 && r.PendingZeroMs == 0 {
			r.PendingZeroMs = since()
		}
		diff, err := agentsDiff(ctx, upCS[0], want)
		if err != nil {
			return false, "", err
		}
		if diff == "" && r.UpstreamReadyMs == 0 {
			r.UpstreamReadyMs = since()
		}
		if ok && found && pending == 0 && diff == "" {
			r.ReconnectMs = since()
			s, rcv := proxy.bytes()
			r.SentBytes, r.ReceivedBytes = s-sent, rcv-received
			return true, "", nil
		}
		return false, fmt.Sprintf("/mirrorz ok %t, %.0f pending (found %t), upstream: %s", ok, pending, found, diff), nil
	})
	if err != nil {
		_, verbose, _ := mirrorz(ctx, hc, edge)
		return fmt.Errorf("the reconnect after the outage: %w; /mirrorz?verbose:\n%s", err, verbose)
	}
	after, err := metricsOf(ctx, edge, "kubestore_mirror_reconciled_total")
	if err != nil {
		return err
	}
	r.Reconciled = labelDeltas(after, before, "kubestore_mirror_reconciled_total", "outcome")
	b.logf("node-agents: %.0f objects pending at the restore (offline writes %s); reconnected in %.0f ms (/mirrorz ok %.0f ms, none pending %.0f ms, upstream Ready %.0f ms); %d bytes sent upstream, %d received; reconciled %s",
		r.PendingAtRestore, byKey(r.OfflineWrites, "%.0f"), r.ReconnectMs, r.MirrorzOkMs, r.PendingZeroMs, r.UpstreamReadyMs, r.SentBytes, r.ReceivedBytes, byKey(r.Reconciled, "%.0f"))

	// Stopped here, in order, rather than killed on return.
	procs = nil
	kubelet.kill()
	return errors.Join(stopServer(edge), stopServer(up))
}

// agentWindow idles -idle, then measures the edge (and the kubelet, if
// not nil, whose metrics are at kubeletMetrics) over -node-window.
func (b *bench) agentWindow(ctx context.Context, edge, kubelet *server, kubeletMetrics string) (AgentWindow, error) {
	var w AgentWindow
	what := "without the kubelet"
	pids := []int{edge.pid()}
	if kubelet != nil {
		what = "with the kubelet"
		pids = append(pids, kubelet.pid())
	}
	b.logf("node-agents: idling %v, then a %v window %s", b.o.Idle, b.o.NodeWindow, what)
	if err := sleep(ctx, b.o.Idle); err != nil {
		return w, err
	}
	before, err := countAgents(ctx, edge, kubeletMetrics)
	if err != nil {
		return w, err
	}
	start := time.Now()
	cpu, err := cpuPercents(ctx, b.o.NodeWindow, pids...)
	if err != nil {
		return w, err
	}
	w.EdgeCPUPercent = cpu[0]
	if kubelet != nil {
		w.KubeletCPUPercent = cpu[1]
	}
	after, err := countAgents(ctx, edge, kubeletMetrics)
	if err != nil {
		return w, err
	}
	secs := time.Since(start).Seconds()
	w.SentPerSecByMethod, w.SentPerSec = rates(after.sent, before.sent, secs)
	w.ServedPerSecByVerb, w.ServedPerSec = rates(after.served, before.served, secs)
	w.ForwardedPerSec = (after.forwarded - before.forwarded) / secs
	if w.EdgeMem, err = b.memOf(edge, "of the edge "+what); err != nil {
		return w, err
	}
	b.logf("node-agents: %s: requests/s: the kubelet sent %.2f (%s), the edge's API served %.2f (%s), forwarded %.2f; CPU edge %.2f%%, kubelet %.2f%%",
		what, w.SentPerSec, byKey(w.SentPerSecByMethod, "%.2f"), w.ServedPerSec, byKey(w.ServedPerSecByVerb, "%.2f"), w.ForwardedPerSec, w.EdgeCPUPercent, w.KubeletCPUPercent)
	return w, nil
}

// countAgents reads the request counters of the edge and, when
// kubeletMetrics is not empty, of the kubelet.
func countAgents(ctx context.Context, edge *server, kubeletMetrics string) (agentCounts, error) {
	var c agentCounts
	m, err := metricsOf(ctx, edge, "apiserver_request_total{", "kubestore_mirror_write_through_total{")
	if err != nil {
		return c, err
	}
	c.served = sumBy(m, "apiserver_request_total", "verb")
	c.forwarded = sum(sumBy(m, "kubestore_mirror_write_through_total", "code"))
	if kubeletMetrics == "" {
		return c, nil
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, kubeletMetrics, nil)
	if err != nil {
		return c, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return c, fmt.Errorf("getting the kubelet's metrics: %w", err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return c, err
	}
	if resp.StatusCode != http.StatusOK {
		return c, fmt.Errorf("getting the kubelet's metrics: HTTP %d: %.300s", resp.StatusCode, raw)
	}
	if m, err = parseMetrics(raw, "rest_client_requests_total{"); err != nil {
		return c, err
	}
	c.sent = sumBy(m, "rest_client_requests_total", "method")
	return c, nil
}

// rates are the per-second increases from before to after over secs, by
// key and in all.
func rates(after, before map[string]float64, secs float64) (map[string]float64, float64) {
	out, total := map[string]float64{}, 0.0
	for k, v := range after {
		if d := v - before[k]; d > 0 {
			out[k] = d / secs
			total += d / secs
		}
	}
	return out, total
}

// startKubelet execs kubemark's hollow kubelet for agentNode against the
// edge's admin kubeconfig.
func (b *bench) startKubelet(edge *server) (*server, string, error) {
	return b.startHollow("kubelet", agentNode, edge.kubeconfig, "--max-pods="+strconv.Itoa(agentMaxPods))
}

// startHollow execs kubemark's hollow morph ("kubelet" or "proxy") of node
// name against kubeconfig, with its own TMPDIR (the kubelet writes its
// pods' files under it). A kubelet listens on two free loopback ports;
// the URL of its read-only port's /metrics is returned.
func (b *bench) startHollow(morph, name, kubeconfig string, extra ...string) (*server, string, error) {
	tmp := filepath.Join(b.root, "hollow-tmp", morph+"-"+name)
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return nil, "", err
	}
	args := []string{"--morph=" + morph, "--name=" + name, "--kubeconfig=" + kubeconfig}
	metrics := ""
	if morph == "kubelet" {
		ports, err := freePorts(2)
		if err != nil {
			return nil, "", err
		}
		args = append(args, "--kubelet-port="+strconv.Itoa(ports[0]), "--kubelet-read-only-port="+strconv.Itoa(ports[1]), "--use-host-image-service=false")
		// The read-only port serves /metrics without authentication.
		metrics = fmt.Sprintf("http://127.0.0.1:%d/metrics", ports[1])
	}
	args = append(args, extra...)
	b.starts++
	logPath := filepath.Join(b.root, fmt.Sprintf("%s-%s-%d.log", morph, name, b.starts))
	k, err := startProcess(b.o.Kubemark, logPath, append(os.Environ(), "TMPDIR="+tmp), args...)
	if err != nil {
		return nil, "", err
	}
	b.logf("kubemark %s (pid %d)", strings.Join(args, " "), k.pid())
	return k, metrics, nil
}

// freePorts are n loopback ports free now, none handed out before in this
// run, below the kernel's ephemeral range (ports.Pick).
func freePorts(n int) ([]int, error) { return ports.Pick(n) }

// seedAgentPods creates the node's namespace, its ConfigMaps and Secrets,
// and agentPods pods on agentNode.
func seedAgentPods(ctx context.Context, cs []*kubernetes.Clientset) error {
	c := cs[0].CoreV1()
	if _, err := c.Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: agentNamespace}}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating namespace %s upstream: %w", agentNamespace, err)
	}
	// A pod needs its ServiceAccount: kubestore's serviceaccount-controller
	// makes the namespace's default at once; a server run without it gets
	// one from the bench.
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := c.ServiceAccounts(agentNamespace).Get(ctx, "default", metav1.GetOptions{})
		if err == nil {
			break
		}
		if !apierrors.IsNotFound(err) {
			return err
		}
		if time.Now().After(deadline) {
			_, err := c.ServiceAccounts(agentNamespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{})
			if err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("creating the default ServiceAccount upstream: %w", err)
			}
			break
		}
		if err := sleep(ctx, 50*time.Millisecond); err != nil {
			return err
		}
	}
	for i := range agentConfigMaps {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("agent-config-%d", i)}, Data: map[string]string{"agent.yaml": payload(i, 0)}}
		if _, err := c.ConfigMaps(agentNamespace).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating configmap upstream: %w", err)
		}
	}
	for i := range agentSecrets {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("agent-secret-%d", i)}, Data: map[string][]byte{"token": []byte(payload(i, 1)[:256])}}
		if _, err := c.Secrets(agentNamespace).Create(ctx, s, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating secret upstream: %w", err)
		}
	}
	if _, err := parallel(ctx, len(cs), agentPods, func(ctx context.Context, w, i int) error {
		_, err := cs[w].CoreV1().Pods(agentNamespace).Create(ctx, agentPod(i), metav1.CreateOptions{})
		return err
	}); err != nil {
		return fmt.Errorf("creating pods upstream: %w", err)
	}
	return nil
}

// agentPod is pod i of the node: scheduled (spec.nodeName set), one
// container on the fake runtime, a ConfigMap and a Secret mounted, and a
// grace period of 1 s so that a delete completes quickly.
func agentPod(i int) *corev1.Pod {
	return nodePod(agentNamespace, podName(i), agentNode, fmt.Sprintf("agent-config-%d", i%agentConfigMaps), fmt.Sprintf("agent-secret-%d", i%agentSecrets))
}

// nodePod is a pod of namespace bound to node, shaped as agentPod, with
// ConfigMap configMap and Secret secret mounted.
func nodePod(namespace, name, node, configMap, secret string) *corev1.Pod {
	grace := int64(1)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: map[string]string{"app": "agent"}},
		Spec: corev1.PodSpec{
			NodeName:                      node,
			TerminationGracePeriodSeconds: &grace,
			Containers: []corev1.Container{{Name: "agent", Image: "registry.k8s.io/pause:3.10",
				VolumeMounts: []corev1.VolumeMount{{Name: "config", MountPath: "/etc/agent"}, {Name: "secret", MountPath: "/etc/agent/secret", ReadOnly: true}}}},
			Volumes: []corev1.Volume{
				{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
					LocalObjectReference: corev1.LocalObjectReference{Name: configMap}}}},
				{Name: "secret", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: secret}}},
			},
		},
	}
}

// agentsDiff says how the upstream differs from the node converged: ""
// when the node is Ready and its pods are exactly want, each Running and
// Ready.
func agentsDiff(ctx context.Context, cs kubernetes.Interface, want map[string]bool) (string, error) {
	var diffs []string
	n, err := cs.CoreV1().Nodes().Get(ctx, agentNode, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		diffs = append(diffs, "no node")
	case err != nil:
		return "", err
	case !nodeReady(n):
		diffs = append(diffs, "node not Ready")
	}
	pods, err := cs.CoreV1().Pods(agentNamespace).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + agentNode})
	if err != nil {
		return "", err
	}
	seen, notReady, extra := 0, 0, 0
	for _, p := range pods.Items {
		switch {
		case !want[p.Name]:
			extra++
		case p.Status.Phase != corev1.PodRunning || !podReady(&p):
			seen++
			notReady++
		default:
			seen++
		}
	}
	if seen != len(want) || notReady > 0 || extra > 0 {
		diffs = append(diffs, fmt.Sprintf("%d of %d pods, %d of them not Running and Ready, %d deleted ones still there", seen, len(want), notReady, extra))
	}
	return strings.Join(diffs, "; "), nil
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// waitAgents polls done every agentPoll until it is true, the kubelet
// exits or timeout passes; the error then says the last state.
func waitAgents(ctx context.Context, kubelet *server, timeout time.Duration, done func() (bool, string, error)) error {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(agentPoll)
	defer tick.Stop()
	for {
		ok, state, err := done()
		if err != nil || ok {
			return err
		}
		if ended, err := kubelet.exited(); ended {
			return fmt.Errorf("the kubelet exited: %v (%s)\n%s", err, state, tail(kubelet.logPath))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline.C:
			return fmt.Errorf("not done after %v: %s", timeout, state)
		case <-tick.C:
		}
	}
}

// sumBy sums the series of name by the value of their label key.
func sumBy(m map[string]float64, name string, keys ...string) map[string]float64 {
	out := map[string]float64{}
	for series, v := range m {
		if strings.HasPrefix(series, name+"{") {
			var values []string
			for _, k := range keys {
				if l := label(series, k); l != "" {
					values = append(values, l)
				}
			}
			out[strings.Join(values, " ")] += v
		}
	}
	return out
}

func sum(m map[string]float64) float64 {
	total := 0.0
	for _, v := range m {
		total += v
	}
	return total
}

// labelDeltas is how much the series of name moved from before to after,
// summed by the value of their label key; keys that did not move are left
// out.
func labelDeltas(after, before map[string]float64, name string, keys ...string) map[string]float64 {
	out := sumBy(after, name, keys...)
	for k, v := range sumBy(before, name, keys...) {
		out[k] -= v
	}
	maps.DeleteFunc(out, func(_ string, v float64) bool { return v == 0 })
	return out
}

// label is the value of label key in a series name{k="v",...}.
func label(series, key string) string {
	for _, sep := range []string{"{", ","} {
		if _, rest, ok := strings.Cut(series, sep+key+`="`); ok {
			v, _, _ := strings.Cut(rest, `"`)
			return v
		}
	}
	return ""
}

// byKey prints figures by key, sorted, each with format: "GET 1.20,
// PATCH 0.30" for "%.2f".
func byKey(m map[string]float64, format string) string {
	if len(m) == 0 {
		return "none"
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, k+" "+fmt.Sprintf(format, m[k]))
	}
	return strings.Join(parts, ", ")
}

// nodeAgentsRows are the figures of the node-agents section: the edge's
// and the kubelet's.
func nodeAgentsRows(row func(figure, value string, t target), r *Result) {
	n := r.NodeAgents
	row(fmt.Sprintf("node agents: kubelet exec to node + %d pods Running and Ready upstream", n.Pods),
		fmt.Sprintf("%.0f ms (requests: %.0f sent by the kubelet, %.0f served by the edge's API, %.0f forwarded upstream)", n.StartMs, n.StartSent, n.StartServed, n.StartForwarded), target{})
	without, with := n.WithoutKubelet, n.WithKubelet
	row(fmt.Sprintf("node agents: requests/s the kubelet sent the edge, %.0f s window", n.WindowSec), fmt.Sprintf("%.2f (%s)", with.SentPerSec, byKey(with.SentPerSecByMethod, "%.2f")), target{})
	row("node agents: edge apiserver_request_total/s, same window",
		fmt.Sprintf("%.2f (%s); without the kubelet %.2f (%s); writes forwarded upstream, not counted there: %.2f/s", with.ServedPerSec, byKey(with.ServedPerSecByVerb, "%.2f"), without.ServedPerSec, byKey(without.ServedPerSecByVerb, "%.2f"), with.ForwardedPerSec), target{})
	row("node agents: CPU edge / kubelet, same window", fmt.Sprintf("%.2f %% / %.2f %% of a core (edge without the kubelet %.2f %%)", with.EdgeCPUPercent, with.KubeletCPUPercent, without.EdgeCPUPercent), target{})
	row(fmt.Sprintf("node agents: edge RSS / anonymous, %.0f mirrored objects", n.MirroredObjects),
		fmt.Sprintf("%s / %s (without the kubelet %s / %s; kubelet RSS %s)", mib(with.EdgeMem.VmRSS), mib(with.EdgeMem.RssAnon), mib(without.EdgeMem.VmRSS), mib(without.EdgeMem.RssAnon), mib(n.KubeletMem.VmRSS)), target{})
	row("node agents: managedFields of the node's mirrored objects", n.ManagedFields.String(), target{})
	row(fmt.Sprintf("node agents: the node's offline writes, %.0f s outage", n.OutageSec), fmt.Sprintf("%.0f objects pending at the restore (writes: %s)", n.PendingAtRestore, byKey(n.OfflineWrites, "%.0f")), target{})
	row(fmt.Sprintf("node agents: reconnect, %d deleted + %d created upstream", n.Deleted, n.Created),
		fmt.Sprintf("%.0f ms (/mirrorz ok %.0f ms, none pending %.0f ms, upstream Ready %.0f ms; reconciled: %s)", n.ReconnectMs, n.MirrorzOkMs, n.PendingZeroMs, n.UpstreamReadyMs, byKey(n.Reconciled, "%.0f")), target{})
	row("node agents: link bytes during the reconnect", fmt.Sprintf("%d sent upstream, %d received", n.SentBytes, n.ReceivedBytes), target{})
}

// ManagedFieldsShare is what managedFields take of some objects: of
// their JSON, and of what decoding them from protobuf allocates, which is
// close to what a decoded copy (the watch cache's) holds. The shares
// differ because a decoded object is several times its JSON while each
// entry's fieldsV1 stays the same JSON bytes.
type ManagedFieldsShare struct {
	Objects      int `json:"objects"`
	Entries      int `json:"entries"`
	Bytes        int `json:"bytes"`
	ObjectsBytes int `json:"objectsBytes"`
	// Decoded is what decoding the objects allocated; DecodedWithout the
	// same without their managedFields.
	Decoded        uint64 `json:"decoded"`
	DecodedWithout uint64 `json:"decodedWithout"`
}

func (m ManagedFieldsShare) String() string {
	return fmt.Sprintf("%d entries on %d objects: %.1f of their %.1f KiB of JSON (%.0f %%), %.1f of the %.1f KiB they hold decoded (%.0f %%)",
		m.Entries, m.Objects, float64(m.Bytes)/1024, float64(m.ObjectsBytes)/1024, 100*float64(m.Bytes)/float64(max(m.ObjectsBytes, 1)),
		float64(m.Decoded-m.DecodedWithout)/1024, float64(m.Decoded)/1024, 100*(1-float64(m.DecodedWithout)/float64(max(m.Decoded, 1))))
}

// managedFieldsShare measures the managedFields of the node's objects
// that the default rules mirror: its Node and Lease, and its namespace's
// pods, ConfigMaps and Secrets.
func managedFieldsShare(ctx context.Context, cs kubernetes.Interface) (ManagedFieldsShare, error) {
	var m ManagedFieldsShare
	var objs []runtime.Object
	node, err := cs.CoreV1().Nodes().Get(ctx, agentNode, metav1.GetOptions{})
	if err != nil {
		return m, err
	}
	lease, err := cs.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, agentNode, metav1.GetOptions{})
	if err != nil {
		return m, err
	}
	objs = append(objs, node, lease)
	pods, err := cs.CoreV1().Pods(agentNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return m, err
	}
	cms, err := cs.CoreV1().ConfigMaps(agentNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return m, err
	}
	secrets, err := cs.CoreV1().Secrets(agentNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return m, err
	}
	objs = appendItems(appendItems(appendItems(objs, pods.Items), cms.Items), secrets.Items)

	var stripped []runtime.Object
	for _, obj := range objs {
		meta, err := apimeta.Accessor(obj)
		if err != nil {
			return m, err
		}
		all, err := json.Marshal(obj)
		if err != nil {
			return m, err
		}
		mf, err := json.Marshal(meta.GetManagedFields())
		if err != nil {
			return m, err
		}
		m.Objects++
		m.Entries += len(meta.GetManagedFields())
		m.Bytes += len(mf)
		m.ObjectsBytes += len(all)
		s := obj.DeepCopyObject()
		sm, err := apimeta.Accessor(s)
		if err != nil {
			return m, err
		}
		sm.SetManagedFields(nil)
		stripped = append(stripped, s)
	}
	if m.Decoded, err = decodedSize(objs); err != nil {
		return m, err
	}
	if m.DecodedWithout, err = decodedSize(stripped); err != nil {
		return m, err
	}
	return m, nil
}

// decodedSize is what decoding objs from protobuf allocates, all at once
// (the bench's other goroutines allocate a little meanwhile).
func decodedSize(objs []runtime.Object) (uint64, error) {
	enc := scheme.Codecs.EncoderForVersion(protobuf.NewSerializer(scheme.Scheme, scheme.Scheme), schema.GroupVersions{corev1.SchemeGroupVersion, coordinationv1.SchemeGroupVersion})
	dec := scheme.Codecs.UniversalDeserializer()
	raw := make([][]byte, len(objs))
	for i, obj := range objs {
		var buf bytes.Buffer
		if err := enc.Encode(obj, &buf); err != nil {
			return 0, err
		}
		raw[i] = buf.Bytes()
	}
	decoded := make([]runtime.Object, len(raw))
	var before, after goruntime.MemStats
	goruntime.GC()
	goruntime.ReadMemStats(&before)
	for i, b := range raw {
		obj, _, err := dec.Decode(b, nil, nil)
		if err != nil {
			return 0, err
		}
		decoded[i] = obj
	}
	goruntime.ReadMemStats(&after)
	goruntime.KeepAlive(decoded)
	return after.TotalAlloc - before.TotalAlloc, nil
}

// appendItems appends each item of a list as an object.
func appendItems[T any, P interface {
	*T
	runtime.Object
}](objs []runtime.Object, items []T) []runtime.Object {
	for i := range items {
		objs = append(objs, P(&items[i]))
	}
	return objs
}
