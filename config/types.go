package config

import (
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"

	"gopkg.in/inf.v0"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Duration is a time.Duration written as "75s" in YAML and on the command
// line.
type Duration struct{ time.Duration }

func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("a duration must be a string such as \"30s\": %w", err)
	}
	return d.Set(s)
}

// Set implements flag.Value.
func (d *Duration) Set(s string) error {
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	d.Duration = v
	return nil
}

// ByteSize is a size in bytes written as a Kubernetes quantity ("256Mi",
// "1536Ki", "1000000").
type ByteSize int64

func (b ByteSize) String() string {
	return resource.NewQuantity(int64(b), resource.BinarySI).String()
}

func (b ByteSize) MarshalJSON() ([]byte, error) { return json.Marshal(b.String()) }

func (b *ByteSize) UnmarshalJSON(data []byte) error {
	var s string
	if err := json.Unmarshal(data, &s); err != nil {
		var n int64
		if err := json.Unmarshal(data, &n); err != nil {
			return fmt.Errorf("a size must be a quantity such as \"256Mi\"")
		}
		*b = ByteSize(n)
		return nil
	}
	return b.Set(s)
}

// Set implements flag.Value.
func (b *ByteSize) Set(s string) error {
	v, err := ParseByteSize(s)
	if err != nil {
		return err
	}
	*b = v
	return nil
}

// maxByteSizeText bounds the text of a size: the quantity parser's cost
// grows quickly with long exponents, and no real size needs more.
const maxByteSizeText = 32

// decimalExponent is the exponent of a quantity in scientific notation.
var decimalExponent = regexp.MustCompile(`[eE]([+-]?[0-9]+)$`)

// ParseByteSize reads a quantity such as "128Mi" as a whole number of bytes.
func ParseByteSize(text string) (ByteSize, error) {
	s := strings.TrimSpace(text)
	if len(s) > maxByteSizeText {
		return 0, fmt.Errorf("%q is not a size such as 256Mi: too long", text)
	}
	// A decimal exponent far out of range ("1E999999999") would make the
	// checks below compute a number of a billion digits: refuse it first.
	if m := decimalExponent.FindStringSubmatch(s); m != nil {
		if e, err := strconv.Atoi(m[1]); err != nil || e > 30 || e < -30 {
			return 0, fmt.Errorf("%q is not a whole number of bytes that fits in 63 bits", text)
		}
	}
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not a size such as 256Mi: %w", text, err)
	}
	if q.Sign() < 0 {
		return 0, fmt.Errorf("%q is negative", text)
	}
	// Value rounds up, and the parser saturates at the int64 limit: only an
	// exact size below it compares equal as a decimal.
	v := q.Value()
	if v == math.MaxInt64 || q.AsDec().Cmp(inf.NewDec(v, 0)) != 0 {
		return 0, fmt.Errorf("%q is not a whole number of bytes that fits in 63 bits", text)
	}
	return ByteSize(v), nil
}

// perResource splits kube-apiserver's "resource[.group]#value" list syntax
// and parses each value with parse. flag names the flag in errors.
func perResource[T any](flag string, entries []string, parse func(string) (T, error)) (map[schema.GroupResource]T, error) {
	out := make(map[schema.GroupResource]T, len(entries))
	for _, e := range entries {
		name, value, ok := strings.Cut(e, "#")
		if !ok || name == "" || strings.Contains(value, "#") {
			return nil, invalid(flag, e, "must be resource[.group]#value")
		}
		gr := schema.ParseGroupResource(name)
		if len(validation.IsDNS1123Label(gr.Resource)) > 0 || (gr.Group != "" && len(validation.IsDNS1123Subdomain(gr.Group)) > 0) {
			return nil, invalid(flag, e, "the resource must be the lowercase plural name, with its group unless it is a core resource, e.g. pods or leases.coordination.k8s.io")
		}
		v, err := parse(value)
		if err != nil {
			return nil, invalid(flag, e, err.Error())
		}
		if _, dup := out[gr]; dup {
			return nil, invalid(flag, e, "names "+gr.String()+" more than once")
		}
		out[gr] = v
	}
	return out, nil
}

// ParseWatchCacheSizes parses --watch-cache-sizes, e.g. "pods#100,secrets#0".
func ParseWatchCacheSizes(entries []string) (map[schema.GroupResource]int, error) {
	return perResource(FlagWatchCacheSizes, entries, func(s string) (int, error) {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("the size must be a non-negative integer")
		}
		return n, nil
	})
}

// ParseHistoryWindows parses --watch-cache-history-windows, e.g. "pods#5m".
func ParseHistoryWindows(entries []string) (map[schema.GroupResource]time.Duration, error) {
	return perResource(FlagWatchCacheHistoryWindows, entries, func(s string) (time.Duration, error) {
		d, err := time.ParseDuration(s)
		if err != nil {
			return 0, fmt.Errorf("the window must be a duration such as 5m")
		}
		if d < MinHistoryWindow {
			return 0, fmt.Errorf("the window must be at least %s", MinHistoryWindow)
		}
		return d, nil
	})
}

// ResourceCache is the watch-cache setting of one resource.
type ResourceCache struct {
	// Enabled false means every read of the resource goes to etcd.
	Enabled bool
	// HistoryWindow is the minimum event history the cache keeps.
	HistoryWindow time.Duration
}

// ParseMaxObjects parses --max-objects, e.g. "configmaps#10000".
func ParseMaxObjects(entries []string) (map[schema.GroupResource]int64, error) {
	return perResource(FlagMaxObjects, entries, func(s string) (int64, error) {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n <= 0 {
			return 0, fmt.Errorf("the budget must be a positive integer")
		}
		return n, nil
	})
}

// ParseMaxBytes parses --max-bytes, e.g. "configmaps#16Mi".
func ParseMaxBytes(entries []string) (map[schema.GroupResource]int64, error) {
	return perResource(FlagMaxBytes, entries, func(s string) (int64, error) {
		n, err := ParseByteSize(s)
		if err != nil {
			return 0, err
		}
		if n == 0 {
			return 0, fmt.Errorf("the budget must be positive")
		}
		return int64(n), nil
	})
}

// Budget is what one resource may store; 0 is unbounded.
type Budget struct {
	Objects int64
	Bytes   int64
	// BytesFrom says where Bytes came from, for error messages:
	// "--max-bytes=configmaps#16Mi" or "1/8 of --memory-limit=128Mi".
	BytesFrom string
}

// Unbounded reports whether the budget limits nothing.
func (b Budget) Unbounded() bool { return b.Objects == 0 && b.Bytes == 0 }

// ParseFeatureGates parses --feature-gates entries, e.g.
// "ListFromCacheSnapshot=false". It checks the syntax; which names exist is
// the feature gate's to say when it is applied.
func ParseFeatureGates(entries []string) (map[string]bool, error) {
	out := make(map[string]bool, len(entries))
	for _, e := range entries {
		name, value, ok := strings.Cut(strings.TrimSpace(e), "=")
		if !ok || name == "" {
			return nil, invalid(FlagFeatureGates, e, "must be Name=true or Name=false")
		}
		on, err := strconv.ParseBool(value)
		if err != nil {
			return nil, invalid(FlagFeatureGates, e, "the value must be true or false")
		}
		if _, dup := out[name]; dup {
			return nil, invalid(FlagFeatureGates, e, "names "+name+" more than once")
		}
		out[name] = on
	}
	return out, nil
}
