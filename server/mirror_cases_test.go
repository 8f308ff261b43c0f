package server_test

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/kubestore/kubestore/config"
	"github.com/kubestore/kubestore/mirrored"
	"github.com/kubestore/kubestore/test/link"
)

// The cases of issue 48 that examples had not walked, each found by trying
// the mirror composed as it is deployed, kept here as regression tests:
// every writer on the identity it has in a deployment.

// The kubelet's final delete of a pod the cluster marked for deletion,
// made offline on its own certificate (its DeleteOptions in the body, in
// protobuf, as client-go sends them), is applied locally and replayed
// after the pod's terminal status once the link is back. The local dry run
// that admits a kubelet's write set dryRun in the query only, which the
// apiserver ignores when a delete has a body: it deleted the pod for real,
// the delete then got 404, nothing was recorded, and the cluster kept the
// pod terminating with its 300 s. A dry run of the final delete changes
// nothing, offline as online.
func TestMirrorKubeletFinalDeleteOffline(t *testing.T) {
	t.Parallel()
	p := startMirrorPair(t, "edge-a", false)
	kubelet := kubeletClient(t, p.edge, p.node)
	upPods := p.up.client.CoreV1().Pods("work")
	pods := kubelet.CoreV1().Pods("work")
	terminating := map[string]*corev1.Pod{}
	for _, name := range []string{"done", "dry"} {
		pod := upPod(t, p.up, "work", name, p.node)
		if err := upPods.Delete(t.Context(), name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](300)}); err != nil {
			t.Fatal(err)
		}
		eventually(t, 20*time.Second, "the kubelet sees its pod "+name+" terminating", func() (bool, error) {
			e, err := pods.Get(t.Context(), name, metav1.GetOptions{})
			return err == nil && e.DeletionTimestamp != nil, err
		})
		terminating[name] = pod
	}
	w, err := upPods.Watch(t.Context(), metav1.ListOptions{FieldSelector: "metadata.name=done", ResourceVersion: terminating["dry"].ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	p.outage(t, "refused")
	done := terminating["done"]
	status := fmt.Sprintf(`{"metadata":{"uid":%q},"status":{"phase":"Succeeded"}}`, done.UID)
	if _, err := pods.Patch(t.Context(), "done", types.StrategicMergePatchType, []byte(status), metav1.PatchOptions{}, "status"); err != nil {
		t.Fatalf("the kubelet's terminal status offline: %v", err)
	}
	final := func(uid types.UID) metav1.DeleteOptions {
		return metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0), Preconditions: metav1.NewUIDPreconditions(string(uid))}
	}
	if err := pods.Delete(t.Context(), "done", final(done.UID)); err != nil {
		t.Fatalf("the kubelet's final delete offline: %v", err)
	}
	if _, err := p.edge.client.CoreV1().Pods("work").Get(t.Context(), "done", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the pod after the kubelet's final delete offline: %v, want it gone locally", err)
	}
	dry := final(terminating["dry"].UID)
	dry.DryRun = []string{metav1.DryRunAll}
	if err := pods.Delete(t.Context(), "dry", dry); err != nil {
		t.Errorf("the kubelet's dry run of its final delete offline: %v", err)
	}
	if _, err := pods.Get(t.Context(), "dry", metav1.GetOptions{}); err != nil {
		t.Errorf("the pod after a dry run of its final delete offline: %v", err)
	}

	p.link.Restore()
	p.waitMirrorz(t, http.StatusOK)
	// The cluster gets the terminal status, then the delete.
	var seen []string
	timeout := time.After(10 * time.Second)
	for deleted := false; !deleted; {
		select {
		case ev := <-w.ResultChan():
			if pod, ok := ev.Object.(*corev1.Pod); ok {
				seen = append(seen, fmt.Sprintf("%s %s", ev.Type, pod.Status.Phase))
				deleted = ev.Type == watch.Deleted
			}
		case <-timeout:
			t.Fatalf("the cluster's pod 10 s after the link's return: %v, want its terminal status, then its delete", seen)
		}
	}
	if len(seen) < 2 || seen[len(seen)-2] != "MODIFIED Succeeded" {
		t.Errorf("the cluster's pod: %v, want the terminal status before the delete", seen)
	}
	if d, err := upPods.Get(t.Context(), "dry", metav1.GetOptions{}); err != nil || d.DeletionTimestamp == nil || ptr.Deref(d.DeletionGracePeriodSeconds, -1) != 300 {
		t.Errorf("the pod a dry run deleted: %v, want it terminating with its 300 s", err)
	}
}

