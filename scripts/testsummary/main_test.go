package main

import (
	"strings"
	"testing"
)

func TestSummarize(t *testing.T) {
	stream := strings.Join([]string{
		`{"Action":"run","Package":"p","Test":"TestA"}`,
		`{"Action":"output","Package":"p","Test":"TestA","Output":"=== RUN   TestA\n"}`,
		`{"Action":"output","Package":"p","Test":"TestA","Output":"    a_test.go:10: outage of 2m: converged false\n"}`,
		`{"Action":"output","Package":"p","Test":"TestA","Output":"    proc_test.go:182: kubestore output (last 8 KiB):\n"}`,
		`{"Action":"output","Package":"p","Test":"TestA","Output":"        I1205 a log line\n"}`,
		`{"Action":"output","Package":"p","Test":"TestA","Output":"    a_test.go:12: 10 s after the link came back: pods differ:\n"}`,
		`{"Action":"output","Package":"p","Test":"TestA","Output":"        pod p-1 Running here, Pending there\n"}`,
		`{"Action":"fail","Package":"p","Test":"TestA"}`,
		`{"Action":"output","Package":"p","Test":"TestB","Output":"    b_test.go:3: fine\n"}`,
		`{"Action":"pass","Package":"p","Test":"TestB"}`,
		`{"Action":"fail","Package":"p"}`,
	}, "\n")
	var out strings.Builder
	if code := summarize(strings.NewReader(stream), &out); code != 1 {
		t.Errorf("exit code %d for a failed test, want 1", code)
	}
	_, summary, ok := strings.Cut(out.String(), "1 failed tests")
	if !ok {
		t.Fatalf("no summary in:\n%s", out.String())
	}
	want := "--- FAIL: p TestA\n    a_test.go:10: outage of 2m: converged false\n    a_test.go:12: 10 s after the link came back: pods differ:\n        pod p-1 Running here, Pending there\n"
	if !strings.HasSuffix(summary, want) {
		t.Errorf("summary:\n%s\nwant it to end with:\n%s", summary, want)
	}
	if !strings.Contains(out.String(), "I1205 a log line") {
		t.Errorf("the output itself is not passed through:\n%s", out.String())
	}

	out.Reset()
	if code := summarize(strings.NewReader(`{"Action":"pass","Package":"p"}`), &out); code != 0 {
		t.Errorf("exit code %d for a passing package, want 0", code)
	}
	if code := summarize(strings.NewReader("# p\n./a.go:1: syntax error\n"), &out); code != 1 {
		t.Errorf("exit code %d for a build failure, want 1", code)
	}
}
