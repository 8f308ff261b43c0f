package config

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Completed is a validated Config with its per-resource lists and feature
// gates parsed, once. Only Complete makes one, so a constructor that takes
// it cannot run on a configuration nobody checked (sample-apiserver's
// CompletedConfig); the zero value panics on use.
type Completed struct{ *completed }

type completed struct {
	cfg            Config
	featureGates   map[string]bool
	cacheSizes     map[schema.GroupResource]int
	historyWindows map[schema.GroupResource]time.Duration
	maxObjects     map[schema.GroupResource]int64
	maxBytes       map[schema.GroupResource]int64
	controllers    map[string]bool
	serviceCIDRs   []netip.Prefix
	smallDevice    bool
}

// Complete validates c, reporting every problem at once as Validate does,
// and parses what the components look up per resource.
func (c Config) Complete() (Completed, error) {
	cc, err := c.complete()
	if err != nil {
		return Completed{}, err
	}
	return Completed{cc}, nil
}

// Config is the validated configuration. Its slices are shared: read them,
// never change them.
func (c Completed) Config() Config { return c.cfg }

// FeatureGates are the --feature-gates entries by name.
func (c Completed) FeatureGates() map[string]bool { return maps.Clone(c.featureGates) }

// CacheFor resolves the cache setting of one resource from the global
// switch, the per-resource overrides and the defaults, a small device's
// (OnDevice) among them.
func (c Completed) CacheFor(gr schema.GroupResource) ResourceCache {
	cache := c.cfg.Cache
	rc := ResourceCache{Enabled: cache.Enabled && cache.DefaultSize > 0, HistoryWindow: cache.HistoryWindow.Duration}
	if size, ok := c.cacheSizes[gr]; ok {
		rc.Enabled = cache.Enabled && size > 0
	} else if c.smallDevice && slices.Contains(SmallDeviceUncached, gr) {
		rc.Enabled = false
	}
	if w, ok := c.historyWindows[gr]; ok {
		rc.HistoryWindow = w
	}
	return rc
}

// BudgetFor resolves the budget of one resource from --max-objects,
// --max-bytes and the default --memory-limit derives.
func (c Completed) BudgetFor(gr schema.GroupResource) Budget {
	b := Budget{Objects: c.maxObjects[gr]}
	if n, ok := c.maxBytes[gr]; ok {
		b.Bytes, b.BytesFrom = n, fmt.Sprintf("--%s=%s#%s", FlagMaxBytes, gr, ByteSize(n))
	} else if limit := c.cfg.Memory.Limit; limit > 0 {
		b.Bytes = int64(limit) / DefaultBudgetFraction
		b.BytesFrom = fmt.Sprintf("1/%d of --%s=%s", DefaultBudgetFraction, FlagMemoryLimit, limit)
	}
	return b
}

// ControllerEnabled reports whether --controllers enables the named one
// (one of Controllers).
func (c Completed) ControllerEnabled(name string) bool { return c.controllers[name] }

// ServiceCIDRs are the ranges of --service-cluster-ip-range, the primary
// family first.
func (c Completed) ServiceCIDRs() []netip.Prefix { return slices.Clone(c.serviceCIDRs) }
