package config_test

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/urfave/cli/v2"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubestore/kubestore/config"
)

// clearEnv unsets every KUBESTORE_* variable for the duration of the test,
// so that the caller's environment cannot leak into a parse.
func clearEnv(t *testing.T) {
	t.Helper()
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "KUBESTORE_") {
			t.Setenv(name, "") // restores the old value after the test
			if err := os.Unsetenv(name); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// load parses args with the real flags and returns what config.Load makes
// of them, as a command's Action would.
func load(t *testing.T, args ...string) (config.Config, error) {
	t.Helper()
	var got config.Config
	loaded := false
	app := &cli.App{
		Name:      "kubestore",
		Flags:     config.Flags(),
		Writer:    io.Discard,
		ErrWriter: io.Discard,
		Action: func(c *cli.Context) error {
			var err error
			got, err = config.Load(c)
			loaded = true
			return err
		},
	}
	if err := app.RunContext(t.Context(), append([]string{"kubestore"}, args...)); err != nil {
		return config.Config{}, err
	}
	if !loaded {
		t.Fatalf("the action did not run for args %q", args)
	}
	return got, nil
}

func mustLoad(t *testing.T, args ...string) config.Config {
	t.Helper()
	cfg, err := load(t, args...)
	if err != nil {
		t.Fatalf("loading %q: %v", args, err)
	}
	return cfg
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// normalize makes empty and nil slices equal: YAML omits both.
func normalize(c config.Config) config.Config {
	for _, s := range []*[]string{&c.Server.TLSSANs, &c.Etcd.Servers, &c.Cache.Sizes, &c.Cache.HistoryWindows, &c.Memory.MaxObjects, &c.Memory.MaxBytes, &c.Server.FeatureGates} {
		if len(*s) == 0 {
			*s = nil
		}
	}
	return c
}

// setting is one configurable field: its flag, a non-default value as
// typed on the command line or in a KUBESTORE_* variable, the field, and
// what that value makes of the field.
type setting struct {
	flag  string
	arg   string
	field func(*config.Config) any // a pointer to the field
	want  any
}

// with returns cfg with the setting's field set to v.
func (s setting) with(cfg config.Config, v any) config.Config {
	reflect.ValueOf(s.field(&cfg)).Elem().Set(reflect.ValueOf(v))
	return cfg
}

func (s setting) get(cfg config.Config) any {
	return reflect.ValueOf(s.field(&cfg)).Elem().Interface()
}

func dur(d time.Duration) config.Duration { return config.Duration{Duration: d} }

// settings lists every flag but --config. Together the values form a valid
// configuration that differs from the defaults in every field.
var settings = []setting{
	{config.FlagDataDir, "/srv/ks", func(c *config.Config) any { return &c.DataDir }, "/srv/ks"},
	{config.FlagBindAddress, "0.0.0.0", func(c *config.Config) any { return &c.Server.BindAddress }, "0.0.0.0"},
	{config.FlagAdvertiseAddress, "192.0.2.10", func(c *config.Config) any { return &c.Server.AdvertiseAddress }, "192.0.2.10"},
	{config.FlagSecurePort, "7443", func(c *config.Config) any { return &c.Server.SecurePort }, 7443},
	{config.FlagTLSSAN, "gw.local,10.0.0.1", func(c *config.Config) any { return &c.Server.TLSSANs }, []string{"gw.local", "10.0.0.1"}},
	{config.FlagShutdownTimeout, "5s", func(c *config.Config) any { return &c.Server.ShutdownTimeout }, dur(5 * time.Second)},
	{config.FlagRequestTimeout, "2m", func(c *config.Config) any { return &c.Server.RequestTimeout }, dur(2 * time.Minute)},
	{config.FlagMinRequestTimeout, "10m", func(c *config.Config) any { return &c.Server.MinRequestTimeout }, dur(10 * time.Minute)},
	{config.FlagMaxRequestsInFlight, "0", func(c *config.Config) any { return &c.Server.MaxRequestsInFlight }, 0},
	{config.FlagMaxMutatingRequestsInFlight, "7", func(c *config.Config) any { return &c.Server.MaxMutatingRequestsInFlight }, 7},
	{config.FlagMaxRequestBodyBytes, "1Mi", func(c *config.Config) any { return &c.Server.MaxRequestBodyBytes }, config.ByteSize(1 << 20)},
	{config.FlagFeatureGates, "ListFromCacheSnapshot=false,DetectCacheInconsistency=true", func(c *config.Config) any { return &c.Server.FeatureGates }, []string{"ListFromCacheSnapshot=false", "DetectCacheInconsistency=true"}},
	{config.FlagTokenAuthFile, "/etc/ks/tokens.csv", func(c *config.Config) any { return &c.Server.TokenAuthFile }, "/etc/ks/tokens.csv"},
	{config.FlagAuthorizationPolicyFile, "/etc/ks/policy.yaml", func(c *config.Config) any { return &c.Server.AuthorizationPolicyFile }, "/etc/ks/policy.yaml"},
	{config.FlagUnixSocket, "/run/kubestore.sock", func(c *config.Config) any { return &c.Server.UnixSocket }, "/run/kubestore.sock"},
	{config.FlagUnixSocketGroup, "agents", func(c *config.Config) any { return &c.Server.UnixSocketGroup }, "agents"},
	{config.FlagEncryptionProviderConfig, "/etc/ks/encryption.yaml", func(c *config.Config) any { return &c.Server.EncryptionProviderConfig }, "/etc/ks/encryption.yaml"},
	{config.FlagCustomResources, "false", func(c *config.Config) any { return &c.Server.CustomResources }, false},
	{config.FlagControllers, "*,-garbage-collector-controller", func(c *config.Config) any { return &c.Server.Controllers }, []string{"*", "-garbage-collector-controller"}},
	{config.FlagServiceClusterIPRange, "10.96.0.0/16,fd00:10:96::/108", func(c *config.Config) any { return &c.Server.ServiceClusterIPRange }, "10.96.0.0/16,fd00:10:96::/108"},
	{config.FlagServiceAccountIssuer, "https://edge.example", func(c *config.Config) any { return &c.Server.ServiceAccountIssuer }, "https://edge.example"},
	{config.FlagManifestsDir, "/etc/ks/manifests", func(c *config.Config) any { return &c.Server.ManifestsDir }, "/etc/ks/manifests"},
	{config.FlagEtcdServers, "https://10.0.0.2:2379,https://10.0.0.3:2379", func(c *config.Config) any { return &c.Etcd.Servers }, []string{"https://10.0.0.2:2379", "https://10.0.0.3:2379"}},
	{config.FlagEtcdCAFile, "/etc/ks/ca.pem", func(c *config.Config) any { return &c.Etcd.CAFile }, "/etc/ks/ca.pem"},
	{config.FlagEtcdCertFile, "/etc/ks/client.pem", func(c *config.Config) any { return &c.Etcd.CertFile }, "/etc/ks/client.pem"},
	{config.FlagEtcdKeyFile, "/etc/ks/client-key.pem", func(c *config.Config) any { return &c.Etcd.KeyFile }, "/etc/ks/client-key.pem"},
	{config.FlagEtcdPrefix, "/kubestore", func(c *config.Config) any { return &c.Etcd.Prefix }, "/kubestore"},
	{config.FlagEtcdCompactionInterval, "0s", func(c *config.Config) any { return &c.Etcd.CompactionInterval }, dur(0)},
	{config.FlagEtcdStartTimeout, "90s", func(c *config.Config) any { return &c.Etcd.StartTimeout }, dur(90 * time.Second)},
	{config.FlagEtcdSnapshotCount, "2000", func(c *config.Config) any { return &c.Etcd.SnapshotCount }, uint64(2000)},
	{config.FlagEtcdSnapshotCatchUpEntries, "200", func(c *config.Config) any { return &c.Etcd.SnapshotCatchUpEntries }, uint64(200)},
	{config.FlagEtcdQuotaBackendBytes, "128Mi", func(c *config.Config) any { return &c.Etcd.QuotaBackendBytes }, config.ByteSize(128 << 20)},
	{config.FlagEtcdBackendBatchInterval, "250ms", func(c *config.Config) any { return &c.Etcd.BackendBatchInterval }, dur(250 * time.Millisecond)},
	{config.FlagEtcdBackendBatchLimit, "500", func(c *config.Config) any { return &c.Etcd.BackendBatchLimit }, 500},
	{config.FlagEtcdMaxRequestBytes, "2000000", func(c *config.Config) any { return &c.Etcd.MaxRequestBytes }, config.ByteSize(2000000)},
	{config.FlagEtcdWALSegmentBytes, "16Mi", func(c *config.Config) any { return &c.Etcd.WALSegmentBytes }, config.ByteSize(16 << 20)},
	{config.FlagEtcdReservedDiskBytes, "64Mi", func(c *config.Config) any { return &c.Etcd.ReservedDiskBytes }, config.ByteSize(64 << 20)},
	{config.FlagEtcdWatchProgressNotifyInterval, "1s", func(c *config.Config) any { return &c.Etcd.WatchProgressNotifyInterval }, dur(time.Second)},
	{config.FlagWatchCache, "false", func(c *config.Config) any { return &c.Cache.Enabled }, false},
	{config.FlagDefaultWatchCacheSize, "0", func(c *config.Config) any { return &c.Cache.DefaultSize }, 0},
	{config.FlagWatchCacheSizes, "pods#0,leases.coordination.k8s.io#50", func(c *config.Config) any { return &c.Cache.Sizes }, []string{"pods#0", "leases.coordination.k8s.io#50"}},
	{config.FlagWatchCacheHistoryWindow, "2m", func(c *config.Config) any { return &c.Cache.HistoryWindow }, dur(2 * time.Minute)},
	{config.FlagWatchCacheHistoryWindows, "pods#5m,events#90s", func(c *config.Config) any { return &c.Cache.HistoryWindows }, []string{"pods#5m", "events#90s"}},
	{config.FlagMemoryLimit, "128Mi", func(c *config.Config) any { return &c.Memory.Limit }, config.ByteSize(128 << 20)},
	{config.FlagMaxObjects, "configmaps#10000,leases.coordination.k8s.io#50", func(c *config.Config) any { return &c.Memory.MaxObjects }, []string{"configmaps#10000", "leases.coordination.k8s.io#50"}},
	{config.FlagMaxBytes, "secrets#4Mi", func(c *config.Config) any { return &c.Memory.MaxBytes }, []string{"secrets#4Mi"}},
	{config.FlagProfiling, "true", func(c *config.Config) any { return &c.Memory.Profiling }, true},
	{config.FlagVerbosity, "4", func(c *config.Config) any { return &c.Log.Verbosity }, 4},
	{config.FlagLogFormat, "json", func(c *config.Config) any { return &c.Log.Format }, "json"},
	{config.FlagUpstreamKubeconfig, "/etc/kubestore/upstream.kubeconfig", func(c *config.Config) any { return &c.Mirror.UpstreamKubeconfig }, "/etc/kubestore/upstream.kubeconfig"},
	{config.FlagNodeName, "edge-1", func(c *config.Config) any { return &c.Mirror.NodeName }, "edge-1"},
	{config.FlagTunnelEndpoint, "https://tunnel-1.example:8132,https://tunnel-2.example:8132", func(c *config.Config) any { return &c.Mirror.TunnelEndpoints }, []string{"https://tunnel-1.example:8132", "https://tunnel-2.example:8132"}},
	{config.FlagTunnelCAFile, "/etc/kubestore/tunnel-ca.crt", func(c *config.Config) any { return &c.Mirror.TunnelCAFile }, "/etc/kubestore/tunnel-ca.crt"},
	{config.FlagUpdateTrialPeriod, "10m", func(c *config.Config) any { return &c.Update.TrialPeriod }, dur(10 * time.Minute)},
	{config.FlagRestoreOnNewerData, "true", func(c *config.Config) any { return &c.Update.RestoreOnNewerData }, true},
	{config.FlagEtcdHeartbeatInterval, "50ms", func(c *config.Config) any { return &c.Etcd.HeartbeatInterval }, dur(50 * time.Millisecond)},
	{config.FlagEtcdElectionTimeout, "500ms", func(c *config.Config) any { return &c.Etcd.ElectionTimeout }, dur(500 * time.Millisecond)},
	{config.FlagMemberName, "gw-2", func(c *config.Config) any { return &c.Site.MemberName }, "gw-2"},
	{config.FlagPeerAdvertiseAddress, "10.0.0.12", func(c *config.Config) any { return &c.Site.PeerAdvertiseAddress }, "10.0.0.12"},
	{config.FlagPeerBindAddress, "10.0.0.12", func(c *config.Config) any { return &c.Site.PeerBindAddress }, "10.0.0.12"},
	{config.FlagPeerPort, "2480", func(c *config.Config) any { return &c.Site.PeerPort }, 2480},
	{config.FlagJoin, "https://10.0.0.11:6443", func(c *config.Config) any { return &c.Site.Join }, "https://10.0.0.11:6443"},
	{config.FlagJoinToken, testJoinToken, func(c *config.Config) any { return &c.Site.JoinToken }, testJoinToken},
}

// testJoinToken is a well-formed join token.
var testJoinToken = config.FormatJoinToken([]byte("a CA certificate"), "0123456789abcdef")

// fileOnly are the settings only the config file sets: lists of
// structures no flag could spell.
var fileOnly = map[string]bool{"Config.Mirror.Rules": true}

// allSet is Default() with every setting applied.
func allSet() config.Config {
	cfg := config.Default()
	for _, s := range settings {
		cfg = s.with(cfg, s.want)
	}
	return cfg
}

// leaves lists the paths of Config's settable fields (Duration counts as
// one field).
func leaves(v reflect.Value, prefix string, out map[string]any) {
	if v.Kind() == reflect.Struct && v.Type() != reflect.TypeFor[config.Duration]() {
		for i := range v.NumField() {
			leaves(v.Field(i), prefix+"."+v.Type().Field(i).Name, out)
		}
		return
	}
	out[prefix] = v.Interface()
}

func leafValues(c config.Config) map[string]any {
	out := map[string]any{}
	leaves(reflect.ValueOf(c), "Config", out)
	return out
}

// TestNoArgumentsYieldDefault is etcd's TestMatchNewConfigAddFlags: the
// flags change nothing unless given.
func TestNoArgumentsYieldDefault(t *testing.T) {
	clearEnv(t)
	got := mustLoad(t)
	if want := config.Default(); !reflect.DeepEqual(got, want) {
		t.Fatalf("no arguments:\n got %+v\nwant %+v", got, want)
	}
}

func TestFlagsCoverEveryField(t *testing.T) {
	var names []string
	for _, f := range config.Flags() {
		names = append(names, f.Names()[0])
	}
	want := []string{config.FlagConfig}
	for _, s := range settings {
		want = append(want, s.flag)
	}
	slices.Sort(names)
	slices.Sort(want)
	if !slices.Equal(names, want) {
		t.Errorf("Flags() = %q, the tests know %q; add the new flag to settings", names, want)
	}

	// Each setting changes exactly one field, and together they change
	// every field: every setting has a flag and no two flags share one.
	def := leafValues(config.Default())
	owner := map[string]string{}
	for _, s := range settings {
		var changed []string
		for path, v := range leafValues(s.with(config.Default(), s.want)) {
			if !reflect.DeepEqual(v, def[path]) {
				changed = append(changed, path)
			}
		}
		if len(changed) != 1 {
			t.Errorf("--%s changes %q, want exactly one field", s.flag, changed)
			continue
		}
		if prev, dup := owner[changed[0]]; dup {
			t.Errorf("--%s and --%s both set %s", prev, s.flag, changed[0])
		}
		owner[changed[0]] = s.flag
	}
	for path := range def {
		if _, ok := owner[path]; !ok && !fileOnly[path] {
			t.Errorf("%s has no flag", path)
		}
	}
}

// flagDefault is the default a flag shows in --help.
func flagDefault(t *testing.T, f cli.Flag) any {
	t.Helper()
	switch f := f.(type) {
	case *cli.StringFlag:
		return f.Value
	case *cli.IntFlag:
		return f.Value
	case *cli.Uint64Flag:
		return f.Value
	case *cli.BoolFlag:
		return f.Value
	case *cli.StringSliceFlag:
		if f.Value == nil || len(f.Value.Value()) == 0 {
			return []string(nil)
		}
		return f.Value.Value()
	case *cli.GenericFlag:
		switch v := f.Value.(type) {
		case *config.Duration:
			return *v
		case *config.ByteSize:
			return *v
		}
	}
	t.Fatalf("flag --%s has unexpected type %T", f.Names()[0], f)
	return nil
}

func TestFlagDefaultsAreDefault(t *testing.T) {
	flags := map[string]cli.Flag{}
	for _, f := range config.Flags() {
		flags[f.Names()[0]] = f
	}
	def := config.Default()
	for _, s := range settings {
		t.Run(s.flag, func(t *testing.T) {
			f, ok := flags[s.flag]
			if !ok {
				t.Fatalf("Flags() has no --%s", s.flag)
			}
			want := s.get(def)
			if reflect.ValueOf(want).Kind() == reflect.Slice && reflect.ValueOf(want).Len() == 0 {
				want = []string(nil)
			}
			if got := flagDefault(t, f); !reflect.DeepEqual(got, want) {
				t.Errorf("--%s shows default %#v, Default() has %#v", s.flag, got, want)
			}
			help := cli.FlagStringer(f)
			if env := "$" + config.EnvVar(s.flag); !strings.Contains(help, env) {
				t.Errorf("help of --%s does not name %s: %s", s.flag, env, help)
			}
			shown := fmt.Sprint(want)
			if list, ok := want.([]string); ok {
				shown = strings.Join(list, `", "`)
			}
			if shown != "" && shown != "false" && !strings.Contains(help, shown) {
				t.Errorf("help of --%s does not show the default %s: %s", s.flag, shown, help)
			}
		})
	}
}

// TestEverySettingHasFlagAndEnv sets each field through its flag and,
// separately, through its KUBESTORE_* variable, and expects exactly that
// field to change.
func TestEverySettingHasFlagAndEnv(t *testing.T) {
	for _, s := range settings {
		want := s.with(config.Default(), s.want)
		t.Run("flag/"+s.flag, func(t *testing.T) {
			clearEnv(t)
			got := mustLoad(t, "--"+s.flag+"="+s.arg)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("--%s=%s: got %#v, want %#v", s.flag, s.arg, s.get(got), s.want)
			}
		})
		t.Run("env/"+s.flag, func(t *testing.T) {
			clearEnv(t)
			t.Setenv(config.EnvVar(s.flag), s.arg)
			got := mustLoad(t)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%s=%s: got %#v, want %#v", config.EnvVar(s.flag), s.arg, s.get(got), s.want)
			}
		})
	}
}

