package records

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
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
	checked := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
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
		if loc := layout.FindIndex(src); loc != nil {
			t.Errorf("%s names the records' key space (%s): read and write records through a records.Store", rel, src[loc[0]:loc[1]])
		}
		if strings.Contains(string(src), "records.Prefix(") && !prefixAllowed[filepath.ToSlash(rel)] {
			t.Errorf("%s asks where the records are (records.Prefix): read and write them through a records.Store", rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 100 {
		t.Fatalf("checked %d Go files under %s: the walk missed the tree", checked, root)
	}
}
