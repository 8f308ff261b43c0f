package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// ClusterCostResult is what the cluster pays per node (issue 53): a fresh
// kube-apiserver + etcd per arm, measured with nothing attached (the
// baseline), then with the arm's nodes, idle and under pod churn. The
// arms: each node's hollow kubelet on kube-apiserver directly
// ("kubelets", then a hollow kube-proxy beside each, idle); a kubestore
// gateway per node mirroring kube-apiserver for its node, its hollow
// kubelet on it ("gateways"); three gateways as one site, each mirroring
// for its node, a hollow kubelet on each ("site", beside a kubelets arm of
// three).
type ClusterCostResult struct {
	// Skipped says why the section did not run (a binary missing).
	Skipped string `json:"skipped,omitempty"`

	PodsPerNode int `json:"podsPerNode"`
	// ChurnPerNodePerMin pods are created, and as many deleted, per node
	// and minute during the churn window.
	ChurnPerNodePerMin float64 `json:"churnPerNodePerMin"`
	// SettleSec is the wait before each window; the baseline window is
	// as long.
	SettleSec float64   `json:"settleSec"`
	IdleSec   float64   `json:"idleSec"`
	ChurnSec  float64   `json:"churnSec"`
	Arms      []CostArm `json:"arms"`
}

// The arms of the cluster-cost section.
const (
	armKubelets = "kubelets"
	armGateways = "gateways"
	armSite     = "site"
	// siteNodes is the size of the site arm.
	siteNodes = 3
)

// CostArm is one arm on its own kube-apiserver.
type CostArm struct {
	Arm   string `json:"arm"`
	Nodes int    `json:"nodes"`
	// Error is why the arm stopped; what it measured before is kept.
	Error string `json:"error,omitempty"`
	// StartMs is from the first agent's exec until kube-apiserver shows
	// every node Ready and its pods Running and Ready.
	StartMs  float64    `json:"startMs"`
	Baseline CostWindow `json:"baseline"`
	Idle     CostWindow `json:"idle"`
	Churn    CostWindow `json:"churn"`
	// Created and Deleted are the churn window's pods.
	Created int `json:"created"`
	Deleted int `json:"deleted"`
	// Proxies (the kubelets arm) is the idle window again once a hollow
	// kube-proxy runs beside each kubelet.
	Proxies *CostWindow `json:"proxies,omitempty"`
}

// CostWindow is kube-apiserver (and its etcd) over one window: the CPU
// they used, their memory at its end, the watches open then, the
// requests served meanwhile (apiserver_request_total) less the bench's
// own (its /metrics reads, the churn's creates and deletes), and the
// bytes the agents exchanged with it, counted at the TCP proxy they all
// reach it through (TLS included; the bench's own requests do not pass
// it).
type CostWindow struct {
	Sec             float64 `json:"sec"`
	APIServerCPUSec float64 `json:"apiserverCPUSec"`
	EtcdCPUSec      float64 `json:"etcdCPUSec"`
	APIServer       Mem     `json:"apiserver"`
	Etcd            Mem     `json:"etcd"`
	// Watches are apiserver_longrunning_requests{verb="WATCH"} at the
	// end, in all and by resource.
	Watches           float64            `json:"watches"`
	WatchesByResource map[string]float64 `json:"watchesByResource"`
	Requests          float64            `json:"requests"`
	RequestsByVerb    map[string]float64 `json:"requestsByVerb"`
	// RequestsByResource are the requests by verb, resource and
	// subresource ("GET" alone: a path that is no resource's, /version).
	RequestsByResource map[string]float64 `json:"requestsByResource"`
	BenchRequests      float64            `json:"benchRequests"`
	// SentBytes went to kube-apiserver, ReceivedBytes came from it.
	SentBytes     int64 `json:"sentBytes"`
	ReceivedBytes int64 `json:"receivedBytes"`
	// PerNode is the window less the arm's baseline, per node.
	PerNode *CostPerNode `json:"perNode,omitempty"`
}

