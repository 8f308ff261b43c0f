package server_test

import (
	"errors"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"
)

// builtin is one served resource and a minimal valid object of it.
type builtin struct {
	gvr        schema.GroupVersionResource
	namespaced bool
	object     string // YAML without metadata.name
}

var builtins = []builtin{
	{schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}, false, "apiVersion: v1\nkind: Namespace\n"},
	{schema.GroupVersionResource{Version: "v1", Resource: "pods"}, true, "apiVersion: v1\nkind: Pod\nspec:\n  containers:\n  - name: c\n    image: busybox:1.36\n"},
	{schema.GroupVersionResource{Version: "v1", Resource: "nodes"}, false, "apiVersion: v1\nkind: Node\nspec:\n  podCIDR: 10.0.0.0/24\n"},
	{schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, true, "apiVersion: v1\nkind: ConfigMap\ndata:\n  k: v\n"},
	{schema.GroupVersionResource{Version: "v1", Resource: "secrets"}, true, "apiVersion: v1\nkind: Secret\nstringData:\n  k: v\n"},
	{schema.GroupVersionResource{Version: "v1", Resource: "services"}, true, "apiVersion: v1\nkind: Service\nspec:\n  ports:\n  - port: 80\n"},
	{schema.GroupVersionResource{Version: "v1", Resource: "endpoints"}, true, "apiVersion: v1\nkind: Endpoints\nsubsets:\n- addresses:\n  - ip: 10.0.0.1\n  ports:\n  - port: 80\n"},
	{schema.GroupVersionResource{Version: "v1", Resource: "events"}, true, "apiVersion: v1\nkind: Event\ninvolvedObject:\n  kind: Pod\n  name: p\n  namespace: default\nreason: Started\nmessage: hello\n"},
	{schema.GroupVersionResource{Version: "v1", Resource: "serviceaccounts"}, true, "apiVersion: v1\nkind: ServiceAccount\n"},
	{schema.GroupVersionResource{Group: "coordination.k8s.io", Version: "v1", Resource: "leases"}, true, "apiVersion: coordination.k8s.io/v1\nkind: Lease\nspec:\n  holderIdentity: a\n  leaseDurationSeconds: 10\n"},
	{schema.GroupVersionResource{Group: "discovery.k8s.io", Version: "v1", Resource: "endpointslices"}, true, "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\naddressType: IPv4\nendpoints:\n- addresses: [10.0.0.1]\n"},
	{schema.GroupVersionResource{Group: "networking.k8s.io", Version: "v1", Resource: "servicecidrs"}, false, "apiVersion: networking.k8s.io/v1\nkind: ServiceCIDR\nspec:\n  cidrs: [10.96.0.0/16]\n"},
	{schema.GroupVersionResource{Group: "resource.k8s.io", Version: "v1", Resource: "resourceslices"}, false, "apiVersion: resource.k8s.io/v1\nkind: ResourceSlice\nspec:\n  driver: dra.example.com\n  nodeName: worker\n  pool:\n    name: worker\n    resourceSliceCount: 1\n  devices:\n  - name: gpu-0\n    attributes:\n      model:\n        string: t4\n"},
	{schema.GroupVersionResource{Group: "events.k8s.io", Version: "v1", Resource: "events"}, true, "apiVersion: events.k8s.io/v1\nkind: Event\neventTime: \"2026-11-24T00:00:00.000000Z\"\nreportingController: kubestore.io/test\nreportingInstance: t1\naction: Testing\nreason: Started\ntype: Normal\nnote: hello\nregarding:\n  kind: Pod\n  name: p\n  namespace: default\n"},
	// A PKCS#10 request (PEM, public key only) for a signer no controller serves.
	{schema.GroupVersionResource{Group: "certificates.k8s.io", Version: "v1", Resource: "certificatesigningrequests"}, false, "apiVersion: certificates.k8s.io/v1\nkind: CertificateSigningRequest\nspec:\n  signerName: example.com/crud\n  usages: [client auth]\n  request: LS0tLS1CRUdJTiBDRVJUSUZJQ0FURSBSRVFVRVNULS0tLS0KTUlISU1IRUNBUUF3RHpFTk1Bc0dBMVVFQXhNRVkzSjFaREJaTUJNR0J5cUdTTTQ5QWdFR0NDcUdTTTQ5QXdFSApBMElBQkQ2MGFLUzZXL295NXF1d0J1RFpRZG9hcmRsb3NjcE5QMVB0elF1QVZNZkxHcmpPd2pCZDNteHpLaVZBCmtUK1VTYlNJYkVpemZma0cvUFhIVG5OaDRtT2dBREFLQmdncWhrak9QUVFEQWdOSEFEQkVBaUFLNEM2UCtidUcKN0tPRTluQlZWRUp2Qkl4UW9BZFZQem1XSi9ybm1BbEFpZ0lnTDliQ0kxVmh5MnZPc3QzRzZHVFR2U2h1SDhiQwpCbEQ4ZHNTbHVJbWRWUE09Ci0tLS0tRU5EIENFUlRJRklDQVRFIFJFUVVFU1QtLS0tLQo=\n"},
	// kubelet's empty PKCS#10 stub request (DER, public key only).
	{schema.GroupVersionResource{Group: "certificates.k8s.io", Version: "v1", Resource: "podcertificaterequests"}, true, "apiVersion: certificates.k8s.io/v1\nkind: PodCertificateRequest\nspec:\n  signerName: example.com/crud\n  podName: p\n  podUID: 9d0f5c2e-1\n  serviceAccountName: default\n  serviceAccountUID: 9d0f5c2e-2\n  nodeName: n1\n  nodeUID: 9d0f5c2e-3\n  stubPKCS10Request: MIG6MGICAQAwADBZMBMGByqGSM49AgEGCCqGSM49AwEHA0IABC4rM7RtOpvjeqSe30NeiAG28aQ43cdnMmiEPMmpEzV7J5Evy3trYDE5dM51q+jgBVIcr4zNkozwz593cAVKpW6gADAKBggqhkjOPQQDAgNIADBFAiBl3xbm4hgCmjWBbEMT4bRtUzppJFimX/kfgzPBUthh6QIhAPOl84Yzdo0UMhQIC6Gl/9BUtkZv58Xz33lFG5Ls2AtZ\n"},
	{schema.GroupVersionResource{Group: "storage.k8s.io", Version: "v1", Resource: "storageclasses"}, false, "apiVersion: storage.k8s.io/v1\nkind: StorageClass\nprovisioner: csi.example.com\nparameters:\n  type: ssd\n"},
	{schema.GroupVersionResource{Group: "storage.k8s.io", Version: "v1", Resource: "volumeattachments"}, false, "apiVersion: storage.k8s.io/v1\nkind: VolumeAttachment\nspec:\n  attacher: csi.example.com\n  nodeName: node1\n  source:\n    persistentVolumeName: pv1\n"},
	{schema.GroupVersionResource{Group: "storage.k8s.io", Version: "v1", Resource: "csinodes"}, false, "apiVersion: storage.k8s.io/v1\nkind: CSINode\nspec:\n  drivers:\n  - name: csi.example.com\n    nodeID: node1\n    topologyKeys: [topology.example.com/zone]\n"},
	{schema.GroupVersionResource{Group: "storage.k8s.io", Version: "v1", Resource: "csidrivers"}, false, "apiVersion: storage.k8s.io/v1\nkind: CSIDriver\nspec:\n  attachRequired: false\n"},
	{schema.GroupVersionResource{Group: "node.k8s.io", Version: "v1", Resource: "runtimeclasses"}, false, "apiVersion: node.k8s.io/v1\nkind: RuntimeClass\nhandler: runc\n"},
}

