package server_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// The uplink's other flows, beside the node's offline writes
// (mirror_offline_test.go): a write to a mirrored object forwarded to the
// upstream while the link is up and refused while it is down, and the
// Events of the node's agents sent upstream by the outbox. Same harness: a
// real upstream (a second kubestore in this process), an edge for node
// edge-a, a link the test cuts or hangs.

// upNamespace creates ns on ts.
func upNamespace(t *testing.T, ts *testServer, ns string) {
	t.Helper()
	if _, err := ts.client.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

func webService(ns string) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}},
	}
}

// causes are the field paths of an Invalid error.
func causes(err error) []string {
	var out []string
	if s, ok := err.(apierrors.APIStatus); ok && s.Status().Details != nil {
		for _, c := range s.Status().Details.Causes {
			out = append(out, c.Field)
		}
	}
	slices.Sort(out)
	return out
}

// A write to a mirrored object at the edge is the upstream's: created,
// updated and deleted there first, the upstream's answer returned (its
// refusal too, with its code and field paths), the edge's copy following
// by the stream. An object no rule mirrors stays local.
func TestMirrorForwardsWrites(t *testing.T) {
	t.Parallel()
	p := startMirrorPair(t, "edge-a", false)
	const ns = "fwd"
	upNamespace(t, p.up, ns)
	getService := func(ts *testServer) (*corev1.Service, error) {
		return ts.client.CoreV1().Services(ns).Get(t.Context(), "web", metav1.GetOptions{})
	}

	created, err := p.edge.client.CoreV1().Services(ns).Create(t.Context(), webService(ns), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating a mirrored Service at the edge: %v", err)
	}
	up, err := getService(p.up)
	if err != nil || up.UID != created.UID {
		t.Fatalf("the upstream's Service after the edge's create: %v (%v), want uid %s: the create is the upstream's", up, err, created.UID)
	}
	seen(t, "the edge's copy of the created Service", getService, p, func(u, e *corev1.Service) bool { return u.UID == e.UID })

	edgeCopy, err := getService(p.edge)
	if err != nil {
		t.Fatal(err)
	}
	edgeCopy.Labels = map[string]string{"tier": "front"}
	if _, err := p.edge.client.CoreV1().Services(ns).Update(t.Context(), edgeCopy, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("updating the mirrored Service at the edge: %v", err)
	}
	if up, err := getService(p.up); err != nil || up.Labels["tier"] != "front" {
		t.Fatalf("the upstream's labels after the edge's update: %v (%v)", up.Labels, err)
	}
	seen(t, "the edge's copy of the update", getService, p, func(u, e *corev1.Service) bool { return e.Labels["tier"] == "front" })

	// The upstream judges: the same invalid update refused the same way
	// through the edge as at the upstream itself.
	bad := func(ts *testServer) error {
		s, err := getService(ts)
		if err != nil {
			return err
		}
		s.Spec.Ports[0].Port = 0
		_, err = ts.client.CoreV1().Services(ns).Update(t.Context(), s, metav1.UpdateOptions{})
		return err
	}
	upErr, edgeErr := bad(p.up), bad(p.edge)
	if !apierrors.IsInvalid(upErr) || !apierrors.IsInvalid(edgeErr) || !slices.Equal(causes(upErr), causes(edgeErr)) {
		t.Errorf("an invalid update: upstream %v %v, edge %v %v: want the upstream's 422 and fields through the edge", upErr, causes(upErr), edgeErr, causes(edgeErr))
	}

	// A ConfigMap no pod of the node references: no rule mirrors it.
	local := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "edge-only"}, Data: map[string]string{"k": "v"}}
	if _, err := p.edge.client.CoreV1().ConfigMaps(ns).Create(t.Context(), local, metav1.CreateOptions{}); err != nil {
		t.Fatalf("a local ConfigMap: %v", err)
	}
	if _, err := p.up.client.CoreV1().ConfigMaps(ns).Get(t.Context(), "edge-only", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the local ConfigMap at the upstream: %v, want 404", err)
	}

	if err := p.edge.client.CoreV1().Services(ns).Delete(t.Context(), "web", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("deleting the mirrored Service at the edge: %v", err)
	}
	if _, err := getService(p.up); !apierrors.IsNotFound(err) {
		t.Errorf("the upstream's Service after the edge's delete: %v, want 404", err)
	}
	eventually(t, 10*time.Second, "the edge's copy deleted", func() (bool, error) {
		_, err := getService(p.edge)
		return apierrors.IsNotFound(err), err
	})
}

