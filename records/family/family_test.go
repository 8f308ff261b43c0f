package family

import (
	"go/ast"
	"go/parser"
	"go/token"
	"strings"
	"testing"
)

// No family's records start as another's do: a listing or deletion of
// one family never reaches another's (mirror/ and mirror-rules/,
// clusterip/ and clusterip-range), and no two families share a name.
func TestFamiliesArePrefixFree(t *testing.T) {
	starts := func(f Family) []string {
		if f.shape == nodeDirectory {
			return []string{f.Start(), f.name + "/"}
		}
		return []string{f.Start()}
	}
	for i, f := range All {
		for j, g := range All {
			if i == j {
				continue
			}
			for _, a := range starts(f) {
				for _, b := range starts(g) {
					if strings.HasPrefix(b, a) {
						t.Errorf("family %s's records start with %q, and so do some of %s's (%q)", f.name, a, g.name, b)
					}
				}
			}
		}
	}
}

// A family kept per node delimits the node: listing edge-1's records
// never reads edge-10's (node names sharing a prefix read each other's
// records).
func TestNodesAreDelimited(t *testing.T) {
	for _, f := range All {
		switch f.shape {
		case nodeDirectory:
			other := f.For("edge-10", "key")
			if strings.HasPrefix(other, f.NodeDir("edge-1")+"/") {
				t.Errorf("%s: edge-1's directory %s/ lists edge-10's %s", f.name, f.NodeDir("edge-1"), other)
			}
			if mine := f.For("edge-1", "key"); !strings.HasPrefix(mine, f.NodeDir("edge-1")+"/") {
				t.Errorf("%s: edge-1's directory %s/ does not list its %s", f.name, f.NodeDir("edge-1"), mine)
			}
		case perNode:
			if key, _ := f.Key(f.For("edge-1")); key != "edge-1" {
				t.Errorf("%s: the record of edge-1 is the node %q's", f.name, key)
			}
		}
	}
}

func TestNames(t *testing.T) {
	for _, tc := range []struct{ got, want string }{
		{MirrorTokens.For("edge-1", "abc"), "mirror-tokens@edge-1/abc"},
		{MirrorConfigured.For("edge-1"), "mirror-configured@edge-1"},
		{Checkpoints.For("rule", "ns"), "mirror/rule/ns"},
		{ClusterIPs.For("10.0.0.1"), "clusterip/10.0.0.1"},
		{CARotations.For("0123", "members", "m1"), "ca-rotation/0123/members/m1"},
		{DataFormat.Name(), "data-format"},
		{MirrorPending.Dir(), "mirror-pending"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
	if key, ok := ClusterIPs.Key("clusterip/10.0.0.1"); !ok || key != "10.0.0.1" {
		t.Errorf("ClusterIPs.Key(clusterip/10.0.0.1) = %q, %v", key, ok)
	}
	if _, ok := ClusterIPs.Key("clusterip-range"); ok {
		t.Error("clusterip-range is a record of ClusterIPs")
	}
}

// All is every Family this file declares.
func TestAllIsEveryFamily(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "family.go", nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	declared := 0
	ast.Inspect(f, func(n ast.Node) bool {
		if lit, ok := n.(*ast.CompositeLit); ok {
			if id, ok := lit.Type.(*ast.Ident); ok && id.Name == "Family" {
				declared++
			}
		}
		return true
	})
	if declared != len(All) {
		t.Errorf("family.go declares %d families, All has %d", declared, len(All))
	}
}
