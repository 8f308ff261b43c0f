package server_test

import (
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/kubestore/kubestore/config"
)

// readmeTable is the table under a README heading: each row's cells.
func readmeTable(t *testing.T, heading string) [][]string {
	t.Helper()
	data, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(data), "\n"+heading+"\n")
	if !ok {
		t.Fatalf("README.md has no heading %q", heading)
	}
	var rows [][]string
	inTable := false
	for _, line := range strings.Split(rest, "\n") {
		if !strings.HasPrefix(line, "|") {
			if inTable {
				break
			}
			continue
		}
		inTable = true
		cells := strings.Split(strings.Trim(line, "|"), "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		if strings.HasPrefix(cells[0], "---") {
			continue
		}
		rows = append(rows, cells)
	}
	if len(rows) == 0 {
		t.Fatalf("README.md has no table under %q", heading)
	}
	return rows[1:] // the header
}

// The README's "What it serves" names every group version the server
// serves and every resource of each, and nothing it does not; its
// controllers table names every controller --controllers knows.
func TestREADMEMatchesTheServer(t *testing.T) {
	ts := startServer(t, testConfig(t))
	_, lists, err := ts.client.Discovery().ServerGroupsAndResources()
	if err != nil {
		t.Fatal(err)
	}
	readme := map[string]string{}
	for _, row := range readmeTable(t, "## What it serves") {
		if row[0] != "(paths)" {
			readme[row[0]] = row[1]
		}
	}
	served := map[string]bool{}
	for _, l := range lists {
		served[l.GroupVersion] = true
		text, ok := readme[l.GroupVersion]
		if !ok {
			t.Errorf("the server serves %s; README's \"What it serves\" does not list it", l.GroupVersion)
			continue
		}
		for _, r := range l.APIResources {
			if name, _, sub := strings.Cut(r.Name, "/"); !sub && !strings.Contains(text, name) {
				t.Errorf("README's row of %s does not name its resource %s", l.GroupVersion, name)
			}
		}
	}
	for gv := range readme {
		if !served[gv] {
			t.Errorf("README's \"What it serves\" lists %s, which the server does not serve", gv)
		}
	}
	var named []string
	for _, row := range readmeTable(t, "### Controllers") {
		named = append(named, strings.Trim(row[0], "`"))
	}
	slices.Sort(named)
	if known := slices.Sorted(slices.Values(config.Controllers)); !slices.Equal(named, known) {
		t.Errorf("README's controllers table names %v, --controllers knows %v", named, known)
	}
}

// The README's default mirror rules are config.DefaultMirrorRules: a
// gateway's RBAC (docs/node/gateway-rbac.yaml) is written from that list,
// and a rule missing from it (serviceaccounts was) leaves a cluster's
// pods without their ServiceAccount on the node.
func TestREADMEDefaultMirrorRules(t *testing.T) {
	data, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(data), "replaces them whole:\n\n")
	if !ok {
		t.Fatal(`README.md has no "replaces them whole:" before the default mirror rules`)
	}
	block, _, _ := strings.Cut(rest, "\n\n")
	var file struct {
		Mirror config.Mirror `json:"mirror"`
	}
	if err := yaml.UnmarshalStrict([]byte(block), &file); err != nil {
		t.Fatalf("the README's default mirror rules: %v\n%s", err, block)
	}
	if want := config.DefaultMirrorRules(); !reflect.DeepEqual(file.Mirror.Rules, want) {
		t.Errorf("the README's default mirror rules:\n%+v\nkubestore config defaults:\n%+v", file.Mirror.Rules, want)
	}
}
