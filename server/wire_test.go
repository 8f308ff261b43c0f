package server_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"
)

// Every wire format kube-apiserver speaks: JSON, YAML and protobuf for
// reads, writes and watches.
func TestWireFormats(t *testing.T) {
	ts := startServer(t, testConfig(t))
	ctx := t.Context()

	t.Run("protobuf client", func(t *testing.T) {
		cfg := rest.CopyConfig(ts.rest)
		cfg.ContentType = runtime.ContentTypeProtobuf
		cfg.AcceptContentTypes = runtime.ContentTypeProtobuf
		pb := kubernetes.NewForConfigOrDie(cfg)
		cm, err := pb.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "pb"}, Data: map[string]string{"k": "v"}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		w, err := pb.CoreV1().ConfigMaps("default").Watch(ctx, metav1.ListOptions{ResourceVersion: cm.ResourceVersion})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		if _, err := pb.CoreV1().ConfigMaps("default").Update(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "pb"}, Data: map[string]string{"k": "v2"}}, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		select {
		case ev := <-w.ResultChan():
			if got := ev.Object.(*corev1.ConfigMap); ev.Type != "MODIFIED" || got.Data["k"] != "v2" {
				t.Errorf("protobuf watch: %s %v", ev.Type, got.Data)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("no protobuf watch event")
		}
		list, err := pb.CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{})
		if err != nil || len(list.Items) == 0 {
			t.Fatalf("protobuf list: %v, %d items", err, len(list.Items))
		}
	})

	raw := ts.client.CoreV1().RESTClient()
	for _, tc := range []struct {
		accept string
		decode func([]byte, any) error
	}{
		{"application/json", json.Unmarshal},
		{"application/yaml", func(b []byte, v any) error { return yaml.Unmarshal(b, v) }},
	} {
		t.Run(tc.accept, func(t *testing.T) {
			body, err := raw.Get().AbsPath("/api/v1/namespaces/default").SetHeader("Accept", tc.accept).DoRaw(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var ns corev1.Namespace
			if err := tc.decode(body, &ns); err != nil || ns.Name != "default" || ns.Kind != "Namespace" {
				t.Errorf("%s: %v, %+v\n%s", tc.accept, err, ns.TypeMeta, body)
			}
		})
	}
	t.Run("YAML request body", func(t *testing.T) {
		body := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: from-yaml\ndata:\n  k: v\n"
		res := raw.Post().AbsPath("/api/v1/namespaces/default/configmaps").SetHeader("Content-Type", "application/yaml").Body([]byte(body)).Do(ctx)
		if err := res.Error(); err != nil {
			t.Fatal(err)
		}
		cm, err := ts.client.CoreV1().ConfigMaps("default").Get(ctx, "from-yaml", metav1.GetOptions{})
		if err != nil || cm.Data["k"] != "v" {
			t.Errorf("created from YAML: %v %v", err, cm.Data)
		}
	})

	t.Run("aggregated discovery", func(t *testing.T) {
		for _, path := range []string{"/api", "/apis"} {
			body, err := raw.Get().AbsPath(path).SetHeader("Accept", "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList").DoRaw(ctx)
			if err != nil {
				t.Fatal(err)
			}
			s := string(body)
			if !strings.Contains(s, `"kind":"APIGroupDiscoveryList"`) {
				t.Errorf("%s: not an aggregated discovery document: %.200s", path, s)
			}
			want := map[string][]string{"/api": {`"resource":"pods"`, `"resource":"configmaps"`}, "/apis": {`"coordination.k8s.io"`, `"discovery.k8s.io"`, `"resource":"leases"`}}[path]
			for _, w := range want {
				if !strings.Contains(s, w) {
					t.Errorf("%s aggregated discovery lacks %s", path, w)
				}
			}
		}
	})

	t.Run("stored in etcd as protobuf under kube-apiserver's keys", func(t *testing.T) {
		if _, err := ts.client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "s1"}, Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}
		if _, err := ts.client.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		for _, key := range []string{"/registry/configmaps/default/from-yaml", "/registry/minions/n1", "/registry/services/specs/default/s1", "/registry/namespaces/default"} {
			resp, err := ts.backend.Client().Get(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			if len(resp.Kvs) != 1 {
				t.Errorf("%s: not in etcd", key)
				continue
			}
			if v := resp.Kvs[0].Value; !strings.HasPrefix(string(v), "k8s\x00") {
				t.Errorf("%s is not stored as protobuf: %q", key, v[:min(len(v), 16)])
			}
		}
	})

	t.Run("openapi v3", func(t *testing.T) {
		body, err := raw.Get().AbsPath("/openapi/v3").DoRaw(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var idx struct {
			Paths map[string]any `json:"paths"`
		}
		if err := json.Unmarshal(body, &idx); err != nil {
			t.Fatal(err)
		}
		for _, p := range []string{"api/v1", "apis/coordination.k8s.io/v1", "apis/discovery.k8s.io/v1", "apis/networking.k8s.io/v1", "apis/resource.k8s.io/v1"} {
			if _, ok := idx.Paths[p]; !ok {
				t.Errorf("/openapi/v3 lacks %s: %v", p, idx.Paths)
			}
		}
		spec, err := raw.Get().AbsPath("/openapi/v3/api/v1").DoRaw(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(spec), "io.k8s.api.core.v1.Pod") {
			t.Errorf("/openapi/v3/api/v1 lacks the Pod schema")
		}
	})

	// kubectl validates a kind by /openapi/v2 when it finds no PATCH of
	// it in /openapi/v3 (a TokenReview, a SelfSubjectAccessReview): every
	// kind a client may create has its schema there.
	t.Run("openapi v2 has every kind a client creates", func(t *testing.T) {
		body, err := raw.Get().AbsPath("/openapi/v2").DoRaw(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			Definitions map[string]struct {
				GVK []struct{ Group, Version, Kind string } `json:"x-kubernetes-group-version-kind"`
			} `json:"definitions"`
		}
		if err := json.Unmarshal(body, &doc); err != nil {
			t.Fatal(err)
		}
		have := map[string]bool{}
		for _, d := range doc.Definitions {
			for _, g := range d.GVK {
				have[g.Group+"/"+g.Version+"/"+g.Kind] = true
			}
		}
		lists, err := ts.client.Discovery().ServerPreferredResources()
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, l := range lists {
			gv, err := schema.ParseGroupVersion(l.GroupVersion)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range l.APIResources {
				if strings.Contains(r.Name, "/") || !slices.Contains(r.Verbs, "create") {
					continue
				}
				if gv.Group == "apiextensions.k8s.io" && slices.Contains(r.Verbs, "patch") {
					// Served by the custom resources' server, outside this
					// document; kubectl finds its PATCH in /openapi/v3 and
					// validates it on the server.
					continue
				}
				n++
				if !have[gv.Group+"/"+gv.Version+"/"+r.Kind] {
					t.Errorf("/openapi/v2 has no schema of %s %s (resource %s): kubectl create -f of one fails its validation", gv, r.Kind, r.Name)
				}
			}
		}
		t.Logf("/openapi/v2 has the schema of all %d kinds a client creates", n)
	})
}
