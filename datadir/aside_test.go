package datadir

import (
	"testing"

	"k8s.io/component-base/metrics/testutil"
)

// What is set aside is counted by copy, for /metrics.
func TestSetAsideCounts(t *testing.T) {
	before, _ := testutil.GetCounterMetricValue(setAsideTotal.WithLabelValues("etcd.removed"))
	SetAside("etcd.removed", "/data/etcd.removed.20261127T000000Z", "a test")
	SetAside("etcd.removed", "/data/etcd.removed.20261127T000001Z", "a test")
	after, err := testutil.GetCounterMetricValue(setAsideTotal.WithLabelValues("etcd.removed"))
	if err != nil || after-before != 2 {
		t.Errorf("kubestore_data_set_aside_total{copy=etcd.removed} went from %v to %v (%v), want +2", before, after, err)
	}
}