// siteEdges are the edges of a site's store, by node.
type siteEdges struct {
	up *testServer
	// extra rules by node, on top of the default ones; links by node, for
	// the nodes whose uplink a test cuts.
	extra map[string][]config.MirrorRule
	links map[string]*link.Link
}

// startSiteEdges starts an edge per node on one external etcd (a site's
// store, as the gateways of a site share it), each mirroring up for its
// node with the default rules and extra, through its link if it has one;
// it returns their configurations and servers, by node, and an observer
// on the same store that mirrors nothing.
func startSiteEdges(t *testing.T, up *testServer, extra map[string][]config.MirrorRule, nodes ...string) (map[string]config.Config, map[string]*testServer, *testServer) {
	t.Helper()
	return siteEdges{up: up, extra: extra}.start(t, nodes...)
}

func (se siteEdges) start(t *testing.T, nodes ...string) (map[string]config.Config, map[string]*testServer, *testServer) {
	t.Helper()
	up, extra := se.up, se.extra
	ext := startExternalEtcd(t)
	cfgs, edges := map[string]config.Config{}, map[string]*testServer{}
	for _, n := range nodes {
		server := up.rest.Host
		if l, ok := se.links[n]; ok {
			server = "https://" + l.Addr
		}
		cfg := edgeConfig(t, up, server, n)
		ext.configure(&cfg)
		cfg.Mirror.Rules = append(cfg.Mirror.Rules, extra[n]...)
		if first := cfgs[nodes[0]]; len(cfgs) > 0 {
			// One CA, as a site's members share it: a kubelet's
			// certificate, whichever signs it, logs in to each.
			shareCA(t, first.DataDir, cfg.DataDir)
		}
		cfgs[n] = cfg
		edges[n] = startServer(t, cfg)
	}
	obsCfg := testConfig(t)
	ext.configure(&obsCfg)
	// Its signer may be the one that issues a kubelet's certificate.
	shareCA(t, cfgs[nodes[0]].DataDir, obsCfg.DataDir)
	return cfgs, edges, startServer(t, obsCfg)
}

