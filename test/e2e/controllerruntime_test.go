package e2e

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

// operator is test/e2e/operator, a controller-runtime operator.
var operator = &goBinary{pkg: "test/e2e/operator", name: "operator"}

// replica is one running operator process.
type replica struct {
	*process
	id string
}

func startReplica(t *testing.T, kubeconfig, id string) *replica {
	t.Helper()
	cmd := exec.Command(operator.get(t), "--kubeconfig", kubeconfig, "--id", id)
	out := &lockedWriter{w: &bytes.Buffer{}}
	cmd.Stdout, cmd.Stderr = out, out
	return &replica{process: startProcess(t, t, "operator "+id, cmd, out, 0), id: id}
}

func (r *replica) leads() bool { return strings.Contains(r.logs(), "LEADER "+r.id) }

var widgets = schema.GroupVersionResource{Group: "demo.kubestore.io", Version: "v1", Resource: "widgets"}

// An operator written with controller-runtime v0.25, as its authors would,
// works against kubestore: leader election between two replicas with
// takeover after the leader is killed, reconcile of a custom resource into
// an owned ConfigMap, status conditions, an Event through the manager's
// recorder read through both Event APIs, and the garbage collector
// cleaning up (background, foreground) or orphaning the ConfigMap.
func TestControllerRuntimeOperator(t *testing.T) {
	requireKubectl(t)
	p := start(t, filepath.Join(shortTempDir(t), "data"))
	p.mustKubectl("apply", "-f", writeTemp(t, `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.demo.kubestore.io
spec:
  group: demo.kubestore.io
  names: {kind: Widget, plural: widgets, singular: widget}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties: {message: {type: string}}
          status:
            type: object
            x-kubernetes-preserve-unknown-fields: true
`))
	p.mustKubectl("wait", "--for=condition=Established", "crd/widgets.demo.kubestore.io")
	dyn := dynamic.NewForConfigOrDie(p.restConfig())
	c := p.clientset()
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()

	replicas := []*replica{startReplica(t, p.kubeconfig, "r1"), startReplica(t, p.kubeconfig, "r2")}
	var leader, standby *replica
	if !eventually(60*time.Second, func() bool { return replicas[0].leads() || replicas[1].leads() }) {
		t.Fatal("no replica became leader")
	}
	leader, standby = replicas[0], replicas[1]
	if standby.leads() {
		leader, standby = standby, leader
	}

	createWidget := func(t *testing.T, name, message string) *unstructured.Unstructured {
		t.Helper()
		w := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "demo.kubestore.io/v1", "kind": "Widget",
			"metadata": map[string]any{"name": name, "namespace": "default"}, "spec": map[string]any{"message": message}}}
		got, err := dyn.Resource(widgets).Namespace("default").Create(ctx, w, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	// ready waits for the Ready condition of the generation.
	ready := func(t *testing.T, name string, generation int64) {
		t.Helper()
		var last any
		if !eventually(60*time.Second, func() bool {
			w, err := dyn.Resource(widgets).Namespace("default").Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false
			}
			conds, _, _ := unstructured.NestedSlice(w.Object, "status", "conditions")
			last = conds
			for _, c := range conds {
				m := c.(map[string]any)
				if m["type"] == "Ready" && m["status"] == "True" && m["observedGeneration"] == generation {
					return true
				}
			}
			return false
		}) {
			t.Fatalf("widget %s: no Ready=True condition for generation %d; conditions %v", name, generation, last)
		}
	}
	configMap := func(name string) (map[string]string, []metav1.OwnerReference, bool) {
		cm, err := c.CoreV1().ConfigMaps("default").Get(ctx, name+"-config", metav1.GetOptions{})
		if err != nil {
			return nil, nil, false
		}
		return cm.Data, cm.OwnerReferences, true
	}
	gone := func(name string) bool { _, _, ok := configMap(name); return !ok }

	t.Run("reconcile-owned-configmap", func(t *testing.T) {
		w := createWidget(t, "w1", "hello")
		if !eventually(60*time.Second, func() bool { d, _, ok := configMap("w1"); return ok && d["message"] == "hello" }) {
			t.Fatal("no ConfigMap w1-config with the message")
		}
		_, refs, _ := configMap("w1")
		if len(refs) != 1 || refs[0].UID != w.GetUID() || refs[0].Kind != "Widget" || refs[0].Controller == nil || !*refs[0].Controller ||
			refs[0].BlockOwnerDeletion == nil || !*refs[0].BlockOwnerDeletion {
			t.Errorf("owner references of w1-config: %+v", refs)
		}
	})

	t.Run("status-conditions", func(t *testing.T) {
		ready(t, "w1", 1)
		if _, err := dyn.Resource(widgets).Namespace("default").Patch(ctx, "w1", "application/merge-patch+json", []byte(`{"spec":{"message":"again"}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		ready(t, "w1", 2)
		if d, _, _ := configMap("w1"); d["message"] != "again" {
			t.Errorf("w1-config after the spec change: %v", d)
		}
	})

	t.Run("event-via-both-apis", func(t *testing.T) {
		var note, message string
		if !eventually(30*time.Second, func() bool {
			l, err := c.EventsV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "regarding.name=w1,reason=Reconciled"})
			if err != nil || len(l.Items) == 0 {
				return false
			}
			e := l.Items[0]
			note = e.Note
			return e.ReportingController == "widget-operator" && e.Regarding.Kind == "Widget" && e.Related != nil && e.Related.Name == "w1-config"
		}) {
			t.Fatalf("no Reconciled event of widget-operator about w1 through events.k8s.io/v1 (last note %q)", note)
		}
		l, err := c.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=w1,reason=Reconciled"})
		if err != nil || len(l.Items) == 0 {
			t.Fatalf("the event through core/v1: %v, %d items", err, len(l.Items))
		}
		message = l.Items[0].Message
		if !strings.Contains(message, "w1-config") || l.Items[0].ReportingController != "widget-operator" {
			t.Errorf("core/v1 view: %+v", l.Items[0])
		}
		if out := p.mustKubectl("get", "events.v1.events.k8s.io", "--field-selector", "regarding.name=w1", "-o", "jsonpath={.items[*].reason}"); !strings.Contains(out, "Reconciled") {
			t.Errorf("kubectl get events.v1.events.k8s.io: %q", out)
		}
	})

	t.Run("leader-election", func(t *testing.T) {
		leader.kill()
		if !eventually(60*time.Second, standby.leads) {
			t.Fatalf("replica %s did not take over after %s was killed", standby.id, leader.id)
		}
		createWidget(t, "w2", "after the takeover")
		if !eventually(60*time.Second, func() bool { d, _, ok := configMap("w2"); return ok && d["message"] == "after the takeover" }) {
			t.Fatal("the new leader did not reconcile w2")
		}
		// The operator prints RECONCILED after its status update, which
		// follows the ConfigMap's write: wait for the line, not just the write.
		if !eventually(30*time.Second, func() bool { return strings.Contains(standby.logs(), "RECONCILED "+standby.id+" w2") }) {
			t.Errorf("w2 not reconciled by the new leader %s", standby.id)
		}
	})

	t.Run("gc-background", func(t *testing.T) {
		p.mustKubectl("delete", "widget", "w1")
		if !eventually(60*time.Second, func() bool { return gone("w1") }) {
			t.Fatal("w1-config outlived its widget")
		}
	})

	t.Run("gc-foreground", func(t *testing.T) {
		if _, _, ok := configMap("w2"); !ok {
			t.Skip("no w2 (leader-election failed)")
		}
		p.mustKubectl("delete", "widget", "w2", "--cascade=foreground")
		if !gone("w2") {
			t.Error("kubectl delete --cascade=foreground returned while w2-config exists")
		}
		if out, err := p.kubectl("get", "widget", "w2"); err == nil {
			t.Errorf("w2 still there after its foreground deletion: %s", out)
		}
	})

	t.Run("gc-orphan", func(t *testing.T) {
		createWidget(t, "w3", "orphan me")
		if !eventually(60*time.Second, func() bool { _, _, ok := configMap("w3"); return ok }) {
			t.Fatal("no w3-config")
		}
		p.mustKubectl("delete", "widget", "w3", "--cascade=orphan")
		if !eventually(30*time.Second, func() bool { _, refs, ok := configMap("w3"); return ok && len(refs) == 0 }) {
			d, refs, ok := configMap("w3")
			t.Fatalf("w3-config after an orphaning delete: exists %t, %v, owner references %+v", ok, d, refs)
		}
	})
}
