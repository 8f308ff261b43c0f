package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/kubestore/kubestore/test/link"
)

// The node agents' requests kubestore leaves unserved, each with why (the
// README's list): none. A request in an agent's log that the API did not
// serve fails the tests below.
var unservedAllowed = []string{}

// nodePods are the pods a test gives a node: each mounts a ConfigMap and a
// Secret, as a node's workloads do.
func nodePod(ns, name, node string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"app": "agent"}},
		Spec: corev1.PodSpec{
			NodeName:                      node,
			TerminationGracePeriodSeconds: ptr(int64(1)),
			Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10",
				VolumeMounts: []corev1.VolumeMount{{Name: "config", MountPath: "/config"}, {Name: "secret", MountPath: "/secret"}}}},
			Volumes: []corev1.Volume{
				{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "agent-config"}}}},
				{Name: "secret", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "agent-secret"}}},
			},
		},
	}
}

// seedNode creates a node's namespace, the ConfigMap and Secret its pods
// mount, and n pods, on cs.
func seedNode(t *testing.T, cs kubernetes.Interface, ns, node string, n int) []string {
	t.Helper()
	ctx := t.Context()
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	_, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "agent-config"}, Data: map[string]string{"mode": "eco"}}, metav1.CreateOptions{})
	must(t, err)
	_, err = cs.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "agent-secret"}, StringData: map[string]string{"key": "v"}}, metav1.CreateOptions{})
	must(t, err)
	var names []string
	for i := range n {
		name := fmt.Sprintf("agent-%d", i)
		createPod(t, cs, nodePod(ns, name, node))
		names = append(names, name)
	}
	return names
}

func createPod(t *testing.T, cs kubernetes.Interface, p *corev1.Pod) {
	t.Helper()
	// A new namespace's default ServiceAccount comes moments after it.
	var err error
	if !eventually(30*time.Second, func() bool {
		_, err = cs.CoreV1().Pods(p.Namespace).Create(t.Context(), p, metav1.CreateOptions{})
		return err == nil || !strings.Contains(err.Error(), "serviceaccount")
	}) || err != nil {
		t.Fatalf("creating pod %s/%s: %v", p.Namespace, p.Name, err)
	}
}

