package server_test

import (
	"context"
	"strings"
	"testing"

	"k8s.io/apiserver/pkg/features"
	utilfeature "k8s.io/apiserver/pkg/util/feature"

	"github.com/kubestore/kubestore/cacher"
)

// TestFeatureGates: --feature-gates reaches the apiserver's gates, a later
// server without it gets the default back, and an unknown gate fails the
// start naming the flag.
func TestFeatureGates(t *testing.T) {
	cfg := testConfig(t)
	cfg.Server.FeatureGates = []string{"NoSuchGate=true"}
	cc := complete(t, cfg)
	backend, err := cacher.Open(context.Background(), cc)
	if err != nil {
		t.Fatal(err)
	}
	_, err = newServer(cc, backend)
	backend.Close()
	if err == nil || !strings.Contains(err.Error(), `invalid --feature-gates "NoSuchGate=true"`) {
		t.Fatalf("New with an unknown gate: %v, want an error naming --feature-gates", err)
	}

	for _, on := range []bool{false, true} {
		cfg := testConfig(t)
		if !on {
			cfg.Server.FeatureGates = []string{"ListFromCacheSnapshot=false"}
		}
		ts := startServer(t, cfg)
		if got := utilfeature.DefaultFeatureGate.Enabled(features.ListFromCacheSnapshot); got != on {
			t.Errorf("with --feature-gates %q: ListFromCacheSnapshot enabled = %v, want %v", cfg.Server.FeatureGates, got, on)
		}
		ts.stop()
	}
}
