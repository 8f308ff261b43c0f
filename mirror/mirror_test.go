package mirror

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/kubestore/kubestore/config"
	"github.com/kubestore/kubestore/mirrored"
	"github.com/kubestore/kubestore/registry"
)

// noStores serves no resource: these tests exercise the rules, not
// storage (the end-to-end tests in test/e2e/mirror_test.go do).
type noStores struct{}

func (noStores) Store(context.Context, schema.GroupResource) (*Store, error) {
	return nil, errors.New("no stores in unit tests")
}
func (noStores) Builtin(gr schema.GroupResource) bool {
	return !strings.Contains(gr.Group, "example.com")
}

func newTestMirror(t *testing.T, rules ...config.MirrorRule) *Mirror {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["up"] = &clientcmdapi.Cluster{Server: "https://127.0.0.1:1"}
	kc.AuthInfos["me"] = &clientcmdapi.AuthInfo{Token: "t"}
	kc.Contexts["c"] = &clientcmdapi.Context{Cluster: "up", AuthInfo: "me"}
	kc.CurrentContext = "c"
	path := filepath.Join(t.TempDir(), "upstream.kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	cfg := config.Mirror{UpstreamKubeconfig: path, NodeName: "edge-1", Rules: rules}
	if len(rules) == 0 {
		cfg.Rules = config.DefaultMirrorRules()
	}
	m, err := New(cfg, noStores{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func obj(t *testing.T, js string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON([]byte(js)); err != nil {
		t.Fatal(err)
	}
	return u
}

// testStore is the store of gr as the server builds it for the mirror,
// without the storage: the registry's kinds, metadata-only attributes for
// custom resources and their definitions.
func testStore(t *testing.T, gr schema.GroupResource) *Store {
	t.Helper()
	api, err := registry.New()
	if err != nil {
		t.Fatal(err)
	}
	if k, ok := api.Kind(gr); ok {
		return &Store{GVR: k.GVR, Namespaced: k.Namespaced, New: k.New, NewList: k.NewList, Attrs: k.Attrs,
			Convert: func(u map[string]any) (runtime.Object, error) {
				obj := k.New()
				return obj, runtime.DefaultUnstructuredConverter.FromUnstructured(u, obj)
			}}
	}
	namespaced := gr != crdResource
	return &Store{Namespaced: namespaced, Attrs: MetadataAttrs(namespaced),
		Convert: func(u map[string]any) (runtime.Object, error) { return &unstructured.Unstructured{Object: u}, nil }}
}

func TestMatching(t *testing.T) {
	m := newTestMirror(t,
		config.MirrorRule{Name: "host-net-off", Resource: "pods", FieldSelector: "spec.nodeName=$(NODE_NAME),spec.hostNetwork=false"},
		config.MirrorRule{Name: "pods", Resource: "pods", FieldSelector: "spec.nodeName=$(NODE_NAME)"},
		config.MirrorRule{Name: "apps-cm", Resource: "configmaps", Namespaces: []string{"apps"}, LabelSelector: "mirror in (yes),!local"},
		config.MirrorRule{Name: "refs", Resource: "secrets", ReferencedBy: "pods"},
		config.MirrorRule{Name: "widgets", Resource: "widgets.example.com"},
	)
	pods, cms, secrets := schema.GroupResource{Resource: "pods"}, schema.GroupResource{Resource: "configmaps"}, schema.GroupResource{Resource: "secrets"}
	cases := []struct {
		name      string
		gr        schema.GroupResource
		namespace string
		obj       string
		want      string // the rule, "" when local
	}{
		{"pod of this node", pods, "default", `{"kind":"Pod","metadata":{"name":"a"},"spec":{"nodeName":"edge-1","hostNetwork":true}}`, "pods@edge-1"},
		{"pod of another node", pods, "default", `{"kind":"Pod","metadata":{"name":"a"},"spec":{"nodeName":"edge-2"}}`, ""},
		{"pod of no node", pods, "default", `{"kind":"Pod","metadata":{"name":"a"},"spec":{}}`, ""},
		// The registry's fields: an unset spec.hostNetwork selects as
		// "false", as a list of the local server selects it.
		{"pod selected by an unset field", pods, "default", `{"kind":"Pod","metadata":{"name":"a"},"spec":{"nodeName":"edge-1"}}`, "host-net-off@edge-1"},
		{"configmap selected", cms, "apps", `{"kind":"ConfigMap","metadata":{"name":"a","labels":{"mirror":"yes"}}}`, "apps-cm"},
		{"configmap namespace in the body", cms, "", `{"kind":"ConfigMap","metadata":{"name":"a","namespace":"apps","labels":{"mirror":"yes"}}}`, "apps-cm"},
		{"configmap excluded by label", cms, "apps", `{"kind":"ConfigMap","metadata":{"name":"a","labels":{"mirror":"yes","local":""}}}`, ""},
		{"configmap in another namespace", cms, "other", `{"kind":"ConfigMap","metadata":{"name":"a","labels":{"mirror":"yes"}}}`, ""},
		{"secret no mirrored pod references", secrets, "apps", `{"kind":"Secret","metadata":{"name":"s"}}`, ""},
		{"custom resource", schema.GroupResource{Group: "example.com", Resource: "widgets"}, "apps", `{"kind":"Widget","metadata":{"name":"w"}}`, "widgets"},
		{"custom resource's definition, another one", crdResource, "", `{"kind":"CustomResourceDefinition","metadata":{"name":"gadgets.example.com"}}`, ""},
		{"custom resource's definition", crdResource, "", `{"kind":"CustomResourceDefinition","metadata":{"name":"widgets.example.com"}}`, "widgets-definition"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := ""
			if r := m.matching(testStore(t, tc.gr), tc.gr, tc.namespace, obj(t, tc.obj)); r != nil {
				got = r.name
			}
			if got != tc.want {
				t.Errorf("matching = %q, want %q", got, tc.want)
			}
		})
	}
	// Once a mirrored pod references the secret, it is the mirror's.
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "apps"},
		Spec: corev1.PodSpec{ImagePullSecrets: []corev1.LocalObjectReference{{Name: "s"}}}}
	m.refs.changed(m.rule("pods"), pod)
	if r := m.matching(testStore(t, secrets), secrets, "apps", obj(t, `{"kind":"Secret","metadata":{"name":"s"}}`)); r == nil || r.name != "refs" {
		t.Errorf("referenced secret: matching = %v, want refs", r)
	}
	m.refs.changed(m.rule("pods"), deletedObject{pod})
	if r := m.matching(testStore(t, secrets), secrets, "apps", obj(t, `{"kind":"Secret","metadata":{"name":"s"}}`)); r != nil {
		t.Errorf("secret no longer referenced: matching = %v, want none", r.name)
	}
}

// The references are upstream's VisitPodSecretNames and
// VisitPodConfigmapNames (k8s.io/kubernetes pkg/api/v1/pod/util_test.go
// TestPodSecrets, TestPodConfigmaps: every volume plugin that names a
// secret), and the pod's ServiceAccount.
func TestPodReferences(t *testing.T) {
	cmRule := &rule{name: "cm", gr: configMaps}
	secretRule := &rule{name: "sec", gr: secrets}
	saRule := &rule{name: "sa", gr: serviceAccounts}
	ref := func(name string) *corev1.LocalObjectReference { return &corev1.LocalObjectReference{Name: name} }
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"},
		Spec: corev1.PodSpec{
			Volumes: []corev1.Volume{
				{Name: "a", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "vol-cm"}}}},
				{Name: "b", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "vol-secret"}}},
				{Name: "c", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
					{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "proj-cm"}}},
					{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "proj-secret"}}},
				}}}},
				{Name: "d", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
				{Name: "azure", VolumeSource: corev1.VolumeSource{AzureFile: &corev1.AzureFileVolumeSource{SecretName: "azure-secret"}}},
				{Name: "cephfs", VolumeSource: corev1.VolumeSource{CephFS: &corev1.CephFSVolumeSource{SecretRef: ref("cephfs-secret")}}},
				{Name: "cinder", VolumeSource: corev1.VolumeSource{Cinder: &corev1.CinderVolumeSource{SecretRef: ref("cinder-secret")}}},
				{Name: "flex", VolumeSource: corev1.VolumeSource{FlexVolume: &corev1.FlexVolumeSource{SecretRef: ref("flex-secret")}}},
				{Name: "rbd", VolumeSource: corev1.VolumeSource{RBD: &corev1.RBDVolumeSource{SecretRef: ref("rbd-secret")}}},
				{Name: "scaleio", VolumeSource: corev1.VolumeSource{ScaleIO: &corev1.ScaleIOVolumeSource{SecretRef: ref("scaleio-secret")}}},
				{Name: "iscsi", VolumeSource: corev1.VolumeSource{ISCSI: &corev1.ISCSIVolumeSource{SecretRef: ref("iscsi-secret")}}},
				{Name: "storageos", VolumeSource: corev1.VolumeSource{StorageOS: &corev1.StorageOSVolumeSource{SecretRef: ref("storageos-secret")}}},
				{Name: "csi", VolumeSource: corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{Driver: "d", NodePublishSecretRef: ref("csi-secret")}}},
			},
			ServiceAccountName: "runner",
			InitContainers:     []corev1.Container{{Name: "init", EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "init-cm"}}}}}},
			Containers: []corev1.Container{{Name: "c", Env: []corev1.EnvVar{
				{Name: "A", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "env-secret"}, Key: "k"}}},
				{Name: "B", Value: "plain"},
			}, EnvFrom: []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "envfrom-secret"}}}}}},
			EphemeralContainers: []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "debug",
				Env: []corev1.EnvVar{{Name: "C", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "debug-cm"}, Key: "k"}}}}}}},
			ImagePullSecrets: []corev1.LocalObjectReference{{Name: "pull"}},
		},
	}
	got := podReferences(pod, []*rule{cmRule, secretRule, saRule})
	want := sets.New(refKey{saRule, "ns", "runner"})
	for _, n := range []string{"vol-cm", "proj-cm", "init-cm", "debug-cm"} {
		want.Insert(refKey{cmRule, "ns", n})
	}
	secretNames := []string{"vol-secret", "proj-secret", "env-secret", "envfrom-secret", "pull", "azure-secret", "cephfs-secret",
		"cinder-secret", "flex-secret", "rbd-secret", "scaleio-secret", "iscsi-secret", "storageos-secret", "csi-secret"}
	for _, n := range secretNames {
		want.Insert(refKey{secretRule, "ns", n})
	}
	if !got.Equal(want) {
		t.Errorf("missing %v, extra %v", want.Difference(got).UnsortedList(), got.Difference(want).UnsortedList())
	}
	if only := podReferences(pod, []*rule{secretRule}); only.Len() != len(secretNames) {
		t.Errorf("with a secrets rule only: %d references, want the %d secrets", only.Len(), len(secretNames))
	}
}

