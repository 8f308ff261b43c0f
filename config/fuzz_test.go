package config_test

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubestore/kubestore/config"
)

// Seeds beyond these live in testdata/fuzz/<FuzzName>/.

func entries(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

// checkPerResourceError asserts the shape of a per-resource parse error:
// it names the flag and one of the offending entries.
func checkPerResourceError(t *testing.T, flag string, in []string, err error) {
	t.Helper()
	msg := err.Error()
	if !strings.HasPrefix(msg, "invalid --"+flag+" ") {
		t.Errorf("error %q does not start with invalid --%s", msg, flag)
	}
	named := false
	for _, e := range in {
		named = named || strings.Contains(msg, strconv.Quote(e))
	}
	if !named {
		t.Errorf("error %q names none of the entries %q", msg, in)
	}
}

func FuzzParseWatchCacheSizes(f *testing.F) {
	for _, s := range []string{"", "pods#100", "pods#100,secrets#0", "leases.coordination.k8s.io#0", "pods#1,pods#2", "Pods#1", "pods#-1", "pods", "#1", "pods.#1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		in := entries(s)
		got, err := config.ParseWatchCacheSizes(in)

		cfg := config.Default()
		cfg.Cache.Sizes = in
		cc, verr := cfg.Complete()
		if err != nil {
			checkPerResourceError(t, config.FlagWatchCacheSizes, in, err)
			if verr == nil {
				t.Errorf("Complete accepted --watch-cache-sizes %q that ParseWatchCacheSizes refuses: %v", in, err)
			}
			return
		}
		if verr != nil {
			t.Fatalf("Complete refused --watch-cache-sizes %q that parses: %v", in, verr)
		}
		if len(got) != len(in) {
			t.Errorf("%d entries %q gave %d resources %v", len(in), in, len(got), got)
		}
		var again []string
		for gr, size := range got {
			if size < 0 {
				t.Errorf("%v has negative size %d", gr, size)
			}
			if gr.Resource != strings.ToLower(gr.Resource) {
				t.Errorf("%v is not lowercase", gr)
			}
			if rc := cc.CacheFor(gr); rc.Enabled != (size > 0) {
				t.Errorf("CacheFor(%v) = %+v with size %d", gr, rc, size)
			}
			again = append(again, gr.String()+"#"+strconv.Itoa(size))
		}
		back, err := config.ParseWatchCacheSizes(again)
		if err != nil || !reflect.DeepEqual(back, got) {
			t.Errorf("round trip of %q through %q: %v, %v; want %v", in, again, back, err, got)
		}
	})
}

func FuzzParseHistoryWindows(f *testing.F) {
	for _, s := range []string{"", "pods#5m", "pods#75s,leases.coordination.k8s.io#1h", "pods#74s", "pods#-5m", "pods#300", "pods#1m15s,pods#2m", "Pods#5m"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		in := entries(s)
		got, err := config.ParseHistoryWindows(in)

		cfg := config.Default()
		cfg.Cache.HistoryWindows = in
		cc, verr := cfg.Complete()
		if err != nil {
			checkPerResourceError(t, config.FlagWatchCacheHistoryWindows, in, err)
			if verr == nil {
				t.Errorf("Complete accepted --watch-cache-history-windows %q that ParseHistoryWindows refuses: %v", in, err)
			}
			return
		}
		if verr != nil {
			t.Fatalf("Complete refused --watch-cache-history-windows %q that parses: %v", in, verr)
		}
		if len(got) != len(in) {
			t.Errorf("%d entries %q gave %d resources %v", len(in), in, len(got), got)
		}
		var again []string
		for gr, d := range got {
			if d < config.MinHistoryWindow {
				t.Errorf("%v has window %s below %s", gr, d, config.MinHistoryWindow)
			}
			if gr.Resource != strings.ToLower(gr.Resource) {
				t.Errorf("%v is not lowercase", gr)
			}
			if rc := cc.CacheFor(gr); rc.HistoryWindow != d {
				t.Errorf("CacheFor(%v) = %+v; want window %s", gr, rc, d)
			}
			again = append(again, gr.String()+"#"+d.String())
		}
		back, err := config.ParseHistoryWindows(again)
		if err != nil || !reflect.DeepEqual(back, got) {
			t.Errorf("round trip of %q through %q: %v, %v; want %v", in, again, back, err, got)
		}
	})
}

func FuzzParseByteSize(f *testing.F) {
	for _, s := range []string{"0", "1", "256Mi", "1536Ki", "2Gi", "1k", "1e3", "-1", "1.5", "0.5Ki", " 1Mi ", "1MB", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := config.ParseByteSize(s)
		if err != nil {
			if !strings.Contains(err.Error(), fmt.Sprintf("%q", s)) {
				t.Errorf("error %q does not name the input %q", err, s)
			}
			return
		}
		if got < 0 {
			t.Fatalf("ParseByteSize(%q) = %d, negative", s, got)
		}
		text := got.String()
		back, err := config.ParseByteSize(text)
		if err != nil || back != got {
			t.Errorf("ParseByteSize(%q) = %d, whose text %q parses as %d, %v", s, got, text, back, err)
		}
		js, err := got.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		var b config.ByteSize
		if err := b.UnmarshalJSON(js); err != nil || b != got {
			t.Errorf("JSON %s of %d reads back as %d, %v", js, got, b, err)
		}
	})
}

