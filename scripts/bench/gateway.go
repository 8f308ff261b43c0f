package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// The gateway data set, per copy (issue 15): what one edge gateway's
// agents and controllers keep in their store.
const (
	gatewayPods       = 200
	gatewayConfigMaps = 1000
	gatewaySecrets    = 500
	gatewayServices   = 50 // headless, each with one EndpointSlice
	gatewayLeases     = 100
	gatewayNodes      = 20
	// gatewayConfigBytes is the payload of each ConfigMap, in three keys.
	gatewayConfigBytes = 2400
)

// GatewayResult is the gateway data set at each scale (a fresh server per
// scale), and on the first scale's server a burst of updates.
type GatewayResult struct {
	Runs []GatewayRun `json:"runs"`
	// Burst: BurstUpdates ConfigMap updates paced over BurstSec seconds,
	// on the first scale's server once it is idle with the data.
	BurstUpdates int     `json:"burstUpdates"`
	BurstSec     float64 `json:"burstSec"`
	BurstRate    float64 `json:"burstAchievedRate"`
	// BurstPeak is VmHWM over the burst alone (reset by clear_refs before
	// it); BurstAfter the memory an idle period after it.
	BurstPeak  int64 `json:"burstPeakBytes"`
	BurstAfter Mem   `json:"burstAfter"`
}

// GatewayRun is one server holding Scale copies of the gateway set, each
// in its own namespace.
type GatewayRun struct {
	Scale   int     `json:"scale"`
	Objects int     `json:"objects"`
	LoadMs  float64 `json:"loadMs"`
	// Mem is sampled -idle after the load; IdleCPUPercent is the server's
	// CPU over -cpu-window after that (the GC of an idle server with data).
	Mem      Mem      `json:"mem"`
	Mappings Mappings `json:"mappings"`
	// BinaryPages is the binary's share of Mappings by section and module.
	BinaryPages    BinaryPages `json:"binaryPages"`
	IdleCPUPercent float64     `json:"idleCPUPercent"`
}

// gatewayTarget is the memory target for a scale of the gateway
// set (a quarter of kube-apiserver + etcd on the same data).
func gatewayTarget(scale int) int64 {
	switch scale {
	case 1:
		return 48 << 20
	case 5:
		return 128 << 20
	}
	return 0
}

// gateway measures each scale of the gateway set on a fresh server; the
// first scale's server then takes the burst.
func (b *bench) gateway(ctx context.Context) error {
	r := &GatewayResult{BurstUpdates: b.o.BurstUpdates, BurstSec: b.o.BurstDuration.Seconds()}
	b.res.Gateway = r
	for i, scale := range b.o.GatewayScales {
		dir := filepath.Join(b.root, fmt.Sprintf("gateway-%d", scale))
		srv, _, err := b.startOn(ctx, dir, "gateway")
		if err != nil {
			return err
		}
		err = b.gatewayRun(ctx, srv, scale, r, i == 0)
		if serr := stopServer(srv); err == nil {
			err = serr
		}
		if err != nil {
			return fmt.Errorf("gateway ×%d: %w", scale, err)
		}
		os.RemoveAll(dir)
	}
	return nil
}

