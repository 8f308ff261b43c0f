package server

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/kubestore/kubestore/config"
)

// Every controller --controllers knows is described once, and each
// description says what it reads and how several kubestores share it.
func TestControllerDescriptors(t *testing.T) {
	var described []string
	for _, d := range controllerDescriptors() {
		described = append(described, d.name)
		described = append(described, d.with...)
		if d.reads == "" || d.shared == "" || d.start == nil {
			t.Errorf("%s: reads %q, shared %q, start set %t: want all three", d.name, d.reads, d.shared, d.start != nil)
		}
	}
	slices.Sort(described)
	if known := slices.Sorted(slices.Values(config.Controllers)); !slices.Equal(described, known) {
		t.Errorf("described %v, --controllers knows %v", described, known)
	}
}

// docs/CONTROLLERS.md's table has a row for every controller.
func TestControllersDocumented(t *testing.T) {
	doc, err := os.ReadFile("../docs/CONTROLLERS.md")
	if err != nil {
		t.Fatal(err)
	}
	var rows []string
	for _, line := range strings.Split(string(doc), "\n") {
		if strings.HasPrefix(line, "| `") {
			rows = append(rows, line)
		}
	}
	for _, name := range config.Controllers {
		// A row may name a second CSR controller by its suffix alone
		// ("`-approving-controller`").
		suffix := "`-" + strings.TrimPrefix(name, "certificatesigningrequest-") + "`"
		if !slices.ContainsFunc(rows, func(r string) bool {
			cell, _, _ := strings.Cut(strings.TrimPrefix(r, "| "), " |")
			return strings.Contains(cell, "`"+name+"`") || strings.Contains(cell, suffix)
		}) {
			t.Errorf("docs/CONTROLLERS.md has no row for %s", name)
		}
	}
}