// builtinFor is the entry of resource in builtins.
func builtinFor(resource string) builtin {
	for _, b := range builtins {
		if b.gvr.Resource == resource && b.gvr.Group != "events.k8s.io" {
			return b
		}
	}
	panic("no builtin " + resource)
}

func (b builtin) client(ts *testServer) dynamic.ResourceInterface {
	if b.namespaced {
		return ts.dynamic.Resource(b.gvr).Namespace("default")
	}
	return ts.dynamic.Resource(b.gvr)
}

func (b builtin) new(t *testing.T, name string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(b.object), &u.Object); err != nil {
		t.Fatal(err)
	}
	u.SetName(name)
	return u
}

// Create, get, list, update, three kinds of patch, server-side apply and
// delete on every built-in resource.
func TestCRUDEveryResource(t *testing.T) {
	ts := startServer(t, testConfig(t))
	for _, b := range builtins {
		t.Run(b.gvr.GroupResource().String(), func(t *testing.T) {
			ctx := t.Context()
			c := b.client(ts)
			// Events of both groups are one key space: each its own name.
			name := "crud-" + strings.TrimSuffix(b.gvr.Resource, "s")
			if b.gvr.Group != "" {
				name += "-" + strings.Split(b.gvr.Group, ".")[0]
			}
			created, err := c.Create(ctx, b.new(t, name), metav1.CreateOptions{})
			if err != nil {
				t.Fatalf("create: %v", err)
			}
			if created.GetUID() == "" || created.GetResourceVersion() == "" || created.GetCreationTimestamp().Time.IsZero() {
				t.Errorf("create did not set uid, resourceVersion and creationTimestamp: %v", created.Object["metadata"])
			}
			if _, err := c.Get(ctx, name, metav1.GetOptions{}); err != nil {
				t.Fatalf("get: %v", err)
			}
			list, err := c.List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name})
			if err != nil || len(list.Items) != 1 {
				t.Fatalf("list by name: %v, %d items", err, len(list.Items))
			}

			created.SetLabels(map[string]string{"step": "update"})
			updated, err := c.Update(ctx, created, metav1.UpdateOptions{})
			if err != nil || updated.GetLabels()["step"] != "update" {
				t.Fatalf("update: %v %v", err, updated.GetLabels())
			}
			// An update from a stale resourceVersion conflicts.
			if _, err := c.Update(ctx, created, metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
				t.Errorf("stale update: got %v, want 409 Conflict", err)
			}

			patches := []struct {
				typ   types.PatchType
				body  string
				label string
			}{
				{types.MergePatchType, `{"metadata":{"labels":{"step":"merge"}}}`, "merge"},
				{types.StrategicMergePatchType, `{"metadata":{"labels":{"step":"strategic"}}}`, "strategic"},
				{types.JSONPatchType, `[{"op":"replace","path":"/metadata/labels/step","value":"json"}]`, "json"},
			}
			for _, p := range patches {
				got, err := c.Patch(ctx, name, p.typ, []byte(p.body), metav1.PatchOptions{})
				if err != nil || got.GetLabels()["step"] != p.label {
					t.Errorf("%s patch: %v, labels %v", p.typ, err, got.GetLabels())
				}
			}

			applied := b.new(t, name)
			applied.SetLabels(map[string]string{"owner": "tester"})
			got, err := c.Apply(ctx, name, applied, metav1.ApplyOptions{FieldManager: "tester", Force: true})
			if err != nil || got.GetLabels()["owner"] != "tester" {
				t.Fatalf("server-side apply: %v %v", err, got)
			}
			managers := map[string]bool{}
			for _, m := range got.GetManagedFields() {
				managers[m.Manager] = true
			}
			if !managers["tester"] {
				t.Errorf("managedFields lacks the apply manager: %v", got.GetManagedFields())
			}
			// Server-side apply also creates.
			fresh := b.new(t, name+"-ssa")
			if _, err := c.Apply(ctx, fresh.GetName(), fresh, metav1.ApplyOptions{FieldManager: "tester"}); err != nil {
				t.Errorf("apply-create: %v", err)
			}

			if err := c.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
				t.Fatalf("delete: %v", err)
			}
			if b.gvr.Resource == "namespaces" {
				return // deleted by the namespace controller (TestDeletingNamespaceDeletesContent)
			}
			if _, err := c.Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Errorf("get after delete: got %v, want 404", err)
			}
		})
	}
}

