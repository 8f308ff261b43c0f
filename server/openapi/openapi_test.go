package openapi

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"k8s.io/kube-openapi/pkg/common"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"github.com/kubestore/kubestore/server/openapi/generated"
)

// refs are the reference callbacks of the OpenAPI v2 and v3 builders
// (k8s.io/kube-openapi pkg/builder and pkg/builder3).
var refs = []struct {
	name string
	ref  common.ReferenceCallback
}{
	{"v2", func(name string) spec.Ref { return spec.MustCreateRef("#/definitions/" + name) }},
	{"v3", func(name string) spec.Ref { return spec.MustCreateRef("#/components/schemas/" + name) }},
}

// The embedded data decodes to exactly what openapi-gen's code builds: the
// same Go values (the dynamic types of defaults included) and the same
// JSON, definition by definition. A failure here after make generate
// means scripts/openapidata and the decoder disagree.
func TestDefinitionsMatchGenerated(t *testing.T) {
	for _, r := range refs {
		t.Run(r.name, func(t *testing.T) {
			want := generated.GetOpenAPIDefinitions(r.ref)
			got := GetOpenAPIDefinitions(r.ref)
			if len(got) != len(want) {
				t.Errorf("%d definitions, want %d", len(got), len(want))
			}
			names := make([]string, 0, len(want))
			for name := range want {
				names = append(names, name)
			}
			slices.Sort(names)
			for _, name := range names {
				g, ok := got[name]
				if !ok {
					t.Errorf("%s: missing", name)
					continue
				}
				w := want[name]
				wj, err := json.Marshal(w.Schema)
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				gj, err := json.Marshal(g.Schema)
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				if string(gj) != string(wj) {
					t.Errorf("%s: JSON\n%s\nwant\n%s", name, gj, wj)
				}
				if !reflect.DeepEqual(g, w) {
					t.Errorf("%s: the decoded definition differs from the generated one (JSON equal: %t)", name, string(gj) == string(wj))
				}
			}
		})
	}
}

// Every call returns values of its own, as the generated code does: a
// caller that changes one cannot change the next.
func TestDefinitionsAreFresh(t *testing.T) {
	ref := refs[0].ref
	first := GetOpenAPIDefinitions(ref)
	const pod = "io.k8s.api.core.v1.PodSpec"
	d, ok := first[pod]
	if !ok {
		t.Fatalf("no %s", pod)
	}
	d.Schema.Properties["containers"].Extensions["x-kubernetes-list-type"] = "changed"
	d.Schema.Required[0] = "changed"
	d.Schema.Properties["containers"].Items.Schema.Description = "changed"
	delete(first, pod)

	second := GetOpenAPIDefinitions(ref)
	if !reflect.DeepEqual(second, generated.GetOpenAPIDefinitions(ref)) {
		t.Error("a change to one call's definitions shows in the next call's")
	}
}

// Corrupt data is an error, not a panic or a huge allocation.
func TestDecodeCorrupt(t *testing.T) {
	ref := refs[0].ref
	for _, n := range []int{0, 1, 2, 10, 1000, len(definitions) / 2, len(definitions) - 1} {
		if _, err := decode(definitions[:n], ref); err == nil {
			t.Errorf("the first %d bytes: no error", n)
		}
	}
	if _, err := decode(definitions+"x", ref); err == nil || !strings.Contains(err.Error(), "after the definitions") {
		t.Errorf("a byte more: %v", err)
	}
	if _, err := decode("\x01\xff\xff\xff\xff\xff\xff\xff\xff\x7f", ref); err == nil {
		t.Error("a string table of 2^63 strings: no error")
	}
}

func BenchmarkGetOpenAPIDefinitions(b *testing.B) {
	ref := refs[0].ref
	b.Run("embedded", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			GetOpenAPIDefinitions(ref)
		}
	})
	b.Run("generated", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			generated.GetOpenAPIDefinitions(ref)
		}
	})
}