func TestRepeatedSliceFlagAccumulates(t *testing.T) {
	clearEnv(t)
	got := mustLoad(t, "--watch-cache-sizes=pods#0", "--watch-cache-sizes", "secrets#0,nodes#10")
	if want := []string{"pods#0", "secrets#0", "nodes#10"}; !slices.Equal(got.Cache.Sizes, want) {
		t.Errorf("Sizes = %q, want %q", got.Cache.Sizes, want)
	}
}

// TestPrecedence checks defaults < --config file < KUBESTORE_* < flag for
// one setting of each kind.
func TestPrecedence(t *testing.T) {
	type levels struct {
		file, env, flag   string // as written in YAML, the variable, the flag
		wantFile, wantEnv any
		wantFlag          any
	}
	field := func(name string) setting {
		for _, s := range settings {
			if s.flag == name {
				return s
			}
		}
		t.Fatalf("no setting %s", name)
		return setting{}
	}
	cases := []struct {
		kind    string
		setting setting
		yamlFmt string // the file, with %s for the value
		levels
	}{
		{"string", field(config.FlagBindAddress), "server:\n  bindAddress: %s\n",
			levels{"0.0.0.0", "::1", "10.0.0.1", "0.0.0.0", "::1", "10.0.0.1"}},
		{"int", field(config.FlagSecurePort), "server:\n  securePort: %s\n",
			levels{"1001", "1002", "1003", 1001, 1002, 1003}},
		{"bool", field(config.FlagWatchCache), "cache:\n  watchCache: %s\n",
			levels{"false", "true", "false", false, true, false}},
		{"duration", field(config.FlagShutdownTimeout), "server:\n  shutdownTimeout: %s\n",
			levels{"10s", "20s", "40s", dur(10 * time.Second), dur(20 * time.Second), dur(40 * time.Second)}},
		{"byte size", field(config.FlagMaxRequestBodyBytes), "server:\n  maxRequestBodyBytes: %s\n",
			levels{"1Mi", "2Mi", "4194304", config.ByteSize(1 << 20), config.ByteSize(2 << 20), config.ByteSize(4 << 20)}},
		{"string slice", field(config.FlagWatchCacheSizes), "cache:\n  watchCacheSizes: [%s]\n",
			levels{"pods#1, nodes#2", "secrets#0,events#5", "leases.coordination.k8s.io#0",
				[]string{"pods#1", "nodes#2"}, []string{"secrets#0", "events#5"}, []string{"leases.coordination.k8s.io#0"}}},
	}
	for _, tc := range cases {
		t.Run(tc.kind, func(t *testing.T) {
			s := tc.setting
			file := writeFile(t, "kubestore.yaml", fmt.Sprintf(tc.yamlFmt, tc.file))
			def := config.Default()
			layers := []struct {
				name           string
				file, env, arg bool
				want           any
			}{
				{"default", false, false, false, s.get(def)},
				{"file", true, false, false, tc.wantFile},
				{"env", false, true, false, tc.wantEnv},
				{"flag", false, false, true, tc.wantFlag},
				{"env beats file", true, true, false, tc.wantEnv},
				{"flag beats file", true, false, true, tc.wantFlag},
				{"flag beats env", false, true, true, tc.wantFlag},
				{"flag beats env and file", true, true, true, tc.wantFlag},
			}
			for _, l := range layers {
				t.Run(l.name, func(t *testing.T) {
					clearEnv(t)
					var args []string
					if l.file {
						args = append(args, "--config", file)
					}
					if l.env {
						t.Setenv(config.EnvVar(s.flag), tc.env)
					}
					if l.arg {
						args = append(args, "--"+s.flag+"="+tc.flag)
					}
					got := mustLoad(t, args...)
					if want := s.with(def, l.want); !reflect.DeepEqual(got, want) {
						t.Errorf("%s: got %#v, want %#v (whole config %+v)", s.flag, s.get(got), l.want, got)
					}
				})
			}
		})
	}
}