// shareCA gives the data dir to the CA of the data dir from, before its
// first start.
func shareCA(t *testing.T, from, to string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(to, "pki"), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"ca.crt", "ca.key"} {
		data, err := os.ReadFile(filepath.Join(from, "pki", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(to, "pki", f), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// deletions records the DELETED events of watch w until stop is called.
func deletions(t *testing.T, w watch.Interface) (stop func() []string) {
	t.Helper()
	var mu sync.Mutex
	var deleted []string
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			if ev.Type == watch.Deleted {
				a, _ := meta.Accessor(ev.Object)
				mu.Lock()
				deleted = append(deleted, a.GetNamespace()+"/"+a.GetName())
				mu.Unlock()
			}
		}
	}()
	return func() []string {
		w.Stop()
		<-done
		mu.Lock()
		defer mu.Unlock()
		return deleted
	}
}

// A write through one gateway of a site to another node's copy keeps the
// copy that node's rule's. It was stored as the writing gateway's own
// (pods@edge-a on edge-b's pod), and edge-a's next relist deleted edge-b's
// pod from the site's store, where edge-b's kubelet would kill it.
func TestMirrorWriteToAnotherNodesCopyKeepsItsRule(t *testing.T) {
	t.Parallel()
	up := startServer(t, testConfig(t))
	upPod(t, up, "work", "p-b", "edge-b")
	cfgs, edges, obs := startSiteEdges(t, up, nil, "edge-a", "edge-b")
	pods := edges["edge-a"].client.CoreV1().Pods("work")
	eventually(t, 30*time.Second, "edge-b's pod in the site's store", func() (bool, error) {
		p, err := pods.Get(t.Context(), "p-b", metav1.GetOptions{})
		return err == nil && p.Annotations[mirrored.AnnotationRule] == "pods@edge-b", err
	})
	// edge-b is down: nothing of its own puts its pod back.
	edges["edge-b"].stop()
	w, err := obs.client.CoreV1().Pods("work").Watch(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	stop := deletions(t, w)
	p, err := pods.Patch(t.Context(), "p-b", types.MergePatchType, []byte(`{"metadata":{"labels":{"tier":"edge"}}}`), metav1.PatchOptions{})
	if err != nil {
		t.Fatalf("a label of edge-b's pod through edge-a: %v", err)
	}
	if rule := p.Annotations[mirrored.AnnotationRule]; rule != "pods@edge-b" || p.Labels["tier"] != "edge" {
		t.Errorf("edge-b's pod after a write through edge-a: rule %q, labels %v; want pods@edge-b and the label", rule, p.Labels)
	}
	edges["edge-a"].stop()
	edges["edge-a"] = startServer(t, cfgs["edge-a"])
	time.Sleep(3 * time.Second) // edge-a's relist
	if got, err := obs.client.CoreV1().Pods("work").Get(t.Context(), "p-b", metav1.GetOptions{}); err != nil || got.Annotations[mirrored.AnnotationRule] != "pods@edge-b" {
		t.Errorf("edge-b's pod after edge-a's restart: %v (rule %q), want it still edge-b's", err, got.Annotations[mirrored.AnnotationRule])
	}
	if d := stop(); len(d) > 0 {
		t.Errorf("the site's store deleted %v", d)
	}
	if u, err := up.client.CoreV1().Pods("work").Get(t.Context(), "p-b", metav1.GetOptions{}); err != nil || u.Labels["tier"] != "edge" {
		t.Errorf("the cluster's pod: %v, labels %v; want the label written through edge-a", err, u.Labels)
	}
}

// Shared rules are owned by their name and their selection: two gateways
// of a site with a shared rule of one name selecting differently keep
// each other's copies across their restarts (each relist deleted the
// other's); a gateway without the rule forwards a write to its copies
// (it forked them locally) and refuses to delete their namespace (the
// namespace controller deleted them).
func TestMirrorSharedRulesOwnTheirSelection(t *testing.T) {
	t.Parallel()
	up := upForAAndB(t)
	settings := func(selector string) []config.MirrorRule {
		return []config.MirrorRule{{Name: "settings", Resource: "configmaps", Namespaces: []string{"shared"}, LabelSelector: selector}}
	}
	cfgs, edges, obs := startSiteEdges(t, up, map[string][]config.MirrorRule{"edge-a": settings("for=a"), "edge-b": settings("for=b")}, "edge-a", "edge-b", "edge-c")
	cms := obs.client.CoreV1().ConfigMaps("shared")
	both := func() (bool, error) {
		list, err := cms.List(t.Context(), metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		var names []string
		for _, c := range list.Items {
			if c.Annotations[mirrored.AnnotationRule] == "settings" {
				names = append(names, c.Name)
			}
		}
		return len(names) == 2, fmt.Errorf("copies %v", names)
	}
	eventually(t, 30*time.Second, "both gateways' copies in the site's store", both)
	w, err := cms.Watch(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	stop := deletions(t, w)
	for _, n := range []string{"edge-a", "edge-b"} {
		edges[n].stop()
		edges[n] = startServer(t, cfgs[n])
		time.Sleep(3 * time.Second) // its relist
	}
	if ok, err := both(); !ok {
		t.Errorf("after both gateways' restarts: %v", err)
	}

	// edge-c runs no rule of configmaps in "shared".
	c := edges["edge-c"].client
	if _, err := c.CoreV1().ConfigMaps("shared").Patch(t.Context(), "for-b", types.MergePatchType, []byte(`{"data":{"k":"v"}}`), metav1.PatchOptions{}); err != nil {
		t.Fatalf("a write through edge-c to edge-b's copy: %v", err)
	}
	if u, err := up.client.CoreV1().ConfigMaps("shared").Get(t.Context(), "for-b", metav1.GetOptions{}); err != nil || u.Data["k"] != "v" {
		t.Errorf("the cluster's for-b after a write through edge-c: %v, data %v; want it forwarded", err, u.Data)
	}
	if l, err := cms.Get(t.Context(), "for-b", metav1.GetOptions{}); err != nil || l.Annotations[mirrored.AnnotationRule] != "settings" || l.Data["k"] != "v" {
		t.Errorf("the copy of for-b after a write through edge-c: %v, rule %q, data %v; want settings' copy of the cluster's", err, l.Annotations[mirrored.AnnotationRule], l.Data)
	}
	if err := c.CoreV1().Namespaces().Delete(t.Context(), "shared", metav1.DeleteOptions{}); !apierrors.IsConflict(err) {
		t.Errorf("deleting the namespace of the copies through edge-c: %v, want 409", err)
	}
	if d := stop(); len(d) > 0 {
		t.Errorf("the site's store deleted %v", d)
	}
}

// Per-node records never cross between nodes whose names share a prefix.
// They were listed by a prefix whose "/" path.Join dropped: gateway edge-1
// loaded edge-10's pending writes and queued Events and reconciled them
// with its own credentials (with a node's, the cluster refused and edge-1
// wrote the cluster's state over edge-10's offline status).
func TestMirrorNodeNamesSharingAPrefix(t *testing.T) {
	t.Parallel()
	up := startServer(t, testConfig(t))
	upPod(t, up, "work", "p10", "edge-10")
	l := link.New(t, strings.TrimPrefix(up.rest.Host, "https://"))
	cfgs, edges, _ := siteEdges{up: up, links: map[string]*link.Link{"edge-10": l}}.start(t, "edge-1", "edge-10")
	kubelet := kubeletClient(t, edges["edge-10"], "edge-10")
	var pod *corev1.Pod
	eventually(t, 30*time.Second, "edge-10's pod at its gateway", func() (bool, error) {
		var err error
		pod, err = kubelet.CoreV1().Pods("work").Get(t.Context(), "p10", metav1.GetOptions{})
		return err == nil, err
	})
	l.Cut()
	eventually(t, 20*time.Second, "edge-10's kubelet writes its pod's status offline", func() (bool, error) {
		_, err := kubelet.CoreV1().Pods("work").Patch(t.Context(), "p10", types.StrategicMergePatchType,
			fmt.Appendf(nil, `{"metadata":{"uid":%q},"status":{"phase":"Running"}}`, pod.UID), metav1.PatchOptions{}, "status")
		return err == nil, err
	})
	if _, err := kubelet.CoreV1().Events("work").Create(t.Context(), &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: "p10.started"},
		InvolvedObject: corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: "work", Name: "p10", UID: pod.UID},
		Reason:         "Started", Message: "offline", Type: corev1.EventTypeNormal, Count: 1,
		Source: corev1.EventSource{Component: "kubelet", Host: "edge-10"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("edge-10's kubelet's Event offline: %v", err)
	}
	// edge-1 starts again: it loads its own records, never edge-10's.
	edges["edge-1"].stop()
	edges["edge-1"] = startServer(t, cfgs["edge-1"])
	time.Sleep(3 * reconcileEvery)
	if u, err := up.client.CoreV1().Pods("work").Get(t.Context(), "p10", metav1.GetOptions{}); err != nil || u.Status.Phase == corev1.PodRunning {
		t.Errorf("the cluster's pod of edge-10 while edge-10's uplink is cut: %v, phase %s; want edge-1 to leave edge-10's write alone", err, u.Status.Phase)
	}
	if _, err := up.client.CoreV1().Events("work").Get(t.Context(), "p10.started", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("edge-10's Event reached the cluster while edge-10's uplink is cut: %v", err)
	}
	l.Restore()
	eventually(t, 20*time.Second, "edge-10's status and Event reach the cluster through its own uplink", func() (bool, error) {
		u, err := up.client.CoreV1().Pods("work").Get(t.Context(), "p10", metav1.GetOptions{})
		if err != nil || u.Status.Phase != corev1.PodRunning {
			return false, fmt.Errorf("%v phase %s", err, u.Status.Phase)
		}
		_, err = up.client.CoreV1().Events("work").Get(t.Context(), "p10.started", metav1.GetOptions{})
		return err == nil, err
	})
}

// reconcileEvery is the mirror's round of the node's pending writes.
const reconcileEvery = 5 * time.Second

// proxiedPair is a mirrorPair whose edge reaches the upstream through a
// link and then a proxy that makes the upstream's own faults (a 5xx for
// one object's writes, a slow answer).
type proxiedPair struct {
	*mirrorPair
	proxy *link.Proxy
}

func startProxiedPair(t *testing.T, node string) *proxiedPair {
	t.Helper()
	up := startServer(t, testConfig(t))
	proxy := link.NewProxy(t, up.rest)
	l := link.New(t, proxy.Addr)
	cfg := testConfig(t)
	cfg.Mirror.UpstreamKubeconfig = filepath.Join(t.TempDir(), "upstream.kubeconfig")
	writeKubeconfig(t, cfg.Mirror.UpstreamKubeconfig, &rest.Config{Host: "https://" + l.Addr, TLSClientConfig: rest.TLSClientConfig{CAData: proxy.CAData}})
	cfg.Mirror.NodeName = node
	p := &proxiedPair{mirrorPair: &mirrorPair{up: up, edge: startServer(t, cfg), link: l, node: node}, proxy: proxy}
	p.waitMirrorz(t, http.StatusOK)
	return p
}

// A pod deleted and created again upstream (another uid) while the node's
// write of the old one is pending is mirrored as soon as the edge's watch
// resumes. The pending record held any uid's copy, and its reconciliation
// found no copy and fetched nothing: the new pod waited for its next
// change upstream.
func TestMirrorPodRecreatedWhileItsStatusIsPending(t *testing.T) {
	t.Parallel()
	p := startMirrorPair(t, "edge-a", false)
	kubelet := kubeletClient(t, p.edge, p.node)
	old := upPod(t, p.up, "work", "p", p.node)
	pods := kubelet.CoreV1().Pods("work")
	eventually(t, 20*time.Second, "the kubelet sees its pod", func() (bool, error) {
		_, err := pods.Get(t.Context(), "p", metav1.GetOptions{})
		return err == nil, err
	})
	p.outage(t, "refused")
	if _, err := pods.Patch(t.Context(), "p", types.StrategicMergePatchType, fmt.Appendf(nil, `{"metadata":{"uid":%q},"status":{"phase":"Running"}}`, old.UID),
		metav1.PatchOptions{}, "status"); err != nil {
		t.Fatalf("the kubelet's status offline: %v", err)
	}
	if err := p.up.client.CoreV1().Pods("work").Delete(t.Context(), "p", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
	recreated := upPod(t, p.up, "work", "p", p.node)
	p.link.Restore()
	eventually(t, 10*time.Second, "the recreated pod at the edge", func() (bool, error) {
		e, err := pods.Get(t.Context(), "p", metav1.GetOptions{})
		return err == nil && e.UID == recreated.UID, fmt.Errorf("%v uid %s", err, e.UID)
	})
	time.Sleep(2 * reconcileEvery)
	if u, err := p.up.client.CoreV1().Pods("work").Get(t.Context(), "p", metav1.GetOptions{}); err != nil || u.UID != recreated.UID || u.Status.Phase == corev1.PodRunning {
		t.Errorf("the recreated pod upstream: %v, uid %s phase %s; want it untouched by the node's write to the pod that went", err, u.UID, u.Status.Phase)
	}
}

// A pending write the upstream keeps answering 5xx does not freeze its
// object: the cluster's changes around the node's pending status reach
// the node at once (a deletionTimestamp), and after a minute the record is
// quarantined, the copy follows the cluster, and the write is delivered
// once the upstream takes it. One stream's 5xx says nothing of the link:
// writes are forwarded meanwhile (the link flapped down with each).
func TestMirrorPoisonedWriteIsQuarantined(t *testing.T) {
	t.Parallel()
	p := startProxiedPair(t, "edge-a")
	kubelet := kubeletClient(t, p.edge, p.node)
	pod := upPod(t, p.up, "work", "p", p.node)
	pods := kubelet.CoreV1().Pods("work")
	eventually(t, 20*time.Second, "the kubelet sees its pod", func() (bool, error) {
		_, err := pods.Get(t.Context(), "p", metav1.GetOptions{})
		return err == nil, err
	})
	p.outage(t, "refused")
	if _, err := pods.Patch(t.Context(), "p", types.StrategicMergePatchType, fmt.Appendf(nil, `{"metadata":{"uid":%q},"status":{"phase":"Running"}}`, pod.UID),
		metav1.PatchOptions{}, "status"); err != nil {
		t.Fatalf("the kubelet's status offline: %v", err)
	}
	poison := p.proxy.Fail(link.Request(http.MethodPatch, "/pods/p/status$"), http.StatusInternalServerError)
	services := p.proxy.Fail(link.Request(http.MethodGet, "/api/v1/services$"), http.StatusInternalServerError)
	p.link.Restore()
	eventually(t, 20*time.Second, "the poisoned write tried", func() (bool, error) { return poison.Hits() > 0, nil })

	// Writes are forwarded while the services' stream fails.
	for i := range 20 {
		if _, err := p.edge.client.CoreV1().Pods("work").Patch(t.Context(), "p", types.MergePatchType, fmt.Appendf(nil, `{"metadata":{"labels":{"try":"%d"}}}`, i), metav1.PatchOptions{}); err != nil {
			t.Errorf("a write forwarded while one stream fails with 500 (try %d): %v", i, err)
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	if services.Hits() == 0 {
		t.Error("the services' stream never tried the upstream")
	}

	// The cluster deletes the pod: the kubelet sees it while its status
	// is pending.
	if err := p.up.client.CoreV1().Pods("work").Delete(t.Context(), "p", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](300)}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the cluster's deletion at the edge, the node's pending status kept", func() (bool, error) {
		e, err := pods.Get(t.Context(), "p", metav1.GetOptions{})
		return err == nil && e.DeletionTimestamp != nil && e.Status.Phase == corev1.PodRunning, fmt.Errorf("%v phase %s", err, e.Status.Phase)
	})
	eventually(t, 2*time.Minute, "the poisoned write quarantined, the copy the cluster's", func() (bool, error) {
		e, err := pods.Get(t.Context(), "p", metav1.GetOptions{})
		return err == nil && e.Status.Phase == corev1.PodPending, fmt.Errorf("%v phase %s", err, e.Status.Phase)
	})
	// The metrics are the process's: in-process servers share them.
	if v := p.edge.metric("kubestore_mirror_quarantined_writes_total", map[string]string{"outcome": "quarantined"}); v < 1 {
		t.Errorf("kubestore_mirror_quarantined_writes_total{outcome=\"quarantined\"} = %v, want at least 1", v)
	}
	poison.Remove()
	services.Remove()
	eventually(t, 3*time.Minute, "the quarantined write delivered once the upstream takes it", func() (bool, error) {
		u, err := p.up.client.CoreV1().Pods("work").Get(t.Context(), "p", metav1.GetOptions{})
		return err == nil && u.Status.Phase == corev1.PodRunning, fmt.Errorf("%v phase %s", err, u.Status.Phase)
	})
}

// An Event the node's agent updates while the outbox sends it reaches the
// cluster with its latest count: the send that read the earlier one
// dropped it from the queue.
func TestMirrorOutboxSendsTheLatestCount(t *testing.T) {
	t.Parallel()
	p := startProxiedPair(t, "edge-a")
	kubelet := kubeletClient(t, p.edge, p.node)
	pod := upPod(t, p.up, "work", "p", p.node)
	eventually(t, 20*time.Second, "the kubelet sees its pod", func() (bool, error) {
		_, err := kubelet.CoreV1().Pods("work").Get(t.Context(), "p", metav1.GetOptions{})
		return err == nil, err
	})
	slow := p.proxy.Delay(link.Request(http.MethodPost, "/api/v1/namespaces/work/events$"), 2*time.Second)
	events := kubelet.CoreV1().Events("work")
	ev, err := events.Create(t.Context(), &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: "p.pulled"},
		InvolvedObject: corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: "work", Name: "p", UID: pod.UID},
		Reason:         "Pulled", Message: "image pulled", Type: corev1.EventTypeNormal, Count: 1,
		Source: corev1.EventSource{Component: "kubelet", Host: p.node},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the Event on its way upstream", func() (bool, error) { return slow.Hits() > 0, nil })
	ev.Count = 2
	if _, err := events.Update(t.Context(), ev, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 15*time.Second, "the Event upstream with its latest count", func() (bool, error) {
		u, err := p.up.client.CoreV1().Events("work").Get(t.Context(), "p.pulled", metav1.GetOptions{})
		return err == nil && u.Count == 2, fmt.Errorf("%v count %d", err, u.Count)
	})
}

// The mirror's annotations are the mirror's: a local write that sets one
// is refused, naming the field. A local object that claimed a rule had its
// writes forwarded upstream with the edge's credentials, and its namespace
// could no longer be deleted.
func TestMirrorAnnotationsRefusedOnLocalWrites(t *testing.T) {
	t.Parallel()
	p := startMirrorPair(t, "edge-a", false)
	ctx := t.Context()
	if _, err := p.edge.client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "local"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cms := p.edge.client.CoreV1().ConfigMaps("local")
	claimed := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "claims", Annotations: map[string]string{mirrored.AnnotationRule: "configmaps"}}}
	_, err := cms.Create(ctx, claimed, metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "metadata.annotations[mirror.kubestore.io/rule]") {
		t.Errorf("a local ConfigMap created with the mirror's rule annotation: %v, want 422 naming the field", err)
	}
	if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "plain"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{mirrored.AnnotationRule, mirrored.AnnotationUpstreamResourceVersion} {
		_, err = cms.Patch(ctx, "plain", types.MergePatchType, fmt.Appendf(nil, `{"metadata":{"annotations":{%q:"x"}}}`, key), metav1.PatchOptions{})
		if !apierrors.IsInvalid(err) {
			t.Errorf("a local ConfigMap patched with %s: %v, want 422", key, err)
		}
	}
	if err := p.edge.client.CoreV1().Namespaces().Delete(ctx, "local", metav1.DeleteOptions{}); err != nil {
		t.Errorf("deleting the local namespace: %v", err)
	}
}

