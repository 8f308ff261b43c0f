package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/kubestore/kubestore/config"
)

var (
	devicesV1      = schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "devices"}
	devicesV1beta1 = schema.GroupVersionResource{Group: "example.com", Version: "v1beta1", Resource: "devices"}
)

// devicesSchema: spec.model is required; spec.replicas is defaulted,
// bounded by a CEL rule and is the scale subresource's replicas.
const devicesSchema = `{
  "type": "object",
  "properties": {
    "spec": {
      "type": "object",
      "required": ["model"],
      "x-kubernetes-validations": [{"rule": "self.replicas <= 10", "message": "replicas must be at most 10"}],
      "properties": {
        "model":    {"type": "string", "maxLength": 32},
        "mode":     {"type": "string", "enum": ["auto", "manual"], "default": "auto"},
        "replicas": {"type": "integer", "minimum": 0, "default": 1}
      }
    },
    "status": {
      "type": "object",
      "properties": {
        "phase":    {"type": "string"},
        "replicas": {"type": "integer"},
        "selector": {"type": "string"}
      }
    }
  }
}`

// devicesCRD is example.com's Device: namespaced, v1 (stored) and v1beta1
// served with None conversion, status and scale subresources and printer
// columns.
func devicesCRD(t *testing.T) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	var s apiextensionsv1.JSONSchemaProps
	if err := json.Unmarshal([]byte(devicesSchema), &s); err != nil {
		t.Fatal(err)
	}
	version := func(name string, storage bool) apiextensionsv1.CustomResourceDefinitionVersion {
		return apiextensionsv1.CustomResourceDefinitionVersion{
			Name: name, Served: true, Storage: storage,
			Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: s.DeepCopy()},
			Subresources: &apiextensionsv1.CustomResourceSubresources{
				Status: &apiextensionsv1.CustomResourceSubresourceStatus{},
				Scale: &apiextensionsv1.CustomResourceSubresourceScale{
					SpecReplicasPath: ".spec.replicas", StatusReplicasPath: ".status.replicas", LabelSelectorPath: ptr.To(".status.selector"),
				},
			},
			AdditionalPrinterColumns: []apiextensionsv1.CustomResourceColumnDefinition{
				{Name: "Model", Type: "string", JSONPath: ".spec.model"},
				{Name: "Phase", Type: "string", JSONPath: ".status.phase"},
			},
		}
	}
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "devices.example.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "example.com",
			Names: apiextensionsv1.CustomResourceDefinitionNames{
				Plural: "devices", Singular: "device", Kind: "Device", ListKind: "DeviceList", ShortNames: []string{"dev"},
			},
			Scope:      apiextensionsv1.NamespaceScoped,
			Versions:   []apiextensionsv1.CustomResourceDefinitionVersion{version("v1", true), version("v1beta1", false)},
			Conversion: &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.NoneConverter},
		},
	}
}

func (ts *testServer) crds() apiextensionsclient.Interface {
	return apiextensionsclient.NewForConfigOrDie(ts.rest)
}

// createCRD creates crd and returns how long it took until its resource
// was in the aggregated and the legacy discovery documents.
func createCRD(t *testing.T, ts *testServer, crd *apiextensionsv1.CustomResourceDefinition) time.Duration {
	t.Helper()
	start := time.Now()
	if _, err := ts.crds().ApiextensionsV1().CustomResourceDefinitions().Create(t.Context(), crd, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating CRD %s: %v", crd.Name, err)
	}
	gv := schema.GroupVersion{Group: crd.Spec.Group, Version: crd.Spec.Versions[0].Name}
	eventually(t, 10*time.Second, crd.Name+" in discovery", func() (bool, error) {
		return inDiscovery(ts, gv, crd.Spec.Names.Plural)
	})
	return time.Since(start)
}

