package records_test

import (
	"maps"
	"slices"
	"testing"

	"github.com/kubestore/kubestore/cacher/cachertest"
)

// A directory of records is listed alone, whatever its name shares with a
// sibling's: gateway edge-1 never reads edge-10's pending writes, the
// ClusterIP records never include the range's (issue 48).
func TestListStateIsADirectory(t *testing.T) {
	st := cachertest.Records(cachertest.Open(t))
	ctx := t.Context()
	for _, name := range []string{"mirror-pending@edge-1/pods/ns/a", "mirror-pending@edge-10/pods/ns/b", "mirror-pending@edge-1",
		"clusterip/10.0.0.1", "clusterip-range", "mirror-configured@edge-1", "mirror-configured@edge-10"} {
		if err := st.PutState(ctx, name, []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		list   string
		prefix bool
		want   []string
	}{
		{"mirror-pending@edge-1/", false, []string{"mirror-pending@edge-1/pods/ns/a"}},
		{"mirror-pending@edge-1", false, []string{"mirror-pending@edge-1/pods/ns/a"}},
		{"clusterip/", false, []string{"clusterip/10.0.0.1"}},
		{"mirror-configured@", true, []string{"mirror-configured@edge-1", "mirror-configured@edge-10"}},
		{"mirror-pending@edge-1/", true, []string{"mirror-pending@edge-1/pods/ns/a"}},
	} {
		list := st.ListState
		if c.prefix {
			list = st.ListStatePrefix
		}
		got, err := list(ctx, c.list)
		if err != nil {
			t.Fatal(err)
		}
		if names := slices.Sorted(maps.Keys(got)); !slices.Equal(names, c.want) {
			t.Errorf("listing %q (prefix %t): %v, want %v", c.list, c.prefix, names, c.want)
		}
	}
}