// Status subresources: a status update leaves spec alone, a main update
// leaves status alone.
func TestStatusSubresources(t *testing.T) {
	ts := startServer(t, testConfig(t))
	cases := []struct {
		builtin
		status any // a status field to set: path and value
		path   []string
		spec   []string
		// specValue is what a status update tries to set spec to.
		specValue any
	}{
		{builtins[1], "Running", []string{"status", "phase"}, []string{"spec", "restartPolicy"}, "changed-by-status"},
		{builtins[2], "1.2.3", []string{"status", "nodeInfo", "kubeletVersion"}, []string{"spec", "podCIDR"}, "changed-by-status"},
		{builtins[5], []any{map[string]any{"ip": "10.9.8.7"}}, []string{"status", "loadBalancer", "ingress"}, []string{"spec", "type"}, "changed-by-status"},
		{builtinFor("servicecidrs"), []any{map[string]any{"type": "Ready", "status": "True", "reason": "Test", "message": "m", "lastTransitionTime": "2026-11-24T00:00:00Z"}},
			[]string{"status", "conditions"}, []string{"spec", "cidrs"}, []any{"10.97.0.0/16"}},
		{builtinFor("volumeattachments"), "v", []string{"status", "attachmentMetadata", "k"}, []string{"spec", "nodeName"}, "changed-by-status"},
	}
	for _, tc := range cases {
		t.Run(tc.gvr.Resource, func(t *testing.T) {
			ctx := t.Context()
			c := tc.client(ts)
			obj, err := c.Create(ctx, tc.new(t, "st"), metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			specBefore, _, _ := unstructured.NestedFieldCopy(obj.Object, tc.spec...)

			withStatus := obj.DeepCopy()
			if err := unstructured.SetNestedField(withStatus.Object, tc.status, tc.path...); err != nil {
				t.Fatal(err)
			}
			if err := unstructured.SetNestedField(withStatus.Object, tc.specValue, tc.spec...); err != nil {
				t.Fatal(err)
			}
			got, err := c.UpdateStatus(ctx, withStatus, metav1.UpdateOptions{})
			if err != nil {
				t.Fatalf("update status: %v", err)
			}
			if v, _, _ := unstructured.NestedFieldCopy(got.Object, tc.path...); v == nil {
				t.Errorf("status update did not set %v", tc.path)
			}
			if v, _, _ := unstructured.NestedFieldCopy(got.Object, tc.spec...); !equalJSON(v, specBefore) {
				t.Errorf("status update changed spec %v to %v", tc.spec, v)
			}

			main := got.DeepCopy()
			unstructured.RemoveNestedField(main.Object, "status")
			main.SetLabels(map[string]string{"x": "y"})
			after, err := c.Update(ctx, main, metav1.UpdateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if v, _, _ := unstructured.NestedFieldCopy(after.Object, tc.path...); v == nil {
				t.Errorf("an update of the main resource dropped %v", tc.path)
			}
		})
	}
}

func equalJSON(a, b any) bool {
	return yamlString(a) == yamlString(b)
}

func yamlString(v any) string {
	b, _ := yaml.Marshal(v)
	return string(b)
}

// Bad objects are refused with 422 Invalid naming the field.
func TestValidationRefusals(t *testing.T) {
	ts := startServer(t, testConfig(t))
	cases := []struct {
		name  string
		b     builtin
		edit  func(u *unstructured.Unstructured)
		field string
	}{
		{"bad name", builtins[3], func(u *unstructured.Unstructured) { u.SetName("Bad_Name") }, "metadata.name"},
		{"bad label value", builtins[3], func(u *unstructured.Unstructured) { u.SetLabels(map[string]string{"a": "not a value!"}) }, "metadata.labels"},
		{"bad generateName", builtins[3], func(u *unstructured.Unstructured) { u.SetName(""); u.SetGenerateName("UPPER-") }, "metadata.generateName"},
		{"pod without containers", builtins[1], func(u *unstructured.Unstructured) { unstructured.RemoveNestedField(u.Object, "spec", "containers") }, "spec.containers"},
		{"pod without image", builtins[1], func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedSlice(u.Object, []any{map[string]any{"name": "c"}}, "spec", "containers")
		}, "spec.containers[0].image"},
		{"service port 0", builtins[5], func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedSlice(u.Object, []any{map[string]any{"port": int64(0)}}, "spec", "ports")
		}, "spec.ports[0].port"},
		{"configmap bad key", builtins[3], func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedStringMap(u.Object, map[string]string{"bad/key": "v"}, "data")
		}, "data[bad/key]"},
		{"lease duration 0", builtins[9], func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(u.Object, int64(0), "spec", "leaseDurationSeconds")
		}, "spec.leaseDurationSeconds"},
		{"tls secret without key", builtins[4], func(u *unstructured.Unstructured) { u.Object["type"] = "kubernetes.io/tls" }, "data[tls.crt]"},
		{"endpointslice bad address", builtins[10], func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedSlice(u.Object, []any{map[string]any{"addresses": []any{"not-an-ip"}}}, "endpoints")
		}, "endpoints[0].addresses[0]"},
		{"resourceslice without a node", builtinFor("resourceslices"), func(u *unstructured.Unstructured) {
			unstructured.RemoveNestedField(u.Object, "spec", "nodeName")
		}, "spec"},
		{"servicecidr not canonical", builtinFor("servicecidrs"), func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedStringSlice(u.Object, []string{"10.96.0.1/16"}, "spec", "cidrs")
		}, "spec.cidrs[0]"},
		{"csr shorter than 10 minutes", builtinFor("certificatesigningrequests"), func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(u.Object, int64(599), "spec", "expirationSeconds")
		}, "spec.expirationSeconds"},
		{"csr without usages", builtinFor("certificatesigningrequests"), func(u *unstructured.Unstructured) { unstructured.RemoveNestedField(u.Object, "spec", "usages") }, "spec.usages"},
		{"pod certificate request of a day and a second from a kubernetes.io signer", builtinFor("podcertificaterequests"), func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(u.Object, "kubernetes.io/kube-apiserver-client-pod", "spec", "signerName")
			_ = unstructured.SetNestedField(u.Object, int64(86401), "spec", "maxExpirationSeconds")
		}, "spec.maxExpirationSeconds"},
		{"storageclass without provisioner", builtinFor("storageclasses"), func(u *unstructured.Unstructured) { delete(u.Object, "provisioner") }, "provisioner"},
		{"volumeattachment without source", builtinFor("volumeattachments"), func(u *unstructured.Unstructured) { unstructured.RemoveNestedField(u.Object, "spec", "source") }, "spec.source"},
		{"csinode bad driver name", builtinFor("csinodes"), func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedSlice(u.Object, []any{map[string]any{"name": "_bad", "nodeID": "n"}}, "spec", "drivers")
		}, "spec.drivers[0].name"},
		{"csidriver short token", builtinFor("csidrivers"), func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedSlice(u.Object, []any{map[string]any{"audience": "a", "expirationSeconds": int64(60)}}, "spec", "tokenRequests")
		}, "spec.tokenRequests[0].expirationSeconds"},
		{"runtimeclass bad handler", builtinFor("runtimeclasses"), func(u *unstructured.Unstructured) { u.Object["handler"] = "Not_A_Label" }, "handler"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			u := tc.b.new(t, "invalid")
			tc.edit(u)
			_, err := tc.b.client(ts).Create(t.Context(), u, metav1.CreateOptions{})
			if !apierrors.IsInvalid(err) {
				t.Fatalf("got %v, want 422 Invalid", err)
			}
			var status apierrors.APIStatus
			if !errors.As(err, &status) || status.Status().Details == nil {
				t.Fatalf("no status details: %v", err)
			}
			var fields []string
			for _, c := range status.Status().Details.Causes {
				fields = append(fields, c.Field)
			}
			found := false
			for _, f := range fields {
				found = found || strings.HasPrefix(f, tc.field)
			}
			if !found {
				t.Errorf("causes name %v, want %s (%v)", fields, tc.field, err)
			}
		})
	}
}

