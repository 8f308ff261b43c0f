package server_test

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	"github.com/kubestore/kubestore/config"
	"github.com/kubestore/kubestore/test/link"
)

// The in-process tests of the mirror's uplink: a real upstream (a second
// kubestore, in this process), an edge mirroring it for one node through a
// link the test hangs or cuts, and the writes of that node, so each rule
// of the offline writes' reconciliation is checked in seconds. They mostly
// wait (a hung link, a forwarded write's deadline): they run beside each
// other.

// mirrorPair is an upstream and an edge that mirrors it for node, through
// link.
type mirrorPair struct {
	up, edge *testServer
	link     *link.Link
	node     string
}

// startMirrorPair starts an upstream and an edge mirroring it for node on
// the default rules. With cut, the edge starts with the link down.
func startMirrorPair(t *testing.T, node string, cut bool) *mirrorPair {
	t.Helper()
	up := startServer(t, testConfig(t))
	l := link.New(t, strings.TrimPrefix(up.rest.Host, "https://"))
	if cut {
		l.Cut()
	}
	edge := startServer(t, edgeConfig(t, up, "https://"+l.Addr, node))
	p := &mirrorPair{up: up, edge: edge, link: l, node: node}
	if !cut {
		p.waitMirrorz(t, http.StatusOK)
	}
	return p
}

