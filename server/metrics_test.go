package server_test

import (
	"bytes"
	"context"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// metric sums the samples of the named metric, read from the server's
// /metrics, whose labels include every label in want (counters and gauges
// by value, histograms by sample count).
func (ts *testServer) metric(name string, want map[string]string) float64 {
	ts.t.Helper()
	body, err := ts.client.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	if err != nil {
		ts.t.Fatalf("reading /metrics: %v", err)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		ts.t.Fatalf("parsing /metrics: %v", err)
	}
	var sum float64
	for _, m := range families[name].GetMetric() {
		if !hasLabels(m, want) {
			continue
		}
		switch {
		case m.Counter != nil:
			sum += m.GetCounter().GetValue()
		case m.Gauge != nil:
			sum += m.GetGauge().GetValue()
		case m.Histogram != nil:
			sum += float64(m.GetHistogram().GetSampleCount())
		}
	}
	return sum
}

func hasLabels(m *dto.Metric, want map[string]string) bool {
	got := map[string]string{}
	for _, l := range m.GetLabel() {
		got[l.GetName()] = l.GetValue()
	}
	for k, v := range want {
		if got[k] != v {
			return false
		}
	}
	return true
}

// etcdLists counts the range requests that listed a resource from etcd.
func (ts *testServer) etcdLists(resource string) float64 {
	return ts.metric("etcd_requests_total", map[string]string{"operation": "list", "resource": resource}) +
		ts.metric("etcd_requests_total", map[string]string{"operation": "listStream", "resource": resource})
}

// etcdGets counts the single-object reads of a resource from etcd.
func (ts *testServer) etcdGets(resource string) float64 {
	return ts.metric("etcd_requests_total", map[string]string{"operation": "get", "resource": resource})
}

// cacheLists counts the lists of a resource served by the watch cache.
func (ts *testServer) cacheLists(resource string) float64 {
	return ts.metric("apiserver_cache_list_total", map[string]string{"resource": resource})
}

// consistentReads counts lists served through the consistent-read path,
// from the cache (fallback="false") or from etcd after a timeout.
func (ts *testServer) consistentReads(resource, fallback string) float64 {
	return ts.metric("apiserver_watch_cache_consistent_read_total", map[string]string{"resource": resource, "fallback": fallback, "success": "true"})
}

// counter reports how much a metric moved while fn ran.
func delta(read func() float64, fn func()) float64 {
	before := read()
	fn()
	return read() - before
}