// nodeReady reports whether node's Ready condition is True on cs.
func nodeReady(ctx context.Context, cs kubernetes.Interface, node string) bool {
	n, err := cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		return false
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// podsRunning reports whether the named pods in ns are Running and Ready
// on cs.
func podsRunning(ctx context.Context, cs kubernetes.Interface, ns string, names []string) bool {
	for _, name := range names {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil || p.Status.Phase != corev1.PodRunning || !podReady(p) {
			return false
		}
	}
	return true
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// checkServed fails for a request an agent made that the API did not
// serve, unless it is one the README justifies.
func checkServed(t *testing.T, agent, out string) {
	t.Helper()
	for _, req := range notFound(out) {
		if !slices.Contains(unservedAllowed, req) {
			t.Errorf("%s: the API did not serve %s", agent, req)
		}
	}
}

// The kubelet and kube-proxy (kubemark's hollow node: their real code,
// a fake container runtime) on kubestore alone, the kubelet with its own
// node identity (a CSR issued through kubectl), under the Node authorizer
// and NodeRestriction: the node is Ready within seconds, pods with
// ConfigMap and Secret volumes run, their deletes complete, every request
// of the agents is served, and the kubelet is still alive five minutes on.
func TestNodeAgentsOnKubestore(t *testing.T) {
	t.Parallel()
	p := start(t, shortTempDir(t))
	cs := p.clientset()
	const node, ns = "hollow-alone", "agents"
	h := newHollowNode(t, node, p.nodeKubeconfig(node))
	h.proxyKubeconfig = p.kubeconfig
	began := time.Now()
	h.startKubelet()
	h.startProxy()
	if !eventually(60*time.Second, func() bool { return nodeReady(t.Context(), cs, node) }) {
		t.Fatalf("node %s not Ready in 60 s", node)
	}
	readyIn := time.Since(began)
	t.Logf("node %s Ready %s after the kubelet started", node, readyIn.Round(100*time.Millisecond))
	if readyIn > 10*time.Second {
		t.Errorf("node Ready %s after the kubelet started, want within 10 s", readyIn)
	}
	dns := startCoreDNS(t, p.kubeconfig)
	pods := seedNode(t, cs, ns, node, 5)
	if !eventually(60*time.Second, func() bool { return podsRunning(t.Context(), cs, ns, pods) }) {
		t.Fatalf("pods not Running and Ready in 60 s")
	}
	// A delete waits for the kubelet, which stops the pod and then
	// deletes it for good.
	for _, name := range pods[:2] {
		must(t, cs.CoreV1().Pods(ns).Delete(t.Context(), name, metav1.DeleteOptions{}))
	}
	if !eventually(60*time.Second, func() bool {
		for _, name := range pods[:2] {
			if _, err := cs.CoreV1().Pods(ns).Get(t.Context(), name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return false
			}
		}
		return true
	}) {
		t.Error("deleted pods still there after 60 s: the kubelet did not complete their deletes")
	}
	for time.Since(began) < 5*time.Minute {
		if h.kubelet.hasExited() {
			t.Fatalf("the kubelet exited %s after its start: %v", time.Since(began).Round(time.Second), h.kubelet.err)
		}
		time.Sleep(5 * time.Second)
	}
	if !nodeReady(t.Context(), cs, node) || !podsRunning(t.Context(), cs, ns, pods[2:]) {
		t.Error("after five minutes: the node or its pods are no longer Ready")
	}
	// CoreDNS serves the cluster's names from kubestore's Services.
	svc, err := cs.CoreV1().Services(ns).Create(t.Context(), &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "agent"}, Ports: []corev1.ServicePort{{Port: 80}}}}, metav1.CreateOptions{})
	must(t, err)
	var addrs []string
	if !eventually(30*time.Second, func() bool {
		addrs, err = dns.resolve(t, "web."+ns+".svc.cluster.local")
		return err == nil && slices.Contains(addrs, svc.Spec.ClusterIP)
	}) {
		t.Errorf("CoreDNS on kubestore: web.%s.svc.cluster.local resolves to %v (%v), want %s", ns, addrs, err, svc.Spec.ClusterIP)
	}
	checkServed(t, "kubelet", h.kubelet.logs())
	checkServed(t, "kube-proxy", h.proxy.logs())
	t.Logf("the kubelet logged %d refusals of the Node authorizer or NodeRestriction", strings.Count(h.kubelet.logs(), "is forbidden"))
	if errs := dns.errors(); len(errs) > 0 {
		t.Errorf("CoreDNS logged errors against kubestore:\n%s", strings.Join(errs, "\n"))
	}
}

// nodeEdge is an edge of the node-agent tests: a kubestore mirroring the
// cluster through its own link, and the hollow node of its node name
// talking to it.
type nodeEdge struct {
	t      *testing.T
	node   string
	ns     string
	dir    string
	args   []string
	link   *link.Link
	p      *proc
	cs     kubernetes.Interface
	hollow *hollowNode
	pods   []string
}

func startNodeEdge(t *testing.T, c *cluster, node string, pods int) *nodeEdge {
	t.Helper()
	dir := shortTempDir(t)
	e := &nodeEdge{t: t, node: node, ns: "ns-" + node, dir: dir}
	e.link = link.New(t, strings.TrimPrefix(c.url, "https://"))
	upstream := filepath.Join(dir, "upstream.kubeconfig")
	writeTokenKubeconfig(t, "https://"+e.link.Addr, gatewayIdentity(t, c, node), upstream)
	// A fixed port: the kubelet keeps its kubeconfig across a restart of
	// kubestore.
	e.args = []string{"--upstream-kubeconfig", upstream, "--node-name", node, "--secure-port", strconv.Itoa(freePort(t))}
	e.p = start(t, filepath.Join(dir, "data"), e.args...)
	e.cs = e.p.clientset()
	e.pods = seedNode(t, c.cs, e.ns, node, pods)
	// The kubelet on its own node's certificate, as deployed; its
	// kubeconfig names the fixed port, and stays across kubestore's
	// restarts.
	e.hollow = newHollowNode(t, node, e.p.nodeKubeconfig(node))
	e.hollow.startKubelet()
	return e
}

// restart stops the edge's kubestore and starts it again on its data.
func (e *nodeEdge) restart() {
	e.t.Helper()
	if err := e.p.stop(30 * time.Second); err != nil {
		e.t.Errorf("stopping the edge %s: %v", e.node, err)
	}
	e.p = start(e.t, filepath.Join(e.dir, "data"), e.args...)
	e.cs = e.p.clientset()
}