func TestConfigFileFromEnv(t *testing.T) {
	clearEnv(t)
	t.Setenv(config.EnvVar(config.FlagConfig), writeFile(t, "k.yaml", "dataDir: /from/file\n"))
	if got := mustLoad(t); got.DataDir != "/from/file" {
		t.Errorf("DataDir = %q, want /from/file from %s", got.DataDir, config.EnvVar(config.FlagConfig))
	}
}

func TestConfigFileRefused(t *testing.T) {
	cases := []struct {
		name    string
		content string
		want    string // a further part of the message
	}{
		{"unknown top-level key", "dataDirectory: /x\n", "dataDirectory"},
		{"unknown nested key", "server:\n  port: 1\n", "port"},
		{"flag name as key", "server:\n  secure-port: 1\n", "secure-port"},
		{"int is a word", "server:\n  securePort: high\n", "securePort"},
		{"bool is a word", "cache:\n  watchCache: maybe\n", "watchCache"},
		{"duration is a number", "server:\n  shutdownTimeout: 30\n", "duration"},
		{"duration has no unit", "server:\n  shutdownTimeout: \"30\"\n", "30"},
		{"size is a word", "etcd:\n  quotaBackendBytes: lots\n", "lots"},
		{"size is a fraction", "etcd:\n  quotaBackendBytes: 1.5\n", "size"},
		{"list is a string", "cache:\n  watchCacheSizes: pods#1\n", "watchCacheSizes"},
		{"section is a string", "server: fast\n", "server"},
		{"top level is a list", "- dataDir: /x\n", ""},
		{"unclosed flow sequence", "server: [1, 2\n", ""},
		{"mapping in a scalar", "dataDir: a: b\n", ""},
		{"tab indentation", "server:\n\tsecurePort: 1\n", ""},
		{"duplicate key", "dataDir: /a\ndataDir: /b\n", "dataDir"},
		{"key in the wrong case", "DataDir: /a\n", "DataDir"},
		{"section in the wrong case", "SERVER:\n  securePort: 1\n", "SERVER"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clearEnv(t)
			path := writeFile(t, "bad.yaml", tc.content)
			check := func(how string, err error) {
				t.Helper()
				if err == nil {
					t.Fatalf("%s accepted %q", how, tc.content)
				}
				msg := err.Error()
				for _, w := range []string{"--config", path, tc.want} {
					if !strings.Contains(msg, w) {
						t.Errorf("%s: error %q does not contain %q", how, msg, w)
					}
				}
			}
			_, err := config.ReadFile(path)
			check("ReadFile", err)
			_, err = load(t, "--config", path)
			check("Load", err)
		})
	}
	t.Run("missing file", func(t *testing.T) {
		clearEnv(t)
		path := filepath.Join(t.TempDir(), "absent.yaml")
		_, err := load(t, "--config", path)
		if err == nil || !strings.Contains(err.Error(), "--config") || !strings.Contains(err.Error(), path) || !errors.Is(err, os.ErrNotExist) {
			t.Errorf("missing file: got %v, want an os.ErrNotExist naming --config and %s", err, path)
		}
	})
}