// While the link is down a write to a mirrored object that is not the
// node's own is refused at once with 503 naming the upstream, never kept
// as a local fork; local objects stay writable, and once the link is back
// the same write goes through.
func TestMirrorRefusesWritesWhileOffline(t *testing.T) {
	t.Parallel()
	throughOutages(t, func(t *testing.T, p *mirrorPair, kind string) {
		const ns = "fwd"
		upNamespace(t, p.up, ns)
		if _, err := p.up.client.CoreV1().Services(ns).Create(t.Context(), webService(ns), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		getService := func(ts *testServer) (*corev1.Service, error) {
			return ts.client.CoreV1().Services(ns).Get(t.Context(), "web", metav1.GetOptions{})
		}
		seen(t, "the edge has the Service", getService, p, func(u, e *corev1.Service) bool { return u.UID == e.UID })
		label := func() error {
			_, err := p.edge.client.CoreV1().Services(ns).Patch(t.Context(), "web", "application/merge-patch+json", []byte(`{"metadata":{"labels":{"tier":"front"}}}`), metav1.PatchOptions{})
			return err
		}

		p.outage(t, kind)
		began := time.Now()
		err := label()
		if !apierrors.IsServiceUnavailable(err) || !strings.Contains(err.Error(), "mirrored from the upstream") {
			t.Errorf("a label on the mirrored Service, link %s: %v, want 503 naming the upstream", kind, err)
		}
		t.Logf("refused after %s", time.Since(began).Round(100*time.Millisecond))
		if s, err := getService(p.edge); err != nil || s.Labels["tier"] != "" {
			t.Errorf("the edge's copy after the refused write: %v (%v), want unchanged", s.Labels, err)
		}
		if _, err := p.edge.client.CoreV1().ConfigMaps(ns).Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "edge-only"}}, metav1.CreateOptions{}); err != nil {
			t.Errorf("a local ConfigMap while the link is %s: %v", kind, err)
		}

		p.link.Restore()
		p.waitMirrorz(t, http.StatusOK)
		eventually(t, 10*time.Second, "the label through the edge once the link is back", func() (bool, error) {
			return label() == nil, nil
		})
		seen(t, "the label upstream and at the edge", getService, p, func(u, e *corev1.Service) bool {
			return u.Labels["tier"] == "front" && e.Labels["tier"] == "front"
		})
	})
}

// The Events the node's agents write about mirrored objects are the
// cluster's to see: served locally at once, queued while the link is down
// and sent once it is back, in both API versions. An Event about a local
// object stays local.
func TestMirrorOutboxSendsTheAgentsEvents(t *testing.T) {
	t.Parallel()
	p := startMirrorPair(t, "edge-a", false)
	const ns = "ev"
	pod := upPod(t, p.up, ns, "p", p.node)
	getPod := func(ts *testServer) (*corev1.Pod, error) {
		return ts.client.CoreV1().Pods(ns).Get(t.Context(), "p", metav1.GetOptions{})
	}
	seen(t, "the edge has the pod", getPod, p, func(u, e *corev1.Pod) bool { return u.UID == e.UID })
	podRef := corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: ns, Name: "p", UID: pod.UID}
	now := metav1.NewTime(time.Now().Truncate(time.Second))
	coreEvent := func(name, reason string, about corev1.ObjectReference) *corev1.Event {
		return &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, InvolvedObject: about, Reason: reason,
			Message: reason, Type: corev1.EventTypeNormal, Source: corev1.EventSource{Component: "kubelet", Host: p.node},
			FirstTimestamp: now, LastTimestamp: now, Count: 1}
	}
	upstreamHas := func(name string) func() (bool, error) {
		return func() (bool, error) {
			_, err := p.up.client.CoreV1().Events(ns).Get(t.Context(), name, metav1.GetOptions{})
			return err == nil, err
		}
	}

	// Online: sent at once.
	if _, err := p.edge.client.CoreV1().Events(ns).Create(t.Context(), coreEvent("p.online", "Scheduled", podRef), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the online Event upstream", upstreamHas("p.online"))

	// Offline: served locally, queued, sent on the link's return.
	p.outage(t, "refused")
	local := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "edge-only"}}
	if _, err := p.edge.client.CoreV1().ConfigMaps(ns).Create(t.Context(), local, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cmRef := corev1.ObjectReference{APIVersion: "v1", Kind: "ConfigMap", Namespace: ns, Name: "edge-only"}
	for _, ev := range []*corev1.Event{coreEvent("p.offline", "Started", podRef), coreEvent("cm.local", "Local", cmRef)} {
		if _, err := p.edge.client.CoreV1().Events(ns).Create(t.Context(), ev, metav1.CreateOptions{}); err != nil {
			t.Fatalf("the Event %s while the link is down: %v", ev.Name, err)
		}
	}
	series := &eventsv1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "p.v1"}, EventTime: metav1.NewMicroTime(time.Now()),
		ReportingController: "kubelet", ReportingInstance: p.node, Action: "Pulling", Reason: "Pulling", Type: corev1.EventTypeNormal,
		Regarding: podRef, Note: "pulling"}
	if _, err := p.edge.client.EventsV1().Events(ns).Create(t.Context(), series, metav1.CreateOptions{}); err != nil {
		t.Fatalf("an events.k8s.io/v1 Event while the link is down: %v", err)
	}
	if _, err := p.edge.client.CoreV1().Events(ns).Get(t.Context(), "p.offline", metav1.GetOptions{}); err != nil {
		t.Errorf("the offline Event at the edge: %v", err)
	}
	if ok, _ := upstreamHas("p.offline")(); ok {
		t.Fatal("the offline Event reached the upstream through a cut link")
	}

	p.link.Restore()
	eventually(t, 30*time.Second, "the queued Event upstream", upstreamHas("p.offline"))
	eventually(t, 30*time.Second, "the queued events.k8s.io/v1 Event upstream", upstreamHas("p.v1"))
	if ok, _ := upstreamHas("cm.local")(); ok {
		t.Error("an Event about a local ConfigMap was sent upstream")
	}
}
