package tunnel

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

var (
	tunnelConnected = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Namespace: "kubestore", Subsystem: "tunnel", Name: "connected",
		Help:           "On a gateway: 1 while its tunnel to each endpoint is open, else 0.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"endpoint"})
	streams = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: "kubestore", Subsystem: "tunnel", Name: "streams_total",
		Help:           "On a gateway: connections the endpoint opened through the tunnel, by outcome: served, or refused (not the node's kubelet, or not reachable).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"outcome"})
	tunnels = metrics.NewGauge(&metrics.GaugeOpts{
		Namespace: "kubestore", Subsystem: "tunnel", Name: "gateways",
		Help:           "On an endpoint: the gateways holding a tunnel.",
		StabilityLevel: metrics.ALPHA,
	})
	dials = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: "kubestore", Subsystem: "tunnel", Name: "connects_total",
		Help:           "On an endpoint: CONNECT requests, by the HTTP code answered.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"code"})
	registerOnce sync.Once
)

// registerMetrics registers the tunnel's metrics once an end of it runs:
// a server with no tunnel shows none.
func registerMetrics() {
	registerOnce.Do(func() { legacyregistry.MustRegister(tunnelConnected, streams, tunnels, dials) })
}
