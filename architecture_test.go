package main

import (
	"errors"
	"go/build"
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

// README's Layout names every directory of the module's packages: the
// map a newcomer reads first drifted too (podgc was missing).
func TestREADMELayoutNamesEveryPackageDirectory(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, layout, ok := strings.Cut(string(readme), "\n## Layout\n")
	if !ok {
		t.Fatal("README.md has no \"## Layout\" section")
	}
	layout, _, _ = strings.Cut(layout, "\n## ")
	for p := range modulePackages(t) {
		dir, _, _ := strings.Cut(p, "/")
		if p != "main" && !strings.Contains(layout, "\n    "+dir+"/") {
			t.Errorf("README.md's Layout does not name %s/ (package %s)", dir, p)
		}
	}
}