func (b *bench) gatewayRun(ctx context.Context, srv *server, scale int, r *GatewayResult, first bool) error {
	run := GatewayRun{Scale: scale}
	start := time.Now()
	cms, err := b.gatewayLoad(ctx, srv, scale)
	if err != nil {
		return err
	}
	run.Objects = scale * (gatewayPods + gatewayConfigMaps + gatewaySecrets + 2*gatewayServices + gatewayLeases)
	run.LoadMs = ms(time.Since(start))
	b.logf("gateway ×%d: %d objects loaded in %v; idling %v", scale, run.Objects, time.Since(start).Round(time.Millisecond), b.o.Idle)
	if err := sleep(ctx, b.o.Idle); err != nil {
		return err
	}
	if run.Mem, err = b.memOf(srv, fmt.Sprintf("gateway ×%d", scale)); err != nil {
		return err
	}
	if run.Mappings, err = readMappings(srv.pid()); err != nil {
		return err
	}
	b.logf("gateway ×%d: RSS by mapping: %s", scale, run.Mappings)
	if run.BinaryPages, err = readBinaryPages(srv.pid(), b.o.SymbolsBin); err != nil {
		return err
	}
	b.logf("gateway ×%d: the binary's resident pages: %s", scale, run.BinaryPages)
	if err := b.heapProfileOf(ctx, srv, fmt.Sprintf("gateway-x%d", scale)); err != nil {
		return err
	}
	if run.IdleCPUPercent, err = cpuPercent(ctx, srv.pid(), b.o.CPUWindow); err != nil {
		return err
	}
	b.logf("gateway ×%d: idle CPU %.2f%%", scale, run.IdleCPUPercent)
	r.Runs = append(r.Runs, run)
	if !first {
		return nil
	}
	return b.gatewayBurst(ctx, srv, cms, r)
}

// gatewayBurst updates the ConfigMaps BurstUpdates times, paced over
// BurstDuration, and records the peak memory of the burst alone.
func (b *bench) gatewayBurst(ctx context.Context, srv *server, cms []*corev1.ConfigMap, r *GatewayResult) error {
	// Writing 5 to clear_refs resets VmHWM to the current RSS
	// (Documentation/filesystems/proc.rst), so the peak is the burst's.
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", srv.pid()), []byte("5"), 0); err != nil {
		return fmt.Errorf("resetting the peak RSS: %w", err)
	}
	cs := b.clientsOf(srv, b.o.Clients)
	rate := float64(b.o.BurstUpdates) / b.o.BurstDuration.Seconds()
	elapsed, err := paced(ctx, b.o.Clients, b.o.BurstUpdates, rate, func(ctx context.Context, w, i int) error {
		k := i % len(cms)
		return updateConfigMap(ctx, cs[w], cms[k], k, 100+i/len(cms))
	})
	if err != nil {
		return fmt.Errorf("burst: %w", err)
	}
	r.BurstRate = float64(b.o.BurstUpdates) / elapsed.Seconds()
	m, err := b.memOf(srv, "end of the burst")
	if err != nil {
		return err
	}
	r.BurstPeak = m.VmHWM
	b.logf("burst: %d updates at %.0f/s, peak RSS %s; idling %v", b.o.BurstUpdates, r.BurstRate, mib(r.BurstPeak), b.o.Idle)
	if err := sleep(ctx, b.o.Idle); err != nil {
		return err
	}
	if r.BurstAfter, err = b.memOf(srv, "after the burst"); err != nil {
		return err
	}
	return b.heapProfileOf(ctx, srv, "gateway-after-burst")
}

// updateConfigMap rewrites the payload of gateway ConfigMap k for round,
// unconditionally (no resourceVersion), so that paced writers never
// conflict with each other.
func updateConfigMap(ctx context.Context, c kubernetes.Interface, cm *corev1.ConfigMap, k, round int) error {
	cm = cm.DeepCopy()
	cm.ResourceVersion = ""
	cm.Data["agent.yaml"] = payload(k, round)[:gatewayConfigBytes/3]
	_, err := c.CoreV1().ConfigMaps(cm.Namespace).Update(ctx, cm, metav1.UpdateOptions{})
	return err
}

// gatewayNamespace is the namespace of copy k of the gateway set.
func gatewayNamespace(k int) string { return fmt.Sprintf("gw-%d", k) }

// gatewayLoad creates scale copies of the gateway set, one per namespace,
// and returns the first copy's ConfigMaps.
func (b *bench) gatewayLoad(ctx context.Context, srv *server, scale int) ([]*corev1.ConfigMap, error) {
	cs := b.clientsOf(srv, b.o.Clients)
	var first []*corev1.ConfigMap
	for k := range scale {
		cms, err := b.gatewayLoadCopy(ctx, cs, k)
		if err != nil {
			return nil, err
		}
		if k == 0 {
			first = cms
		}
	}
	return first, nil
}

