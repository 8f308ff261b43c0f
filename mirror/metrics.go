package mirror

import (
	"context"
	"sync"
	"time"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

var (
	connected = metrics.NewGauge(&metrics.GaugeOpts{
		Namespace: "kubestore", Subsystem: "mirror", Name: "connected",
		Help:           "1 while the upstream answers the mirror, else 0.",
		StabilityLevel: metrics.ALPHA,
	})
	lastSync = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Namespace: "kubestore", Subsystem: "mirror", Name: "last_sync_timestamp_seconds",
		Help:           "When each rule was last known to be in sync with the upstream (the oldest of its streams).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"rule"})
	lagSeconds = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Namespace: "kubestore", Subsystem: "mirror", Name: "lag_seconds",
		Help:           "Seconds since each rule last heard from the upstream, while one of its streams is not watching it; 0 while all are.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"rule"})
	lagEvents = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Namespace: "kubestore", Subsystem: "mirror", Name: "lag_events",
		Help:           "Objects each rule's last resume or relist had to write (or delete) to catch up with the upstream.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"rule"})
	objects = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Namespace: "kubestore", Subsystem: "mirror", Name: "objects",
		Help:           "Objects each rule mirrored at its last relist.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"rule"})
	relists = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: "kubestore", Subsystem: "mirror", Name: "relists_total",
		Help:           "Full reads of the upstream, diffed against the local copies: the first sync of a stream and each 410.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"rule"})
	resumes = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: "kubestore", Subsystem: "mirror", Name: "resumes_total",
		Help:           "Upstream watches resumed from a known resourceVersion: after a restart, an outage or a watch's timeout.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"rule"})
	applied = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: "kubestore", Subsystem: "mirror", Name: "applied_total",
		Help:           "Upstream objects applied to the local store, by outcome: created, updated, deleted, unchanged (not written), or deferred (not created: its local namespace is terminating).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"rule", "op"})
	writeThroughs = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: "kubestore", Subsystem: "mirror", Name: "write_through_total",
		Help:           "Local writes to mirrored objects forwarded to the upstream, by the upstream's HTTP code.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"code"})
	tokensRelayed = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: "kubestore", Subsystem: "mirror", Name: "tokens_total",
		Help:           "The kubelet's TokenRequests for the node's pods, by who issued the token: the cluster (relayed) or kubestore (local: the cluster did not, or could not).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"issuer"})
	passedThrough = metrics.NewCounter(&metrics.CounterOpts{
		Namespace: "kubestore", Subsystem: "mirror", Name: "passed_through_total",
		Help:           "Reads of the cluster's ServiceAccounts (the node's pods) of what no rule mirrors whole, passed through to the upstream.",
		StabilityLevel: metrics.ALPHA,
	})
	writeRefused = metrics.NewCounter(&metrics.CounterOpts{
		Namespace: "kubestore", Subsystem: "mirror", Name: "write_refused_total",
		Help:           "Local writes to mirrored objects refused with 503 because the upstream was not reachable.",
		StabilityLevel: metrics.ALPHA,
	})
	pendingWrites = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: "kubestore", Subsystem: "mirror", Name: "offline_writes_total",
		Help:           "The node's own writes to mirrored objects applied locally while the upstream was not reachable, by write: status, spec (Lease, CSINode), create, delete.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"write"})
	pendingObjects = metrics.NewGauge(&metrics.GaugeOpts{
		Namespace: "kubestore", Subsystem: "mirror", Name: "pending_objects",
		Help:           "Objects the node wrote while the upstream was not reachable, not yet reconciled with it.",
		StabilityLevel: metrics.ALPHA,
	})
	pendingAge = metrics.NewGauge(&metrics.GaugeOpts{
		Namespace: "kubestore", Subsystem: "mirror", Name: "pending_oldest_seconds",
		Help:           "Age of the oldest pending write of the node; 0 when none is pending.",
		StabilityLevel: metrics.ALPHA,
	})
	skippedObjects = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: "kubestore", Subsystem: "mirror", Name: "skipped_total",
		Help:           "Upstream objects a stream could not store (they do not convert to the served type) and skipped, by rule; /mirrorz?verbose names them.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"rule"})
	replacedLocal = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: "kubestore", Subsystem: "mirror", Name: "replaced_local_total",
		Help:           "Local objects an upstream object of the same name replaced, by rule: the upstream wins a name clash.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"rule"})
	reconciled = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: "kubestore", Subsystem: "mirror", Name: "reconciled_total",
		Help:           "Pending writes of the node reconciled with the upstream, by outcome: pushed (the upstream took the node's state), gone (the object is gone upstream), recreated (deleted and created again upstream: the node's writes to the old object are dropped and the new one fetched), refused (the upstream refused it; its own state is kept).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"outcome"})
	eventsSent = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: "kubestore", Subsystem: "mirror", Name: "events_total",
		Help:           "Events of the node's agents about mirrored objects, by what became of them: sent upstream, dropped (the queue was full: the oldest go), refused by the upstream, or expired locally before the link came back.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"outcome"})
	quarantined = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: "kubestore", Subsystem: "mirror", Name: "quarantined_writes_total",
		Help:           "Pending writes of the node the upstream kept failing (a 5xx, a timeout) for a minute, by what became of them: quarantined (the object follows the cluster again; the write is tried every 2 minutes), superseded (the node wrote the object again, and its newer write is tried instead). kubestore_mirror_pending_objects counts those still quarantined.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"outcome"})
	eventsQueued = metrics.NewGauge(&metrics.GaugeOpts{
		Namespace: "kubestore", Subsystem: "mirror", Name: "events_queued",
		Help:           "Events of the node's agents queued for the upstream.",
		StabilityLevel: metrics.ALPHA,
	})
	registerOnce sync.Once
)

func registerMetrics() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(connected, lastSync, lagSeconds, lagEvents, objects, relists, resumes, applied, writeThroughs, tokensRelayed, passedThrough, writeRefused,
			pendingWrites, pendingObjects, pendingAge, reconciled, replacedLocal, skippedObjects, eventsSent, eventsQueued, quarantined)
	})
}

