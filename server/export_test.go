package server

import (
	"time"

	"github.com/kubestore/kubestore/podgc"
)

// RelieveMemoryPressure is what the server does under memory pressure
// (memory.Pressure), for the tests to drive without filling the heap.
func (s *Server) RelieveMemoryPressure() []string { return s.pressure.Relieve("a test", true) }

// SetPodGCTiming makes the pod garbage collectors of servers started
// after it look every period and collect after quarantine.
func SetPodGCTiming(period, quarantine time.Duration) {
	podGCTiming = podgc.Timing{Period: period, Quarantine: quarantine}
}