// kubectl get's columns and short names come from the server.
func TestTablesAndShortNames(t *testing.T) {
	ts := startServer(t, testConfig(t))
	ctx := t.Context()
	if _, err := builtins[1].client(ts).Create(ctx, builtins[1].new(t, "p"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var table metav1.Table
	body, err := ts.client.CoreV1().RESTClient().Get().AbsPath("/api/v1/namespaces/default/pods").
		SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").DoRaw(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(body, &table); err != nil {
		t.Fatal(err)
	}
	var cols []string
	for _, c := range table.ColumnDefinitions {
		cols = append(cols, c.Name)
	}
	if strings.Join(cols[:5], ",") != "Name,Ready,Status,Restarts,Age" {
		t.Errorf("pod columns %v", cols)
	}
	if len(table.Rows) != 1 || table.Rows[0].Cells[1] != "0/1" || table.Rows[0].Cells[2] != "Pending" {
		t.Errorf("pod row %v", table.Rows)
	}

	resources, err := ts.client.Discovery().ServerResourcesForGroupVersion("v1")
	if err != nil {
		t.Fatal(err)
	}
	short := map[string]string{}
	for _, r := range resources.APIResources {
		for _, s := range r.ShortNames {
			short[s] = r.Name
		}
	}
	for s, r := range map[string]string{"po": "pods", "cm": "configmaps", "ns": "namespaces", "no": "nodes", "svc": "services", "ep": "endpoints", "sa": "serviceaccounts", "ev": "events"} {
		if short[s] != r {
			t.Errorf("short name %s -> %q, want %s", s, short[s], r)
		}
	}
}