func TestConfigFileOverlaysDefaults(t *testing.T) {
	cfg, err := config.ReadFile(writeFile(t, "k.yaml", "# only one setting\netcd:\n  prefix: /edge\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := config.Default()
	want.Etcd.Prefix = "/edge"
	if !reflect.DeepEqual(cfg, want) {
		t.Errorf("got %+v, want the defaults with etcd.prefix /edge", cfg)
	}
	empty, err := config.ReadFile(writeFile(t, "empty.yaml", ""))
	if err != nil || !reflect.DeepEqual(empty, config.Default()) {
		t.Errorf("empty file: got %+v, %v; want the defaults", empty, err)
	}
}

func TestYAMLRoundTrip(t *testing.T) {
	cases := []struct {
		name string
		cfg  config.Config
	}{
		{"default", config.Default()},
		{"every field set", allSet()},
		{"odd byte size", func() config.Config {
			c := config.Default()
			c.Server.MaxRequestBodyBytes = 1000001
			c.Etcd.MaxRequestBytes = 1000
			return c
		}()},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			data, err := tc.cfg.YAML()
			if err != nil {
				t.Fatal(err)
			}
			got, err := config.ReadFile(writeFile(t, "k.yaml", string(data)))
			if err != nil {
				t.Fatalf("reading YAML() back: %v\n%s", err, data)
			}
			if !reflect.DeepEqual(normalize(got), normalize(tc.cfg)) {
				t.Errorf("round trip:\n got %+v\nwant %+v\nyaml:\n%s", got, tc.cfg, data)
			}
		})
	}
	// The file names settings by their documented keys.
	data, err := config.Default().YAML()
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"dataDir:", "securePort: 6443", "watchCache: true", "historyWindow: 1m15s", "maxRequestBodyBytes: 3Mi", "format: text"} {
		if !strings.Contains(string(data), key) {
			t.Errorf("YAML() lacks %q:\n%s", key, data)
		}
	}
}

func TestEnvVar(t *testing.T) {
	cases := []struct{ flag, want string }{
		{config.FlagDataDir, "KUBESTORE_DATA_DIR"},
		{config.FlagConfig, "KUBESTORE_CONFIG"},
		{config.FlagVerbosity, "KUBESTORE_VERBOSITY"},
		{config.FlagEtcdCAFile, "KUBESTORE_ETCD_CAFILE"},
		{config.FlagMaxMutatingRequestsInFlight, "KUBESTORE_MAX_MUTATING_REQUESTS_INFLIGHT"},
		{config.FlagWatchCacheHistoryWindows, "KUBESTORE_WATCH_CACHE_HISTORY_WINDOWS"},
	}
	for _, tc := range cases {
		t.Run(tc.flag, func(t *testing.T) {
			if got := config.EnvVar(tc.flag); got != tc.want {
				t.Errorf("EnvVar(%q) = %q, want %q", tc.flag, got, tc.want)
			}
		})
	}
	seen := map[string]string{}
	for _, f := range config.Flags() {
		name := f.Names()[0]
		ef, ok := f.(interface{ GetEnvVars() []string })
		if !ok {
			t.Fatalf("--%s has no env vars", name)
		}
		if got, want := ef.GetEnvVars(), []string{config.EnvVar(name)}; !slices.Equal(got, want) {
			t.Errorf("--%s reads %q, want %q", name, got, want)
		}
		if prev, dup := seen[config.EnvVar(name)]; dup {
			t.Errorf("--%s and --%s share %s", prev, name, config.EnvVar(name))
		}
		seen[config.EnvVar(name)] = name
	}
}

func TestValidateAccepts(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(*config.Config)
	}{
		{"default", func(*config.Config) {}},
		// A site's member runs the embedded etcd: every field but the
		// external etcd's (and the way back of a gateway alone), and
		// every field but the site's.
		{"every field set, a site's member", func(c *config.Config) {
			*c = allSet()
			c.Etcd.Servers, c.Etcd.CAFile, c.Etcd.CertFile, c.Etcd.KeyFile = nil, "", "", ""
			c.Update.RestoreOnNewerData = false
		}},
		{"every field set, an external etcd", func(c *config.Config) {
			*c = allSet()
			c.Site = config.Default().Site
		}},
		{"port 0", func(c *config.Config) { c.Server.SecurePort = 0 }},
		{"IPv6 any", func(c *config.Config) { c.Server.BindAddress = "::" }},
		{"unix etcd without TLS", func(c *config.Config) { c.Etcd.Servers = []string{"unix:///run/etcd.sock"} }},
		{"external etcd with CA only", func(c *config.Config) {
			c.Etcd.Servers = []string{"http://10.0.0.1:2379"}
			c.Etcd.CAFile = "/ca.pem"
		}},
		{"cache off everywhere", func(c *config.Config) { c.Cache.Enabled = false; c.Cache.DefaultSize = 0 }},
		{"history window at the minimum", func(c *config.Config) {
			c.Cache.HistoryWindow = dur(config.MinHistoryWindow)
			c.Cache.HistoryWindows = []string{"pods#75s"}
		}},
		{"compaction off", func(c *config.Config) { c.Etcd.CompactionInterval = dur(0) }},
		{"log json, verbose", func(c *config.Config) { c.Log.Format = config.LogFormatJSON; c.Log.Verbosity = 10 }},
		{"no controllers", func(c *config.Config) { c.Server.Controllers = nil }},
		{"IPv6 service range", func(c *config.Config) { c.Server.ServiceClusterIPRange = "fd00::/112" }},
		{"issuer without a colon", func(c *config.Config) { c.Server.ServiceAccountIssuer = "kubestore" }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := config.Default()
			tc.mutate(&cfg)
			if err := cfg.Validate(); err != nil {
				t.Errorf("Validate() = %v, want nil", err)
			}
			cc, err := cfg.Complete()
			if err != nil {
				t.Fatalf("Complete() = %v, want nil", err)
			}
			if !reflect.DeepEqual(cc.Config(), cfg) {
				t.Errorf("Complete().Config() = %+v, want %+v", cc.Config(), cfg)
			}
		})
	}
}

// joined returns the individual errors of an errors.Join.
func joined(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	if err == nil {
		return nil
	}
	return []error{err}
}

