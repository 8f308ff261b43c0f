package registry

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The catalog names each resource as kube-apiserver does: discovery's
// kind, singular name, scope, short names and categories (what kubectl
// reads), and the etcd key prefix, so that etcd data is laid out as on a
// cluster (pkg/registry/*/storage in k8s.io/kubernetes).
func TestCatalog(t *testing.T) {
	type entry struct {
		kind, singular string
		namespaced     bool
		shortNames     []string
		categories     []string
		keyPrefix      string
	}
	want := map[schema.GroupVersionResource]entry{
		{Version: "v1", Resource: "namespaces"}:                                               {"Namespace", "namespace", false, []string{"ns"}, nil, "namespaces"},
		{Version: "v1", Resource: "pods"}:                                                     {"Pod", "pod", true, []string{"po"}, []string{"all"}, "pods"},
		{Version: "v1", Resource: "nodes"}:                                                    {"Node", "node", false, []string{"no"}, nil, "minions"},
		{Version: "v1", Resource: "configmaps"}:                                               {"ConfigMap", "configmap", true, []string{"cm"}, nil, "configmaps"},
		{Version: "v1", Resource: "secrets"}:                                                  {"Secret", "secret", true, nil, nil, "secrets"},
		{Version: "v1", Resource: "services"}:                                                 {"Service", "service", true, []string{"svc"}, []string{"all"}, "services/specs"},
		{Version: "v1", Resource: "endpoints"}:                                                {"Endpoints", "endpoints", true, []string{"ep"}, nil, "services/endpoints"},
		{Version: "v1", Resource: "events"}:                                                   {"Event", "event", true, []string{"ev"}, nil, "events"},
		{Version: "v1", Resource: "serviceaccounts"}:                                          {"ServiceAccount", "serviceaccount", true, []string{"sa"}, nil, "serviceaccounts"},
		{Group: "coordination.k8s.io", Version: "v1", Resource: "leases"}:                     {"Lease", "lease", true, nil, nil, "leases"},
		{Group: "discovery.k8s.io", Version: "v1", Resource: "endpointslices"}:                {"EndpointSlice", "endpointslice", true, nil, nil, "endpointslices"},
		{Group: "networking.k8s.io", Version: "v1", Resource: "servicecidrs"}:                 {"ServiceCIDR", "servicecidr", false, nil, nil, "servicecidrs"},
		{Group: "resource.k8s.io", Version: "v1", Resource: "resourceslices"}:                 {"ResourceSlice", "resourceslice", false, nil, nil, "resourceslices"},
		{Group: "certificates.k8s.io", Version: "v1", Resource: "certificatesigningrequests"}: {"CertificateSigningRequest", "certificatesigningrequest", false, []string{"csr"}, nil, "certificatesigningrequests"},
		{Group: "certificates.k8s.io", Version: "v1", Resource: "podcertificaterequests"}:     {"PodCertificateRequest", "podcertificaterequest", true, nil, nil, "podcertificaterequests"},
		{Group: "storage.k8s.io", Version: "v1", Resource: "storageclasses"}:                  {"StorageClass", "storageclass", false, []string{"sc"}, nil, "storageclasses"},
		{Group: "storage.k8s.io", Version: "v1", Resource: "volumeattachments"}:               {"VolumeAttachment", "volumeattachment", false, nil, nil, "volumeattachments"},
		{Group: "storage.k8s.io", Version: "v1", Resource: "csinodes"}:                        {"CSINode", "csinode", false, nil, nil, "csinodes"},
		{Group: "storage.k8s.io", Version: "v1", Resource: "csidrivers"}:                      {"CSIDriver", "csidriver", false, nil, nil, "csidrivers"},
		{Group: "node.k8s.io", Version: "v1", Resource: "runtimeclasses"}:                     {"RuntimeClass", "runtimeclass", false, nil, nil, "runtimeclasses"},
	}
	defs := catalog()
	if len(defs) != len(want) {
		t.Errorf("%d resources, want %d", len(defs), len(want))
	}
	for _, d := range defs {
		w, ok := want[d.gvr]
		if !ok {
			t.Errorf("unexpected resource %s", d.gvr)
			continue
		}
		got := entry{d.kind, d.singular, d.namespaced, d.shortNames, d.categories, d.keyPrefix}
		if !reflect.DeepEqual(got, w) {
			t.Errorf("%s: %+v, want %+v", d.gvr.Resource, got, w)
		}
	}
	api, err := New()
	if err != nil {
		t.Fatal(err)
	}
	prefixes := api.KeyPrefixes()
	for gvr, w := range want {
		if prefixes[gvr.GroupResource()] != w.keyPrefix {
			t.Errorf("KeyPrefixes[%s] = %q, want %q", gvr.GroupResource(), prefixes[gvr.GroupResource()], w.keyPrefix)
		}
	}
}

// Each New is a world of its own: servers in one process share no
// definitions or scheme.
func TestNewIsFresh(t *testing.T) {
	a, err := New()
	if err != nil {
		t.Fatal(err)
	}
	b, err := New()
	if err != nil {
		t.Fatal(err)
	}
	if a.Scheme() == b.Scheme() || a.defs[0] == b.defs[0] {
		t.Error("two APIs share their scheme or definitions")
	}
}

// The scheme registers every kind under its version and the internal
// one, defaults it on decode, and converts the field selectors the kind
// supports, refusing others with kube-apiserver's message.
func TestScheme(t *testing.T) {
	api, err := New()
	if err != nil {
		t.Fatal(err)
	}
	s := api.Scheme()
	for _, d := range api.defs {
		for _, v := range []string{d.gvr.Version, runtime.APIVersionInternal} {
			gvk := d.gvr.GroupVersion().WithKind(d.kind)
			gvk.Version = v
			if !s.Recognizes(gvk) {
				t.Errorf("%s not registered", gvk)
			}
		}
	}

	decoded, _, err := api.Codecs().UniversalDecoder(corev1.SchemeGroupVersion).Decode(
		[]byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"containers":[{"name":"c","image":"busybox"}]}}`), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	pod := decoded.(*corev1.Pod)
	if pod.Spec.RestartPolicy != corev1.RestartPolicyAlways || pod.Spec.Containers[0].ImagePullPolicy != corev1.PullAlways {
		t.Errorf("decoded pod not defaulted: %+v", pod.Spec)
	}

	podGVK := corev1.SchemeGroupVersion.WithKind("Pod")
	for _, label := range []string{"metadata.name", "metadata.namespace", "spec.nodeName", "status.phase"} {
		if _, _, err := s.ConvertFieldLabel(podGVK, label, "x"); err != nil {
			t.Errorf("field selector %s: %v", label, err)
		}
	}
	if _, _, err := s.ConvertFieldLabel(podGVK, "spec.containers", "x"); err == nil || err.Error() != "field label not supported: spec.containers" {
		t.Errorf("unsupported field selector: %v", err)
	}
	nsGVK := corev1.SchemeGroupVersion.WithKind("Namespace")
	if _, _, err := s.ConvertFieldLabel(nsGVK, "spec.nodeName", "x"); err == nil {
		t.Error("namespaces accept a pod field selector")
	}
}
