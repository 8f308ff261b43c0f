package server

import (
	"slices"
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
