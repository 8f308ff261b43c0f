package server

import (
	"testing"

	"k8s.io/apiserver/pkg/features"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
)

// On a small device ListFromCacheSnapshot defaults to off, --feature-gates
// still decides, and a later server on a large one gets the default back.
func TestSmallDeviceFeatureGates(t *testing.T) {
	for _, tc := range []struct {
		name  string
		user  map[string]bool
		small bool
		want  bool
	}{
		{"small device", nil, true, false},
		{"small device, the flag turns it on", map[string]bool{string(features.ListFromCacheSnapshot): true}, true, true},
		{"large device", nil, false, true},
	} {
		if err := applyFeatureGates(tc.user, nil, tc.small); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := utilfeature.DefaultFeatureGate.Enabled(features.ListFromCacheSnapshot); got != tc.want {
			t.Errorf("%s: ListFromCacheSnapshot = %v, want %v", tc.name, got, tc.want)
		}
	}
}