// inDiscovery reports whether resource is listed under gv in both the
// aggregated discovery (what kubectl and client-go use) and the legacy
// /apis and /apis/<group>/<version> documents.
func inDiscovery(ts *testServer, gv schema.GroupVersion, resource string) (bool, error) {
	ctx := context.Background()
	// Aggregated: one request for every group.
	_, lists, err := ts.client.Discovery().ServerGroupsAndResources()
	if err != nil {
		return false, err
	}
	found := false
	for _, l := range lists {
		if l.GroupVersion != gv.String() {
			continue
		}
		for _, r := range l.APIResources {
			found = found || r.Name == resource
		}
	}
	if !found {
		return false, fmt.Errorf("not in the aggregated discovery")
	}
	// Legacy: the group list, then the version's resources.
	var groups metav1.APIGroupList
	body, err := ts.client.Discovery().RESTClient().Get().AbsPath("/apis").SetHeader("Accept", "application/json").DoRaw(ctx)
	if err != nil {
		return false, err
	}
	if err := json.Unmarshal(body, &groups); err != nil {
		return false, err
	}
	if !slices.ContainsFunc(groups.Groups, func(g metav1.APIGroup) bool {
		return g.Name == gv.Group && slices.ContainsFunc(g.Versions, func(v metav1.GroupVersionForDiscovery) bool { return v.Version == gv.Version })
	}) {
		return false, fmt.Errorf("not in the legacy /apis")
	}
	var resources metav1.APIResourceList
	body, err = ts.client.Discovery().RESTClient().Get().AbsPath("/apis", gv.Group, gv.Version).SetHeader("Accept", "application/json").DoRaw(ctx)
	if err != nil {
		return false, err
	}
	if err := json.Unmarshal(body, &resources); err != nil {
		return false, err
	}
	if !slices.ContainsFunc(resources.APIResources, func(r metav1.APIResource) bool { return r.Name == resource }) {
		return false, fmt.Errorf("not in the legacy /apis/%s", gv)
	}
	return true, nil
}

func createNamespace(t *testing.T, ts *testServer, name string) {
	t.Helper()
	if _, err := ts.client.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func device(name string, spec map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.com/v1", "kind": "Device",
		"metadata": map[string]any{"name": name},
		"spec":     spec,
	}}
}

