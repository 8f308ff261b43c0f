package records

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/kubestore/kubestore/records/family"
)

// No Go file of kubestore outside this package (tests aside) names the
// records' key space: who reads or writes a record goes through a Store,
// and only a storage version migration asks where the records are
// (Prefix), to leave them alone.
func TestOnlyRecordsKnowsTheLayout(t *testing.T) {
	layout := regexp.MustCompile(`["/]` + regexp.QuoteMeta(dir) + `["/]`)
	prefixAllowed := map[string]bool{"maintenance/update.go": true}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	kubestoreSources(t, root, func(rel string, src []byte) {
		if loc := layout.FindIndex(src); loc != nil {
			t.Errorf("%s names the records' key space (%s): read and write records through a records.Store", rel, src[loc[0]:loc[1]])
		}
		if strings.Contains(string(src), "records.Prefix(") && !prefixAllowed[rel] {
			t.Errorf("%s asks where the records are (records.Prefix): read and write them through a records.Store", rel)
		}
	})
}

// No Go file of kubestore outside this package (tests aside) spells a
// family's name: a record's name is built from its family.Family.
func TestNoFileSpellsAFamily(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	spells := func(s string) (family.Family, bool) {
		for _, f := range family.All {
			if s == f.Start() || strings.HasPrefix(s, f.Name()+"/") || strings.HasPrefix(s, f.Name()+"@") {
				return f, true
			}
		}
		return family.Family{}, false
	}
	fset := token.NewFileSet()
	kubestoreSources(t, root, func(rel string, src []byte) {
		file, err := parser.ParseFile(fset, rel, src, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(file, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			if s, err := strconv.Unquote(lit.Value); err == nil {
				if f, ok := spells(s); ok {
					t.Errorf("%s spells %q, a record of family %s: name it with its family.Family", fset.Position(lit.Pos()), s, f.Name())
				}
			}
			return true
		})
	})
}

// kubestoreSources calls fn with each Go file of kubestore under root
// (its path from root, with slashes) outside this package, the tests and
// the test tree.
func kubestoreSources(t *testing.T, root string, fn func(rel string, src []byte)) {
	t.Helper()
	checked := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			switch rel {
			case "records", "test", "bin", "dist", ".git":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		checked++
		fn(rel, src)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 100 {
		t.Fatalf("checked %d Go files under %s: the walk missed the tree", checked, root)
	}
}