func TestValidateRefuses(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(*config.Config)
		want   [][]string // per reported error: the flag and the value it must name
	}{
		{"empty data dir", func(c *config.Config) { c.DataDir = "" },
			[][]string{{"--data-dir", `""`}}},
		{"peer advertise unspecified", func(c *config.Config) { c.Site.PeerAdvertiseAddress = "0.0.0.0" },
			[][]string{{"--peer-advertise-address", "0.0.0.0", "reach"}}},
		{"peer advertise with external etcd", func(c *config.Config) {
			c.Site.PeerAdvertiseAddress = "10.0.0.1"
			c.Etcd.Servers = []string{"https://10.0.0.2:2379"}
		}, [][]string{{"--peer-advertise-address", "10.0.0.1", "--etcd-servers"}}},
		{"peer port zero", func(c *config.Config) { c.Site.PeerPort = 0 },
			[][]string{{"--peer-port", `"0"`}}},
		{"peer bind not an IP", func(c *config.Config) { c.Site.PeerBindAddress = "gw1" },
			[][]string{{"--peer-bind-address", "gw1"}}},
		{"member name", func(c *config.Config) { c.Site.MemberName = "Gateway_1" },
			[][]string{{"--member-name", "Gateway_1"}}},
		{"restore on newer data on a site's member", func(c *config.Config) {
			c.Site.PeerAdvertiseAddress = "10.0.0.2"
			c.Update.RestoreOnNewerData = true
		}, [][]string{{"--restore-on-newer-data", "--peer-advertise-address", "10.0.0.2", "new site"}}},
		{"tunnel without a mirror", func(c *config.Config) { c.Mirror.TunnelEndpoints = []string{"https://tunnel.example:8132"} },
			[][]string{{"--tunnel-endpoint", "https://tunnel.example:8132", "--upstream-kubeconfig"}}},
		{"tunnel not https", func(c *config.Config) {
			c.Mirror.UpstreamKubeconfig, c.Mirror.NodeName, c.Mirror.Rules = "/etc/up.kubeconfig", "edge-1", config.DefaultMirrorRules()
			c.Mirror.TunnelEndpoints = []string{"https://tunnel.example:8132", "tunnel.example:8132", "https://tunnel.example:8132"}
		}, [][]string{{"--tunnel-endpoint", "tunnel.example:8132", "https://HOST[:PORT]"}, {"--tunnel-endpoint", "https://tunnel.example:8132", "twice"}}},
		{"join without the site", func(c *config.Config) {
			c.Site.Join, c.Site.JoinToken = "https://10.0.0.1:6443", testJoinToken
		}, [][]string{{"--join", "https://10.0.0.1:6443", "--peer-advertise-address"}}},
		{"join not https", func(c *config.Config) {
			c.Site.PeerAdvertiseAddress = "10.0.0.2"
			c.Site.Join, c.Site.JoinToken = "http://10.0.0.1:6443", testJoinToken
		}, [][]string{{"--join", "http://10.0.0.1:6443", "https://HOST:PORT"}}},
		{"join without a token", func(c *config.Config) {
			c.Site.PeerAdvertiseAddress = "10.0.0.2"
			c.Site.Join = "https://10.0.0.1:6443"
		}, [][]string{{"--join", "--join-token"}}},
		{"bad token, secret withheld", func(c *config.Config) {
			c.Site.PeerAdvertiseAddress = "10.0.0.2"
			c.Site.Join, c.Site.JoinToken = "https://10.0.0.1:6443", "K10abc::supersecretvalue1234"
		}, [][]string{{"--join-token", "hex digits"}}},
		{"election below 5 heartbeats", func(c *config.Config) { c.Etcd.ElectionTimeout = dur(400 * time.Millisecond) },
			[][]string{{"--etcd-election-timeout", "400ms", "5 times"}}},
		{"unknown controller", func(c *config.Config) { c.Server.Controllers = []string{"*", "-gc"} },
			[][]string{{"--controllers", "-gc", "garbage-collector-controller"}}},
		{"controller twice", func(c *config.Config) {
			c.Server.Controllers = []string{"namespace-controller", "-namespace-controller"}
		},
			[][]string{{"--controllers", "-namespace-controller", "more than once"}}},
		{"service range not a CIDR", func(c *config.Config) { c.Server.ServiceClusterIPRange = "10.0.0.1" },
			[][]string{{"--service-cluster-ip-range", "10.0.0.1"}}},
		{"service range with host bits", func(c *config.Config) { c.Server.ServiceClusterIPRange = "10.0.0.1/24" },
			[][]string{{"--service-cluster-ip-range", "10.0.0.1/24", "10.0.0.0/24"}}},
		{"service range too small", func(c *config.Config) { c.Server.ServiceClusterIPRange = "10.0.0.0/30" },
			[][]string{{"--service-cluster-ip-range", "10.0.0.0/30", "8 addresses"}}},
		{"service range too large", func(c *config.Config) { c.Server.ServiceClusterIPRange = "10.0.0.0/8" },
			[][]string{{"--service-cluster-ip-range", "10.0.0.0/8", "too large"}}},
		{"two IPv4 service ranges", func(c *config.Config) { c.Server.ServiceClusterIPRange = "10.0.0.0/24,10.1.0.0/24" },
			[][]string{{"--service-cluster-ip-range", "10.0.0.0/24,10.1.0.0/24", "one IPv4 and one IPv6"}}},
		{"http issuer", func(c *config.Config) { c.Server.ServiceAccountIssuer = "http://kubestore" },
			[][]string{{"--service-account-issuer", "http://kubestore", "https"}}},
		{"bind address is a name", func(c *config.Config) { c.Server.BindAddress = "localhost" },
			[][]string{{"--bind-address", "localhost"}}},
		{"bind address with port", func(c *config.Config) { c.Server.BindAddress = "127.0.0.1:6443" },
			[][]string{{"--bind-address", "127.0.0.1:6443"}}},
		{"advertise address is a name", func(c *config.Config) { c.Server.AdvertiseAddress = "gateway" },
			[][]string{{"--advertise-address", "gateway", "must be an IP address"}}},
		{"advertise address on loopback", func(c *config.Config) { c.Server.AdvertiseAddress = "127.0.0.1" },
			[][]string{{"--advertise-address", "127.0.0.1", "loopback", "default/kubernetes"}}},
		{"advertise address unspecified", func(c *config.Config) { c.Server.AdvertiseAddress = "0.0.0.0" },
			[][]string{{"--advertise-address", "0.0.0.0", "unspecified"}}},
		{"advertise address link-local", func(c *config.Config) { c.Server.AdvertiseAddress = "169.254.20.10" },
			[][]string{{"--advertise-address", "169.254.20.10", "link-local"}}},
		{"advertise address of the other family", func(c *config.Config) { c.Server.AdvertiseAddress = "fd00::10" },
			[][]string{{"--advertise-address", "fd00::10", "family", "10.0.0.0/24"}}},
		{"port 70000", func(c *config.Config) { c.Server.SecurePort = 70000 },
			[][]string{{"--secure-port", "70000"}}},
		{"negative port", func(c *config.Config) { c.Server.SecurePort = -1 },
			[][]string{{"--secure-port", "-1"}}},
		{"SAN with a space", func(c *config.Config) { c.Server.TLSSANs = []string{"gw.local", "my host"} },
			[][]string{{"--tls-san", "my host"}}},
		{"negative shutdown timeout", func(c *config.Config) { c.Server.ShutdownTimeout = dur(-time.Second) },
			[][]string{{"--shutdown-timeout", "-1s"}}},
		{"zero request timeout", func(c *config.Config) { c.Server.RequestTimeout = dur(0) },
			[][]string{{"--request-timeout", "0s"}}},
		{"negative min request timeout", func(c *config.Config) { c.Server.MinRequestTimeout = dur(-5 * time.Minute) },
			[][]string{{"--min-request-timeout", "-5m0s"}}},
		{"negative inflight", func(c *config.Config) { c.Server.MaxRequestsInFlight = -3 },
			[][]string{{"--max-requests-inflight", "-3"}}},
		{"negative mutating inflight", func(c *config.Config) { c.Server.MaxMutatingRequestsInFlight = -4 },
			[][]string{{"--max-mutating-requests-inflight", "-4"}}},
		{"zero body size", func(c *config.Config) { c.Server.MaxRequestBodyBytes = 0 },
			[][]string{{"--max-request-body-bytes", `"0"`}}},
		{"etcd server without scheme", func(c *config.Config) { c.Etcd.Servers = []string{"https://ok:2379", "localhost:2379"} },
			[][]string{{"--etcd-servers", "localhost:2379"}}},
		{"etcd server with ftp scheme", func(c *config.Config) { c.Etcd.Servers = []string{"ftp://etcd:2379"} },
			[][]string{{"--etcd-servers", "ftp://etcd:2379"}}},
		{"CA file without etcd servers", func(c *config.Config) { c.Etcd.CAFile = "/ca.pem" },
			[][]string{{"--etcd-cafile", "/ca.pem", "--etcd-servers"}}},
		{"cert and key without etcd servers", func(c *config.Config) { c.Etcd.CertFile = "/c.pem"; c.Etcd.KeyFile = "/k.pem" },
			[][]string{{"--etcd-certfile", "/c.pem", "--etcd-servers"}, {"--etcd-keyfile", "/k.pem", "--etcd-servers"}}},
		{"cert without key", func(c *config.Config) { c.Etcd.Servers = []string{"https://e:2379"}; c.Etcd.CertFile = "/c.pem" },
			[][]string{{"--etcd-certfile", "/c.pem", "--etcd-keyfile"}}},
		{"key without cert", func(c *config.Config) { c.Etcd.Servers = []string{"https://e:2379"}; c.Etcd.KeyFile = "/k.pem" },
			[][]string{{"--etcd-keyfile", "/k.pem", "--etcd-certfile"}}},
		{"prefix without slash", func(c *config.Config) { c.Etcd.Prefix = "registry" },
			[][]string{{"--etcd-prefix", "registry"}}},
		{"prefix is the root", func(c *config.Config) { c.Etcd.Prefix = "/" },
			[][]string{{"--etcd-prefix", `"/"`}}},
		{"negative compaction interval", func(c *config.Config) { c.Etcd.CompactionInterval = dur(-time.Minute) },
			[][]string{{"--etcd-compaction-interval", "-1m0s"}}},
		{"zero etcd start timeout", func(c *config.Config) { c.Etcd.StartTimeout = dur(0) },
			[][]string{{"--etcd-start-timeout", "0s"}}},
		{"zero snapshot count", func(c *config.Config) { c.Etcd.SnapshotCount = 0 },
			[][]string{{"--etcd-snapshot-count", `"0"`}}},
		{"zero quota", func(c *config.Config) { c.Etcd.QuotaBackendBytes = 0 },
			[][]string{{"--etcd-quota-backend-bytes", `"0"`}}},
		{"negative batch interval", func(c *config.Config) { c.Etcd.BackendBatchInterval = dur(-time.Second) },
			[][]string{{"--etcd-backend-batch-interval", "-1s"}}},
		{"negative update trial period", func(c *config.Config) { c.Update.TrialPeriod = dur(-time.Hour) },
			[][]string{{"--update-trial-period", "-1h0m0s"}}},
		{"negative batch limit", func(c *config.Config) { c.Etcd.BackendBatchLimit = -1 },
			[][]string{{"--etcd-backend-batch-limit", "-1"}}},
		{"zero max request bytes", func(c *config.Config) { c.Etcd.MaxRequestBytes = 0 },
			[][]string{{"--etcd-max-request-bytes", `"0"`}}},
		{"tiny WAL segment", func(c *config.Config) { c.Etcd.WALSegmentBytes = 1 << 20 },
			[][]string{{"--etcd-wal-segment-bytes", `"1Mi"`}}},
		{"negative disk reserve", func(c *config.Config) { c.Etcd.ReservedDiskBytes = -1 },
			[][]string{{"--etcd-reserved-disk-bytes", `"-1"`}}},
		{"zero progress notify interval", func(c *config.Config) { c.Etcd.WatchProgressNotifyInterval = dur(0) },
			[][]string{{"--etcd-watch-progress-notify-interval", "0s"}}},
		{"negative default cache size", func(c *config.Config) { c.Cache.DefaultSize = -1 },
			[][]string{{"--default-watch-cache-size", "-1"}}},
		{"cache size without size", func(c *config.Config) { c.Cache.Sizes = []string{"pods"} },
			[][]string{{"--watch-cache-sizes", `"pods"`}}},
		{"negative cache size", func(c *config.Config) { c.Cache.Sizes = []string{"pods#-1"} },
			[][]string{{"--watch-cache-sizes", "pods#-1"}}},
		{"cache size not a number", func(c *config.Config) { c.Cache.Sizes = []string{"pods#x"} },
			[][]string{{"--watch-cache-sizes", "pods#x"}}},
		{"cache size of a capitalised resource", func(c *config.Config) { c.Cache.Sizes = []string{"Pods#1"} },
			[][]string{{"--watch-cache-sizes", "Pods#1"}}},
		{"cache size twice", func(c *config.Config) { c.Cache.Sizes = []string{"pods#1", "secrets#0", "pods#2"} },
			[][]string{{"--watch-cache-sizes", "pods#2"}}},
		{"history window below 75s", func(c *config.Config) { c.Cache.HistoryWindow = dur(74 * time.Second) },
			[][]string{{"--watch-cache-history-window", "1m14s", "1m15s"}}},
		{"per-resource history window below 75s", func(c *config.Config) { c.Cache.HistoryWindows = []string{"pods#1m"} },
			[][]string{{"--watch-cache-history-windows", "pods#1m", "1m15s"}}},
		{"per-resource history window not a duration", func(c *config.Config) { c.Cache.HistoryWindows = []string{"pods#soon"} },
			[][]string{{"--watch-cache-history-windows", "pods#soon"}}},
		{"per-resource history window twice", func(c *config.Config) {
			c.Cache.HistoryWindows = []string{"leases.coordination.k8s.io#2m", "leases.coordination.k8s.io#3m"}
		}, [][]string{{"--watch-cache-history-windows", "leases.coordination.k8s.io#3m"}}},
		{"feature gate without value", func(c *config.Config) { c.Server.FeatureGates = []string{"ListFromCacheSnapshot"} },
			[][]string{{"--feature-gates", "ListFromCacheSnapshot", "Name=true"}}},
		{"feature gate not a bool", func(c *config.Config) { c.Server.FeatureGates = []string{"ListFromCacheSnapshot=off"} },
			[][]string{{"--feature-gates", "ListFromCacheSnapshot=off", "true or false"}}},
		{"feature gate twice", func(c *config.Config) { c.Server.FeatureGates = []string{"A=true", "A=false"} },
			[][]string{{"--feature-gates", "A=false", "more than once"}}},
		{"relative unix socket", func(c *config.Config) { c.Server.UnixSocket = "ks.sock" },
			[][]string{{"--unix-socket", "ks.sock", "absolute"}}},
		{"unix socket path too long", func(c *config.Config) { c.Server.UnixSocket = "/" + strings.Repeat("s", 107) },
			[][]string{{"--unix-socket", "107 bytes"}}},
		{"unix socket group without socket", func(c *config.Config) { c.Server.UnixSocketGroup = "agents" },
			[][]string{{"--unix-socket-group", "agents", "--unix-socket"}}},
		{"memory limit below the minimum", func(c *config.Config) { c.Memory.Limit = 1 << 20 },
			[][]string{{"--memory-limit", "1Mi", "48Mi"}}},
		{"object budget of zero", func(c *config.Config) { c.Memory.MaxObjects = []string{"pods#0"} },
			[][]string{{"--max-objects", "pods#0", "positive"}}},
		{"object budget not a number", func(c *config.Config) { c.Memory.MaxObjects = []string{"pods#1k"} },
			[][]string{{"--max-objects", "pods#1k"}}},
		{"object budget twice", func(c *config.Config) { c.Memory.MaxObjects = []string{"pods#1", "pods#2"} },
			[][]string{{"--max-objects", "pods#2"}}},
		{"byte budget not a size", func(c *config.Config) { c.Memory.MaxBytes = []string{"secrets#lots"} },
			[][]string{{"--max-bytes", "secrets#lots"}}},
		{"byte budget of zero", func(c *config.Config) { c.Memory.MaxBytes = []string{"secrets#0"} },
			[][]string{{"--max-bytes", "secrets#0", "positive"}}},
		{"byte budget without resource", func(c *config.Config) { c.Memory.MaxBytes = []string{"#1Mi"} },
			[][]string{{"--max-bytes", "#1Mi"}}},
		{"log format xml", func(c *config.Config) { c.Log.Format = "xml" },
			[][]string{{"--log-format", "xml"}}},
		{"negative verbosity", func(c *config.Config) { c.Log.Verbosity = -1 },
			[][]string{{"--v", "-1"}}},
		{"several problems", func(c *config.Config) {
			c.Server.SecurePort = 70000
			c.Cache.Sizes = []string{"pods"}
			c.Log.Format = "xml"
			c.Etcd.Prefix = "registry"
		}, [][]string{{"--secure-port", "70000"}, {"--etcd-prefix", "registry"}, {"--watch-cache-sizes", "pods"}, {"--log-format", "xml"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := config.Default()
			tc.mutate(&cfg)
			err := cfg.Validate()
			if err == nil {
				t.Fatalf("Validate() accepted %+v", cfg)
			}
			if _, cerr := cfg.Complete(); cerr == nil || cerr.Error() != err.Error() {
				t.Errorf("Complete() = %v, want Validate's %v", cerr, err)
			}
			errs := joined(err)
			if len(errs) != len(tc.want) {
				t.Errorf("Validate() reported %d problems, want %d: %v", len(errs), len(tc.want), err)
			}
			for _, want := range tc.want {
				found := false
				for _, e := range errs {
					ok := true
					for _, w := range want {
						ok = ok && strings.Contains(e.Error(), w)
					}
					found = found || ok
				}
				if !found {
					t.Errorf("no error contains all of %q; got:\n%v", want, err)
				}
			}
			for _, e := range errs {
				if !strings.HasPrefix(e.Error(), "invalid --") || strings.Contains(e.Error(), "\n") {
					t.Errorf("message %q is not one line starting with \"invalid --<flag>\"", e)
				}
			}
		})
	}
}

