package config_test

import (
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubestore/kubestore/config"
)

// On a small device ConfigMaps and Secrets are read from etcd unless
// --watch-cache-sizes names them; everything else keeps its setting, and a
// device that is not small (or of unknown memory) changes nothing. Which
// device is small is package memory's (TestDeviceMemory).
func TestSmallDeviceCaches(t *testing.T) {
	configmaps, secrets, pods := schema.GroupResource{Resource: "configmaps"}, schema.GroupResource{Resource: "secrets"}, schema.GroupResource{Resource: "pods"}
	cases := []struct {
		name   string
		small  bool
		sizes  []string
		cached map[schema.GroupResource]bool
	}{
		{"small", true, nil, map[schema.GroupResource]bool{configmaps: false, secrets: false, pods: true}},
		{"small, ConfigMaps named", true, []string{"configmaps#100"}, map[schema.GroupResource]bool{configmaps: true, secrets: false, pods: true}},
		{"small, pods off by flag", true, []string{"pods#0"}, map[schema.GroupResource]bool{configmaps: false, secrets: false, pods: false}},
		{"not small (large or unknown)", false, nil, map[schema.GroupResource]bool{configmaps: true, secrets: true, pods: true}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := config.Default()
			c.Cache.Sizes = tc.sizes
			cc, err := c.Complete()
			if err != nil {
				t.Fatal(err)
			}
			before := cc.CacheFor(configmaps)
			on := cc.OnDevice(tc.small)
			if on.SmallDevice() != tc.small {
				t.Errorf("SmallDevice() = %v, want %v", on.SmallDevice(), tc.small)
			}
			for gr, want := range tc.cached {
				if got := on.CacheFor(gr).Enabled; got != want {
					t.Errorf("CacheFor(%v).Enabled = %v, want %v", gr, got, want)
				}
			}
			if after := cc.CacheFor(configmaps); after != before {
				t.Errorf("OnDevice changed the config it was called on: %+v, was %+v", after, before)
			}
		})
	}
}