// FuzzConfigFile feeds arbitrary bytes to the --config loader: it must
// refuse them with a message naming --config and the file, or produce a
// configuration that, if valid, YAML() writes back as a file that loads to
// the same configuration.
func FuzzConfigFile(f *testing.F) {
	for _, s := range []string{
		"",
		"dataDir: /data\n",
		"server:\n  securePort: 7443\n  shutdownTimeout: 10s\n  maxRequestBodyBytes: 1Mi\n",
		"etcd:\n  servers: [https://10.0.0.1:2379]\n  caFile: /ca.pem\n  quotaBackendBytes: 134217728\n",
		"cache:\n  watchCache: false\n  watchCacheSizes: [pods#0, leases.coordination.k8s.io#10]\n  historyWindows: [pods#5m]\n",
		"log:\n  verbosity: 4\n  format: json\n",
		"unknown: 1\n",
		"server: [1, 2\n",
	} {
		f.Add([]byte(s))
	}
	f.Add(func() []byte {
		data, err := allSet().YAML()
		if err != nil {
			f.Fatal(err)
		}
		return data
	}())
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		path := filepath.Join(dir, "in.yaml")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		cfg, err := config.ReadFile(path)
		if err != nil {
			if msg := err.Error(); !strings.Contains(msg, "--config") || !strings.Contains(msg, path) {
				t.Errorf("error %q does not name --config and %s", msg, path)
			}
			return
		}
		if cfg.Validate() != nil {
			return
		}
		out, err := cfg.YAML()
		if err != nil {
			t.Fatalf("YAML() of a loaded config: %v", err)
		}
		path2 := filepath.Join(dir, "out.yaml")
		if err := os.WriteFile(path2, out, 0o600); err != nil {
			t.Fatal(err)
		}
		back, err := config.ReadFile(path2)
		if err != nil {
			t.Fatalf("YAML() output does not load: %v\n%s", err, out)
		}
		if !reflect.DeepEqual(normalize(back), normalize(cfg)) {
			t.Errorf("round trip changed the config:\n got %+v\nwant %+v\nyaml:\n%s", back, cfg, out)
		}
		if err := back.Validate(); err != nil {
			t.Errorf("round trip made a valid config invalid: %v", err)
		}
	})
}

// FuzzParseBudgets checks --max-objects and --max-bytes: a parse error
// names the flag and the entry, Validate agrees with the parser, and every
// accepted budget is positive.
func FuzzParseBudgets(f *testing.F) {
	for _, s := range []string{"", "configmaps#10000", "pods#1,leases.coordination.k8s.io#5", "pods#0", "pods#-1", "pods#1Mi", "secrets#16Mi", "pods#1,pods#2", "Pods#1", "#5"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		in := entries(s)
		for _, p := range []struct {
			flag  string
			parse func([]string) (map[schema.GroupResource]int64, error)
			set   func(*config.Config)
		}{
			{config.FlagMaxObjects, config.ParseMaxObjects, func(c *config.Config) { c.Memory.MaxObjects = in }},
			{config.FlagMaxBytes, config.ParseMaxBytes, func(c *config.Config) { c.Memory.MaxBytes = in }},
		} {
			got, err := p.parse(in)
			cfg := config.Default()
			p.set(&cfg)
			cc, verr := cfg.Complete()
			if err != nil {
				checkPerResourceError(t, p.flag, in, err)
				if verr == nil {
					t.Errorf("Complete accepted --%s %q that the parser refuses: %v", p.flag, in, err)
				}
				continue
			}
			if verr != nil {
				t.Fatalf("Complete refused --%s %q that parses: %v", p.flag, in, verr)
			}
			if len(got) != len(in) {
				t.Errorf("%d entries %q gave %d resources %v", len(in), in, len(got), got)
			}
			for gr, n := range got {
				if n <= 0 {
					t.Errorf("--%s %q: %v has budget %d, want positive", p.flag, in, gr, n)
				}
				if b := cc.BudgetFor(gr); (p.flag == config.FlagMaxObjects && b.Objects != n) || (p.flag == config.FlagMaxBytes && b.Bytes != n) {
					t.Errorf("--%s %q: BudgetFor(%v) = %+v, want %d", p.flag, in, gr, b, n)
				}
			}
		}
	})
}

func FuzzParseFeatureGates(f *testing.F) {
	for _, s := range []string{"", "ListFromCacheSnapshot=false", "A=true,B=false", "A=1", "A", "=true", "A=yes", "A=true,A=false", " A = true", "A=true,"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		in := entries(s)
		got, err := config.ParseFeatureGates(in)
		if err != nil {
			checkPerResourceError(t, config.FlagFeatureGates, in, err)
			return
		}
		if len(got) != len(in) {
			t.Errorf("%q: %d gates from %d entries", s, len(got), len(in))
		}
		// What was parsed prints back to entries that parse the same.
		var again []string
		for name, on := range got {
			if name == "" || strings.Contains(name, "=") {
				t.Errorf("%q: gate name %q", s, name)
			}
			again = append(again, fmt.Sprintf("%s=%t", name, on))
		}
		back, err := config.ParseFeatureGates(again)
		if err != nil || !reflect.DeepEqual(back, got) {
			t.Errorf("%q: parsed %v, printed %q, parsed back %v, %v", s, got, again, back, err)
		}
	})
}