func TestParseWatchCacheSizes(t *testing.T) {
	cases := []struct {
		name    string
		in      []string
		want    map[schema.GroupResource]int
		wantErr string // the entry the error must name
	}{
		{"none", nil, map[schema.GroupResource]int{}, ""},
		{"core resources", []string{"pods#100", "secrets#0"},
			map[schema.GroupResource]int{{Resource: "pods"}: 100, {Resource: "secrets"}: 0}, ""},
		{"group-qualified", []string{"leases.coordination.k8s.io#0", "endpointslices.discovery.k8s.io#7"},
			map[schema.GroupResource]int{{Group: "coordination.k8s.io", Resource: "leases"}: 0, {Group: "discovery.k8s.io", Resource: "endpointslices"}: 7}, ""},
		{"same resource in two groups", []string{"leases#1", "leases.coordination.k8s.io#0"},
			map[schema.GroupResource]int{{Resource: "leases"}: 1, {Group: "coordination.k8s.io", Resource: "leases"}: 0}, ""},
		{"no size", []string{"pods"}, nil, "pods"},
		{"empty size", []string{"pods#"}, nil, "pods#"},
		{"no resource", []string{"#5"}, nil, "#5"},
		{"negative", []string{"pods#-1"}, nil, "pods#-1"},
		{"not a number", []string{"pods#x"}, nil, "pods#x"},
		{"fraction", []string{"pods#1.5"}, nil, "pods#1.5"},
		{"two separators", []string{"pods#1#2"}, nil, "pods#1#2"},
		{"capitalised", []string{"Pods#1"}, nil, "Pods#1"},
		{"kind instead of resource", []string{"ConfigMap#1"}, nil, "ConfigMap#1"},
		{"duplicate", []string{"pods#1", "pods#2"}, nil, "pods#2"},
		{"duplicate with trailing dot", []string{"pods#1", "pods.#2"}, nil, "pods.#2"},
		{"empty entry", []string{""}, nil, `""`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := config.ParseWatchCacheSizes(tc.in)
			if tc.wantErr != "" {
				if err == nil {
					t.Fatalf("ParseWatchCacheSizes(%q) = %v, want an error", tc.in, got)
				}
				if !strings.Contains(err.Error(), "--watch-cache-sizes") || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("error %q does not name --watch-cache-sizes and %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseWatchCacheSizes(%q): %v", tc.in, err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("ParseWatchCacheSizes(%q) = %v, want %v", tc.in, got, tc.want)
			}
		})
	}
}