// flips counts, per node, the times its Ready condition left True on the
// cluster, from a watch of the nodes.
type flips struct {
	mu    sync.Mutex
	ready map[string]bool
	count map[string]int
	at    map[string][]time.Time
}

func watchFlips(t *testing.T, cs kubernetes.Interface) *flips {
	t.Helper()
	f := &flips{ready: map[string]bool{}, count: map[string]int{}, at: map[string][]time.Time{}}
	ctx := t.Context()
	go func() {
		rv := ""
		for ctx.Err() == nil {
			w, err := cs.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true})
			if err != nil {
				time.Sleep(time.Second)
				rv = ""
				continue
			}
			for ev := range w.ResultChan() {
				n, ok := ev.Object.(*corev1.Node)
				if !ok {
					if ev.Type == watch.Error {
						rv = ""
					}
					break
				}
				rv = n.ResourceVersion
				if ev.Type != watch.Added && ev.Type != watch.Modified {
					continue
				}
				ready := false
				for _, c := range n.Status.Conditions {
					if c.Type == corev1.NodeReady {
						ready = c.Status == corev1.ConditionTrue
					}
				}
				f.mu.Lock()
				if was, seen := f.ready[n.Name]; seen && was && !ready {
					f.count[n.Name]++
					f.at[n.Name] = append(f.at[n.Name], time.Now())
				}
				f.ready[n.Name] = ready
				f.mu.Unlock()
			}
			w.Stop()
		}
	}()
	return f
}

func (f *flips) of(node string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.count[node]
}

// outage is one edge's outage in TestNodeAgentsThroughMirror.
type outage struct {
	hung            bool
	length          time.Duration
	restartKubelet  bool
	restartKubestor bool
	zombieRounds    int
}

// The kubelet on an edge kubestore that mirrors a real cluster (etcd,
// kube-apiserver, kube-controller-manager's node-lifecycle controller),
// through a link that goes down: five edges at once, one online
// throughout (it must not flip NotReady once in ten minutes), four through
// outages of 2 and 10 minutes, hung or refused, with the kubelet and
// kubestore restarted while offline. After each outage, within 10 s of
// the link's return, the cluster shows the node Ready, every pod's status
// as the edge has it, the Events written offline, and no pod on one side
// only; and twenty deliberate delete races leave no zombie.
func TestNodeAgentsThroughMirror(t *testing.T) {
	t.Parallel()
	// The cluster's watches come from etcd, compacted every minute: an
	// edge that resumes after its outage gets 410 and relists.
	c := startCluster(t, "--watch-cache=false", "--etcd-compaction-interval=1m")
	f := watchFlips(t, c.cs)
	online := 10 * time.Minute
	if testing.Short() {
		online = 2 * time.Minute
	}
	cases := map[string]outage{
		"hollow-online":  {},
		"hollow-hung-2m": {hung: true, length: 2 * time.Minute, restartKubelet: true, zombieRounds: 10},
		"hollow-down-2m": {length: 2 * time.Minute, restartKubestor: true, zombieRounds: 10},
		"hollow-hung-10": {hung: true, length: 10 * time.Minute, restartKubelet: true, restartKubestor: true},
		"hollow-down-10": {length: 10 * time.Minute, restartKubelet: true},
	}
	if testing.Short() {
		for name, o := range cases {
			o.length = min(o.length, time.Minute)
			o.zombieRounds = min(o.zombieRounds, 2)
			cases[name] = o
		}
	}
	names := slices.Sorted(func(yield func(string) bool) {
		for n := range cases {
			if !yield(n) {
				return
			}
		}
	})
	edges := map[string]*nodeEdge{}
	for _, node := range names {
		edges[node] = startNodeEdge(t, c, node, 3)
	}
	for _, node := range names {
		e := edges[node]
		if !eventually(90*time.Second, func() bool {
			return nodeReady(t.Context(), c.cs, node) && podsRunning(t.Context(), c.cs, e.ns, e.pods)
		}) {
			t.Fatalf("%s: node or pods not Ready on the cluster in 90 s", node)
		}
	}
	began := time.Now()
	var wg sync.WaitGroup
	for _, node := range names {
		o := cases[node]
		if o.length == 0 {
			continue
		}
		wg.Go(func() {
			e := edges[node]
			runOutage(t, c, e, o)
			for i := range o.zombieRounds {
				deleteRace(t, c, e, i)
			}
		})
	}
	wg.Wait()
	if rest := online - time.Since(began); rest > 0 {
		time.Sleep(rest)
	}
	if n := f.of("hollow-online"); n != 0 {
		t.Errorf("the online node went NotReady %d times in %s on the cluster, want 0", n, time.Since(began).Round(time.Second))
	}
	t.Logf("the online node went NotReady %d times in %s", f.of("hollow-online"), time.Since(began).Round(time.Second))
	for _, node := range names {
		checkServed(t, "kubelet of "+node, edges[node].hollow.kubelet.logs())
	}
}