// CostPerNode is a window's cost per node, less the baseline's.
type CostPerNode struct {
	RSSBytes            int64   `json:"rssBytes"`
	CPUMillicores       float64 `json:"cpuMillicores"`
	EtcdCPUMillicores   float64 `json:"etcdCPUMillicores"`
	Watches             float64 `json:"watches"`
	RequestsPerMin      float64 `json:"requestsPerMin"`
	ReceivedBytesPerMin float64 `json:"receivedBytesPerMin"`
	SentBytesPerMin     float64 `json:"sentBytesPerMin"`
}

// perNode is w less base, per node.
func (w CostWindow) perNode(base CostWindow, nodes int) *CostPerNode {
	n := float64(nodes)
	rate := func(v, sec float64) float64 {
		if sec <= 0 {
			return 0
		}
		return v / sec
	}
	return &CostPerNode{
		RSSBytes:            (w.APIServer.VmRSS - base.APIServer.VmRSS) / int64(nodes),
		CPUMillicores:       1000 * (rate(w.APIServerCPUSec, w.Sec) - rate(base.APIServerCPUSec, base.Sec)) / n,
		EtcdCPUMillicores:   1000 * (rate(w.EtcdCPUSec, w.Sec) - rate(base.EtcdCPUSec, base.Sec)) / n,
		Watches:             (w.Watches - base.Watches) / n,
		RequestsPerMin:      60 * (rate(w.Requests, w.Sec) - rate(base.Requests, base.Sec)) / n,
		ReceivedBytesPerMin: 60 * rate(float64(w.ReceivedBytes), w.Sec) / n,
		SentBytesPerMin:     60 * rate(float64(w.SentBytes), w.Sec) / n,
	}
}

// The cluster-cost section's objects: one namespace, and for each node
// costPodsPerNode pods, each mounting the node's ConfigMap and Secret
// (and, from the ServiceAccount admission, a token and the namespace's
// kube-root-ca.crt).
const (
	costNamespace   = "cluster-cost"
	costPodsPerNode = 10
	// costGatewayGroup is the gateways' group, bound to the ClusterRole
	// of -gateway-rbac.
	costGatewayGroup = "kubestore:gateways"
	costProxyToken   = "bench-kube-proxy-token-0123456789"
	// costPoll is how often the start is checked.
	costPoll = time.Second
)

func costNodeName(i int) string { return fmt.Sprintf("cost-node-%02d", i) }

// costArms are the arms of a run, smallest first: a kubelets and a
// gateways arm for each -cluster-cost-nodes, and the site beside a
// kubelets arm of its size.
func costArms(nodes []int) []CostArm {
	var arms []CostArm
	sizes := slices.Clone(nodes)
	if !slices.Contains(sizes, siteNodes) {
		sizes = append(sizes, siteNodes)
	}
	slices.Sort(sizes)
	for _, n := range slices.Compact(sizes) {
		arms = append(arms, CostArm{Arm: armKubelets, Nodes: n})
		if slices.Contains(nodes, n) {
			arms = append(arms, CostArm{Arm: armGateways, Nodes: n})
		}
		if n == siteNodes {
			arms = append(arms, CostArm{Arm: armSite, Nodes: n})
		}
	}
	return arms
}