// updateMetrics sets the gauges from the streams' state.
func (m *Mirror) updateMetrics(context.Context) {
	if m.Connected() {
		connected.Set(1)
	} else {
		connected.Set(0)
	}
	n, _ := m.up.events.queued()
	eventsQueued.Set(float64(n))
	recs := m.up.pending.all()
	pendingObjects.Set(float64(len(recs)))
	if len(recs) > 0 {
		pendingAge.Set(time.Since(recs[0].Since).Seconds())
	} else {
		pendingAge.Set(0)
	}
	type agg struct {
		lastSync, lastSeen time.Time
		lagging            bool
		objects, lag       int
	}
	byRule := map[string]*agg{}
	for _, r := range m.rules {
		byRule[r.base] = &agg{}
	}
	now := time.Now()
	for _, s := range m.allStreams() {
		st, a := s.status(), byRule[s.rule.base]
		if a.lastSync.IsZero() || st.lastSync.Before(a.lastSync) {
			a.lastSync = st.lastSync
		}
		if !st.connected {
			a.lagging = true
			if a.lastSeen.IsZero() || st.lastSeen.Before(a.lastSeen) {
				a.lastSeen = st.lastSeen
			}
		}
		a.objects += st.objects
		a.lag += st.lagEvents
	}
	for name, a := range byRule {
		if !a.lastSync.IsZero() {
			lastSync.WithLabelValues(name).Set(float64(a.lastSync.Unix()))
		}
		lag := 0.0
		if a.lagging && !a.lastSeen.IsZero() {
			lag = now.Sub(a.lastSeen).Seconds()
		}
		lagSeconds.WithLabelValues(name).Set(lag)
		lagEvents.WithLabelValues(name).Set(float64(a.lag))
		objects.WithLabelValues(name).Set(float64(a.objects))
	}
}
