package config

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// SmallDeviceUncached are the resources a small device reads straight from
// etcd unless --watch-cache-sizes names them. Their caches hold a third of a
// gateway's heap (ConfigMaps and Secrets: 41 of 115 MB at five gateway
// sets), and what the cache buys is cheaper LISTs and watches of the whole
// resource, which a node's agents do not make: the kubelet reads the
// ConfigMaps and Secrets of its pods by name, and a GET by name reads etcd
// cached or not, a watch by name is a watch of one key in etcd
// (docs/PERFORMANCE.md, "Watch cache per resource"). Pods stay cached:
// the kubelet and the garbage collector list and watch them.
var SmallDeviceUncached = []schema.GroupResource{{Resource: "configmaps"}, {Resource: "secrets"}}

// OnDevice returns c with the defaults of a small device (package memory
// decides which is one) when small is set: SmallDeviceUncached.
func (c Completed) OnDevice(small bool) Completed {
	cc := *c.completed
	cc.smallDevice = small
	return Completed{&cc}
}

// SmallDevice reports whether OnDevice was given a small device.
func (c Completed) SmallDevice() bool { return c.smallDevice }