// clusterCost measures every arm; an arm that fails is recorded with its
// error and the next one runs.
func (b *bench) clusterCost(ctx context.Context) error {
	r := &ClusterCostResult{PodsPerNode: costPodsPerNode, ChurnPerNodePerMin: b.o.CostChurnRate,
		SettleSec: b.o.Idle.Seconds(), IdleSec: b.o.CostIdle.Seconds(), ChurnSec: b.o.CostChurn.Seconds()}
	b.res.ClusterCost = r
	etcdBin, apiserverBin := filepath.Join(b.o.PeerBinDir, "etcd"), filepath.Join(b.o.PeerBinDir, "kube-apiserver")
	for _, bin := range []string{etcdBin, apiserverBin, b.o.Kubemark} {
		if _, err := os.Stat(bin); err != nil {
			r.Skipped = fmt.Sprintf("%s: %v (make upstream-bins builds it)", bin, err)
			b.logf("cluster-cost: skipped: %s", r.Skipped)
			return nil
		}
	}
	rbac, err := os.ReadFile(b.o.GatewayRBAC)
	if err != nil {
		return fmt.Errorf("reading -gateway-rbac: %w", err)
	}
	var errs []error
	for _, a := range costArms(b.o.CostNodes) {
		err := b.costArm(ctx, &a, peerSpec{etcdBin: etcdBin, apiserverBin: apiserverBin}, rbac)
		if err != nil {
			a.Error = err.Error()
			errs = append(errs, fmt.Errorf("cluster-cost, %s ×%d: %w", a.Arm, a.Nodes, err))
			b.logf("cluster-cost: %s ×%d failed: %v", a.Arm, a.Nodes, err)
		}
		r.Arms = append(r.Arms, a)
		if ctx.Err() != nil {
			break
		}
	}
	return errors.Join(errs...)
}

// benchCounter counts the requests of the bench's client by method.
type benchCounter struct {
	mu       sync.Mutex
	byMethod map[string]float64
}

func (c *benchCounter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
		c.mu.Lock()
		c.byMethod[r.Method]++
		c.mu.Unlock()
		return rt.RoundTrip(r)
	})
}

func (c *benchCounter) counts() map[string]float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.byMethod)
}

// costCluster is one arm's kube-apiserver: the pair, the bench's admin
// client (its requests counted), and the proxy every agent reaches it
// through.
type costCluster struct {
	p       *peerPair
	admin   *server
	cs      *kubernetes.Clientset
	counter *benchCounter
	proxy   *linkProxy
	dir     string
}

