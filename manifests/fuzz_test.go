package manifests

import (
	"strings"
	"testing"
)

// decode reads files from the manifests directory: anything there must
// give objects with apiVersion, kind and name, or an error naming the
// document, and never a panic. Seeds beyond these live in
// testdata/fuzz/FuzzDecode/.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		"",
		"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n",
		"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n---\napiVersion: v1\nkind: Secret\nmetadata:\n  name: b\n",
		`{"apiVersion":"v1","kind":"List","items":[{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"}}]}`,
		"---\n---\n",
		"kind: ConfigMap\n",
		"apiVersion: v1\nkind: List\nitems: 3\n",
		"a: b: c\n",
		"[1, 2]\n",
		`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":1}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		objs, err := decode(data)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "document ") {
				t.Errorf("error %q does not name the document", err)
			}
			return
		}
		for _, o := range objs {
			if o == nil || o.Object == nil {
				t.Fatalf("nil object from %q", data)
			}
			if o.GetAPIVersion() == "" || o.GetKind() == "" || o.GetName() == "" {
				t.Errorf("object without apiVersion, kind or name from %q", data)
			}
		}
	})
}