// edgeConfig is the configuration of an edge that mirrors up for node,
// reaching it at server (up's own address, or a link's).
func edgeConfig(t *testing.T, up *testServer, server, node string) config.Config {
	t.Helper()
	kc, err := clientcmd.LoadFromFile(up.server.Kubeconfig())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range kc.Clusters {
		c.Server = server
	}
	path := filepath.Join(t.TempDir(), "upstream.kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t)
	cfg.Mirror.UpstreamKubeconfig = path
	cfg.Mirror.NodeName = node
	return cfg
}

// waitMirrorz waits for the edge's /mirrorz to answer code: 200 once every
// stream is connected and synced, 503 once the link is seen down.
func (p *mirrorPair) waitMirrorz(t *testing.T, code int) {
	t.Helper()
	eventually(t, 30*time.Second, fmt.Sprintf("/mirrorz answers %d", code), func() (bool, error) {
		got, body, err := p.edge.get("/mirrorz")
		if err != nil {
			return false, err
		}
		return got == code, fmt.Errorf("%d %s", got, body)
	})
}

// outage takes the link down as kind says: "hung" (connections open,
// nothing moves) or "refused" (every connection closed and refused). The
// edge's writes then answer at once ("refused") or after the forwarded
// write's deadline ("hung").
func (p *mirrorPair) outage(t *testing.T, kind string) {
	t.Helper()
	switch kind {
	case "hung":
		p.link.Hang()
	case "refused":
		p.link.Cut()
		p.waitMirrorz(t, http.StatusServiceUnavailable)
	default:
		t.Fatalf("no outage %q", kind)
	}
}

var outages = []string{"refused", "hung"}

// throughOutages runs test once per kind of outage, each with an upstream
// and an edge of its own for node edge-a.
func throughOutages(t *testing.T, test func(t *testing.T, p *mirrorPair, kind string)) {
	t.Helper()
	for _, kind := range outages {
		t.Run(kind, func(t *testing.T) { test(t, startMirrorPair(t, "edge-a", false), kind) })
	}
}

// upNode is the node's Node as a cluster has it: Ready, one volume
// attached by the attach-detach controller.
func upNode(t *testing.T, ts *testServer, name string) *corev1.Node {
	t.Helper()
	n, err := ts.client.CoreV1().Nodes().Create(t.Context(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n.Status = corev1.NodeStatus{
		Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
			LastHeartbeatTime: metav1.NewTime(time.Now().Add(-time.Minute).Truncate(time.Second))}},
		VolumesAttached: []corev1.AttachedVolume{{Name: "kubernetes.io/csi/vol-A"}},
	}
	if n, err = ts.client.CoreV1().Nodes().UpdateStatus(t.Context(), n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	return n
}

// upPod is a pod of node in namespace ns, Pending, with finalizers if
// given.
func upPod(t *testing.T, ts *testServer, ns, name, node string, finalizers ...string) *corev1.Pod {
	t.Helper()
	if _, err := ts.client.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	pod, err := ts.client.CoreV1().Pods(ns).Create(t.Context(), &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Finalizers: finalizers},
		Spec:       corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return pod
}

// seen waits until the edge holds what the upstream holds of obj, as get
// reads it on each side.
func seen[T any](t *testing.T, what string, get func(ts *testServer) (T, error), p *mirrorPair, same func(up, edge T) bool) {
	t.Helper()
	began := time.Now()
	defer func() { t.Logf("%s: after %s", what, time.Since(began).Round(100*time.Millisecond)) }()
	eventually(t, 10*time.Second, what, func() (bool, error) {
		u, err := get(p.up)
		if err != nil {
			return false, err
		}
		e, err := get(p.edge)
		if err != nil {
			return false, err
		}
		return same(u, e), fmt.Errorf("upstream %+v, edge %+v", u, e)
	})
}

func nodeCondition(n *corev1.Node, ct corev1.NodeConditionType) *corev1.NodeCondition {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == ct {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

func podCondition(p *corev1.Pod, ct corev1.PodConditionType) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == ct {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

func volumes(n *corev1.Node) []string {
	var out []string
	for _, v := range n.Status.VolumesAttached {
		out = append(out, string(v.Name))
	}
	return out
}

// The attach-detach case of issue 35: the node's heartbeat written during
// an outage, the attach-detach controller's volumesAttached changed
// upstream meanwhile; after the return both are there, upstream and at the
// edge.
func TestMirrorOfflineNodeStatusKeepsVolumesAttached(t *testing.T) {
	t.Parallel()
	throughOutages(t, func(t *testing.T, p *mirrorPair, kind string) {
		upNode(t, p.up, p.node)
		getNode := func(ts *testServer) (*corev1.Node, error) {
			return ts.client.CoreV1().Nodes().Get(t.Context(), p.node, metav1.GetOptions{})
		}
		seen(t, "the edge has the Node with vol-A", getNode, p, func(u, e *corev1.Node) bool {
			return slices.Equal(volumes(e), []string{"kubernetes.io/csi/vol-A"})
		})

		p.outage(t, kind)
		beat := metav1.NewTime(time.Now().Truncate(time.Second))
		patch := fmt.Sprintf(`{"status":{"conditions":[{"type":"Ready","status":"True","reason":"KubeletReady","lastHeartbeatTime":%q}]}}`, beat.UTC().Format(time.RFC3339))
		if _, err := p.edge.client.CoreV1().Nodes().Patch(t.Context(), p.node, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}, "status"); err != nil {
			t.Fatalf("the node's heartbeat during the outage: %v", err)
		}
		n, err := getNode(p.up)
		if err != nil {
			t.Fatal(err)
		}
		n.Status.VolumesAttached = []corev1.AttachedVolume{{Name: "kubernetes.io/csi/vol-B"}}
		if _, err := p.up.client.CoreV1().Nodes().UpdateStatus(t.Context(), n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		p.link.Restore()

		seen(t, "vol-B and the offline heartbeat, upstream and at the edge", getNode, p, func(u, e *corev1.Node) bool {
			for _, n := range []*corev1.Node{u, e} {
				c := nodeCondition(n, corev1.NodeReady)
				if !slices.Equal(volumes(n), []string{"kubernetes.io/csi/vol-B"}) || c == nil || !c.LastHeartbeatTime.Equal(&beat) {
					return false
				}
			}
			return true
		})
	})
}

// The DisruptionTarget case of issue 35: the pod's status written by the
// node during an outage, a condition added upstream meanwhile; after the
// return both are there.
func TestMirrorOfflinePodStatusKeepsDisruptionTarget(t *testing.T) {
	t.Parallel()
	throughOutages(t, func(t *testing.T, p *mirrorPair, kind string) {
		upPod(t, p.up, "work", "p", p.node)
		getPod := func(ts *testServer) (*corev1.Pod, error) {
			return ts.client.CoreV1().Pods("work").Get(t.Context(), "p", metav1.GetOptions{})
		}
		seen(t, "the edge has the pod", getPod, p, func(u, e *corev1.Pod) bool { return u.UID == e.UID })

		p.outage(t, kind)
		patch := `{"status":{"phase":"Running","conditions":[{"type":"Ready","status":"True"}]}}`
		if _, err := p.edge.client.CoreV1().Pods("work").Patch(t.Context(), "p", types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}, "status"); err != nil {
			t.Fatalf("the node's pod status during the outage: %v", err)
		}
		disruption := `{"status":{"conditions":[{"type":"DisruptionTarget","status":"True","reason":"EvictionByEvictionAPI"}]}}`
		if _, err := p.up.client.CoreV1().Pods("work").Patch(t.Context(), "p", types.StrategicMergePatchType, []byte(disruption), metav1.PatchOptions{}, "status"); err != nil {
			t.Fatal(err)
		}
		p.link.Restore()

		seen(t, "Running, Ready and DisruptionTarget, upstream and at the edge", getPod, p, func(u, e *corev1.Pod) bool {
			for _, pod := range []*corev1.Pod{u, e} {
				if pod.Status.Phase != corev1.PodRunning || podCondition(pod, corev1.PodReady) == nil || podCondition(pod, corev1.DisruptionTarget) == nil {
					return false
				}
			}
			return true
		})
	})
}

// A delete of a terminating pod offline that is not the kubelet's final
// delete (a graceful delete, one of another uid) is refused and leaves it
// terminating upstream, and a dry run of the final delete changes nothing;
// the kubelet's final delete after a terminal status leaves the cluster
// with both, in that order.
func TestMirrorOfflinePodDeletes(t *testing.T) {
	t.Parallel()
	p := startMirrorPair(t, "edge-a", false)
	const hold = "example.com/hold"
	terminating := func(name string) *corev1.Pod {
		t.Helper()
		pod := upPod(t, p.up, "work", name, p.node, hold)
		if err := p.up.client.CoreV1().Pods("work").Delete(t.Context(), name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](300)}); err != nil {
			t.Fatal(err)
		}
		eventually(t, 20*time.Second, "the edge has pod "+name+" terminating", func() (bool, error) {
			e, err := p.edge.client.CoreV1().Pods("work").Get(t.Context(), name, metav1.GetOptions{})
			return err == nil && e.DeletionTimestamp != nil, err
		})
		return pod
	}
	keep := terminating("keep")
	done := terminating("done")

	p.outage(t, "refused")
	edgePods := p.edge.client.CoreV1().Pods("work")
	final := func(uid types.UID) metav1.DeleteOptions {
		return metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0), Preconditions: metav1.NewUIDPreconditions(string(uid))}
	}
	dryRun := final(keep.UID)
	dryRun.DryRun = []string{metav1.DryRunAll}
	graceful := metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](30)}
	for what, opts := range map[string]metav1.DeleteOptions{"a graceful delete": graceful, "a delete of another uid": final("not-its-uid")} {
		// Not the node's own writes: refused while the link is down.
		if err := edgePods.Delete(t.Context(), "keep", opts); !apierrors.IsServiceUnavailable(err) {
			t.Errorf("%s of a terminating pod offline: %v, want 503", what, err)
		}
	}
	// The node's own, as a dry run: answered locally, nothing written.
	if err := edgePods.Delete(t.Context(), "keep", dryRun); err != nil {
		t.Errorf("a dry run of the final delete offline: %v", err)
	}
	if k, err := edgePods.Get(t.Context(), "keep", metav1.GetOptions{}); err != nil || ptr.Deref(k.DeletionGracePeriodSeconds, -1) != 300 {
		t.Errorf("the edge's pod after deletes that are not the node's: %v, grace %v; want it as the cluster has it", err, k.DeletionGracePeriodSeconds)
	}
	patch := `{"status":{"phase":"Succeeded"}}`
	if _, err := edgePods.Patch(t.Context(), "done", types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}, "status"); err != nil {
		t.Fatalf("the node's terminal status offline: %v", err)
	}
	if err := edgePods.Delete(t.Context(), "done", final(done.UID)); err != nil {
		t.Fatalf("the kubelet's final delete offline: %v", err)
	}
	p.link.Restore()
	p.waitMirrorz(t, http.StatusOK)

	upPods := p.up.client.CoreV1().Pods("work")
	eventually(t, 20*time.Second, "the final delete replayed after the terminal status", func() (bool, error) {
		d, err := upPods.Get(t.Context(), "done", metav1.GetOptions{})
		return err == nil && d.Status.Phase == corev1.PodSucceeded && ptr.Deref(d.DeletionGracePeriodSeconds, -1) == 0,
			fmt.Errorf("%v phase=%s grace=%v", err, d.Status.Phase, d.DeletionGracePeriodSeconds)
	})
	// The reconciliation of the other records is done by then: the pod
	// the node did not finally delete is as the cluster left it.
	k, err := upPods.Get(t.Context(), "keep", metav1.GetOptions{})
	if err != nil || k.DeletionTimestamp == nil || ptr.Deref(k.DeletionGracePeriodSeconds, -1) != 300 {
		t.Errorf("the pod deleted offline by a dry run, a graceful delete and a failed delete: %v, grace %v; want terminating with its 300 s", err, k.DeletionGracePeriodSeconds)
	}
}