// costArm runs one arm on a fresh kube-apiserver + etcd.
func (b *bench) costArm(ctx context.Context, a *CostArm, spec peerSpec, rbac []byte) error {
	nodes := make([]string, a.Nodes)
	for i := range nodes {
		nodes[i] = costNodeName(i)
	}
	// Every identity a cluster gives its agents: each kubelet its node's
	// (the Node authorizer and NodeRestriction judge it), each gateway its
	// own user in the gateways' group, kube-proxy system:kube-proxy (bound
	// to system:node-proxier by kube-apiserver's bootstrap policy).
	spec.tokens = []string{costProxyToken + ",system:kube-proxy,kube-proxy-uid"}
	for i, n := range nodes {
		spec.tokens = append(spec.tokens, fmt.Sprintf("%s,system:node:%s,%s-uid,system:nodes", costToken("kubelet", i), n, n),
			fmt.Sprintf("%s,kubestore-gateway-%d,gateway-%d-uid,%s", costToken("gateway", i), i, i, costGatewayGroup))
	}
	spec.asCluster = true
	spec.dir = filepath.Join(b.root, fmt.Sprintf("cost-%s-%d", a.Arm, a.Nodes))
	b.logf("cluster-cost: %s ×%d: a fresh kube-apiserver + etcd", a.Arm, a.Nodes)
	p, err := b.startPeerWith(ctx, spec)
	if err != nil {
		return err
	}
	var procs []*server
	defer func() {
		// The agents first, the kubelets before the gateways they talk to.
		for _, s := range slices.Backward(procs) {
			s.kill()
		}
		p.stop()
		os.RemoveAll(spec.dir)
	}()
	c := &costCluster{p: p, counter: &benchCounter{byMethod: map[string]float64{}}, dir: spec.dir}
	cfg := rest.CopyConfig(p.cfg)
	cfg.WrapTransport = c.counter.wrap
	c.admin = &server{cfg: cfg}
	c.cs = clientFor(c.admin, true)
	if err := costSeed(ctx, c, nodes, rbac); err != nil {
		return err
	}
	u, err := url.Parse(p.cfg.Host)
	if err != nil {
		return err
	}
	if c.proxy, err = newLinkProxy(u.Host); err != nil {
		return err
	}
	defer c.proxy.cut()

	if err := sleep(ctx, b.o.Idle); err != nil {
		return err
	}
	if a.Baseline, err = b.costWindow(ctx, c, "baseline", b.o.Idle, nil); err != nil {
		return err
	}

	startAt := time.Now()
	switch a.Arm {
	case armKubelets:
		for i, n := range nodes {
			kc, err := b.costKubeconfig(c, "kubelet", i)
			if err != nil {
				return err
			}
			k, _, err := b.startHollow("kubelet", n, kc)
			if err != nil {
				return err
			}
			procs = append(procs, k)
		}
	case armGateways, armSite:
		var gs *gatewaySite
		if a.Arm == armSite {
			if gs, err = b.newGatewaySite(fmt.Sprintf("cost-site-%d", a.Nodes), a.Nodes); err != nil {
				return err
			}
		}
		var gateways []*server
		for i, n := range nodes {
			kc, err := b.costKubeconfig(c, "gateway", i)
			if err != nil {
				return err
			}
			args := []string{"--upstream-kubeconfig", kc, "--node-name", n}
			var gw *server
			if gs != nil {
				gw, _, err = gs.start(ctx, i, args...)
			} else {
				gw, _, err = b.startOn(ctx, filepath.Join(spec.dir, fmt.Sprintf("gateway-%d", i)), fmt.Sprintf("cost-gateway-%d", i), args...)
			}
			if err != nil {
				return err
			}
			procs = append(procs, gw)
			gateways = append(gateways, gw)
		}
		if gs != nil {
			defer func() {
				for i := range nodes {
					os.RemoveAll(filepath.Join(b.root, fmt.Sprintf("%s-%d", gs.name, i)))
				}
			}()
		}
		for i, gw := range gateways {
			k, _, err := b.startHollow("kubelet", nodes[i], gw.kubeconfig)
			if err != nil {
				return err
			}
			procs = append(procs, k)
		}
	}
	if err := costWaitReady(ctx, c, nodes, procs); err != nil {
		return fmt.Errorf("the agents' start: %w", err)
	}
	a.StartMs = ms(time.Since(startAt))
	b.logf("cluster-cost: %s ×%d: every node Ready and its %d pods Running upstream %v after the first exec", a.Arm, a.Nodes, costPodsPerNode, time.Since(startAt).Round(time.Millisecond))

	if err := sleep(ctx, b.o.Idle); err != nil {
		return err
	}
	if a.Idle, err = b.costWindow(ctx, c, "idle", b.o.CostIdle, nil); err != nil {
		return err
	}
	a.Idle.PerNode = a.Idle.perNode(a.Baseline, a.Nodes)
	churn := &costChurn{cs: c.cs, nodes: nodes, last: make([]string, len(nodes))}
	if a.Churn, err = b.costWindow(ctx, c, "churn", b.o.CostChurn, func(ctx context.Context) error {
		return churn.run(ctx, b.o.CostChurnRate, b.o.CostChurn)
	}); err != nil {
		return err
	}
	a.Churn.PerNode = a.Churn.perNode(a.Baseline, a.Nodes)
	a.Created, a.Deleted = churn.created, churn.deleted
	if err := costAlive(procs); err != nil {
		return err
	}
	if a.Arm != armKubelets {
		return nil
	}

	// The same nodes with kube-proxy too: it watches Services and
	// EndpointSlices, which a gateway mirrors for it.
	kc, err := b.costKubeconfigFor(c, "kube-proxy", costProxyToken)
	if err != nil {
		return err
	}
	for _, n := range nodes {
		k, _, err := b.startHollow("proxy", n, kc)
		if err != nil {
			return err
		}
		procs = append(procs, k)
	}
	if err := sleep(ctx, b.o.Idle); err != nil {
		return err
	}
	w, err := b.costWindow(ctx, c, "idle with kube-proxy", b.o.CostIdle, nil)
	if err != nil {
		return err
	}
	w.PerNode = w.perNode(a.Baseline, a.Nodes)
	a.Proxies = &w
	return costAlive(procs)
}

