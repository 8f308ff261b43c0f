package server

import (
	"fmt"
	"maps"
	"strings"

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
func applyFeatureGates(user map[string]bool, entries []string) error {
	gates := map[string]bool{}
	specs := utilfeature.DefaultMutableFeatureGate.GetAll()
	for name := range setGates {
		gates[name] = specs[featuregate.Feature(name)].Default
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