// gatewayLoadCopy creates copy k of the gateway set in its namespace with
// the clients cs, and returns its ConfigMaps.
func (b *bench) gatewayLoadCopy(ctx context.Context, cs []*kubernetes.Clientset, k int) ([]*corev1.ConfigMap, error) {
	ns := gatewayNamespace(k)
	if _, err := cs[0].CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("creating namespace %s: %w", ns, err)
	}
	cms := make([]*corev1.ConfigMap, gatewayConfigMaps)
	steps := []struct {
		what string
		n    int
		fn   func(ctx context.Context, c *kubernetes.Clientset, i int) error
	}{
		{"configmaps", gatewayConfigMaps, func(ctx context.Context, c *kubernetes.Clientset, i int) error {
			cm, err := c.CoreV1().ConfigMaps(ns).Create(ctx, gatewayConfigMap(ns, i), metav1.CreateOptions{})
			cms[i] = cm
			return err
		}},
		{"secrets", gatewaySecrets, func(ctx context.Context, c *kubernetes.Clientset, i int) error {
			_, err := c.CoreV1().Secrets(ns).Create(ctx, gatewaySecret(ns, i), metav1.CreateOptions{})
			return err
		}},
		{"services", gatewayServices, func(ctx context.Context, c *kubernetes.Clientset, i int) error {
			svc, eps := gatewayService(ns, i)
			if _, err := c.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
				return err
			}
			_, err := c.DiscoveryV1().EndpointSlices(ns).Create(ctx, eps, metav1.CreateOptions{})
			return err
		}},
		{"leases", gatewayLeases, func(ctx context.Context, c *kubernetes.Clientset, i int) error {
			_, err := c.CoordinationV1().Leases(ns).Create(ctx, gatewayLease(ns, i), metav1.CreateOptions{})
			return err
		}},
		{"pods", gatewayPods, func(ctx context.Context, c *kubernetes.Clientset, i int) error {
			p, err := c.CoreV1().Pods(ns).Create(ctx, gatewayPod(ns, i), metav1.CreateOptions{})
			if err != nil {
				return err
			}
			p.Status = runningStatus(p, i)
			_, err = c.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{})
			return err
		}},
	}
	for _, s := range steps {
		if _, err := parallel(ctx, b.o.Clients, s.n, func(ctx context.Context, w, i int) error {
			return s.fn(ctx, cs[w], i)
		}); err != nil {
			return nil, fmt.Errorf("creating %s in %s: %w", s.what, ns, err)
		}
	}
	return cms, nil
}

func gatewayConfigMap(ns string, i int) *corev1.ConfigMap {
	p := payload(i, 0)
	third := gatewayConfigBytes / 3
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Name: fmt.Sprintf("device-%04d", i), Namespace: ns,
			Labels: map[string]string{"app.kubernetes.io/name": "edge-agent", "app.kubernetes.io/component": "device-config", "edge.example.com/node": nodeName(i % gatewayNodes)},
		},
		Data: map[string]string{
			"agent.yaml":   p[:third],
			"devices.json": p[third:] + p[:2*third-len(p)],
			"rules.conf":   strings.Repeat(strconv.Itoa(i), third/len(strconv.Itoa(i))),
		},
	}
}

func gatewaySecret(ns string, i int) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("device-cred-%04d", i), Namespace: ns,
			Labels: map[string]string{"app.kubernetes.io/name": "edge-agent", "app.kubernetes.io/component": "device-credentials"}},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{"token": []byte(payload(i, 1)[:768]), "ca.crt": []byte(payload(i, 2)[:256])},
	}
}

