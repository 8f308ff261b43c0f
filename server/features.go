package server

import (
	"fmt"
	"maps"
	"strings"

	"k8s.io/apiserver/pkg/features"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/component-base/featuregate"

	"github.com/kubestore/kubestore/config"
)

// setGates are the gates an earlier applyFeatureGates set: a server built
// later in the same process (tests) without them gets their upstream
// defaults back.
var setGates = map[string]bool{}

// applyFeatureGates sets the process's apiserver feature gates: upstream's
// defaults, overridden by --feature-gates (user, parsed from entries). The
// gates are process-wide and read when the stores are built, so this runs
// before them. An unknown gate fails without changing any.
//
// On a small device (memory.SmallDevice) ListFromCacheSnapshot defaults
// to off: the btree snapshots the cache keeps for every event of its
// history window cost 11 % of the peak of a 10,000-update burst and 64 MiB
// after the LISTs of 10,000 ConfigMaps, and serve only paginated LISTs at
// an older resourceVersion, which informers (WatchList) never make; those
// are then read from etcd (docs/PERFORMANCE.md).
func applyFeatureGates(user map[string]bool, entries []string, smallDevice bool) error {
	gates := map[string]bool{}
	specs := utilfeature.DefaultMutableFeatureGate.GetAll()
	for name := range setGates {
		gates[name] = specs[featuregate.Feature(name)].Default
	}
	if smallDevice {
		gates[string(features.ListFromCacheSnapshot)] = false
	}
	maps.Copy(gates, user)
	if err := utilfeature.DefaultMutableFeatureGate.DeepCopy().SetFromMap(gates); err != nil {
		return fmt.Errorf("invalid --%s %q: %w", config.FlagFeatureGates, strings.Join(entries, ","), err)
	}
	if err := utilfeature.DefaultMutableFeatureGate.SetFromMap(gates); err != nil {
		return err
	}
	maps.Copy(setGates, gates)
	return nil
}