// costToken is the bearer token of an agent.
func costToken(who string, i int) string { return fmt.Sprintf("bench-%s-%d-token-0123456789", who, i) }

// costKubeconfig writes the kubeconfig of agent who (kubelet, gateway)
// of node i: its token, kube-apiserver through the proxy.
func (b *bench) costKubeconfig(c *costCluster, who string, i int) (string, error) {
	return b.costKubeconfigFor(c, fmt.Sprintf("%s-%d", who, i), costToken(who, i))
}

// costKubeconfigFor writes the kubeconfig named name with token, for
// kube-apiserver through the proxy (on loopback; its certificate is its
// own self-signed one).
func (b *bench) costKubeconfigFor(c *costCluster, name, token string) (string, error) {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["cluster"] = &clientcmdapi.Cluster{Server: "https://" + c.proxy.addr, InsecureSkipTLSVerify: true}
	kc.AuthInfos["agent"] = &clientcmdapi.AuthInfo{Token: token}
	kc.Contexts["cluster"] = &clientcmdapi.Context{Cluster: "cluster", AuthInfo: "agent"}
	kc.CurrentContext = "cluster"
	path := filepath.Join(c.dir, name+".kubeconfig")
	return path, clientcmd.WriteToFile(*kc, path)
}

// costSeed makes what kube-controller-manager would and the nodes' pods:
// the gateways' ClusterRole (-gateway-rbac) bound to their group, the
// namespace with its default ServiceAccount and kube-root-ca.crt, and
// for each node a ConfigMap, a Secret and costPodsPerNode pods bound to
// it.
func costSeed(ctx context.Context, c *costCluster, nodes []string, rbac []byte) error {
	obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(rbac, nil, nil)
	if err != nil {
		return fmt.Errorf("decoding -gateway-rbac: %w", err)
	}
	role, ok := obj.(*rbacv1.ClusterRole)
	if !ok {
		return fmt.Errorf("-gateway-rbac holds a %T, want one ClusterRole", obj)
	}
	rbacClient := c.cs.RbacV1()
	if _, err := rbacClient.ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating ClusterRole %s: %w", role.Name, err)
	}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "kubestore-gateways"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: costGatewayGroup}}}
	if _, err := rbacClient.ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating ClusterRoleBinding: %w", err)
	}
	core := c.cs.CoreV1()
	if _, err := core.Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: costNamespace}}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating namespace %s: %w", costNamespace, err)
	}
	if _, err := core.ServiceAccounts(costNamespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating the default ServiceAccount: %w", err)
	}
	ca, err := os.ReadFile(filepath.Join(c.dir, "certs", "apiserver.crt"))
	if err != nil {
		return fmt.Errorf("reading kube-apiserver's certificate for kube-root-ca.crt: %w", err)
	}
	if _, err := core.ConfigMaps(costNamespace).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "kube-root-ca.crt"},
		Data: map[string]string{"ca.crt": string(ca)}}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating kube-root-ca.crt: %w", err)
	}
	for i, n := range nodes {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "config-" + n}, Data: map[string]string{"agent.yaml": payload(i, 0)}}
		if _, err := core.ConfigMaps(costNamespace).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating configmap: %w", err)
		}
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "secret-" + n}, Data: map[string][]byte{"token": []byte(payload(i, 1)[:256])}}
		if _, err := core.Secrets(costNamespace).Create(ctx, s, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating secret: %w", err)
		}
	}
	jobs := len(nodes) * costPodsPerNode
	if _, err := parallel(ctx, 4, jobs, func(ctx context.Context, _, k int) error {
		n := nodes[k%len(nodes)]
		_, err := core.Pods(costNamespace).Create(ctx, costPod(n, fmt.Sprintf("seed-%s-%d", n, k/len(nodes))), metav1.CreateOptions{})
		return err
	}); err != nil {
		return fmt.Errorf("creating pods: %w", err)
	}
	return nil
}