// runOutage takes e's link down for o, restarts what o says while it is
// down, and checks what the cluster shows within 20 s of its return: the
// node's pods, their Ready, the Events written offline. An outage past
// the node-lifecycle controller's grace makes the cluster mark the pods
// not Ready; the kubelet marks them Ready again when its status manager
// next compares its statuses with the API's (every 10 s, syncPeriod,
// pkg/kubelet/status/status_manager.go), as a kubelet connected to
// kube-apiserver does: up to 10 s of the wait is the kubelet's tick,
// beside the link's probe (2 s) and the pending writes' reconciler (5 s).
// A kubelet restarted offline writes every status at once.
func runOutage(t *testing.T, c *cluster, e *nodeEdge, o outage) {
	ctx := t.Context()
	relists := func() float64 {
		v, _ := e.metrics().value("kubestore_mirror_relists_total", "rule", "pods")
		return v
	}
	relistsBefore := relists()
	if o.hung {
		e.link.Hang()
	} else {
		e.link.Cut()
	}
	down := time.Now()
	// The node's agents go on offline: the kubelet reports its pods, a
	// device agent writes Events about them.
	offlineEvents := []string{}
	for i := range 3 {
		name := fmt.Sprintf("offline-%d", i)
		_, err := e.cs.CoreV1().Events(e.ns).Create(ctx, &corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{Name: name},
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: e.ns, Name: e.pods[0], UID: e.podUID(e.pods[0])},
			Reason:         "DeviceReport", Message: fmt.Sprintf("offline report %d", i), Type: corev1.EventTypeNormal,
			Source: corev1.EventSource{Component: "device-agent", Host: e.node}, Count: 1,
			FirstTimestamp: metav1.Now(), LastTimestamp: metav1.Now(),
		}, metav1.CreateOptions{})
		if err != nil {
			t.Errorf("%s: a device agent's Event while offline: %v", e.node, err)
		}
		offlineEvents = append(offlineEvents, name)
	}
	// The cluster changes meanwhile: a new pod for the node, one deleted.
	createPod(t, c.cs, nodePod(e.ns, "while-down", e.node))
	must(t, c.cs.CoreV1().Pods(e.ns).Delete(ctx, e.pods[1], metav1.DeleteOptions{GracePeriodSeconds: ptr(int64(0))}))
	time.Sleep(min(o.length/3, 40*time.Second))
	// kubestore first, as a node boots.
	if o.restartKubestor {
		e.restart()
	}
	if o.restartKubelet {
		e.hollow.startKubelet()
	}
	if o.restartKubelet && !eventually(60*time.Second, func() bool {
		return nodeReady(ctx, e.cs, e.node) && podsRunning(ctx, e.cs, e.ns, []string{e.pods[0], e.pods[2]})
	}) {
		t.Errorf("%s: after the kubelet's restart offline, the node or its pods are not Ready on the edge", e.node)
	}
	if o.restartKubelet && e.hollow.kubelet.hasExited() {
		t.Errorf("%s: the kubelet restarted offline exited; its log ends:\n%s", e.node, tail(e.hollow.kubelet.logs(), 2<<10))
	}
	time.Sleep(time.Until(down.Add(o.length)))
	e.link.Restore()
	back := time.Now()
	want := []string{e.pods[0], e.pods[2], "while-down"}
	// diff is what differs now; waited, what differed last (a slow
	// convergence's log says which).
	var diff, waited string
	ok := eventually(20*time.Second, func() bool {
		diff = e.compare(ctx, c, want, offlineEvents)
		if diff != "" {
			waited = fmt.Sprintf("%s after the return: %s", time.Since(back).Round(100*time.Millisecond), diff)
		}
		return diff == ""
	})
	// A restarted kubestore counts from 0: its relists are all after the
	// outage began.
	relisted := relists()
	if !o.restartKubestor {
		relisted -= relistsBefore
	}
	t.Logf("%s: outage of %s (hung %t, kubelet restarted %t, kubestore restarted %t): converged %t in %s; %.0f relists of the pods",
		e.node, o.length, o.hung, o.restartKubelet, o.restartKubestor, ok, time.Since(back).Round(100*time.Millisecond), relisted)
	if ok && time.Since(back) > 5*time.Second {
		t.Logf("%s: still differing %s", e.node, waited)
	}
	if !ok {
		t.Errorf("%s: 20 s after the link came back: %s", e.node, diff)
	}
	if o.length >= 10*time.Minute && relisted == 0 {
		t.Errorf("%s: no relist of the pods after %s offline: the resume was expected to be past the cluster's history", e.node, o.length)
	}
}

