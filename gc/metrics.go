package gc

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

var (
	deletes = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: "kubestore", Subsystem: "garbage_collector", Name: "deletes_total",
		Help:           "Objects the garbage collector deleted because their owners were gone or deleted in the foreground, by the propagation it deleted them with.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"propagation"})
	referencesRemoved = metrics.NewCounter(&metrics.CounterOpts{
		Namespace: "kubestore", Subsystem: "garbage_collector", Name: "references_removed_total",
		Help:           "Owner references removed from dependents: of orphaning owners, or of absent owners while another owner remains.",
		StabilityLevel: metrics.ALPHA,
	})
	orphaned = metrics.NewCounter(&metrics.CounterOpts{
		Namespace: "kubestore", Subsystem: "garbage_collector", Name: "orphaned_total",
		Help:           "Dependents orphaned by owners deleted with propagationPolicy Orphan.",
		StabilityLevel: metrics.ALPHA,
	})
	finalizersRemoved = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: "kubestore", Subsystem: "garbage_collector", Name: "finalizers_removed_total",
		Help:           "orphan and foregroundDeletion finalizers removed once their work was done.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"finalizer"})
	errorsTotal = metrics.NewCounter(&metrics.CounterOpts{
		Namespace: "kubestore", Subsystem: "garbage_collector", Name: "errors_total",
		Help:           "Objects whose processing failed and was retried.",
		StabilityLevel: metrics.ALPHA,
	})
	tracked = metrics.NewGauge(&metrics.GaugeOpts{
		Namespace: "kubestore", Subsystem: "garbage_collector", Name: "dependents",
		Help:           "Objects with owner references the garbage collector tracks.",
		StabilityLevel: metrics.ALPHA,
	})
	resources = metrics.NewGauge(&metrics.GaugeOpts{
		Namespace: "kubestore", Subsystem: "garbage_collector", Name: "resources",
		Help:           "Resources whose objects the garbage collector watches.",
		StabilityLevel: metrics.ALPHA,
	})
	discoveryReads = metrics.NewCounter(&metrics.CounterOpts{
		Namespace: "kubestore", Subsystem: "garbage_collector", Name: "discovery_reads_total",
		Help:           "Times the garbage collector read discovery to find the resources to watch: at its start, after a CustomResourceDefinition changed or an owner of an unknown kind was met, and while a read failed.",
		StabilityLevel: metrics.ALPHA,
	})
	leader = metrics.NewGauge(&metrics.GaugeOpts{
		Namespace: "kubestore", Subsystem: "garbage_collector", Name: "leader",
		Help:           "1 while this process is the one collecting (holds the garbage-collector etcd election).",
		StabilityLevel: metrics.ALPHA,
	})
	registerOnce sync.Once
)

func registerMetrics() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(deletes, referencesRemoved, orphaned, finalizersRemoved, errorsTotal, tracked, resources, discoveryReads, leader)
	})
}