// costPod is a pod bound to node, mounting its ConfigMap and Secret.
func costPod(node, name string) *corev1.Pod {
	return nodePod(costNamespace, name, node, "config-"+node, "secret-"+node)
}

// costWaitReady waits until kube-apiserver shows every node Ready and
// every seeded pod Running and Ready, or an agent exits.
func costWaitReady(ctx context.Context, c *costCluster, nodes []string, procs []*server) error {
	deadline := time.Now().Add(mirrorDeadline)
	for {
		state, err := costState(ctx, c.cs, nodes)
		if err != nil {
			return err
		}
		if state == "" {
			return nil
		}
		if err := costAlive(procs); err != nil {
			return fmt.Errorf("%w (%s)", err, state)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not done after %v: %s", mirrorDeadline, state)
		}
		if err := sleep(ctx, costPoll); err != nil {
			return err
		}
	}
}

// costState says what is not Ready yet: "" when nothing.
func costState(ctx context.Context, cs kubernetes.Interface, nodes []string) (string, error) {
	list, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", err
	}
	ready := 0
	for _, n := range list.Items {
		if slices.Contains(nodes, n.Name) && nodeReady(&n) {
			ready++
		}
	}
	pods, err := cs.CoreV1().Pods(costNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", err
	}
	running := 0
	for _, p := range pods.Items {
		if strings.HasPrefix(p.Name, "seed-") && p.Status.Phase == corev1.PodRunning && podReady(&p) {
			running++
		}
	}
	if want := len(nodes) * costPodsPerNode; ready < len(nodes) || running < want {
		return fmt.Sprintf("%d of %d nodes Ready, %d of %d pods Running and Ready", ready, len(nodes), running, want), nil
	}
	return "", nil
}

// costAlive is an error when one of procs has exited.
func costAlive(procs []*server) error {
	for _, s := range procs {
		if ended, err := s.exited(); ended {
			return fmt.Errorf("%s exited: %v\n%s", filepath.Base(s.logPath), err, tail(s.logPath))
		}
	}
	return nil
}

// costSample is kube-apiserver at one moment.
type costSample struct {
	at                time.Time
	apiCPU, etcdCPU   time.Duration
	bench             map[string]float64
	sent, received    int64
	metrics           map[string]float64
	apiMem, etcdMem   Mem
	watches           float64
	watchesByResource map[string]float64
}

// sample reads the counters; the bench's count is read before its
// /metrics request, which is thus counted in the next window, as
// kube-apiserver records a request once it has answered it.
func (c *costCluster) sample(ctx context.Context) (costSample, error) {
	s := costSample{at: time.Now(), bench: c.counter.counts()}
	var err1, err2 error
	s.apiCPU, err1 = cpuTime(c.p.apiserver.pid())
	s.etcdCPU, err2 = cpuTime(c.p.etcd.pid())
	if err := errors.Join(err1, err2); err != nil {
		return s, err
	}
	s.sent, s.received = c.proxy.bytes()
	var err error
	if s.metrics, err = metricsOf(ctx, c.admin, "apiserver_request_total{", "apiserver_longrunning_requests{"); err != nil {
		return s, err
	}
	s.watchesByResource = map[string]float64{}
	for series, v := range s.metrics {
		if strings.HasPrefix(series, "apiserver_longrunning_requests{") && label(series, "verb") == "WATCH" {
			s.watches += v
			if v != 0 {
				s.watchesByResource[label(series, "resource")] += v
			}
		}
	}
	if s.apiMem, err = readMem(c.p.apiserver.pid()); err != nil {
		return s, err
	}
	s.etcdMem, err = readMem(c.p.etcd.pid())
	return s, err
}

