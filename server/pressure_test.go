package server_test

import (
	"bytes"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

// openAPIControllers counts the running OpenAPI v3 controllers of the
// custom resources (upstream's openapiv3.Controller), one per built
// /openapi/v3 service.
func openAPIControllers() int {
	buf := make([]byte, 8<<20)
	buf = buf[:runtime.Stack(buf, true)]
	return bytes.Count(buf, []byte("controller/openapiv3.(*Controller).Run("))
}

// Under memory pressure the server drops its OpenAPI documents, and the
// custom resources' controller with the v3 one; the next request builds
// them again, the same bytes, and the rebuilt service follows the CRDs.
func TestOpenAPIDroppedUnderMemoryPressure(t *testing.T) {
	ts := startServer(t, testConfig(t))
	ctx := t.Context()
	createCRD(t, ts, devicesCRD(t))
	before := openAPIControllers()
	if dropped := ts.server.RelieveMemoryPressure(); len(dropped) != 0 {
		t.Errorf("before any request, the relief dropped %v", dropped)
	}
	raw := ts.client.Discovery().RESTClient()
	read := func() map[string][]byte {
		t.Helper()
		docs := map[string][]byte{}
		for _, p := range []string{"/openapi/v3", "/openapi/v3/api/v1", "/openapi/v3/apis/example.com/v1", "/openapi/v2"} {
			body, err := raw.Get().AbsPath(p).DoRaw(ctx)
			if err != nil {
				t.Fatalf("GET %s: %v", p, err)
			}
			docs[p] = body
		}
		return docs
	}
	first := read()
	if n := openAPIControllers(); n != before+1 {
		t.Fatalf("%d OpenAPI v3 controllers run after the first /openapi/v3, want %d", n, before+1)
	}
	dropped := ts.server.RelieveMemoryPressure()
	if want := []string{"OpenAPI v3 documents", "OpenAPI v2 document"}; !slices.Equal(dropped, want) {
		t.Errorf("the relief dropped %v, want %v", dropped, want)
	}
	eventually(t, 10*time.Second, "the dropped service's controller stopped", func() (bool, error) {
		return openAPIControllers() == before, nil
	})
	again := read()
	for p, body := range first {
		if !bytes.Equal(again[p], body) {
			t.Errorf("%s rebuilt after the drop differs: %d bytes, were %d", p, len(again[p]), len(body))
		}
	}
	if n := openAPIControllers(); n != before+1 {
		t.Errorf("%d OpenAPI v3 controllers run after the rebuild, want %d", n, before+1)
	}

	// The rebuilt service's controller publishes a CRD created after it.
	gadgets := devicesCRD(t)
	gadgets.Name, gadgets.Spec.Group = "devices.example.org", "example.org"
	createCRD(t, ts, gadgets)
	eventually(t, 10*time.Second, "example.org/v1 in the rebuilt /openapi/v3", func() (bool, error) {
		paths, err := openAPIV3Paths(ctx, ts)
		_, ok := paths["apis/example.org/v1"]
		return ok, err
	})
	if dropped := ts.server.RelieveMemoryPressure(); !slices.Contains(dropped, "OpenAPI v3 documents") {
		t.Errorf("the second relief dropped %v", dropped)
	}
	eventually(t, 10*time.Second, "the rebuilt service's controller stopped", func() (bool, error) {
		return openAPIControllers() == before, nil
	})
	if body, err := raw.Get().AbsPath("/openapi/v3/apis/example.org/v1").DoRaw(ctx); err != nil || !strings.Contains(string(body), "Device") {
		t.Errorf("GET /openapi/v3/apis/example.org/v1 after the second drop: %v, %.200s", err, body)
	}
}
