package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A first start on a fresh data directory, a restart, and the graceful stop
// after each log nothing at warning or error level, in either log format,
// with every optional part on: custom resources (the default), the unix
// socket and a manifests directory that defines a CRD. Operators alert on
// those lines.
func TestCleanLogs(t *testing.T) {
	for _, format := range []string{"text", "json"} {
		t.Run(format, func(t *testing.T) {
			dir := shortTempDir(t)
			mdir := filepath.Join(dir, "manifests")
			if err := os.Mkdir(mdir, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(mdir, "boot.yaml"), []byte(cleanLogsManifests), 0o600); err != nil {
				t.Fatal(err)
			}
			args := []string{"--log-format", format, "--unix-socket", filepath.Join(dir, "api.sock"), "--manifests-dir", mdir}
			for _, run := range []string{"first start", "restart"} {
				p := start(t, filepath.Join(dir, "data"), args...)
				if !eventually(30*time.Second, func() bool { return strings.Contains(p.logs(), "Applied manifests") }) {
					t.Fatalf("%s: manifests not applied within 30s\n%s", run, p.logs())
				}
				// A client's watch is open when the stop ends it.
				ctx, cancel := context.WithCancel(context.Background())
				w, err := p.clientset().CoreV1().ConfigMaps("").Watch(ctx, metav1.ListOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if err := p.stop(30 * time.Second); err != nil {
					t.Fatalf("%s: graceful stop: %v\n%s", run, err, p.logs())
				}
				w.Stop()
				cancel()
				if bad := unwantedLogLines(p.logs()); len(bad) > 0 {
					t.Errorf("%s: %d lines at warning or error level, or of no known format:\n%s", run, len(bad), strings.Join(bad, "\n"))
				}
			}
		})
	}
}

const cleanLogsManifests = `apiVersion: v1
kind: ConfigMap
metadata:
  name: boot
  namespace: default
data:
  mode: eco
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  names: {kind: Widget, plural: widgets, singular: widget}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-preserve-unknown-fields: true
`

var (
	// klog's text header: I0102 15:04:05.000000    1234 file.go:12]
	klogText = regexp.MustCompile(`^([IWEF])\d{4} \d{2}:\d{2}:\d{2}\.\d{6} +\d+ [^ ]+:\d+\] `)
	// zap's console encoder, as etcd's logger writes: time, level, name.
	zapConsole = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}T[^\t]+\t([a-z]+)\t`)
)

// unwantedLogLines returns the lines of a kubestore log above info level, in
// each format its loggers write: klog's text or JSON lines, and etcd's zap
// console or JSON lines. Lines of no known format are returned too: nothing
// else should write to stderr.
func unwantedLogLines(logs string) []string {
	// make test turns client-go's cache mutation detector on for every
	// process (the Makefile says why); each informer then warns once that
	// it is, a line of the test's instrumentation, not of kubestore.
	detector, _ := strconv.ParseBool(os.Getenv("KUBE_CACHE_MUTATION_DETECTOR"))
	var bad []string
	for _, line := range strings.Split(logs, "\n") {
		// Empty, or a continuation of a multi-line klog value.
		if line == "" || strings.HasPrefix(line, "\t") || strings.HasPrefix(line, " ") {
			continue
		}
		if detector && strings.Contains(line, "Mutation detector is enabled, this will result in memory leakage.") {
			continue
		}
		if slowMachine(line) {
			continue
		}
		if !infoLogLine(line) {
			bad = append(bad, line)
		}
	}
	return bad
}

// etcdSlowWarnings are etcd's warnings that a request, a sync or a
// heartbeat took longer than its expected time (100 ms for an apply). They
// say the machine was slow, not that anything is wrong, and are what a
// slow device's operator wants to see; on the test machine they come and
// go with the load of the tests running beside (make test runs packages in
// parallel), so the clean-log check does not count them.
var etcdSlowWarnings = []string{
	"apply request took too long",
	"slow fdatasync",
	"leader failed to send out heartbeat on time; took too long, leader is overloaded likely from slow disk",
}

// slowMachine reports whether line is one of etcd's slow warnings, in its
// console or JSON form.
func slowMachine(line string) bool {
	if !strings.Contains(line, "etcd") {
		return false
	}
	for _, w := range etcdSlowWarnings {
		if strings.Contains(line, "\t"+w) || strings.Contains(line, `"msg":"`+w+`"`) {
			return true
		}
	}
	return false
}

func infoLogLine(line string) bool {
	if m := klogText.FindStringSubmatch(line); m != nil {
		return m[1] == "I"
	}
	if m := zapConsole.FindStringSubmatch(line); m != nil {
		return zapInfo(m[1])
	}
	var fields map[string]any
	if json.Unmarshal([]byte(line), &fields) != nil {
		return false
	}
	if level, ok := fields["level"].(string); ok {
		return zapInfo(level)
	}
	// component-base's JSON lines have no level: info lines carry their
	// verbosity "v", error lines do not.
	_, ok := fields["v"]
	return ok && fields["msg"] != nil
}

func zapInfo(level string) bool { return slices.Contains([]string{"debug", "info"}, level) }

// The check fails on warning and error lines of each logger and format
// (most of them printed by a start and stop before they were fixed or
// filtered), and passes info lines.
func TestCleanLogsClassifier(t *testing.T) {
	info := []string{
		`I1123 17:42:07.159086   20199 server.go:251] "kubestore API server" url="https://127.0.0.1:33951"`,
		"2026-11-23T17:55:41.177Z\tinfo\tetcd\tembed/serve.go:219\tserving client traffic insecurely; this is strongly discouraged!\t{\"traffic\": \"grpc\"}",
		`{"level":"info","ts":"2026-11-23T17:43:45.410Z","logger":"etcd","caller":"embed/etcd.go:422","msg":"closing etcd server"}`,
		`{"ts":1795455827833.3286,"caller":"kubestore/main.go:38","msg":"Stopping gracefully; send the signal again to exit at once","v":0,"signal":"terminated"}`,
		`{"ts":1795456659234.9807,"caller":"server/genericapiserver.go:716","msg":"[graceful-termination] waiting for shutdown to be initiated","v":1}`,
		// etcd's warnings of a slow machine (etcdSlowWarnings).
		"2026-11-28T03:42:06.178Z\twarn\tetcd\ttxn/util.go:93\tapply request took too long\t{\"took\": 0.241672573, \"expected-duration\": 0.1}",
		`{"level":"warn","ts":"2026-11-28T03:42:06.178Z","logger":"etcd","caller":"wal/wal.go:820","msg":"slow fdatasync","took":"1.2s","expected-duration":"1s"}`,
	}
	unwanted := []string{
		"2026-11-23T17:42:06.708Z\twarn\tetcd\tembed/config.go:956\tRunning http and grpc server on single port. This is not recommended for production.",
		"2026-11-23T17:42:07.051Z\terror\tetcd\tversion/monitor.go:120\tfailed to update storage version\t{\"cluster-version\": \"3.7.0\", \"error\": \"cannot detect storage schema version: missing term information\"}",
		"2026-11-23T17:42:10.502Z\terror\tetcd\tembed/etcd.go:908\tsetting up serving from embedded etcd failed.\t{\"error\": \"http: Server closed\"}",
		`{"level":"warn","ts":"2026-11-23T17:43:45.425Z","logger":"etcd","caller":"auth/store.go:1137","msg":"simple token is not cryptographically signed"}`,
		`{"level":"error","ts":"2026-11-23T17:43:48.901Z","logger":"etcd","caller":"embed/etcd.go:908","msg":"setting up serving from embedded etcd failed.","error":"mux: server closed"}`,
		`W1123 17:42:07.149736   20199 genericapiserver.go:798] Skipping API apiextensions.k8s.io/v1beta1 because it has no resources.`,
		`E1123 17:42:09.436347   20199 reflector.go:204] "Failed to watch" err="context canceled" logger="UnhandledError" reflector="k8s.io/client-go@v0.37.2/tools/cache/reflector.go:343" type="*v1.CustomResourceDefinition"`,
		`F1123 17:57:37.231343   14061 hooks.go:203] PostStartHook "crd-informer-synced" failed: context canceled`,
		`{"ts":1795455828901.2,"caller":"cache/reflector.go:204","msg":"Failed to watch","logger":"UnhandledError","err":"context canceled","reflector":"k8s.io/client-go@v0.37.2/tools/cache/reflector.go:343"}`,
		`kubestore: starting embedded etcd: etcdserver: cannot access data directory`,
		`panic: runtime error: invalid memory address or nil pointer dereference`,
	}
	captured := strings.Join(info, "\n") + "\n" + strings.Join(unwanted, "\n") + "\n\tcontinued value\n >\n"
	if got := unwantedLogLines(captured); !slices.Equal(got, unwanted) {
		t.Errorf("unwanted lines:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(unwanted, "\n"))
	}
}

// First starts on fresh data directories log nothing at warning or error
// level either, however the start's steps interleave: the controllers
// start once the system namespaces exist; the start is over once the
// garbage collector has won its election. Five in make test; make
// release-check runs fifty (KUBESTORE_CLEAN_STARTS).
func TestCleanLogsFirstStarts(t *testing.T) {
	starts := 5
	if s := os.Getenv("KUBESTORE_CLEAN_STARTS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			t.Fatalf("KUBESTORE_CLEAN_STARTS=%q: want a positive number", s)
		}
		starts = n
	}
	for i := range starts {
		dir := shortTempDir(t)
		p := start(t, filepath.Join(dir, "data"))
		if !eventually(30*time.Second, func() bool { return strings.Contains(p.logs(), "Garbage collector leads") }) {
			t.Fatalf("start %d: the garbage collector did not lead within 30 s\n%s", i+1, p.logs())
		}
		if err := p.stop(30 * time.Second); err != nil {
			t.Fatalf("start %d: graceful stop: %v\n%s", i+1, err, p.logs())
		}
		if bad := unwantedLogLines(p.logs()); len(bad) > 0 {
			t.Fatalf("start %d of %d: %d lines at warning or error level, or of no known format:\n%s", i+1, starts, len(bad), strings.Join(bad, "\n"))
		}
	}
}