func TestCustomResources(t *testing.T) {
	ts := startServer(t, testConfig(t))
	ctx := t.Context()
	took := createCRD(t, ts, devicesCRD(t))
	t.Logf("devices.example.com in discovery %s after the create", took)
	if took > time.Second {
		t.Errorf("the CRD's resource took %s to appear in discovery, want at most 1s", took)
	}
	createNamespace(t, ts, "cr")
	devices := ts.dynamic.Resource(devicesV1).Namespace("cr")

	// /openapi/v3 is built on its first request: that request already
	// lists the CRD created before it, as kubectl needs.
	t.Run("openapi v3 built on first request", func(t *testing.T) {
		paths, err := openAPIV3Paths(ctx, ts)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range []string{"apis/example.com/v1", "apis/example.com/v1beta1", "apis/apiextensions.k8s.io/v1", "api/v1"} {
			if _, ok := paths[p]; !ok {
				t.Errorf("first /openapi/v3 lacks %s: %v", p, slices.Sorted(maps.Keys(paths)))
			}
		}
	})

	t.Run("create, get, list, watch, patch, apply, delete", func(t *testing.T) {
		w, err := devices.Watch(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		created, err := devices.Create(ctx, device("d1", map[string]any{"model": "gw-1"}), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got, err := devices.Get(ctx, "d1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.GetUID() != created.GetUID() || got.GetResourceVersion() != created.GetResourceVersion() {
			t.Errorf("get returned %s@%s, created %s@%s", got.GetUID(), got.GetResourceVersion(), created.GetUID(), created.GetResourceVersion())
		}
		patched, err := devices.Patch(ctx, "d1", types.MergePatchType, []byte(`{"spec":{"model":"gw-2"}}`), metav1.PatchOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if m, _, _ := unstructured.NestedString(patched.Object, "spec", "model"); m != "gw-2" {
			t.Errorf("merge patch: model %q", m)
		}
		if _, err := devices.Patch(ctx, "d1", types.JSONPatchType, []byte(`[{"op":"replace","path":"/spec/replicas","value":2}]`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		applied, err := devices.Apply(ctx, "d2", device("d2", map[string]any{"model": "gw-3"}), metav1.ApplyOptions{FieldManager: "test"})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(applied.GetManagedFields(), func(m metav1.ManagedFieldsEntry) bool {
			return m.Manager == "test" && m.Operation == metav1.ManagedFieldsOperationApply
		}) {
			t.Errorf("server-side apply recorded no managed fields for its manager: %v", applied.GetManagedFields())
		}
		// A second manager changing an applied field conflicts.
		_, err = devices.Apply(ctx, "d2", device("d2", map[string]any{"model": "other"}), metav1.ApplyOptions{FieldManager: "intruder"})
		if !apierrors.IsConflict(err) {
			t.Errorf("apply by another manager of an owned field: got %v, want 409 Conflict", err)
		}
		l, err := devices.List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := names(l); !slices.Equal(got, []string{"d1", "d2"}) {
			t.Errorf("list: %v", got)
		}
		if err := devices.Delete(ctx, "d1", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := devices.Get(ctx, "d1", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("get after delete: %v", err)
		}
		want := []string{"ADDED d1", "MODIFIED d1", "MODIFIED d1", "ADDED d2", "DELETED d1"}
		if got := collect(t, w, len(want), 10*time.Second); !slices.Equal(got, want) {
			t.Errorf("watch: %v, want %v", got, want)
		}
	})

	t.Run("schema validation refuses a bad object", func(t *testing.T) {
		for name, tc := range map[string]struct {
			spec map[string]any
			want []string
		}{
			"wrong type":       {map[string]any{"model": "m", "replicas": "three"}, []string{"spec.replicas", "must be of type integer"}},
			"missing required": {map[string]any{"mode": "auto"}, []string{"spec.model", "Required value"}},
			"enum":             {map[string]any{"model": "m", "mode": "turbo"}, []string{"spec.mode", "Unsupported value", `"turbo"`}},
			"cel rule":         {map[string]any{"model": "m", "replicas": 20}, []string{"spec", "replicas must be at most 10"}},
		} {
			t.Run(name, func(t *testing.T) {
				_, err := devices.Create(ctx, device("bad", tc.spec), metav1.CreateOptions{})
				if !apierrors.IsInvalid(err) {
					t.Fatalf("got %v, want 422 Invalid", err)
				}
				for _, w := range tc.want {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("message %q does not contain %q", err.Error(), w)
					}
				}
			})
		}
		// The rule holds on updates too.
		if _, err := devices.Create(ctx, device("cel", map[string]any{"model": "m"}), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		_, err := devices.Patch(ctx, "cel", types.MergePatchType, []byte(`{"spec":{"replicas":11}}`), metav1.PatchOptions{})
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "replicas must be at most 10") {
			t.Errorf("update breaking the CEL rule: %v", err)
		}
	})

	t.Run("defaulting and pruning", func(t *testing.T) {
		out, err := devices.Create(ctx, device("defaults", map[string]any{"model": "m", "unknown": "dropped"}), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		spec, _, _ := unstructured.NestedMap(out.Object, "spec")
		want := map[string]any{"model": "m", "mode": "auto", "replicas": int64(1)}
		if !equalJSON(spec, want) {
			t.Errorf("spec %v, want defaults applied and the unknown field pruned: %v", spec, want)
		}
		// Stored that way too, not only answered.
		got, err := devices.Get(ctx, "defaults", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if spec, _, _ := unstructured.NestedMap(got.Object, "spec"); !equalJSON(spec, want) {
			t.Errorf("stored spec %v, want %v", spec, want)
		}
	})

	t.Run("status subresource does not touch spec", func(t *testing.T) {
		obj, err := devices.Create(ctx, device("st", map[string]any{"model": "m"}), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := obj.Object["status"]; ok {
			t.Errorf("create kept a status: %v", obj.Object["status"])
		}
		obj.Object["status"] = map[string]any{"phase": "Online"}
		obj.Object["spec"] = map[string]any{"model": "changed-by-status"}
		out, err := devices.UpdateStatus(ctx, obj, metav1.UpdateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if m, _, _ := unstructured.NestedString(out.Object, "spec", "model"); m != "m" {
			t.Errorf("a status update changed spec.model to %q", m)
		}
		if p, _, _ := unstructured.NestedString(out.Object, "status", "phase"); p != "Online" {
			t.Errorf("status.phase %q after the status update", p)
		}
		// And the main resource ignores status.
		out.Object["status"] = map[string]any{"phase": "Lost"}
		out, err = devices.Update(ctx, out, metav1.UpdateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if p, _, _ := unstructured.NestedString(out.Object, "status", "phase"); p != "Online" {
			t.Errorf("an update of the resource changed status.phase to %q", p)
		}
	})

	t.Run("scale subresource", func(t *testing.T) {
		if _, err := devices.Create(ctx, device("sc", map[string]any{"model": "m", "replicas": 2}), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		scale, err := devices.Get(ctx, "sc", metav1.GetOptions{}, "scale")
		if err != nil {
			t.Fatal(err)
		}
		if scale.GetKind() != "Scale" || scale.GetAPIVersion() != "autoscaling/v1" {
			t.Errorf("scale is a %s %s", scale.GetAPIVersion(), scale.GetKind())
		}
		if r, _, _ := unstructured.NestedInt64(scale.Object, "spec", "replicas"); r != 2 {
			t.Errorf("scale spec.replicas %d, want 2", r)
		}
		if _, err := devices.Patch(ctx, "sc", types.MergePatchType, []byte(`{"spec":{"replicas":4}}`), metav1.PatchOptions{}, "scale"); err != nil {
			t.Fatal(err)
		}
		got, err := devices.Get(ctx, "sc", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if r, _, _ := unstructured.NestedInt64(got.Object, "spec", "replicas"); r != 4 {
			t.Errorf("spec.replicas %d after scaling to 4", r)
		}
		// The CEL rule guards the scale subresource too.
		if _, err := devices.Patch(ctx, "sc", types.MergePatchType, []byte(`{"spec":{"replicas":40}}`), metav1.PatchOptions{}, "scale"); !apierrors.IsInvalid(err) {
			t.Errorf("scaling beyond the CEL rule: %v", err)
		}
	})

	t.Run("printer columns", func(t *testing.T) {
		var table metav1.Table
		body, err := ts.client.Discovery().RESTClient().Get().AbsPath("/apis/example.com/v1/namespaces/cr/devices").
			SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").DoRaw(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(body, &table); err != nil {
			t.Fatal(err)
		}
		var cols []string
		for _, c := range table.ColumnDefinitions {
			cols = append(cols, c.Name)
		}
		// Age is the CRD author's to list once they list columns.
		if !slices.Equal(cols, []string{"Name", "Model", "Phase"}) {
			t.Errorf("columns %v, want Name Model Phase", cols)
		}
		for _, r := range table.Rows {
			if r.Cells[0] == "st" && (r.Cells[1] != "m" || r.Cells[2] != "Online") {
				t.Errorf("row of st: %v", r.Cells)
			}
		}
	})

	t.Run("two versions with None conversion", func(t *testing.T) {
		beta := ts.dynamic.Resource(devicesV1beta1).Namespace("cr")
		obj := device("beta", map[string]any{"model": "m"})
		obj.SetAPIVersion("example.com/v1beta1")
		if _, err := beta.Create(ctx, obj, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		got, err := devices.Get(ctx, "beta", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.GetAPIVersion() != "example.com/v1" {
			t.Errorf("read through v1 as %s", got.GetAPIVersion())
		}
		back, err := beta.Get(ctx, "beta", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if back.GetAPIVersion() != "example.com/v1beta1" || back.GetUID() != got.GetUID() {
			t.Errorf("read through v1beta1: %s %s, want the same object", back.GetAPIVersion(), back.GetUID())
		}
		// Stored once, in the storage version.
		resp, err := ts.backend.Client().Get(ctx, "/registry/example.com/devices/cr/beta")
		if err != nil || len(resp.Kvs) != 1 {
			t.Fatalf("reading the stored object: %v %v", resp, err)
		}
		var stored map[string]any
		if err := json.Unmarshal(resp.Kvs[0].Value, &stored); err != nil {
			t.Fatalf("custom objects are stored as JSON: %v", err)
		}
		if stored["apiVersion"] != "example.com/v1" {
			t.Errorf("stored as %v, want the storage version example.com/v1", stored["apiVersion"])
		}
	})

	t.Run("conversion webhooks are refused", func(t *testing.T) {
		crd := devicesCRD(t)
		crd.Name, crd.Spec.Names.Plural, crd.Spec.Names.Singular, crd.Spec.Names.Kind, crd.Spec.Names.ListKind, crd.Spec.Names.ShortNames =
			"hooks.example.com", "hooks", "hook", "Hook", "HookList", nil
		crd.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{
			Strategy: apiextensionsv1.WebhookConverter,
			Webhook: &apiextensionsv1.WebhookConversion{
				ClientConfig:             &apiextensionsv1.WebhookClientConfig{URL: ptr.To("https://127.0.0.1:1/convert")},
				ConversionReviewVersions: []string{"v1"},
			},
		}
		_, err := ts.crds().ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd, metav1.CreateOptions{})
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.conversion.strategy") {
			t.Errorf("CRD with a conversion webhook: got %v, want 422 naming spec.conversion.strategy", err)
		}
	})

	t.Run("a namespace's deletion deletes its custom objects", func(t *testing.T) {
		createNamespace(t, ts, "cr-gone")
		gone := ts.dynamic.Resource(devicesV1).Namespace("cr-gone")
		if _, err := gone.Create(ctx, device("d", map[string]any{"model": "m"}), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := ts.client.CoreV1().Namespaces().Delete(ctx, "cr-gone", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, 30*time.Second, "namespace cr-gone deleted", func() (bool, error) {
			_, err := ts.client.CoreV1().Namespaces().Get(ctx, "cr-gone", metav1.GetOptions{})
			return apierrors.IsNotFound(err), err
		})
		if l, err := ts.dynamic.Resource(devicesV1).Namespace("cr-gone").List(ctx, metav1.ListOptions{}); err != nil || len(l.Items) != 0 {
			t.Errorf("custom objects left in the deleted namespace: %v %v", l, err)
		}
	})
}

// The list/watch semantics of built-in resources hold for a custom
// resource, cached and with its watch cache off
// (--watch-cache-sizes=devices.example.com#0).
func TestCustomResourceListWatchSemantics(t *testing.T) {
	for _, cached := range []bool{true, false} {
		t.Run(fmt.Sprintf("cached=%v", cached), func(t *testing.T) {
			cfg := testConfig(t)
			if !cached {
				cfg.Cache.Sizes = []string{"devices.example.com#0"}
			}
			ts := startServer(t, cfg)
			createCRD(t, ts, devicesCRD(t))
			s := newSubject(t, ts, "devices", "Device", cached)
			s.gvr = devicesV1
			reads := func() float64 {
				return ts.consistentReads("devices", "false") + ts.consistentReads("devices", "true")
			}
			n := delta(reads, func() { checkListWatchSemantics(t, s) })
			if !cached && n != 0 {
				t.Errorf("devices.example.com#0 went through a watch cache: %v consistent reads", n)
			}
		})
	}
}

// A dynamic informer (what controllers of custom resources use) syncs
// with WatchList and follows changes.
func TestCustomResourceDynamicInformer(t *testing.T) {
	ts := startServer(t, testConfig(t))
	ctx := t.Context()
	createCRD(t, ts, devicesCRD(t))
	createNamespace(t, ts, "inf")
	devices := ts.dynamic.Resource(devicesV1).Namespace("inf")
	for i := range 20 {
		if _, err := devices.Create(ctx, device(fmt.Sprintf("d%02d", i), map[string]any{"model": "m"}), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// Watches are counted in apiserver_request_total when they end.
	openWatches := func() float64 {
		return ts.metric("apiserver_longrunning_requests", map[string]string{"verb": "WATCH", "resource": "devices", "group": "example.com"})
	}
	lists := func() float64 {
		return ts.metric("apiserver_request_total", map[string]string{"verb": "LIST", "resource": "devices", "group": "example.com"})
	}
	listsBefore, watchesBefore := lists(), openWatches()
	factory := dynamicinformer.NewFilteredDynamicSharedInformerFactory(ts.dynamic, 0, "inf", nil)
	inf := factory.ForResource(devicesV1).Informer()
	stop := make(chan struct{})
	factory.Start(stop)
	defer func() {
		close(stop)
		factory.Shutdown()
	}()
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("informer did not sync")
	}
	if n := len(inf.GetStore().List()); n != 20 {
		t.Errorf("informer synced %d objects, want 20", n)
	}
	if d := lists() - listsBefore; d != 0 {
		t.Errorf("the informer listed %v times; client-go's default is WatchList (one watch)", d)
	}
	if d := openWatches() - watchesBefore; d < 1 {
		t.Errorf("the informer has no watch open")
	}
	if _, err := devices.Patch(ctx, "d03", types.MergePatchType, []byte(`{"spec":{"model":"new"}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "informer sees the patch", func() (bool, error) {
		obj, ok, err := inf.GetStore().GetByKey("inf/d03")
		if !ok || err != nil {
			return false, err
		}
		m, _, _ := unstructured.NestedString(obj.(*unstructured.Unstructured).Object, "spec", "model")
		return m == "new", nil
	})
}

// --max-objects and --max-bytes apply to custom resources like to built-in
// ones.
func TestCustomResourceBudget(t *testing.T) {
	cfg := testConfig(t)
	cfg.Memory.MaxObjects = []string{"devices.example.com#5"}
	cfg.Memory.MaxBytes = []string{"gadgets.example.com#2Ki"}
	ts := startServer(t, cfg)
	ctx := t.Context()
	createCRD(t, ts, devicesCRD(t))
	createNamespace(t, ts, "budget")
	devices := ts.dynamic.Resource(devicesV1).Namespace("budget")
	for i := range 5 {
		if _, err := devices.Create(ctx, device(fmt.Sprintf("d%d", i), map[string]any{"model": "m"}), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	_, err := devices.Create(ctx, device("d5", map[string]any{"model": "m"}), metav1.CreateOptions{})
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "devices.example.com") {
		t.Fatalf("sixth device: got %v, want 403 naming devices.example.com", err)
	}
	if err := devices.Delete(ctx, "d0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "a create after a delete", func() (bool, error) {
		_, err := devices.Create(ctx, device("d5", map[string]any{"model": "m"}), metav1.CreateOptions{})
		return err == nil, err
	})

	gadgetsCRD := devicesCRD(t)
	gadgetsCRD.Name, gadgetsCRD.Spec.Names = "gadgets.example.com", apiextensionsv1.CustomResourceDefinitionNames{
		Plural: "gadgets", Singular: "gadget", Kind: "Gadget", ListKind: "GadgetList"}
	createCRD(t, ts, gadgetsCRD)
	gadgets := ts.dynamic.Resource(devicesV1.GroupVersion().WithResource("gadgets")).Namespace("budget")
	gadget := func(name string) *unstructured.Unstructured {
		g := device(name, map[string]any{"model": "m"})
		g.SetKind("Gadget")
		g.SetAnnotations(map[string]string{"note": strings.Repeat("x", 1024)})
		return g
	}
	if _, err := gadgets.Create(ctx, gadget("g0"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err = gadgets.Create(ctx, gadget("g1"), metav1.CreateOptions{})
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "--max-bytes=gadgets.example.com#2Ki") {
		t.Fatalf("a gadget beyond 2Ki: got %v, want 403 naming --max-bytes=gadgets.example.com#2Ki", err)
	}
}

// Deleting a CRD deletes its objects; CRDs and objects survive a restart.
func TestCustomResourceLifecycle(t *testing.T) {
	cfg := testConfig(t)
	ts := startServer(t, cfg)
	ctx := t.Context()
	createCRD(t, ts, devicesCRD(t))
	createNamespace(t, ts, "life")
	devices := func() dynamic.ResourceInterface { return ts.dynamic.Resource(devicesV1).Namespace("life") }
	created, err := devices().Create(ctx, device("keep", map[string]any{"model": "m"}), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	ts.stop()
	ts = startServer(t, cfg)
	eventually(t, 10*time.Second, "devices served after the restart", func() (bool, error) {
		got, err := devices().Get(ctx, "keep", metav1.GetOptions{})
		return err == nil && got.GetUID() == created.GetUID(), err
	})

	crds := ts.crds().ApiextensionsV1().CustomResourceDefinitions()
	if err := crds.Delete(ctx, "devices.example.com", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the CRD deleted", func() (bool, error) {
		_, err := crds.Get(ctx, "devices.example.com", metav1.GetOptions{})
		return apierrors.IsNotFound(err), err
	})
	resp, err := ts.backend.Client().Get(ctx, "/registry/example.com/devices/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) != 0 {
		t.Errorf("%d objects left in etcd after their CRD was deleted", len(resp.Kvs))
	}
	// A new CRD of the same name starts empty.
	createCRD(t, ts, devicesCRD(t))
	eventually(t, 10*time.Second, "the recreated CRD is empty", func() (bool, error) {
		l, err := devices().List(ctx, metav1.ListOptions{})
		return err == nil && len(l.Items) == 0, err
	})
}

// --custom-resources=false builds no apiextensions server.
func TestCustomResourcesOff(t *testing.T) {
	cfg := testConfig(t)
	cfg.Server.CustomResources = false
	ts := startServer(t, cfg)
	_, err := ts.crds().ApiextensionsV1().CustomResourceDefinitions().List(t.Context(), metav1.ListOptions{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("listing CRDs with --%s=false: got %v, want 404", config.FlagCustomResources, err)
	}
	groups, err := ts.client.Discovery().ServerGroups()
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range groups.Groups {
		if g.Name == apiextensionsv1.GroupName {
			t.Errorf("apiextensions.k8s.io in discovery with --%s=false", config.FlagCustomResources)
		}
	}
	var status int
	ts.client.Discovery().RESTClient().Get().AbsPath("/apis/example.com/v1/devices").Do(t.Context()).StatusCode(&status)
	if status != http.StatusNotFound {
		t.Errorf("unknown path: status %d, want 404", status)
	}
}

// A watch of a custom resource from a compacted revision ends with 410
// Gone, cached (after a restart, the cache's history starts after the
// compaction) and uncached.
func TestCustomResourceWatchExpired(t *testing.T) {
	cfg := testConfig(t)
	cfg.Cache.Sizes = []string{"gadgets.example.com#0"}
	ts := startServer(t, cfg)
	ctx := t.Context()
	gadgets := devicesCRD(t)
	gadgets.Name, gadgets.Spec.Names = "gadgets.example.com", apiextensionsv1.CustomResourceDefinitionNames{
		Plural: "gadgets", Singular: "gadget", Kind: "Gadget", ListKind: "GadgetList"}
	createCRD(t, ts, devicesCRD(t))
	createCRD(t, ts, gadgets)
	cached := newSubject(t, ts, "devices", "Device", true)
	cached.gvr = devicesV1
	uncached := newSubject(t, ts, "gadgets", "Gadget", false)
	uncached.gvr = devicesV1.GroupVersion().WithResource("gadgets")
	old := map[*listWatchSubject]string{}
	for _, s := range []*listWatchSubject{cached, uncached} {
		old[s] = s.create(t, "old").GetResourceVersion()
		for i := range 5 {
			s.relabel(t, "old", fmt.Sprint(i))
		}
	}
	resp, err := ts.backend.Client().Get(ctx, "compact-marker")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ts.backend.Client().Compact(ctx, resp.Header.Revision); err != nil {
		t.Fatal(err)
	}
	expectExpired(t, uncached, old[uncached])
	ts.stop()
	ts = startServer(t, cfg)
	cached.ts, uncached.ts = ts, ts
	eventually(t, 10*time.Second, "devices served after the restart", func() (bool, error) {
		_, err := cached.client().Get(ctx, "old", metav1.GetOptions{})
		return err == nil, err
	})
	expectExpired(t, cached, old[cached])
	expectExpired(t, uncached, old[uncached])
}

// openAPIV3Paths are the group versions /openapi/v3 lists.
func openAPIV3Paths(ctx context.Context, ts *testServer) (map[string]any, error) {
	body, err := ts.client.Discovery().RESTClient().Get().AbsPath("/openapi/v3").DoRaw(ctx)
	if err != nil {
		return nil, err
	}
	var idx struct {
		Paths map[string]any `json:"paths"`
	}
	err = json.Unmarshal(body, &idx)
	return idx.Paths, err
}