// costWindow measures kube-apiserver over d, running load meanwhile when
// not nil (it returns once its d is over).
func (b *bench) costWindow(ctx context.Context, c *costCluster, what string, d time.Duration, load func(context.Context) error) (CostWindow, error) {
	var w CostWindow
	before, err := c.sample(ctx)
	if err != nil {
		return w, err
	}
	if load != nil {
		err = load(ctx)
	} else {
		err = sleep(ctx, d)
	}
	if err != nil {
		return w, err
	}
	after, err := c.sample(ctx)
	if err != nil {
		return w, err
	}
	w.Sec = after.at.Sub(before.at).Seconds()
	w.APIServerCPUSec = (after.apiCPU - before.apiCPU).Seconds()
	w.EtcdCPUSec = (after.etcdCPU - before.etcdCPU).Seconds()
	w.APIServer, w.Etcd = after.apiMem, after.etcdMem
	w.Watches, w.WatchesByResource = after.watches, after.watchesByResource
	w.RequestsByVerb = labelDeltas(after.metrics, before.metrics, "apiserver_request_total", "verb")
	w.Requests = sum(w.RequestsByVerb)
	w.RequestsByResource = labelDeltas(after.metrics, before.metrics, "apiserver_request_total", "verb", "resource", "subresource")
	for method, n := range after.bench {
		w.BenchRequests += n - before.bench[method]
	}
	w.Requests -= w.BenchRequests
	w.SentBytes, w.ReceivedBytes = after.sent-before.sent, after.received-before.received
	b.logf("cluster-cost: %s, %.0f s: kube-apiserver CPU %.2f s (etcd %.2f s), RSS %s (etcd %s), %.0f watches (%s), %.0f requests besides the bench's %.0f (%s; %s), %d bytes from it, %d to it",
		what, w.Sec, w.APIServerCPUSec, w.EtcdCPUSec, mib(w.APIServer.VmRSS), mib(w.Etcd.VmRSS), w.Watches, byKey(w.WatchesByResource, "%.0f"),
		w.Requests, w.BenchRequests, byKey(w.RequestsByVerb, "%.0f"), byKey(w.RequestsByResource, "%.0f"), w.ReceivedBytes, w.SentBytes)
	return w, nil
}

// costChurn creates pods bound to the nodes, in turn, and deletes each
// node's previous one as it creates the next: a steady stream of pods
// started and ended.
type costChurn struct {
	cs               *kubernetes.Clientset
	nodes            []string
	mu               sync.Mutex
	last             []string // each node's live churned pod
	created, deleted int
}

// run churns at rate pods per node and minute for d.
func (ch *costChurn) run(ctx context.Context, rate float64, d time.Duration) error {
	perSec := rate * float64(len(ch.nodes)) / 60
	n := int(perSec * d.Seconds())
	end := time.Now().Add(d)
	_, err := paced(ctx, 4, n, perSec, func(ctx context.Context, _, i int) error {
		k := i % len(ch.nodes)
		node := ch.nodes[k]
		name := fmt.Sprintf("churn-%s-%d", node, i/len(ch.nodes))
		if _, err := ch.cs.CoreV1().Pods(costNamespace).Create(ctx, costPod(node, name), metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating pod %s: %w", name, err)
		}
		ch.mu.Lock()
		ch.created++
		prev := ch.last[k]
		ch.last[k] = name
		ch.mu.Unlock()
		if prev == "" {
			return nil
		}
		// Graceful, as a controller deletes: the kubelet ends the pod.
		if err := ch.cs.CoreV1().Pods(costNamespace).Delete(ctx, prev, metav1.DeleteOptions{}); err != nil {
			return fmt.Errorf("deleting pod %s: %w", prev, err)
		}
		ch.mu.Lock()
		ch.deleted++
		ch.mu.Unlock()
		return nil
	})
	if err != nil {
		return err
	}
	return sleep(ctx, time.Until(end))
}

// The cluster-cost section's defaults.
const (
	defaultCostWindow    = 60 * time.Second
	defaultCostChurnRate = 2.0
)