func TestNewer(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want bool
	}{
		{"10", "9", true}, {"9", "10", false}, {"10", "10", false}, {"100", "99", true},
		// Not etcd revisions: any difference counts.
		{"a", "b", true}, {"x", "x", false},
	} {
		if got := newer(tc.a, tc.b); got != tc.want {
			t.Errorf("newer(%q, %q) = %t, want %t", tc.a, tc.b, got, tc.want)
		}
	}
}

// TestUpstreamBody: the local resourceVersion a client sends becomes the
// upstream's, and the mirror's annotations never reach the upstream.
func TestUpstreamBody(t *testing.T) {
	m := newTestMirror(t)
	local := &metav1.ObjectMeta{Name: "p", Namespace: "ns", ResourceVersion: "42",
		Annotations: map[string]string{mirrored.AnnotationRule: "pods", mirrored.AnnotationUpstreamResourceVersion: "9001"}}
	cases := []struct {
		name, verb, contentType, body string
		want                          string // JSON; "" for a conflict
	}{
		{"update", "update", "application/json",
			`{"kind":"Pod","apiVersion":"v1","metadata":{"name":"p","resourceVersion":"42","annotations":{"a":"b","mirror.kubestore.io/rule":"pods","mirror.kubestore.io/upstream-resource-version":"9001"}}}`,
			`{"apiVersion":"v1","kind":"Pod","metadata":{"annotations":{"a":"b"},"name":"p","resourceVersion":"9001"}}`},
		{"update without resourceVersion", "update", "application/json",
			`{"kind":"Pod","apiVersion":"v1","metadata":{"name":"p"}}`, `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"}}`},
		{"update of a stale copy", "update", "application/json", `{"kind":"Pod","apiVersion":"v1","metadata":{"name":"p","resourceVersion":"41"}}`, ""},
		{"update in YAML", "update", "application/yaml", "kind: Pod\napiVersion: v1\nmetadata:\n  name: p\n  resourceVersion: \"42\"\n",
			`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","resourceVersion":"9001"}}`},
		{"merge patch", "patch", "application/merge-patch+json", `{"metadata":{"resourceVersion":"42","labels":{"x":"y"}}}`,
			`{"metadata":{"labels":{"x":"y"},"resourceVersion":"9001"}}`},
		{"strategic merge patch without resourceVersion", "patch", "application/strategic-merge-patch+json", `{"status":{"phase":"Running"}}`,
			`{"status":{"phase":"Running"}}`},
		{"JSON patch", "patch", "application/json-patch+json", `[{"op":"test","path":"/metadata/resourceVersion","value":"42"},{"op":"add","path":"/metadata/labels/x","value":"y"}]`,
			`[{"op":"test","path":"/metadata/resourceVersion","value":"9001"},{"op":"add","path":"/metadata/labels/x","value":"y"}]`},
		{"JSON patch of a stale copy", "patch", "application/json-patch+json", `[{"op":"test","path":"/metadata/resourceVersion","value":"7"}]`, ""},
		{"delete with preconditions", "delete", "application/json", `{"kind":"DeleteOptions","apiVersion":"v1","preconditions":{"resourceVersion":"42","uid":"u"}}`,
			`{"apiVersion":"v1","kind":"DeleteOptions","preconditions":{"resourceVersion":"9001","uid":"u"}}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPut, "/api/v1/namespaces/ns/pods/p", nil)
			r.Header.Set("Content-Type", tc.contentType)
			wt := &writeThrough{u: m.up, r: r, info: &request.RequestInfo{Verb: tc.verb, Name: "p", Namespace: "ns"},
				gr: schema.GroupResource{Resource: "pods"}, store: &Store{GVR: corev1.SchemeGroupVersion.WithResource("pods")},
				body: []byte(tc.body), local: local}
			got, contentType, err := wt.upstreamBody()
			if tc.want == "" {
				if !apierrors.IsConflict(err) {
					t.Fatalf("err = %v, want a conflict", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if contentType == runtime.ContentTypeProtobuf {
				// An update goes up as protobuf: compared as the Pod it is.
				if got, err = m.up.wire.asJSON(got, nil); err != nil {
					t.Fatal(err)
				}
				var g, w corev1.Pod
				if err := json.Unmarshal(got, &g); err != nil {
					t.Fatalf("%s: %v", got, err)
				}
				json.Unmarshal([]byte(tc.want), &w) //nolint:errcheck // a test constant
				if !equality.Semantic.DeepEqual(g, w) {
					t.Errorf("body = %s\nwant   %s", got, tc.want)
				}
				return
			}
			var g, w any
			if err := json.Unmarshal(got, &g); err != nil {
				t.Fatalf("%s: %v", got, err)
			}
			json.Unmarshal([]byte(tc.want), &w) //nolint:errcheck // a test constant
			if !reflect.DeepEqual(g, w) {
				t.Errorf("body = %s\nwant   %s", got, tc.want)
			}
		})
	}
}

// A custom resource named by two rules has its definition mirrored once:
// two rules writing one object would each take it over from the other.
func TestOneDefinitionPerCustomResource(t *testing.T) {
	m := newTestMirror(t,
		config.MirrorRule{Name: "widgets-a", Resource: "widgets.example.com", Namespaces: []string{"a"}},
		config.MirrorRule{Name: "widgets-b", Resource: "widgets.example.com", Namespaces: []string{"b"}},
		config.MirrorRule{Name: "gadgets", Resource: "gadgets.example.com"},
		config.MirrorRule{Name: "pods", Resource: "pods"},
	)
	var got []string
	for _, r := range m.rules {
		if r.gr == crdResource {
			got = append(got, r.object)
		}
	}
	if want := []string{"widgets.example.com", "gadgets.example.com"}; !reflect.DeepEqual(got, want) {
		t.Errorf("definition rules for %q, want %q", got, want)
	}
}

// An upstream object the local store cannot take is skipped, not a
// failure of its stream: one object never wedges a rule.
func TestApplySkipsAnObjectTheStoreCannotTake(t *testing.T) {
	m := newTestMirror(t)
	store := testStore(t, schema.GroupResource{Resource: "pods"})
	bad := obj(t, `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"ns","uid":"u1","resourceVersion":"5"},"spec":{"containers":"not-a-list"}}`)
	_, err := m.apply(t.Context(), m.rule("pods"), store, bad)
	if !errors.As(err, new(skippedError)) {
		t.Errorf("applying a pod whose spec does not convert: %v, want a skippedError", err)
	}
}

// What reconciliation sends of the node's offline status: the fields the
// node changed, each condition it changed whole (a newer heartbeat alone
// merged onto the cluster's Unknown would say neither's), nothing of what
// it did not change, and the object read as preconditions.
func TestNodePatch(t *testing.T) {
	store := testStore(t, schema.GroupResource{Resource: "nodes"})
	rec := pendingRecord{Resource: "nodes", Name: "edge-1", Writes: []ownWrite{ownStatus}}
	base := json.RawMessage(`{"conditions":[{"type":"Ready","status":"True","reason":"KubeletReady","lastHeartbeatTime":"2026-01-01T00:00:00Z"},{"type":"MemoryPressure","status":"False"}],"volumesAttached":[{"name":"vol-A","devicePath":""}]}`)
	var owned map[string]any
	if err := json.Unmarshal([]byte(`{"conditions":[{"type":"Ready","status":"True","reason":"KubeletReady","lastHeartbeatTime":"2026-01-01T00:01:00Z"},{"type":"MemoryPressure","status":"False"}],"volumesAttached":[{"name":"vol-A","devicePath":""}]}`), &owned); err != nil {
		t.Fatal(err)
	}
	// The cluster's Node as the node left it, but for volumesAttached.
	cur := obj(t, `{"kind":"Node","metadata":{"name":"edge-1","uid":"u1","resourceVersion":"7"},"status":{"conditions":[{"type":"Ready","status":"True","reason":"KubeletReady","lastHeartbeatTime":"2026-01-01T00:00:00Z"},{"type":"MemoryPressure","status":"False"}],"volumesAttached":[{"name":"vol-B","devicePath":""}]}}`)
	data, err := nodePatch(store, rec, base, owned, cur)
	if err != nil {
		t.Fatal(err)
	}
	var patch struct {
		Metadata map[string]string `json:"metadata"`
		Status   map[string]any    `json:"status"`
	}
	if err := json.Unmarshal(data, &patch); err != nil {
		t.Fatal(err)
	}
	if patch.Metadata["uid"] != "u1" || patch.Metadata["resourceVersion"] != "7" {
		t.Errorf("preconditions %v, want uid u1 and resourceVersion 7", patch.Metadata)
	}
	if _, ok := patch.Status["volumesAttached"]; ok {
		t.Errorf("the patch sends volumesAttached, which the node did not change: %s", data)
	}
	conds, _ := patch.Status["conditions"].([]any)
	var ready map[string]any
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == "Ready" {
			ready = m
		}
		if m, ok := c.(map[string]any); ok && m["type"] == "MemoryPressure" {
			t.Errorf("the patch sends MemoryPressure, which the node did not change: %s", data)
		}
	}
	if ready["status"] != "True" || ready["reason"] != "KubeletReady" || ready["lastHeartbeatTime"] != "2026-01-01T00:01:00Z" {
		t.Errorf("the Ready condition sent: %v, want the node's whole condition; patch %s", ready, data)
	}
	// Nothing changed: nothing to send.
	if data, err := nodePatch(store, rec, base, mustMap(t, base), cur); err != nil || data != nil {
		t.Errorf("patch of an unchanged status: %s %v, want none", data, err)
	}
}

func mustMap(t *testing.T, data []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// A condition the kubelet reports that the cluster changed while the node
// was away (the node-lifecycle controller's not Ready) is sent as the node
// holds it, though the node did not change it; another writer's condition
// is not.
func TestNodePatchReassertsTheKubeletsConditions(t *testing.T) {
	store := testStore(t, schema.GroupResource{Resource: "pods"})
	rec := pendingRecord{Resource: "pods", Namespace: "ns", Name: "p", Writes: []ownWrite{ownStatus}}
	status := `{"phase":"Running","conditions":[{"type":"Ready","status":"True"}]}`
	cur := obj(t, `{"kind":"Pod","metadata":{"name":"p","namespace":"ns","uid":"u1","resourceVersion":"9"},"status":{"phase":"Running","conditions":[{"type":"Ready","status":"False","reason":"NodeUnreachable"},{"type":"DisruptionTarget","status":"True"}]}}`)
	data, err := nodePatch(store, rec, json.RawMessage(status), mustMap(t, []byte(status)), cur)
	if err != nil {
		t.Fatal(err)
	}
	var patch struct {
		Status struct {
			Conditions []map[string]any `json:"conditions"`
		} `json:"status"`
	}
	if err := json.Unmarshal(data, &patch); err != nil {
		t.Fatalf("%v: %s", err, data)
	}
	if len(patch.Status.Conditions) != 1 || patch.Status.Conditions[0]["type"] != "Ready" || patch.Status.Conditions[0]["status"] != "True" {
		t.Errorf("patch %s, want the node's Ready=True alone", data)
	}
}

// A condition reasserted beside one the node changed keeps the order the
// patch's $setElementOrder gives: the apiserver refuses a list out of it
// (500, "doesn't match $setElementOrder list"), at every try, and the
// node's offline status was held back until its quarantine (found by
// test/model, seed 2: the cluster's Node had lost the node's DiskPressure,
// which the node had written before its Ready).
func TestNodePatchReassertedConditionsKeepTheirOrder(t *testing.T) {
	store := testStore(t, schema.GroupResource{Resource: "nodes"})
	rec := pendingRecord{Resource: "nodes", Name: "edge-1", Writes: []ownWrite{ownStatus}}
	base := `{"conditions":[{"type":"DiskPressure","status":"True","reason":"KubeletDisk","message":"d-17"},{"type":"Ready","status":"True","reason":"KubeletReady","message":"hb-0"}]}`
	owned := `{"conditions":[{"type":"DiskPressure","status":"True","reason":"KubeletDisk","message":"d-17"},{"type":"Ready","status":"True","reason":"KubeletReady","message":"hb-89"}]}`
	cur := obj(t, `{"apiVersion":"v1","kind":"Node","metadata":{"name":"edge-1","uid":"u1","resourceVersion":"9"},"status":{"conditions":[{"type":"Ready","status":"True","reason":"KubeletReady","message":"hb-0"},{"type":"Model","status":"True","reason":"Model","message":"c-118"}]}}`)
	data, err := nodePatch(store, rec, json.RawMessage(base), mustMap(t, []byte(owned)), cur)
	if err != nil {
		t.Fatal(err)
	}
	curJSON, err := cur.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	merged, err := strategicpatch.StrategicMergePatch(curJSON, data, &corev1.Node{})
	if err != nil {
		t.Fatalf("the apiserver's merge of the patch: %v\npatch %s", err, data)
	}
	var node corev1.Node
	if err := json.Unmarshal(merged, &node); err != nil {
		t.Fatal(err)
	}
	got := map[corev1.NodeConditionType]string{}
	for _, c := range node.Status.Conditions {
		got[c.Type] = c.Message
	}
	if want := map[corev1.NodeConditionType]string{"DiskPressure": "d-17", "Ready": "hb-89", "Model": "c-118"}; !reflect.DeepEqual(got, want) {
		t.Errorf("conditions after the patch %v, want %v; patch %s", got, want, data)
	}
}
