package datadir

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"
)

// setAsideTotal counts the copies of the etcd data set aside since the
// process started: a start that set one aside shows it on /metrics.
var setAsideTotal = metrics.NewCounterVec(&metrics.CounterOpts{
	Name: "kubestore_data_set_aside_total",
	Help: "Copies of the etcd data set aside since the start (never deleted by kubestore), by copy: etcd.newer (a way back to the previous release), etcd.removed (a removed member joined again), etcd.log-lost (a member whose disk lost acknowledged raft entries joined again), etcd.before-reset (kubestore cluster reset).",
}, []string{"copy"})

var registerSetAside sync.Once

// SetAside records that the data was set aside as name (a copy of its
// own, at path) and why, and what that discards here: a warning in the
// log and kubestore_data_set_aside_total. The copy stays until its owner
// deletes it.
func SetAside(name, path, why string) {
	registerSetAside.Do(func() { legacyregistry.MustRegister(setAsideTotal) })
	setAsideTotal.WithLabelValues(name).Inc()
	klog.Warningf("The etcd data was set aside to %s: %s. kubestore never deletes it: keep it until you know you need nothing of it, then delete it to free the space", path, why)
}