// A copy is never created in a local namespace that is terminating: the
// namespace controller deleted it there as a local object (a pod gracefully,
// whose final delete by the kubelet was forwarded to the cluster). It is
// created once the namespace is gone, without waiting for its next change
// upstream; and the controller never deletes a copy.
func TestMirrorCopyWaitsForATerminatingNamespace(t *testing.T) {
	t.Parallel()
	p := startMirrorPair(t, "edge-a", false)
	ctx := t.Context()
	if _, err := p.edge.client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "work"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	const hold = "example.com/hold"
	if _, err := p.edge.client.CoreV1().ConfigMaps("work").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "held", Finalizers: []string{hold}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := p.edge.client.CoreV1().Namespaces().Delete(ctx, "work", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	w, err := p.edge.client.CoreV1().Pods("work").Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	pod := upPod(t, p.up, "work", "p", p.node)
	time.Sleep(5 * time.Second)
	if _, err := p.edge.client.CoreV1().Pods("work").Get(ctx, "p", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the pod's copy in the terminating namespace: %v, want none yet", err)
	}
	if _, err := p.edge.client.CoreV1().ConfigMaps("work").Patch(ctx, "held", types.JSONPatchType, []byte(`[{"op":"remove","path":"/metadata/finalizers"}]`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 15*time.Second, "the pod's copy once the namespace is gone", func() (bool, error) {
		e, err := p.edge.client.CoreV1().Pods("work").Get(ctx, "p", metav1.GetOptions{})
		return err == nil && e.UID == pod.UID, err
	})
	for {
		select {
		case ev := <-w.ResultChan():
			if e, ok := ev.Object.(*corev1.Pod); ok && e.DeletionTimestamp != nil {
				t.Errorf("the pod's copy was deleted locally: %s with deletionTimestamp %v", ev.Type, e.DeletionTimestamp)
			}
			continue
		default:
		}
		break
	}
	if u, err := p.up.client.CoreV1().Pods("work").Get(ctx, "p", metav1.GetOptions{}); err != nil || u.DeletionTimestamp != nil {
		t.Errorf("the cluster's pod: %v, deletionTimestamp %v; want it untouched", err, u.DeletionTimestamp)
	}
}

// A shared rule owns its copies by its selection: when its configuration
// changes its selectors, the relist still deletes the copies the former
// ones selected and the new ones do not (none other gateway runs the rule).
func TestMirrorSharedRuleNewSelectorsDropTheFormerCopies(t *testing.T) {
	t.Parallel()
	up := upForAAndB(t)
	cfg := edgeConfig(t, up, up.rest.Host, "edge-a")
	rules := cfg.Mirror.Rules
	cfg.Mirror.Rules = append(rules, config.MirrorRule{Name: "settings", Resource: "configmaps", Namespaces: []string{"shared"}, LabelSelector: "for=a"})
	edge := startServer(t, cfg)
	cms := edge.client.CoreV1().ConfigMaps("shared")
	eventually(t, 20*time.Second, "for-a mirrored", func() (bool, error) {
		_, err := cms.Get(t.Context(), "for-a", metav1.GetOptions{})
		return err == nil, err
	})
	edge.stop()
	cfg.Mirror.Rules = append(rules, config.MirrorRule{Name: "settings", Resource: "configmaps", Namespaces: []string{"shared"}, LabelSelector: "for=b"})
	edge = startServer(t, cfg)
	cms = edge.client.CoreV1().ConfigMaps("shared")
	eventually(t, 20*time.Second, "for-b mirrored, for-a gone", func() (bool, error) {
		_, errA := cms.Get(t.Context(), "for-a", metav1.GetOptions{})
		_, errB := cms.Get(t.Context(), "for-b", metav1.GetOptions{})
		return apierrors.IsNotFound(errA) && errB == nil, fmt.Errorf("for-a: %v, for-b: %v", errA, errB)
	})
}

// upForAAndB is an upstream with the ConfigMaps for-a and for-b, labelled
// for=a and for=b, in the namespace "shared".
func upForAAndB(t *testing.T) *testServer {
	up := startServer(t, testConfig(t))
	upNamespace(t, up, "shared")
	for _, n := range []string{"a", "b"} {
		if _, err := up.client.CoreV1().ConfigMaps("shared").Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "for-" + n, Labels: map[string]string{"for": n}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	return up
}

// A write through the gateway to a pod the cluster deleted and created
// again, before the gateway's stream brought the new one, lands on the new
// pod upstream, as any write by name does; the answer is that pod, never
// the gateway's copy of the old one as if it had been written (the model
// checker's seed 2: a label acknowledged on a pod that was gone, found on
// its successor).
func TestMirrorWriteAnswersTheObjectWritten(t *testing.T) {
	t.Parallel()
	p := startProxiedPair(t, "edge-a")
	old := upPod(t, p.up, "work", "p", p.node)
	pods := p.edge.client.CoreV1().Pods("work")
	eventually(t, 20*time.Second, "the pod at the edge", func() (bool, error) {
		e, err := pods.Get(t.Context(), "p", metav1.GetOptions{})
		return err == nil && e.UID == old.UID, err
	})
	// The stream brings nothing new: its lists and watches of pods fail,
	// and the link's cut ends the one it had.
	stalled := p.proxy.Fail(link.Request(http.MethodGet, `/pods$`), http.StatusInternalServerError)
	p.link.Cut()
	p.link.Restore()
	if err := p.up.client.CoreV1().Pods("work").Delete(t.Context(), "p", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
	recreated := upPod(t, p.up, "work", "p", p.node)
	var got *corev1.Pod
	eventually(t, 20*time.Second, "a label through the edge", func() (bool, error) {
		var err error
		got, err = pods.Patch(t.Context(), "p", types.MergePatchType, []byte(`{"metadata":{"labels":{"tier":"edge"}}}`), metav1.PatchOptions{})
		return err == nil, err
	})
	if got.UID != recreated.UID || got.Labels["tier"] != "edge" {
		t.Errorf("the answer to a label through the edge: uid %s, labels %v; want the recreated pod %s, which the cluster labeled (the old one was %s)",
			got.UID, got.Labels, recreated.UID, old.UID)
	}
	if u, err := p.up.client.CoreV1().Pods("work").Get(t.Context(), "p", metav1.GetOptions{}); err != nil || u.UID != recreated.UID || u.Labels["tier"] != "edge" {
		t.Errorf("the cluster's pod: %v, uid %s, labels %v", err, u.UID, u.Labels)
	}
	stalled.Remove()
	eventually(t, 20*time.Second, "the recreated pod at the edge", func() (bool, error) {
		e, err := pods.Get(t.Context(), "p", metav1.GetOptions{})
		return err == nil && e.UID == recreated.UID && e.Labels["tier"] == "edge", fmt.Errorf("%v uid %s", err, e.UID)
	})
}