func TestParseHistoryWindows(t *testing.T) {
	cases := []struct {
		name    string
		in      []string
		want    map[schema.GroupResource]time.Duration
		wantErr string
	}{
		{"none", nil, map[schema.GroupResource]time.Duration{}, ""},
		{"core and grouped", []string{"pods#5m", "leases.coordination.k8s.io#75s", "events#1h30m"},
			map[schema.GroupResource]time.Duration{
				{Resource: "pods"}: 5 * time.Minute,
				{Group: "coordination.k8s.io", Resource: "leases"}: 75 * time.Second,
				{Resource: "events"}: 90 * time.Minute,
			}, ""},
		{"below the minimum", []string{"pods#74s"}, nil, "pods#74s"},
		{"zero", []string{"pods#0"}, nil, "pods#0"},
		{"negative", []string{"pods#-5m"}, nil, "pods#-5m"},
		{"no unit", []string{"pods#300"}, nil, "pods#300"},
		{"not a duration", []string{"pods#soon"}, nil, "pods#soon"},
		{"no window", []string{"pods"}, nil, "pods"},
		{"capitalised", []string{"Pods#5m"}, nil, "Pods#5m"},
		{"duplicate", []string{"pods#5m", "pods#6m"}, nil, "pods#6m"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := config.ParseHistoryWindows(tc.in)
			if tc.wantErr != "" {
				if err == nil {
					t.Fatalf("ParseHistoryWindows(%q) = %v, want an error", tc.in, got)
				}
				if !strings.Contains(err.Error(), "--watch-cache-history-windows") || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("error %q does not name --watch-cache-history-windows and %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseHistoryWindows(%q): %v", tc.in, err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("ParseHistoryWindows(%q) = %v, want %v", tc.in, got, tc.want)
			}
		})
	}
}

func TestBudgetFor(t *testing.T) {
	cm := schema.GroupResource{Resource: "configmaps"}
	lease := schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}
	cases := []struct {
		name   string
		memory config.Memory
		gr     schema.GroupResource
		want   config.Budget
	}{
		{"nothing set", config.Memory{}, cm, config.Budget{}},
		{"objects only", config.Memory{MaxObjects: []string{"configmaps#10"}}, cm, config.Budget{Objects: 10}},
		{"another resource's budget", config.Memory{MaxObjects: []string{"configmaps#10"}, MaxBytes: []string{"configmaps#1Mi"}}, lease, config.Budget{}},
		{"grouped resource", config.Memory{MaxObjects: []string{"leases.coordination.k8s.io#5"}}, lease, config.Budget{Objects: 5}},
		{"derived from the memory limit", config.Memory{Limit: 128 << 20}, cm, config.Budget{Bytes: 16 << 20, BytesFrom: "1/8 of --memory-limit=128Mi"}},
		{"explicit bytes win over the derived default", config.Memory{Limit: 128 << 20, MaxBytes: []string{"configmaps#1Mi"}}, cm, config.Budget{Bytes: 1 << 20, BytesFrom: "--max-bytes=configmaps#1Mi"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := config.Default()
			cfg.Memory = tc.memory
			cc, err := cfg.Complete()
			if err != nil {
				t.Fatal(err)
			}
			got := cc.BudgetFor(tc.gr)
			if got != tc.want {
				t.Errorf("BudgetFor(%s) = %+v, want %+v", tc.gr, got, tc.want)
			}
			if got.Unbounded() != (tc.want == config.Budget{}) {
				t.Errorf("Unbounded() = %v for %+v", got.Unbounded(), got)
			}
		})
	}
}

