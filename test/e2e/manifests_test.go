package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// --manifests-dir applies its files by server-side apply once the server is
// ready and again when they change; a broken file is logged and retried
// while the server keeps serving; applying unchanged files writes nothing.
func TestManifestsDir(t *testing.T) {
	requireKubectl(t)
	dir := shortTempDir(t)
	mdir := filepath.Join(t.TempDir(), "manifests")
	if err := os.Mkdir(mdir, 0o700); err != nil {
		t.Fatal(err)
	}
	write := func(name, data string) {
		t.Helper()
		// Through a rename, as a firmware update or an editor would.
		tmp := filepath.Join(mdir, ".tmp")
		if err := os.WriteFile(tmp, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(mdir, name)); err != nil {
			t.Fatal(err)
		}
	}
	write("00-base.yaml", `apiVersion: v1
kind: Namespace
metadata:
  name: edge
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
  namespace: edge
data:
  mode: eco
`)
	write("10-defaults.json", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"plain"},"data":{"a":"1"}}`)
	write("20-broken.yml", "apiVersion: v1\nkind: ConfigMap\nmetadata: [\n")
	write("notes.txt", "not a manifest")

	p := start(t, dir, "--manifests-dir", mdir)
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		if !eventually(30*time.Second, cond) {
			t.Fatalf("%s: not within 30s\n%s", what, p.logs())
		}
	}
	get := func(args ...string) string {
		out, err := p.kubectl(args...)
		if err != nil {
			return ""
		}
		return out
	}
	waitFor("manifests applied", func() bool {
		return get("get", "configmap", "-n", "edge", "settings", "-o", "jsonpath={.data.mode}") == "eco" &&
			get("get", "configmap", "-n", "default", "plain", "-o", "jsonpath={.data.a}") == "1"
	})
	if m := p.mustKubectl("get", "configmap", "-n", "edge", "settings", "--show-managed-fields", "-o", "jsonpath={.metadata.managedFields[*].manager}"); !strings.Contains(m, "kubestore-manifests") {
		t.Errorf("field manager: %q", m)
	}
	waitFor("broken file logged", func() bool { return strings.Contains(p.logs(), "20-broken.yml") })

	// Unchanged files are not written again.
	rv := p.rv("get", "configmap", "-n", "edge", "settings")
	time.Sleep(7 * time.Second)
	if got := p.rv("get", "configmap", "-n", "edge", "settings"); got != rv {
		t.Errorf("an unchanged manifest was written again: resourceVersion %d -> %d", rv, got)
	}

	// A changed file is applied again, and a fixed one is applied.
	write("00-base.yaml", `apiVersion: v1
kind: Namespace
metadata:
  name: edge
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
  namespace: edge
data:
  mode: performance
`)
	write("20-broken.yml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: fixed\n")
	waitFor("changes applied", func() bool {
		return get("get", "configmap", "-n", "edge", "settings", "-o", "jsonpath={.data.mode}") == "performance" &&
			get("get", "configmap", "fixed", "-o", "name") != ""
	})
	if err := p.stop(30 * time.Second); err != nil {
		t.Fatalf("graceful stop: %v\n%s", err, p.logs())
	}
}
