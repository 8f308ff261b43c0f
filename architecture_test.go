package main

import (
	"cmp"
	"errors"
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// notMapped are the module's packages docs/ARCHITECTURE.md's table leaves
// out, each said in its text: the test tree, the scripts and the generated
// OpenAPI definitions (imported by scripts/openapidata and tests only).
var notMapped = []string{"test", "scripts", "server/openapi/generated"}

// docs/ARCHITECTURE.md's package table is the module's import graph: every
// package once, with its imports of the module (go/build, this platform's
// files without the tests) and its floor (0 with none, else one above the
// highest it imports). The map was true by care alone; this keeps it so.
func TestArchitectureTableIsTheImportGraph(t *testing.T) {
	imports := modulePackages(t)
	floors := map[string]int{}
	var floor func(string) int
	floor = func(p string) int {
		if f, ok := floors[p]; ok {
			return f
		}
		f := 0
		for _, imp := range imports[p] {
			f = max(f, floor(imp)+1)
		}
		floors[p] = f
		return f
	}

	doc, err := os.ReadFile("docs/ARCHITECTURE.md")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("^\\| (\\d+) \\| ([^|]+) \\| ([^|]+) \\|")
	names := regexp.MustCompile("`([^`]+)`")
	seen := map[string]bool{}
	for _, line := range strings.Split(string(doc), "\n") {
		m := row.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		wantFloor, _ := strconv.Atoi(m[1])
		var wantImports []string
		if s := strings.TrimSpace(m[3]); s != "–" {
			for _, p := range strings.Split(s, ",") {
				wantImports = append(wantImports, strings.TrimSpace(p))
			}
		}
		slices.Sort(wantImports)
		for _, n := range names.FindAllStringSubmatch(m[2], -1) {
			p := n[1]
			if seen[p] {
				t.Errorf("docs/ARCHITECTURE.md: %s has two rows", p)
			}
			seen[p] = true
			got, ok := imports[p]
			if !ok {
				t.Errorf("docs/ARCHITECTURE.md: %s is no package of the module", p)
				continue
			}
			if !slices.Equal(got, wantImports) {
				t.Errorf("docs/ARCHITECTURE.md: %s imports %s, the table says %s", p, strings.Join(got, ", "), strings.Join(wantImports, ", "))
			}
			if f := floor(p); f != wantFloor {
				t.Errorf("docs/ARCHITECTURE.md: %s is on floor %d, the table says %d", p, f, wantFloor)
			}
		}
	}
	for p := range imports {
		if !seen[p] {
			t.Errorf("docs/ARCHITECTURE.md: package %s (imports %s, floor %d) has no row", p, strings.Join(imports[p], ", "), floor(p))
		}
	}
}

// modulePackages are the module's mapped packages ("main" for the root)
// with their imports of the module, as go/build reads this platform's
// files without the tests.
func modulePackages(t *testing.T) map[string][]string {
	t.Helper()
	mod, err := os.ReadFile("go.mod")
	if err != nil {
		t.Fatal(err)
	}
	module := strings.TrimSpace(strings.TrimPrefix(strings.SplitN(string(mod), "\n", 2)[0], "module"))

	imports := map[string][]string{}
	err = filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		name := filepath.ToSlash(path)
		if name == "." {
			name = "main"
		}
		if slices.ContainsFunc(notMapped, func(p string) bool { return name == p || strings.HasPrefix(name, p+"/") }) ||
			path != "." && strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "bin" || d.Name() == "dist" {
			return filepath.SkipDir
		}
		pkg, err := build.ImportDir(path, 0)
		if errors.As(err, new(*build.NoGoError)) {
			return nil
		}
		if err != nil {
			return err
		}
		var own []string
		for _, imp := range pkg.Imports {
			if p, ok := strings.CutPrefix(imp, module+"/"); ok {
				own = append(own, p)
			}
		}
		slices.Sort(own)
		imports[name] = own
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return imports
}

// neverImports are docs/ARCHITECTURE.md's Rules: what a package never
// imports, not even through another package. The table above says what
// each package imports today; these say what it must not come to import.
var neverImports = []struct {
	packages, never []string
	why             string
}{
	{
		[]string{"registry"},
		[]string{"cacher", "cacher/cachertest", "etcdembed", "records", "datadir"},
		"the registry is the kinds' rules, handed a store: it declares what it needs of records (IPRecords)",
	},
	{
		[]string{"mirror"},
		[]string{"registry", "server"},
		"the mirror writes below the REST layer (cacher.RawStore) and is assembled by server",
	},
	{
		[]string{"gc", "podgc", "namespaces", "serviceaccount", "certificates", "serviceip"},
		[]string{"mirror", "cacher", "server"},
		"a controller works through the API's clients or the registry's stores; the mirror's copies are known by their annotations (mirrored)",
	},
	{
		[]string{"config"},
		[]string{"*"},
		"the one Config is data: every package may import it",
	},
}

func TestNeverImports(t *testing.T) {
	imports := modulePackages(t)
	deps := map[string][]string{}
	var closure func(string) []string
	closure = func(p string) []string {
		if d, ok := deps[p]; ok {
			return d
		}
		var d []string
		for _, imp := range imports[p] {
			d = append(d, imp)
			d = append(d, closure(imp)...)
		}
		slices.Sort(d)
		d = slices.Compact(d)
		deps[p] = d
		return d
	}
	for _, rule := range neverImports {
		for _, p := range rule.packages {
			if _, ok := imports[p]; !ok {
				t.Errorf("rule for %s: no such package", p)
				continue
			}
			for _, dep := range closure(p) {
				if slices.Contains(rule.never, "*") || slices.Contains(rule.never, dep) {
					t.Errorf("%s imports %s (%s): %s", p, dep, strings.Join(importPath(imports, p, dep), " → "), rule.why)
				}
			}
			for _, never := range rule.never {
				if _, ok := imports[never]; !ok && never != "*" {
					t.Errorf("rule for %s: %s is no package of the module", p, never)
				}
			}
		}
	}
}

// importPath is a chain of imports from p to dep.
func importPath(imports map[string][]string, p, dep string) []string {
	if p == dep {
		return []string{p}
	}
	for _, imp := range imports[p] {
		if rest := importPath(imports, imp, dep); rest != nil {
			return append([]string{p}, rest...)
		}
	}
	return nil
}

// configReads are the files, or file:function, of package config that may
// read or write files. config is data and its parsing; what the machine
// has (memory, cgroups) is asked by the packages that use it.
var configReads = map[string]string{
	"flags.go:overlayFile": "the --config file",
}

// fileIO are the functions, by import path, that touch the file system.
var fileIO = map[string][]string{
	"os": {"Chdir", "Chmod", "Chown", "Create", "CreateTemp", "DirFS", "Lchown", "Link", "Lstat", "Mkdir", "MkdirAll",
		"MkdirTemp", "NewFile", "Open", "OpenFile", "OpenRoot", "ReadDir", "ReadFile", "Readlink", "Remove", "RemoveAll",
		"Rename", "Stat", "Symlink", "Truncate", "WriteFile"},
	"io/ioutil":             {"*"},
	"io/fs":                 {"Glob", "ReadDir", "ReadFile", "Stat", "Sub", "WalkDir"},
	"path/filepath":         {"EvalSymlinks", "Glob", "Walk", "WalkDir"},
	"syscall":               {"*"},
	"golang.org/x/sys/unix": {"*"},
}

// Package config reads no file but its own (--config), outside the
// exceptions configReads names.
func TestConfigReadsNoFiles(t *testing.T) {
	pkg, err := build.ImportDir("config", 0)
	if err != nil {
		t.Fatal(err)
	}
	used := map[string]bool{}
	fset := token.NewFileSet()
	for _, name := range pkg.GoFiles {
		f, err := parser.ParseFile(fset, filepath.Join("config", name), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		local := importNames(f)
		for _, decl := range f.Decls {
			fn := ""
			if d, ok := decl.(*ast.FuncDecl); ok {
				fn = d.Name.Name
			}
			ast.Inspect(decl, func(n ast.Node) bool {
				sel, ok := n.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				x, ok := sel.X.(*ast.Ident)
				if !ok {
					return true
				}
				funcs, ok := fileIO[local[x.Name]]
				if !ok || !slices.Contains(funcs, "*") && !slices.Contains(funcs, sel.Sel.Name) {
					return true
				}
				for _, allowed := range []string{name + ":" + fn, name} {
					if _, ok := configReads[allowed]; ok {
						used[allowed] = true
						return true
					}
				}
				t.Errorf("%s: %s.%s in %s: package config does no file I/O; the package that needs what the machine has reads it",
					fset.Position(sel.Pos()), local[x.Name], sel.Sel.Name, cmp.Or(fn, "a declaration"))
				return true
			})
		}
	}
	for allowed, why := range configReads {
		if !used[allowed] {
			t.Errorf("config/%s (%s) does no file I/O any more: remove it from configReads", allowed, why)
		}
	}
}

// importNames maps the names f gives its imports to their paths.
func importNames(f *ast.File) map[string]string {
	local := map[string]string{}
	for _, imp := range f.Imports {
		path, _ := strconv.Unquote(imp.Path.Value)
		n := path[strings.LastIndex(path, "/")+1:]
		if imp.Name != nil {
			n = imp.Name.Name
		}
		local[n] = path
	}
	return local
}

// wholeClientset are the constructors, by import path, that make every API
// group's client-go code reachable: the Clientset's and the informer
// factory's. The binary links text/template, which keeps every exported
// method of every reachable type, so one call keeps every group's typed
// clients, informers and apply configurations: 18 MB in issue 14, 16.4 MB
// in issue 53 (docs/PERFORMANCE.md).
var wholeClientset = map[string][]string{
	"k8s.io/client-go/kubernetes": {"New", "NewForConfig", "NewForConfigAndClient", "NewForConfigOrDie"},
	"k8s.io/client-go/informers":  {"NewSharedInformerFactory", "NewSharedInformerFactoryWithOptions", "NewFilteredSharedInformerFactory"},
}

// The binary makes no whole Clientset or informer factory: each package
// builds the typed clients and informers of the groups it uses.
func TestNoWholeClientset(t *testing.T) {
	fset := token.NewFileSet()
	for name := range modulePackages(t) {
		dir := name
		if name == "main" {
			dir = "."
		}
		pkg, err := build.ImportDir(dir, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, file := range pkg.GoFiles {
			f, err := parser.ParseFile(fset, filepath.Join(dir, file), nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			local := importNames(f)
			ast.Inspect(f, func(n ast.Node) bool {
				sel, ok := n.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				if x, ok := sel.X.(*ast.Ident); ok && slices.Contains(wholeClientset[local[x.Name]], sel.Sel.Name) {
					t.Errorf("%s: %s.%s keeps every API group's client-go code in the binary (16-18 MB): build the typed clients and informers of the groups used",
						fset.Position(sel.Pos()), local[x.Name], sel.Sel.Name)
				}
				return true
			})
		}
	}
}
