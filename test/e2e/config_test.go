package e2e

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// kubestore config defaults prints a file that config check accepts and
// serve loads; config check reports each problem of a bad file on its own
// line, naming the flag, and exits non-zero.
func TestConfigDefaultsAndCheck(t *testing.T) {
	dir := t.TempDir()
	defaults := mustRunKubestore(t, "config", "defaults")
	for _, key := range []string{"dataDir:", "securePort: 6443", "quotaBackendBytes:", "shutdownTimeout:"} {
		if !strings.Contains(defaults, key) {
			t.Errorf("config defaults lacks %q:\n%s", key, defaults)
		}
	}
	good := filepath.Join(dir, "good.yaml")
	if err := os.WriteFile(good, []byte(defaults), 0o600); err != nil {
		t.Fatal(err)
	}
	if out := mustRunKubestore(t, "config", "check", "--config", good); !strings.Contains(out, "ok") {
		t.Errorf("config check of the defaults: %s", out)
	}
	// Flags given to config defaults end up in the file.
	if out := mustRunKubestore(t, "config", "defaults", "--etcd-quota-backend-bytes", "64Mi"); !strings.Contains(out, "quotaBackendBytes: 64Mi") {
		t.Errorf("config defaults ignores a flag:\n%s", out)
	}

	cases := []struct {
		name, yaml string
		want       []string
	}{
		{"three bad values", "server:\n  securePort: 70000\n  shutdownTimeout: -1s\netcd:\n  quotaBackendBytes: 0\n",
			[]string{"--secure-port \"70000\"", "--shutdown-timeout \"-1s\"", "--etcd-quota-backend-bytes \"0\""}},
		{"unknown field", "server:\n  securePrt: 1\n", []string{"securePrt"}},
		{"not YAML", "server: [\n", []string{"--config"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			bad := filepath.Join(dir, "bad.yaml")
			if err := os.WriteFile(bad, []byte(tc.yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			out, err := runKubestore(t, "config", "check", "--config", bad)
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() == 0 {
				t.Fatalf("want a non-zero exit, got %v\n%s", err, out)
			}
			lines := strings.Split(strings.TrimSpace(out), "\n")
			if len(lines) != len(tc.want) {
				t.Errorf("want %d lines, one per problem, got:\n%s", len(tc.want), out)
			}
			for i, w := range tc.want {
				if i < len(lines) && !strings.Contains(lines[i], w) {
					t.Errorf("line %d lacks %q: %s", i+1, w, lines[i])
				}
			}
		})
	}
	if out, err := runKubestore(t, "config", "check"); err == nil || !strings.Contains(out, "--config") {
		t.Errorf("config check without --config: %v\n%s", err, out)
	}

	// serve loads the printed defaults (flags override the port and dir).
	p := start(t, shortTempDir(t), "--config", good)
	stopGracefully(t, p)
}