func (e *nodeEdge) metrics() metricsText {
	e.t.Helper()
	out, err := e.p.kubectl("get", "--raw", "/metrics")
	if err != nil {
		return ""
	}
	return metricsText(out)
}

func (e *nodeEdge) podUID(name string) types.UID {
	p, err := e.cs.CoreV1().Pods(e.ns).Get(e.t.Context(), name, metav1.GetOptions{})
	if err != nil {
		return ""
	}
	return p.UID
}

// compare says how the cluster and the edge differ for e's node, "" when
// they agree: the node Ready on the cluster, the same pods on both sides
// with the same status, and the Events written offline on the cluster.
func (e *nodeEdge) compare(ctx context.Context, c *cluster, want, events []string) string {
	var diffs []string
	if !nodeReady(ctx, c.cs, e.node) {
		diffs = append(diffs, "the node is not Ready on the cluster")
	}
	up, err := c.cs.CoreV1().Pods(e.ns).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + e.node})
	if err != nil {
		return err.Error()
	}
	local, err := e.cs.CoreV1().Pods(e.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err.Error()
	}
	byName := map[string]corev1.Pod{}
	for _, p := range local.Items {
		byName[p.Name] = p
	}
	var upNames, localNames []string
	for _, p := range up.Items {
		upNames = append(upNames, p.Name)
		l, ok := byName[p.Name]
		switch {
		case !ok:
		case l.UID != p.UID:
			diffs = append(diffs, fmt.Sprintf("pod %s: uid %s on the edge, %s on the cluster", p.Name, l.UID, p.UID))
		case l.Status.Phase != p.Status.Phase || podReady(&l) != podReady(&p):
			diffs = append(diffs, fmt.Sprintf("pod %s: %s ready=%t on the edge, %s ready=%t on the cluster", p.Name, l.Status.Phase, podReady(&l), p.Status.Phase, podReady(&p)))
		}
	}
	for _, p := range local.Items {
		localNames = append(localNames, p.Name)
	}
	sort.Strings(upNames)
	sort.Strings(localNames)
	sort.Strings(want)
	if !slices.Equal(upNames, localNames) || !slices.Equal(upNames, want) {
		diffs = append(diffs, fmt.Sprintf("pods: %v on the cluster, %v on the edge, want %v", upNames, localNames, want))
	}
	for _, name := range want {
		if p, ok := byName[name]; !ok || p.Status.Phase != corev1.PodRunning || !podReady(&p) {
			diffs = append(diffs, "pod "+name+" not Running and Ready")
		}
	}
	for _, name := range events {
		if _, err := c.cs.CoreV1().Events(e.ns).Get(ctx, name, metav1.GetOptions{}); err != nil {
			diffs = append(diffs, "event "+name+": "+err.Error())
		}
	}
	return strings.Join(diffs, "; ")
}