// An edge started with the link down, its node registered offline (Node,
// Lease and CSINode, these two owned by the Node): once the link is back
// the upstream Lease and CSINode name the upstream Node's uid as owner.
func TestMirrorOfflineRegistrationKeepsOwners(t *testing.T) {
	t.Parallel()
	p := startMirrorPair(t, "edge-r", true)
	ctx := t.Context()
	node, err := p.edge.client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: p.node}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("registering the Node offline: %v", err)
	}
	owner := []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID}}
	if _, err := p.edge.client.CoordinationV1().Leases("kube-node-lease").Create(ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: p.node, OwnerReferences: owner},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr.To(p.node), LeaseDurationSeconds: ptr.To[int32](40), RenewTime: ptr.To(metav1.NewMicroTime(time.Now()))},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating the Lease offline: %v", err)
	}
	if _, err := p.edge.client.StorageV1().CSINodes().Create(ctx, &storagev1.CSINode{
		ObjectMeta: metav1.ObjectMeta{Name: p.node, OwnerReferences: owner},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating the CSINode offline: %v", err)
	}
	p.link.Restore()
	p.waitMirrorz(t, http.StatusOK)
	eventually(t, 30*time.Second, "the upstream Lease and CSINode owned by the upstream Node", func() (bool, error) {
		n, err := p.up.client.CoreV1().Nodes().Get(ctx, p.node, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		l, err := p.up.client.CoordinationV1().Leases("kube-node-lease").Get(ctx, p.node, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		c, err := p.up.client.StorageV1().CSINodes().Get(ctx, p.node, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		ok := func(refs []metav1.OwnerReference) bool { return len(refs) == 1 && refs[0].UID == n.UID }
		return ok(l.OwnerReferences) && ok(c.OwnerReferences), fmt.Errorf("node uid %s, lease owners %+v, csinode owners %+v", n.UID, l.OwnerReferences, c.OwnerReferences)
	})
	// Stay: the cluster's garbage collector does not take them.
	time.Sleep(3 * time.Second)
	if _, err := p.up.client.CoordinationV1().Leases("kube-node-lease").Get(ctx, p.node, metav1.GetOptions{}); err != nil {
		t.Errorf("the upstream Lease after its owner was fixed: %v", err)
	}
}

// A pod deleted and created again upstream (another uid) while the node's
// status write to it is pending: the write is dropped, and the edge holds
// the new pod as the cluster has it.
func TestMirrorOfflineWriteToRecreatedPod(t *testing.T) {
	t.Parallel()
	p := startMirrorPair(t, "edge-a", false)
	old := upPod(t, p.up, "work", "p", p.node)
	getPod := func(ts *testServer) (*corev1.Pod, error) {
		return ts.client.CoreV1().Pods("work").Get(t.Context(), "p", metav1.GetOptions{})
	}
	seen(t, "the edge has the pod", getPod, p, func(u, e *corev1.Pod) bool { return u.UID == e.UID })

	p.outage(t, "refused")
	if _, err := p.edge.client.CoreV1().Pods("work").Patch(t.Context(), "p", types.StrategicMergePatchType,
		[]byte(`{"status":{"phase":"Running","message":"offline"}}`), metav1.PatchOptions{}, "status"); err != nil {
		t.Fatal(err)
	}
	if err := p.up.client.CoreV1().Pods("work").Delete(t.Context(), "p", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
	recreated := upPod(t, p.up, "work", "p", p.node)
	p.link.Restore()

	seen(t, "the new pod, as the cluster has it, on both sides", getPod, p, func(u, e *corev1.Pod) bool {
		return u.UID == recreated.UID && e.UID == recreated.UID && u.Status.Message == "" && e.Status.Message == ""
	})
	if recreated.UID == old.UID {
		t.Fatal("the upstream gave the recreated pod the same uid")
	}
}

// A local object whose name a mirrored object later takes: the upstream's
// replaces it (the cluster's pod means the cluster's Secret), and the
// rule's stream goes on delivering.
func TestMirrorUpstreamWinsANameClash(t *testing.T) {
	t.Parallel()
	p := startMirrorPair(t, "edge-a", false)
	ctx := t.Context()
	for _, ts := range []*testServer{p.up, p.edge} {
		if _, err := ts.client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "work"}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	secret := func(v string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "creds"}, StringData: map[string]string{"v": v}}
	}
	if _, err := p.edge.client.CoreV1().Secrets("work").Create(ctx, secret("local"), metav1.CreateOptions{}); err != nil {
		t.Fatalf("a local Secret: %v", err)
	}
	up, err := p.up.client.CoreV1().Secrets("work").Create(ctx, secret("cluster"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// A pod of the node that mounts it.
	if _, err := p.up.client.CoreV1().Pods("work").Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "uses-creds"},
		Spec: corev1.PodSpec{NodeName: p.node, Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}},
			Volumes: []corev1.Volume{{Name: "creds", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "creds"}}}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	edgeSecret := func(want string) func() (bool, error) {
		return func() (bool, error) {
			s, err := p.edge.client.CoreV1().Secrets("work").Get(ctx, "creds", metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			return s.UID == up.UID && string(s.Data["v"]) == want, fmt.Errorf("uid %s data %q", s.UID, s.Data["v"])
		}
	}
	eventually(t, 20*time.Second, "the cluster's Secret in place of the local one", edgeSecret("cluster"))
	up.StringData = map[string]string{"v": "cluster-2"}
	if _, err := p.up.client.CoreV1().Secrets("work").Update(ctx, up, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "a later change of the cluster's Secret", edgeSecret("cluster-2"))
}

// Two gateways sharing one store (one etcd), each the node of its own
// name, mirror one cluster: each keeps its own node's Node and pods, and
// neither deletes the other's, at their starts, relists and restarts.
func TestMirrorNodesShareOneStore(t *testing.T) {
	t.Parallel()
	up := startServer(t, testConfig(t))
	ext := startExternalEtcd(t)
	nodes := []string{"edge-a", "edge-b"}
	for _, n := range nodes {
		upNode(t, up, n)
		upPod(t, up, "work", "p-"+n, n)
	}
	// A shared rule only edge-a is configured with: edge-b, restarted,
	// does not take its copies for a rule removed from its configuration.
	if _, err := up.client.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shared"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := up.client.CoreV1().ConfigMaps("shared").Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cfgs := map[string]config.Config{}
	edges := map[string]*testServer{}
	for _, n := range nodes {
		cfg := edgeConfig(t, up, up.rest.Host, n)
		ext.configure(&cfg)
		if n == "edge-a" {
			cfg.Mirror.Rules = append(cfg.Mirror.Rules, config.MirrorRule{Name: "shared-settings", Resource: "configmaps", Namespaces: []string{"shared"}})
		}
		cfgs[n] = cfg
		edges[n] = startServer(t, cfg)
	}
	ctx := t.Context()
	whole := func(ts *testServer) (bool, error) {
		pods, err := ts.client.CoreV1().Pods("work").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		nodeList, err := ts.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		cms, err := ts.client.CoreV1().ConfigMaps("shared").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		return len(pods.Items) == 2 && len(nodeList.Items) == 2 && len(cms.Items) == 1, fmt.Errorf("%d pods, %d nodes, %d shared ConfigMaps", len(pods.Items), len(nodeList.Items), len(cms.Items))
	}
	eventually(t, 30*time.Second, "both nodes' Node and pod in the shared store", func() (bool, error) { return whole(edges["edge-a"]) })
	// Nothing of either node is deleted, across a restart of each
	// gateway: watched through a third kubestore of the same store, which
	// mirrors nothing.
	obsCfg := testConfig(t)
	ext.configure(&obsCfg)
	obs := startServer(t, obsCfg)
	w, err := obs.client.CoreV1().Pods("work").Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	nw, err := obs.client.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer nw.Stop()
	cw, err := obs.client.CoreV1().ConfigMaps("shared").Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer cw.Stop()
	for _, n := range nodes {
		edges[n].stop()
		edges[n] = startServer(t, cfgs[n])
		time.Sleep(5 * time.Second)
		if ok, err := whole(edges[n]); !ok {
			t.Errorf("after %s restarted: %v", n, err)
		}
	}
	for _, ch := range []<-chan watch.Event{w.ResultChan(), nw.ResultChan(), cw.ResultChan()} {
	drain:
		for {
			select {
			case ev := <-ch:
				if ev.Type == watch.Deleted {
					a, _ := meta.Accessor(ev.Object)
					t.Errorf("a gateway deleted %T %s of the shared store", ev.Object, a.GetName())
				}
			default:
				break drain
			}
		}
	}
}

// The node's Lease and CSINode, written by the node during an outage while
// the cluster changed what is not the node's (their labels): after the
// return both are there, upstream and at the edge.
func TestMirrorOfflineLeaseAndCSINodeKeepTheClustersFields(t *testing.T) {
	t.Parallel()
	throughOutages(t, func(t *testing.T, p *mirrorPair, kind string) {
		ctx := t.Context()
		node := upNode(t, p.up, p.node)
		owner := []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID}}
		if _, err := p.up.client.CoordinationV1().Leases("kube-node-lease").Create(ctx, &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: p.node, OwnerReferences: owner},
			Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr.To(p.node), LeaseDurationSeconds: ptr.To[int32](40)},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := p.up.client.StorageV1().CSINodes().Create(ctx, &storagev1.CSINode{ObjectMeta: metav1.ObjectMeta{Name: p.node, OwnerReferences: owner}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		getLease := func(ts *testServer) (*coordinationv1.Lease, error) {
			return ts.client.CoordinationV1().Leases("kube-node-lease").Get(ctx, p.node, metav1.GetOptions{})
		}
		getCSINode := func(ts *testServer) (*storagev1.CSINode, error) {
			return ts.client.StorageV1().CSINodes().Get(ctx, p.node, metav1.GetOptions{})
		}
		seen(t, "the edge has the Lease", getLease, p, func(u, e *coordinationv1.Lease) bool { return u.UID == e.UID })
		seen(t, "the edge has the CSINode", getCSINode, p, func(u, e *storagev1.CSINode) bool { return u.UID == e.UID })

		p.outage(t, kind)
		// The node: a new lease duration, a CSI driver registered.
		if _, err := p.edge.client.CoordinationV1().Leases("kube-node-lease").Patch(ctx, p.node, types.MergePatchType,
			[]byte(`{"spec":{"leaseDurationSeconds":60}}`), metav1.PatchOptions{}); err != nil {
			t.Fatalf("the node's Lease during the outage: %v", err)
		}
		if _, err := p.edge.client.StorageV1().CSINodes().Patch(ctx, p.node, types.MergePatchType,
			[]byte(`{"spec":{"drivers":[{"name":"csi.example.com","nodeID":"edge-a"}]}}`), metav1.PatchOptions{}); err != nil {
			t.Fatalf("the node's CSINode during the outage: %v", err)
		}
		// The cluster: labels of its own.
		for _, c := range []func() error{
			func() error {
				_, err := p.up.client.CoordinationV1().Leases("kube-node-lease").Patch(ctx, p.node, types.MergePatchType, []byte(`{"metadata":{"labels":{"cluster":"yes"}}}`), metav1.PatchOptions{})
				return err
			},
			func() error {
				_, err := p.up.client.StorageV1().CSINodes().Patch(ctx, p.node, types.MergePatchType, []byte(`{"metadata":{"labels":{"cluster":"yes"}}}`), metav1.PatchOptions{})
				return err
			},
		} {
			if err := c(); err != nil {
				t.Fatal(err)
			}
		}
		p.link.Restore()

		seen(t, "the node's lease duration and the cluster's label, upstream and at the edge", getLease, p, func(u, e *coordinationv1.Lease) bool {
			for _, l := range []*coordinationv1.Lease{u, e} {
				if ptr.Deref(l.Spec.LeaseDurationSeconds, 0) != 60 || l.Labels["cluster"] != "yes" {
					return false
				}
			}
			return true
		})
		seen(t, "the node's CSI driver and the cluster's label, upstream and at the edge", getCSINode, p, func(u, e *storagev1.CSINode) bool {
			for _, c := range []*storagev1.CSINode{u, e} {
				if len(c.Spec.Drivers) != 1 || c.Spec.Drivers[0].Name != "csi.example.com" || c.Labels["cluster"] != "yes" {
					return false
				}
			}
			return true
		})
	})
}

// Offline, a write of the node's objects is the node's own only when its
// kubelet (system:node:<node>) or the admin makes it: a user the policy
// lets write pods/status is refused while the link is down, as any write
// the edge cannot answer for, and the kubelet's identity is applied.
func TestMirrorOfflineOwnWritesAreTheKubelets(t *testing.T) {
	t.Parallel()
	up := startServer(t, testConfig(t))
	l := link.New(t, strings.TrimPrefix(up.rest.Host, "https://"))
	cfg := edgeConfig(t, up, "https://"+l.Addr, "edge-a")
	cfg.Server.AuthorizationPolicyFile = filepath.Join(t.TempDir(), "policy.yaml")
	policy := "rules:\n- users: [alice]\n  verbs: [get, patch]\n  resources: [pods, pods/status]\n  namespaces: [work]\n"
	if err := os.WriteFile(cfg.Server.AuthorizationPolicyFile, []byte(policy), 0o600); err != nil {
		t.Fatal(err)
	}
	p := &mirrorPair{up: up, edge: startServer(t, cfg), link: l, node: "edge-a"}
	p.waitMirrorz(t, http.StatusOK)
	upPod(t, p.up, "work", "p", p.node)
	getPod := func(ts *testServer) (*corev1.Pod, error) {
		return ts.client.CoreV1().Pods("work").Get(t.Context(), "p", metav1.GetOptions{})
	}
	seen(t, "the edge has the pod", getPod, p, func(u, e *corev1.Pod) bool { return u.UID == e.UID })

	p.outage(t, "refused")
	as := func(name string, groups ...string) kubernetes.Interface {
		c := rest.CopyConfig(p.edge.rest)
		c.Impersonate = rest.ImpersonationConfig{UserName: name, Groups: append(groups, "system:authenticated")}
		return kubernetes.NewForConfigOrDie(c)
	}
	patch := []byte(`{"status":{"phase":"Running"}}`)
	_, err := as("alice").CoreV1().Pods("work").Patch(t.Context(), "p", types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	if !apierrors.IsServiceUnavailable(err) {
		t.Errorf("alice's write of edge-a's pod status offline: %v, want 503 (not the node's own)", err)
	}
	if _, err := as("system:node:edge-a", "system:nodes").CoreV1().Pods("work").Patch(t.Context(), "p", types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
		t.Fatalf("edge-a's kubelet's write of its pod status offline: %v", err)
	}
	p.link.Restore()
	seen(t, "the kubelet's Running upstream", getPod, p, func(u, _ *corev1.Pod) bool { return u.Status.Phase == corev1.PodRunning })
}

// A kubelet's write of a mirrored object is forwarded with the edge's
// credentials: the edge admits it first as the cluster would admit the
// kubelet (NodeRestriction), so a label only the cluster's admin may set
// is refused there and never reaches the upstream.
func TestMirrorKubeletWritesPassNodeRestriction(t *testing.T) {
	t.Parallel()
	p := startMirrorPair(t, "edge-a", false)
	upNode(t, p.up, p.node)
	getNode := func(ts *testServer) (*corev1.Node, error) {
		return ts.client.CoreV1().Nodes().Get(t.Context(), p.node, metav1.GetOptions{})
	}
	seen(t, "the edge has its Node", getNode, p, func(u, e *corev1.Node) bool { return u.UID == e.UID })
	c := rest.CopyConfig(p.edge.rest)
	c.Impersonate = rest.ImpersonationConfig{UserName: "system:node:" + p.node, Groups: []string{"system:nodes", "system:authenticated"}}
	kubelet := kubernetes.NewForConfigOrDie(c)
	label := func(key string) error {
		_, err := kubelet.CoreV1().Nodes().Patch(t.Context(), p.node, types.MergePatchType, fmt.Appendf(nil, `{"metadata":{"labels":{%q:"x"}}}`, key), metav1.PatchOptions{})
		return err
	}
	if err := label("node-restriction.kubernetes.io/pool"); !apierrors.IsForbidden(err) {
		t.Errorf("the kubelet sets a node-restriction.kubernetes.io/ label through the edge: %v, want 403", err)
	}
	if err := label("example.com/zone"); err != nil {
		t.Fatalf("the kubelet's own label: %v", err)
	}
	n, err := getNode(p.up)
	if err != nil || n.Labels["example.com/zone"] != "x" || n.Labels["node-restriction.kubernetes.io/pool"] != "" {
		t.Errorf("the cluster's Node labels %v (%v): want the kubelet's own label only", n.Labels, err)
	}
}