func TestParseByteSize(t *testing.T) {
	cases := []struct {
		in      string
		want    config.ByteSize
		wantErr bool
	}{
		{"0", 0, false},
		{"1", 1, false},
		{"1000000", 1000000, false},
		{"1k", 1000, false},
		{"1M", 1000000, false},
		{"1Ki", 1024, false},
		{"1536Ki", 1536 << 10, false},
		{"256Mi", 256 << 20, false},
		{"2Gi", 2 << 30, false},
		{"10Ti", 10 << 40, false},
		{"1e3", 1000, false},
		{"1E18", 1000000000000000000, false},
		{" 64Mi ", 64 << 20, false},
		// Found by FuzzParseByteSize: the parser would compute a billion digits.
		{"99999999E999999999", 0, true},
		{"1e-999999999", 0, true},
		{"", 0, true},
		{"-1", 0, true},
		{"-1Mi", 0, true},
		{"1.5", 0, true},
		{"0.5", 0, true},
		{"abc", 0, true},
		{"1MB", 0, true},
		{"1 Mi", 0, true},
		{"100m", 0, true},
		{"1000m", 1, false},
		{"100Ti", 100 << 40, false},
		{"1Pi", 1 << 50, false},
		{"123456Gi", 123456 << 30, false},
		{"1000000000000000000", 1000000000000000000, false},
		{"8Ei", 0, true},
		{"1e-3999999", 0, true},
	}
	for _, tc := range cases {
		t.Run(strconv.Quote(tc.in), func(t *testing.T) {
			got, err := config.ParseByteSize(tc.in)
			if tc.wantErr {
				if err == nil {
					t.Fatalf("ParseByteSize(%q) = %d, want an error", tc.in, got)
				}
				if !strings.Contains(err.Error(), strconv.Quote(tc.in)) {
					t.Errorf("error %q does not name %q", err, tc.in)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("ParseByteSize(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
			}
			var b config.ByteSize
			if err := b.Set(tc.in); err != nil || b != tc.want {
				t.Errorf("Set(%q) = %d, %v; want %d", tc.in, b, err, tc.want)
			}
		})
	}
}

func TestCacheForResource(t *testing.T) {
	pods := schema.GroupResource{Resource: "pods"}
	leases := schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}
	coreLeases := schema.GroupResource{Resource: "leases"}
	def := time.Duration(config.DefaultHistoryWindow)
	cases := []struct {
		name  string
		cache func(*config.Cache)
		gr    schema.GroupResource
		want  config.ResourceCache
	}{
		{"default", func(*config.Cache) {}, pods, config.ResourceCache{Enabled: true, HistoryWindow: def}},
		{"global off", func(c *config.Cache) { c.Enabled = false }, pods, config.ResourceCache{HistoryWindow: def}},
		{"global off beats explicit size", func(c *config.Cache) { c.Enabled = false; c.Sizes = []string{"pods#100"} },
			pods, config.ResourceCache{HistoryWindow: def}},
		{"default size 0", func(c *config.Cache) { c.DefaultSize = 0 }, pods, config.ResourceCache{HistoryWindow: def}},
		{"default size 0, explicit non-zero", func(c *config.Cache) { c.DefaultSize = 0; c.Sizes = []string{"pods#1"} },
			pods, config.ResourceCache{Enabled: true, HistoryWindow: def}},
		{"default size 0, other resource listed", func(c *config.Cache) { c.DefaultSize = 0; c.Sizes = []string{"secrets#10"} },
			pods, config.ResourceCache{HistoryWindow: def}},
		{"explicit 0", func(c *config.Cache) { c.Sizes = []string{"pods#0"} }, pods, config.ResourceCache{HistoryWindow: def}},
		{"explicit 0 of another resource", func(c *config.Cache) { c.Sizes = []string{"secrets#0"} },
			pods, config.ResourceCache{Enabled: true, HistoryWindow: def}},
		{"explicit non-zero", func(c *config.Cache) { c.Sizes = []string{"pods#5"} }, pods, config.ResourceCache{Enabled: true, HistoryWindow: def}},
		{"group-qualified 0", func(c *config.Cache) { c.Sizes = []string{"leases.coordination.k8s.io#0"} },
			leases, config.ResourceCache{HistoryWindow: def}},
		{"group-qualified 0 leaves the core group alone", func(c *config.Cache) { c.Sizes = []string{"leases.coordination.k8s.io#0"} },
			coreLeases, config.ResourceCache{Enabled: true, HistoryWindow: def}},
		{"bare name does not match a group", func(c *config.Cache) { c.Sizes = []string{"leases#0"} },
			leases, config.ResourceCache{Enabled: true, HistoryWindow: def}},
		{"group-qualified non-zero with default 0", func(c *config.Cache) {
			c.DefaultSize = 0
			c.Sizes = []string{"leases.coordination.k8s.io#10"}
		}, leases, config.ResourceCache{Enabled: true, HistoryWindow: def}},
		{"global history window", func(c *config.Cache) { c.HistoryWindow = dur(3 * time.Minute) },
			pods, config.ResourceCache{Enabled: true, HistoryWindow: 3 * time.Minute}},
		{"per-resource history window", func(c *config.Cache) {
			c.HistoryWindow = dur(3 * time.Minute)
			c.HistoryWindows = []string{"leases.coordination.k8s.io#10m", "pods#2m"}
		}, leases, config.ResourceCache{Enabled: true, HistoryWindow: 10 * time.Minute}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := config.Default()
			tc.cache(&c.Cache)
			cc, err := c.Complete()
			if err != nil {
				t.Fatal(err)
			}
			if got := cc.CacheFor(tc.gr); got != tc.want {
				t.Errorf("CacheFor(%v) = %+v, want %+v", tc.gr, got, tc.want)
			}
		})
	}
	t.Run("invalid lists", func(t *testing.T) {
		for _, cache := range []config.Cache{
			{Enabled: true, DefaultSize: 1, HistoryWindow: dur(config.DefaultHistoryWindow), Sizes: []string{"pods"}},
			{Enabled: true, DefaultSize: 1, HistoryWindow: dur(config.DefaultHistoryWindow), HistoryWindows: []string{"pods#1s"}},
		} {
			c := config.Default()
			c.Cache = cache
			if _, err := c.Complete(); err == nil {
				t.Errorf("Complete with %+v succeeded, want an error", cache)
			}
		}
	})
}

// The gates are parsed once, and what Completed hands out is a copy.
func TestCompletedFeatureGates(t *testing.T) {
	c := config.Default()
	c.Server.FeatureGates = []string{"ListFromCacheSnapshot=false", " DetectCacheInconsistency=1"}
	cc, err := c.Complete()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"ListFromCacheSnapshot": false, "DetectCacheInconsistency": true}
	got := cc.FeatureGates()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("FeatureGates() = %v, want %v", got, want)
	}
	got["ListFromCacheSnapshot"] = true
	if again := cc.FeatureGates(); !reflect.DeepEqual(again, want) {
		t.Errorf("changing the returned map changed the completed config: %v", again)
	}
}

func TestDurationAndByteSizeText(t *testing.T) {
	var d config.Duration
	if err := d.Set("1m30s"); err != nil || d.Duration != 90*time.Second || d.String() != "1m30s" {
		t.Errorf("Duration.Set(1m30s) = %v, %v", d, err)
	}
	if err := d.Set("90"); err == nil {
		t.Errorf("Duration.Set(90) accepted a number without unit")
	}
	for _, tc := range []struct {
		b    config.ByteSize
		want string
	}{{0, "0"}, {1000, "1k"}, {1 << 20, "1Mi"}, {1536 << 10, "1536Ki"}, {2 << 30, "2Gi"}, {1000001, "1000001"}} {
		if got := tc.b.String(); got != tc.want {
			t.Errorf("ByteSize(%d).String() = %q, want %q", int64(tc.b), got, tc.want)
		}
	}
}

// The same flags are defined on the app and on its commands; a flag given
// before or after the command name must count.
func TestFlagsBeforeAndAfterCommand(t *testing.T) {
	clearEnv(t)
	var got config.Config
	action := func(c *cli.Context) error {
		var err error
		got, err = config.Load(c)
		return err
	}
	app := &cli.App{Name: "kubestore", Flags: config.Flags(), Action: action,
		Commands: []*cli.Command{{Name: "sub", Flags: config.Flags(), Action: action}}}
	for _, args := range [][]string{
		{"--data-dir", "/x", "sub"},
		{"sub", "--data-dir", "/x"},
		{"--data-dir", "/y", "sub", "--data-dir", "/x"},
	} {
		got = config.Config{}
		if err := app.RunContext(t.Context(), append([]string{"kubestore"}, args...)); err != nil {
			t.Fatalf("%q: %v", args, err)
		}
		if got.DataDir != "/x" {
			t.Errorf("%q: data dir %q, want /x", args, got.DataDir)
		}
	}
}

// The endpoint of default/kubernetes: --advertise-address, else a bind
// address pods can reach; a loopback or unspecified bind address
// advertises none.
func TestAdvertisedAddress(t *testing.T) {
	for _, tc := range []struct {
		bind, advertise, want string
	}{
		{"127.0.0.1", "", ""},
		{"0.0.0.0", "", ""},
		{"::", "", ""},
		{"192.0.2.5", "", "192.0.2.5"},
		{"0.0.0.0", "192.0.2.10", "192.0.2.10"},
		{"192.0.2.5", "192.0.2.10", "192.0.2.10"},
	} {
		got, ok := config.Server{BindAddress: tc.bind, AdvertiseAddress: tc.advertise}.AdvertisedAddress()
		if ok != (tc.want != "") || ok && got.String() != tc.want {
			t.Errorf("bind %s, advertise %q: %v %v, want %q", tc.bind, tc.advertise, got, ok, tc.want)
		}
	}
}