// deleteRace runs one round of deleting a running pod on the cluster while
// the kubelet's final delete, its answer and the watch's deletion race
// (odd rounds hang the link for a moment in the middle), and fails if the
// edge keeps or brings back the pod the cluster deleted.
func deleteRace(t *testing.T, c *cluster, e *nodeEdge, round int) {
	ctx := t.Context()
	name := fmt.Sprintf("race-%d", round)
	createPod(t, c.cs, nodePod(e.ns, name, e.node))
	if !eventually(60*time.Second, func() bool { return podsRunning(ctx, e.cs, e.ns, []string{name}) }) {
		t.Errorf("%s: %s not Running on the edge in 60 s", e.node, name)
		return
	}
	must(t, c.cs.CoreV1().Pods(e.ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: ptr(int64(1))}))
	if round%2 == 1 {
		time.Sleep(time.Duration(round*150) * time.Millisecond)
		e.link.Hang()
		time.Sleep(3 * time.Second)
		e.link.Restore()
	}
	gone := func(cs kubernetes.Interface) bool {
		_, err := cs.CoreV1().Pods(e.ns).Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}
	if !eventually(60*time.Second, func() bool { return gone(c.cs) && gone(e.cs) }) {
		t.Errorf("%s: round %d: %s still there 60 s after its delete (cluster gone %t, edge gone %t)", e.node, round, name, gone(c.cs), gone(e.cs))
		return
	}
	for range 10 {
		time.Sleep(time.Second)
		if !gone(e.cs) {
			t.Errorf("%s: round %d: zombie: %s came back on the edge after the cluster deleted it", e.node, round, name)
			return
		}
	}
}

// The attach-detach case of issue 35 with the cluster's own controller: a
// CSI volume attached to the node while its link is down (hung, then
// refused), kube-controller-manager's attach-detach controller writing the
// Node's volumesAttached, the test answering the VolumeAttachment as an
// external attacher would (no real storage), and the kubelet restarted
// offline, so that it writes its Node's status at the edge. After each
// return the Node's volumesAttached, on the cluster and at the edge, is
// the controller's view.
func TestNodeAgentsVolumesAttachedThroughOutages(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	e := startNodeEdge(t, c, "hollow-volumes", 1)
	ctx := t.Context()
	if !eventually(90*time.Second, func() bool { return nodeReady(ctx, c.cs, e.node) }) {
		t.Fatalf("%s not Ready on the cluster in 90 s", e.node)
	}
	// A real kubelet asks the attach-detach controller to manage its
	// volumes with this annotation (--enable-controller-attach-detach,
	// on by default); kubemark's hollow kubelet turns that off, so the
	// test says it for the node.
	_, err := c.cs.CoreV1().Nodes().Patch(ctx, e.node, types.MergePatchType,
		[]byte(`{"metadata":{"annotations":{"volumes.kubernetes.io/controller-managed-attach-detach":"true"}}}`), metav1.PatchOptions{})
	must(t, err)
	const driver = "attach.kubestore.test"
	_, err = c.cs.StorageV1().CSIDrivers().Create(ctx, &storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: driver},
		Spec: storagev1.CSIDriverSpec{AttachRequired: ptr(true)}}, metav1.CreateOptions{})
	must(t, err)
	offlineStatus := func() float64 {
		v, _ := e.metrics().value("kubestore_mirror_offline_writes_total", "write", "status")
		return v
	}
	for i, hung := range []bool{true, false} {
		if hung {
			e.link.Hang()
		} else {
			e.link.Cut()
		}
		attachVolume(t, c, e.ns, e.node, driver, fmt.Sprintf("vol-%d", i))
		before := offlineStatus()
		e.hollow.startKubelet()
		if !eventually(90*time.Second, func() bool { return offlineStatus() > before }) {
			t.Fatalf("outage %d: the restarted kubelet wrote no status offline in 90 s", i)
		}
		e.link.Restore()
		var diff string
		if !eventually(10*time.Second, func() bool {
			want := attachedByController(ctx, t, c.cs, e.node)
			diff = ""
			for side, cs := range map[string]kubernetes.Interface{"cluster": c.cs, "edge": e.cs} {
				n, err := cs.CoreV1().Nodes().Get(ctx, e.node, metav1.GetOptions{})
				if err != nil {
					diff += fmt.Sprintf("%s: %v; ", side, err)
					continue
				}
				var got []string
				for _, v := range n.Status.VolumesAttached {
					got = append(got, string(v.Name))
				}
				slices.Sort(got)
				if !slices.Equal(got, want) {
					diff += fmt.Sprintf("%s: volumesAttached %v, the controller attached %v; ", side, got, want)
				}
			}
			return diff == ""
		}) {
			t.Errorf("outage %d (hung %t): 10 s after the link's return: %s", i, hung, diff)
		}
	}
}