// clusterCostRows are the figures per node of each node count: the
// kubelets' beside the gateways' (and the site's) with their ratio.
func clusterCostRows(row func(figure, value string, t target), r *Result) {
	c := r.ClusterCost
	arm := func(kind string, n int) *CostArm {
		for i := range c.Arms {
			if a := &c.Arms[i]; a.Arm == kind && a.Nodes == n {
				return a
			}
		}
		return nil
	}
	var sizes []int
	for _, a := range c.Arms {
		if a.Error != "" {
			row(fmt.Sprintf("cluster cost: %s ×%d", a.Arm, a.Nodes), "FAILED: "+firstLine(a.Error), target{})
		}
		if !slices.Contains(sizes, a.Nodes) {
			sizes = append(sizes, a.Nodes)
		}
	}
	type figure struct {
		name string
		of   func(p *CostPerNode) float64
		unit string
	}
	figures := []figure{
		{"kube-apiserver RSS", func(p *CostPerNode) float64 { return float64(p.RSSBytes) / (1 << 20) }, "%.2f MiB"},
		{"kube-apiserver CPU", func(p *CostPerNode) float64 { return p.CPUMillicores }, "%.2f millicores"},
		{"watches", func(p *CostPerNode) float64 { return p.Watches }, "%.1f"},
		{"requests/min", func(p *CostPerNode) float64 { return p.RequestsPerMin }, "%.2f"},
		{"KB/min from kube-apiserver", func(p *CostPerNode) float64 { return p.ReceivedBytesPerMin / 1e3 }, "%.2f"},
		{"KB/min to kube-apiserver", func(p *CostPerNode) float64 { return p.SentBytesPerMin / 1e3 }, "%.2f"},
	}
	ratio := func(x, base float64) string {
		if base == 0 {
			return "n/a"
		}
		return fmt.Sprintf("%.2f×", x/base)
	}
	for _, n := range sizes {
		kubelets := arm(armKubelets, n)
		if kubelets == nil || kubelets.Error != "" {
			continue
		}
		for _, other := range []*CostArm{arm(armGateways, n), arm(armSite, n)} {
			if other == nil || other.Error != "" {
				continue
			}
			what, goal := "gateway", "gateway <= kubelet"
			if other.Arm == armSite {
				what, goal = "site member", "site member < kubelet"
			}
			row(fmt.Sprintf("cluster cost ×%d: agents' exec to every node Ready, pods Running", n),
				fmt.Sprintf("kubelets %.1f s, %ss %.1f s", kubelets.StartMs/1000, what, other.StartMs/1000), target{})
			for _, phase := range []struct {
				name     string
				k, o, kp *CostPerNode
			}{
				{"idle", kubelets.Idle.PerNode, other.Idle.PerNode, proxiesPerNode(kubelets)},
				{fmt.Sprintf("churn %g pods/min/node", c.ChurnPerNodePerMin), kubelets.Churn.PerNode, other.Churn.PerNode, nil},
			} {
				if phase.k == nil || phase.o == nil {
					continue
				}
				for _, f := range figures {
					k, o := f.of(phase.k), f.of(phase.o)
					value := fmt.Sprintf("kubelet "+f.unit+", %s "+f.unit+" (%s)", k, what, o, ratio(o, k))
					if phase.kp != nil {
						kp := f.of(phase.kp)
						value += fmt.Sprintf("; kubelet+kube-proxy "+f.unit+" (%s)", kp, ratio(o, kp))
					}
					ok := o <= k
					if other.Arm == armSite {
						ok = o < k
					}
					row(fmt.Sprintf("cluster cost ×%d, %s, per node: %s", n, phase.name, f.name), value, target{goal, ok})
				}
			}
		}
	}
}

// proxiesPerNode is the kubelets arm's idle cost with kube-proxy beside
// each kubelet, when measured.
func proxiesPerNode(a *CostArm) *CostPerNode {
	if a.Proxies == nil {
		return nil
	}
	return a.Proxies.PerNode
}