// gatewayService is a headless Service and the EndpointSlice a controller
// would keep for it: one ready endpoint per agent it selects, four here.
func gatewayService(ns string, i int) (*corev1.Service, *discoveryv1.EndpointSlice) {
	name := fmt.Sprintf("svc-%02d", i)
	labels := map[string]string{"app.kubernetes.io/name": "edge-agent", "app.kubernetes.io/instance": fmt.Sprintf("agent-%d", i%10)}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
		Spec: corev1.ServiceSpec{
			ClusterIP: corev1.ClusterIPNone, Selector: labels,
			Ports: []corev1.ServicePort{{Name: "metrics", Port: 9100, Protocol: corev1.ProtocolTCP}},
		},
	}
	ready := true
	port, portName, proto := int32(9100), "metrics", corev1.ProtocolTCP
	eps := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-abcde", Namespace: ns,
			Labels: map[string]string{discoveryv1.LabelServiceName: name, discoveryv1.LabelManagedBy: "endpointslice-controller.k8s.io"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: &portName, Port: &port, Protocol: &proto}},
	}
	for k := range 4 {
		node := nodeName((i + k) % gatewayNodes)
		eps.Endpoints = append(eps.Endpoints, discoveryv1.Endpoint{
			Addresses:  []string{fmt.Sprintf("10.100.%d.%d", i, 2+k)},
			Conditions: discoveryv1.EndpointConditions{Ready: &ready},
			NodeName:   &node,
			TargetRef:  &corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: podName(i*4 + k)},
		})
	}
	return svc, eps
}

// gatewayLease is a node agent's heartbeat.
func gatewayLease(ns string, i int) *coordinationv1.Lease {
	holder := nodeName(i % gatewayNodes)
	secs := int32(40)
	now := metav1.NewMicroTime(time.Now())
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("agent-%03d", i), Namespace: ns},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &secs, AcquireTime: &now, RenewTime: &now},
	}
}

// gatewayPod is the store section's agent pod with a Secret volume too.
func gatewayPod(ns string, i int) *corev1.Pod {
	p := pod(i, gatewayNodes)
	p.Namespace = ns
	p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "credentials", VolumeSource: corev1.VolumeSource{
		Secret: &corev1.SecretVolumeSource{SecretName: fmt.Sprintf("device-cred-%04d", i%gatewaySecrets)}}})
	c := &p.Spec.Containers[0]
	c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "credentials", MountPath: "/etc/agent/credentials", ReadOnly: true})
	return p
}

// gatewayRows are the figures of the gateway section.
func gatewayRows(row func(figure, value string, t target), r *Result) {
	g := r.Gateway
	for _, run := range g.Runs {
		var t target
		if lim := gatewayTarget(run.Scale); lim > 0 {
			t = target{"RSS <= " + mib(lim), run.Mem.VmRSS <= lim}
		}
		row(fmt.Sprintf("gateway ×%d (%d objects): RSS (anonymous)", run.Scale, run.Objects), fmt.Sprintf("%s (%s); loaded in %.0f ms", mib(run.Mem.VmRSS), mib(run.Mem.RssAnon), run.LoadMs), t)
		row(fmt.Sprintf("gateway ×%d: RSS by mapping", run.Scale), run.Mappings.String(), target{})
		row(fmt.Sprintf("gateway ×%d: the binary's resident pages", run.Scale), run.BinaryPages.String(), target{})
		row(fmt.Sprintf("gateway ×%d: CPU idle with the data", run.Scale), fmt.Sprintf("%.2f %% of a core", run.IdleCPUPercent), target{"<= 2 %", run.IdleCPUPercent <= 2})
	}
	if len(g.Runs) == 0 {
		return
	}
	steady := g.Runs[0].Mem.VmRSS
	row(fmt.Sprintf("gateway ×%d: peak RSS over a burst of %d updates in %.0f s", g.Runs[0].Scale, g.BurstUpdates, g.BurstSec),
		fmt.Sprintf("%s (%.2fx steady; %.0f updates/s achieved; after it %s, anonymous %s)", mib(g.BurstPeak), float64(g.BurstPeak)/float64(steady), g.BurstRate, mib(g.BurstAfter.VmRSS), mib(g.BurstAfter.RssAnon)),
		target{"<= 2x steady", g.BurstPeak > 0 && g.BurstPeak <= 2*steady})
}