// attachVolume makes a CSI volume of driver for a new pod of node (a PV
// and a bound PVC), waits for the attach-detach controller's
// VolumeAttachment, answers it attached as the driver's external attacher
// would, and waits for the controller to add it to the Node's
// volumesAttached on the cluster.
func attachVolume(t *testing.T, c *cluster, ns, node, driver, vol string) {
	t.Helper()
	ctx := t.Context()
	pvc, err := c.cs.CoreV1().PersistentVolumeClaims(ns).Create(ctx, &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: vol},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, VolumeName: ns + "-" + vol,
			StorageClassName: ptr(""), Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}},
	}, metav1.CreateOptions{})
	must(t, err)
	// Bound to the claim by its uid, which the attach-detach controller
	// checks (a volume's claimRef names the claim it is bound to).
	pv, err := c.cs.CoreV1().PersistentVolumes().Create(ctx, &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: ns + "-" + vol},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeSource:        corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: driver, VolumeHandle: vol}},
			ClaimRef:                      &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: ns, Name: vol, UID: pvc.UID},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			StorageClassName:              "",
		},
	}, metav1.CreateOptions{})
	must(t, err)
	// Bound, as the persistent-volume controller would say (it does not
	// run here).
	pv.Status.Phase = corev1.VolumeBound
	_, err = c.cs.CoreV1().PersistentVolumes().UpdateStatus(ctx, pv, metav1.UpdateOptions{})
	must(t, err)
	pvc.Status.Phase = corev1.ClaimBound
	pvc.Status.AccessModes = pvc.Spec.AccessModes
	pvc.Status.Capacity = pvc.Spec.Resources.Requests
	_, err = c.cs.CoreV1().PersistentVolumeClaims(ns).UpdateStatus(ctx, pvc, metav1.UpdateOptions{})
	must(t, err)
	pod := nodePod(ns, "uses-"+vol, node)
	pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: "data",
		VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: vol}}})
	createPod(t, c.cs, pod)
	var va *storagev1.VolumeAttachment
	if !eventually(60*time.Second, func() bool {
		list, err := c.cs.StorageV1().VolumeAttachments().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false
		}
		for i := range list.Items {
			if s := list.Items[i].Spec; s.NodeName == node && s.Source.PersistentVolumeName != nil && *s.Source.PersistentVolumeName == pv.Name {
				va = &list.Items[i]
				return true
			}
		}
		return false
	}) {
		n, _ := c.cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		t.Fatalf("no VolumeAttachment of %s to %s in 60 s (the node's annotations on the cluster: %v)", pv.Name, node, n.GetAnnotations())
	}
	va.Status.Attached = true
	_, err = c.cs.StorageV1().VolumeAttachments().UpdateStatus(ctx, va, metav1.UpdateOptions{})
	must(t, err)
	name := "kubernetes.io/csi/" + driver + "^" + vol
	if !eventually(60*time.Second, func() bool { return slices.Contains(attachedTo(ctx, t, c.cs, node), name) }) {
		t.Fatalf("the attach-detach controller did not report %s attached to %s in 60 s", name, node)
	}
}

// attachedTo is the cluster Node's volumesAttached, sorted: what the
// attach-detach controller wrote.
func attachedTo(ctx context.Context, t *testing.T, cs kubernetes.Interface, node string) []string {
	t.Helper()
	n, err := cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		return nil
	}
	var out []string
	for _, v := range n.Status.VolumesAttached {
		out = append(out, string(v.Name))
	}
	slices.Sort(out)
	return out
}

// attachedByController are the CSI volumes the cluster's VolumeAttachments
// say are attached to node, by the names the attach-detach controller
// gives them in volumesAttached (kubernetes.io/csi/<driver>^<handle>),
// sorted.
func attachedByController(ctx context.Context, t *testing.T, cs kubernetes.Interface, node string) []string {
	t.Helper()
	list, err := cs.StorageV1().VolumeAttachments().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil
	}
	var out []string
	for _, va := range list.Items {
		if va.Spec.NodeName != node || !va.Status.Attached || va.Spec.Source.PersistentVolumeName == nil {
			continue
		}
		pv, err := cs.CoreV1().PersistentVolumes().Get(ctx, *va.Spec.Source.PersistentVolumeName, metav1.GetOptions{})
		if err != nil || pv.Spec.CSI == nil {
			continue
		}
		out = append(out, "kubernetes.io/csi/"+pv.Spec.CSI.Driver+"^"+pv.Spec.CSI.VolumeHandle)
	}
	slices.Sort(out)
	return out
}
