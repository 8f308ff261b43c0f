package mirror

import (
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
)

// The mirror's two flows, by file. The uplink reaches the downstream only
// through the downstream port (ports.go); what both use (the rules, what
// a node owns, the link, the ports) is shared. A new file says which it
// is here.
var (
	uplinkFiles = []string{"uplink.go", "writethrough.go", "forward.go", "offline.go", "answer.go",
		"pending.go", "reconcile.go", "events.go", "tokens.go", "decisions.go", "passthrough.go"}
	downstreamFiles = []string{"stream.go", "apply.go", "references.go", "view.go", "deferred.go"}
	sharedFiles     = []string{"mirror.go", "ports.go", "owned.go", "rules.go", "link.go", "wire.go", "elect.go",
		"metrics.go", "admission.go"}
)

// The uplink is a wall: its files use nothing the downstream's files
// declare (as the type checker resolves each name), and hold a *Mirror
// only in the entry points that hand a request to the uplink (m.up), so
// everything the uplink needs of the streams' side goes through the
// downstream interface of ports.go.
func TestUplinkReachesTheDownstreamOnlyThroughItsPort(t *testing.T) {
	fset := token.NewFileSet()
	var files []*ast.File
	byName := map[string]*ast.File{}
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		if !slices.Contains(uplinkFiles, name) && !slices.Contains(downstreamFiles, name) && !slices.Contains(sharedFiles, name) {
			t.Errorf("%s is in no flow: name it in uplinkFiles, downstreamFiles or sharedFiles", name)
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
		byName[name] = f
	}
	info := &types.Info{Uses: map[*ast.Ident]types.Object{}, Selections: map[*ast.SelectorExpr]*types.Selection{}}
	conf := types.Config{Importer: exportData(t)}
	if _, err := conf.Check("github.com/kubestore/kubestore/mirror", fset, files, info); err != nil {
		t.Fatal(err)
	}

	var found []string
	at := func(n ast.Node, what string) { found = append(found, fset.Position(n.Pos()).String()+": "+what) }
	for _, name := range uplinkFiles {
		f := byName[name]
		if f == nil {
			t.Errorf("%s: no such file", name)
			continue
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if fd, ok := n.(*ast.FuncDecl); ok && fd.Recv != nil && receiverType(fd) == "Mirror" {
				// An entry point: the receiver only as m.up.
				recv := fd.Recv.List[0].Names[0].Name
				ast.Inspect(fd.Body, func(n ast.Node) bool {
					if sel, ok := n.(*ast.SelectorExpr); ok {
						if id, ok := sel.X.(*ast.Ident); ok && id.Name == recv && sel.Sel.Name == "up" {
							return false
						}
					}
					if id, ok := n.(*ast.Ident); ok && id.Name == recv {
						at(id, "the entry point "+fd.Name.Name+" uses its *Mirror other than as "+recv+".up")
					}
					return true
				})
				return false
			}
			id, ok := n.(*ast.Ident)
			if !ok {
				return true
			}
			obj := info.Uses[id]
			if obj == nil || obj.Pkg() == nil || obj.Pkg().Path() != "github.com/kubestore/kubestore/mirror" {
				return true
			}
			if from := filepath.Base(fset.Position(obj.Pos()).Filename); slices.Contains(downstreamFiles, from) {
				at(id, id.Name+", which "+from+" declares")
			}
			if tn, ok := obj.(*types.TypeName); ok && tn.Name() == "Mirror" {
				at(id, "names the Mirror")
			}
			return true
		})
	}
	sort.Strings(found)
	for _, f := range found {
		t.Error(f)
	}
}

// exportData imports the package's dependencies from the compiler's
// export data, as go list -export leaves it in the build cache.
func exportData(t *testing.T) types.Importer {
	t.Helper()
	out, err := exec.Command("go", "list", "-export", "-deps", "-f", "{{.ImportPath}}={{.Export}}", ".").Output()
	if err != nil {
		t.Fatalf("go list -export: %v", err)
	}
	exports := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if path, file, ok := strings.Cut(line, "="); ok && file != "" {
			exports[path] = file
		}
	}
	return importer.ForCompiler(token.NewFileSet(), "gc", func(path string) (io.ReadCloser, error) {
		file, ok := exports[path]
		if !ok {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(file)
	})
}

func receiverType(fd *ast.FuncDecl) string {
	t := fd.Recv.List[0].Type
	if s, ok := t.(*ast.StarExpr); ok {
		t = s.X
	}
	if id, ok := t.(*ast.Ident); ok {
		return id.Name
	}
	return ""
}
