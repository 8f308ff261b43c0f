// Package config holds kubestore's one configuration: its documented
// defaults, the YAML file, KUBESTORE_* environment variables and flags (in
// that order of precedence), and the validation that names the flag and the
// bad value. It is data only and imports none of kubestore's other packages.
package config

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/sets"
)

// Defaults. Each one is what an unconfigured device gets; the flag help
// repeats it.
const (
	// DefaultUpdateTrialPeriod: an hour of healthy service commits an
	// update, as an A/B updater marks its slot good after a boot that
	// held.
	DefaultUpdateTrialPeriod = time.Hour

	DefaultBindAddress         = "127.0.0.1"
	DefaultSecurePort          = 6443
	DefaultShutdownTimeout     = 30 * time.Second
	DefaultRequestTimeout      = 60 * time.Second
	DefaultMinRequestTimeout   = 30 * time.Minute
	DefaultMaxRequestsInFlight = 400
	DefaultMaxMutatingInFlight = 200
	DefaultMaxRequestBodyBytes = 3 << 20
	DefaultEtcdPrefix          = "/registry"
	DefaultCompactionInterval  = 5 * time.Minute
	DefaultEtcdStartTimeout    = 60 * time.Second
	// etcd keeps the raft log since its last snapshot, plus the catch-up
	// entries, in memory (~1.5–3 KB an entry), and its backend keeps every
	// value of the largest batch referenced until the slot is reused
	// (txBuffer.reset in go.etcd.io/etcd/server/v3/storage/backend keeps
	// the slices): these three bound both near 3 MB (issue 15,
	// docs/PERFORMANCE.md).
	DefaultSnapshotCount        = 1000
	DefaultSnapshotCatchUp      = 100
	DefaultBackendBatchInterval = 5 * time.Second
	DefaultBackendBatchLimit    = 1000
	DefaultMaxRequestBytes      = 1536 << 10
	DefaultProgressNotify       = 5 * time.Second
	DefaultWatchCacheSize       = 100
	DefaultHistoryWindow        = 75 * time.Second
	DefaultLogFormat            = LogFormatText

	// DefaultWALSegmentBytes is the size each etcd WAL segment is
	// preallocated to (etcd's own is 64 MB). etcd keeps two segments from
	// its first start, the current one and the next, so this sets a fresh
	// data directory's size; docs/RELIABILITY.md has what smaller segments
	// cost in writes and start-up.
	DefaultWALSegmentBytes = 4 << 20
	// MinWALSegmentBytes keeps a segment larger than the largest request
	// etcd accepts by default, so a request does not cut a segment by itself.
	MinWALSegmentBytes = 2 << 20
	// DefaultReservedDiskBytes is the free space below which kubestore
	// refuses writes to the embedded etcd: two WAL segments (the next is
	// preallocated when one fills) and as much again for the database,
	// whose file grows by writing into holes.
	DefaultReservedDiskBytes = 4 * DefaultWALSegmentBytes

	// DefaultBudgetFraction: with --memory-limit, a resource without a
	// --max-bytes budget may store objects of at most 1/8 of the limit in
	// encoded size. Decoded in the watch cache with its indexes and snapshot
	// they take about five times their encoded size (docs/PERFORMANCE.md),
	// so one full resource stays well under the limit.
	DefaultBudgetFraction = 8

	// MaxUnixSocketPath is the longest path a unix socket may have on Linux
	// (sun_path is 108 bytes with the terminating NUL).
	MaxUnixSocketPath = 107

	// MinMemoryLimit is the smallest --memory-limit: below it the idle
	// server alone would keep the garbage collector running.
	MinMemoryLimit = 48 << 20

	// MinHistoryWindow is the shortest event history the upstream cacher
	// accepts (cacher.DefaultEventFreshDuration: one bookmark period plus
	// 15 s), so a bookmark is always within the history a client resumes
	// from.
	MinHistoryWindow = 75 * time.Second

	LogFormatText = "text"
	LogFormatJSON = "json"
)

// DefaultQuotaBackendBytes is the embedded etcd's space quota. bbolt maps
// the whole database (quota × 1.1) into the address space, which a 32-bit
// process cannot afford beyond a few hundred MiB; a 64-bit one gets etcd's
// own default.
var DefaultQuotaBackendBytes = func() ByteSize {
	if strconv.IntSize == 32 {
		return 256 << 20
	}
	return 2 << 30
}()

// Config is the whole configuration. Sub-configs are passed whole to the
// component that owns them.
type Config struct {
	// DataDir holds all state: etcd/, pki/, admin.kubeconfig.
	DataDir string `json:"dataDir"`
	Server  Server `json:"server"`
	Etcd    Etcd   `json:"etcd"`
	Cache   Cache  `json:"cache"`
	Memory  Memory `json:"memory"`
	Log     Log    `json:"log"`
	Mirror  Mirror `json:"mirror"`
	Update  Update `json:"update"`
	Site    Site   `json:"site"`
}

// Update configures what a release does on the data of another: the trial
// of an update and the way back from a newer one (README: "Updating the
// firmware").
type Update struct {
	// TrialPeriod is how long the server serves healthily after an update
	// before it commits it by itself; 0 waits for kubestore update commit.
	TrialPeriod Duration `json:"trialPeriod"`
	// RestoreOnNewerData restores the pre-update snapshot instead of
	// refusing data of a newer format.
	RestoreOnNewerData bool `json:"restoreOnNewerData"`
}

// Server configures the HTTPS API server.
type Server struct {
	BindAddress string `json:"bindAddress"`
	// AdvertiseAddress is the address the node's pods reach the API at:
	// the endpoint of the Service default/kubernetes. Empty: the bind
	// address when it is one pods can reach, else none.
	AdvertiseAddress string `json:"advertiseAddress,omitempty"`
	// SecurePort 0 picks a free port (tests); the kubeconfig records it.
	SecurePort int `json:"securePort"`
	// TLSSANs are extra names and IPs for the serving certificate.
	TLSSANs                     []string `json:"tlsSANs,omitempty"`
	ShutdownTimeout             Duration `json:"shutdownTimeout"`
	RequestTimeout              Duration `json:"requestTimeout"`
	MinRequestTimeout           Duration `json:"minRequestTimeout"`
	MaxRequestsInFlight         int      `json:"maxRequestsInFlight"`
	MaxMutatingRequestsInFlight int      `json:"maxMutatingRequestsInFlight"`
	MaxRequestBodyBytes         ByteSize `json:"maxRequestBodyBytes"`
	// FeatureGates are Name=bool entries for the k8s.io/apiserver feature
	// gates, over upstream's defaults.
	FeatureGates []string `json:"featureGates,omitempty"`
	// TokenAuthFile holds bearer tokens in kube-apiserver's CSV format.
	TokenAuthFile string `json:"tokenAuthFile,omitempty"`
	// AuthorizationPolicyFile grants local agents access; without it only
	// the admin identity is authorized.
	AuthorizationPolicyFile string `json:"authorizationPolicyFile,omitempty"`
	// UnixSocket, when set, is a second, plain-HTTP listener whose peers are
	// authenticated by their uid (SO_PEERCRED).
	UnixSocket      string `json:"unixSocket,omitempty"`
	UnixSocketGroup string `json:"unixSocketGroup,omitempty"`
	// EncryptionProviderConfig is an EncryptionConfiguration file; empty
	// means the generated one in <data-dir>/pki.
	EncryptionProviderConfig string `json:"encryptionProviderConfig,omitempty"`
	// CustomResources serves apiextensions.k8s.io and custom resources
	// (apiextensions-apiserver chained behind the built-in API); false
	// does not build it at all.
	CustomResources bool `json:"customResources"`
	// ManifestsDir holds manifests applied (server-side apply, field
	// manager kubestore-manifests) at start and when they change.
	ManifestsDir string `json:"manifestsDir,omitempty"`
	// Controllers switches the controllers and allocators that run beside
	// the API: "*", "name", "-name" (kube-controller-manager's syntax).
	Controllers []string `json:"controllers"`
	// ServiceClusterIPRange is where ClusterIPs are allocated from.
	ServiceClusterIPRange string `json:"serviceClusterIPRange"`
	// ServiceAccountIssuer is the iss claim of ServiceAccount tokens and
	// the issuer of the OIDC discovery document.
	ServiceAccountIssuer string `json:"serviceAccountIssuer"`
}

// Etcd configures storage: the embedded etcd server by default, or an
// external etcd cluster when Servers is set.
type Etcd struct {
	// Servers, when set, are the client URLs of an external etcd cluster
	// and no embedded etcd is started.
	Servers  []string `json:"servers,omitempty"`
	CAFile   string   `json:"caFile,omitempty"`
	CertFile string   `json:"certFile,omitempty"`
	KeyFile  string   `json:"keyFile,omitempty"`
	// Prefix is prepended to every key, as kube-apiserver's --etcd-prefix.
	Prefix string `json:"prefix"`
	// CompactionInterval is how often old revisions are compacted; 0 never.
	CompactionInterval Duration `json:"compactionInterval"`
	// StartTimeout bounds the wait for the embedded etcd (or the external
	// cluster) to become ready.
	StartTimeout Duration `json:"startTimeout"`

	// Embedded etcd tuning; ignored with Servers.
	SnapshotCount          uint64   `json:"snapshotCount"`
	SnapshotCatchUpEntries uint64   `json:"snapshotCatchUpEntries"`
	QuotaBackendBytes      ByteSize `json:"quotaBackendBytes"`
	BackendBatchInterval   Duration `json:"backendBatchInterval"`
	BackendBatchLimit      int      `json:"backendBatchLimit"`
	MaxRequestBytes        ByteSize `json:"maxRequestBytes"`
	WALSegmentBytes        ByteSize `json:"walSegmentBytes"`
	ReservedDiskBytes      ByteSize `json:"reservedDiskBytes"`
	// WatchProgressNotifyInterval is how often etcd tells a quiet watch
	// the current revision, so that the watch cache and bookmarks keep up
	// with writes to other resources (KEP-1904, efficient watch
	// resumption).
	WatchProgressNotifyInterval Duration `json:"watchProgressNotifyInterval"`
	// HeartbeatInterval and ElectionTimeout are raft's timing between the
	// members of a site (etcd's --heartbeat-interval and
	// --election-timeout).
	HeartbeatInterval Duration `json:"heartbeatInterval"`
	ElectionTimeout   Duration `json:"electionTimeout"`
}

// External reports whether an external etcd cluster is configured.
func (e Etcd) External() bool { return len(e.Servers) > 0 }

// Cache configures the upstream watch cache per resource, with
// kube-apiserver's flag syntax.
type Cache struct {
	// Enabled is the global switch (--watch-cache).
	Enabled bool `json:"watchCache"`
	// DefaultSize applies to resources absent from Sizes: 0 reads them
	// straight from etcd, any other value caches them.
	DefaultSize int `json:"defaultWatchCacheSize"`
	// Sizes are resource[.group]#size entries; size 0 reads that resource
	// straight from etcd. Upstream sizes caches dynamically, so every
	// non-zero size means the same: cached.
	Sizes []string `json:"watchCacheSizes,omitempty"`
	// HistoryWindow is the minimum duration of events a cache keeps for
	// watches resuming from an older resourceVersion.
	HistoryWindow Duration `json:"historyWindow"`
	// HistoryWindows are resource[.group]#duration overrides.
	HistoryWindows []string `json:"historyWindows,omitempty"`
}

// Memory bounds what the server may hold. The watch cache keeps every live
// object decoded in memory, so the stored objects are the floor of memory
// use; budgets bound that floor per resource.
type Memory struct {
	// Limit is the Go runtime's soft memory limit (runtime/debug
	// SetMemoryLimit); 0 leaves it to GOMEMLIMIT. A resource without a
	// byte budget of its own gets Limit/DefaultBudgetFraction.
	Limit ByteSize `json:"limit"`
	// MaxObjects are resource[.group]#count budgets.
	MaxObjects []string `json:"maxObjects,omitempty"`
	// MaxBytes are resource[.group]#size budgets of the objects' stored
	// (encoded) size.
	MaxBytes []string `json:"maxBytes,omitempty"`
	// Profiling serves /debug/pprof to the admin identity.
	Profiling bool `json:"profiling"`
}

// Log configures logging to stderr.
type Log struct {
	// Verbosity is klog's -v level.
	Verbosity int    `json:"verbosity"`
	Format    string `json:"format"`
}

// Default returns the configuration of a device that was given none.
func Default() Config {
	return Config{
		DataDir: DefaultDataDir(),
		Server: Server{
			BindAddress:                 DefaultBindAddress,
			SecurePort:                  DefaultSecurePort,
			ShutdownTimeout:             Duration{DefaultShutdownTimeout},
			RequestTimeout:              Duration{DefaultRequestTimeout},
			MinRequestTimeout:           Duration{DefaultMinRequestTimeout},
			MaxRequestsInFlight:         DefaultMaxRequestsInFlight,
			MaxMutatingRequestsInFlight: DefaultMaxMutatingInFlight,
			MaxRequestBodyBytes:         DefaultMaxRequestBodyBytes,
			CustomResources:             true,
			Controllers:                 []string{"*"},
			ServiceClusterIPRange:       DefaultServiceClusterIPRange,
			ServiceAccountIssuer:        DefaultServiceAccountIssuer,
		},
		Etcd: Etcd{
			Prefix:                      DefaultEtcdPrefix,
			CompactionInterval:          Duration{DefaultCompactionInterval},
			StartTimeout:                Duration{DefaultEtcdStartTimeout},
			SnapshotCount:               DefaultSnapshotCount,
			SnapshotCatchUpEntries:      DefaultSnapshotCatchUp,
			QuotaBackendBytes:           DefaultQuotaBackendBytes,
			BackendBatchInterval:        Duration{DefaultBackendBatchInterval},
			BackendBatchLimit:           DefaultBackendBatchLimit,
			MaxRequestBytes:             DefaultMaxRequestBytes,
			WALSegmentBytes:             DefaultWALSegmentBytes,
			ReservedDiskBytes:           DefaultReservedDiskBytes,
			WatchProgressNotifyInterval: Duration{DefaultProgressNotify},
			HeartbeatInterval:           Duration{DefaultHeartbeatInterval},
			ElectionTimeout:             Duration{DefaultElectionTimeout},
		},
		Cache: Cache{
			Enabled:       true,
			DefaultSize:   DefaultWatchCacheSize,
			HistoryWindow: Duration{DefaultHistoryWindow},
		},
		Log:    Log{Format: DefaultLogFormat},
		Mirror: Mirror{Rules: DefaultMirrorRules()},
		Update: Update{TrialPeriod: Duration{DefaultUpdateTrialPeriod}},
		Site:   Site{PeerBindAddress: DefaultPeerBindAddress, PeerPort: DefaultPeerPort},
	}
}

// DefaultDataDir is /var/lib/kubestore for root and the user's data
// directory otherwise, so a newcomer can start kubestore without root.
func DefaultDataDir() string {
	if os.Geteuid() == 0 {
		return "/var/lib/kubestore"
	}
	if d := os.Getenv("XDG_DATA_HOME"); d != "" {
		return filepath.Join(d, "kubestore")
	}
	if home, err := os.UserHomeDir(); err == nil {
		return filepath.Join(home, ".local", "share", "kubestore")
	}
	return "kubestore-data"
}

// notAnEndpoint says why ip cannot be an endpoint of a Service, as the
// validation of Endpoints refuses it, or "" when it can be.
func notAnEndpoint(ip netip.Addr) string {
	switch {
	case ip.IsUnspecified():
		return "is unspecified"
	case ip.IsLoopback():
		return "is a loopback address"
	case ip.IsLinkLocalUnicast(), ip.IsLinkLocalMulticast():
		return "is link-local"
	case ip.IsMulticast():
		return "is multicast"
	}
	return ""
}

// AdvertisedAddress is where the node's pods reach the API (the endpoint
// of default/kubernetes): --advertise-address, else --bind-address when
// an endpoint can name it; false when there is none.
func (s Server) AdvertisedAddress() (netip.Addr, bool) {
	for _, a := range []string{s.AdvertiseAddress, s.BindAddress} {
		if ip, err := netip.ParseAddr(a); err == nil && notAnEndpoint(ip) == "" {
			return ip.Unmap(), true
		}
	}
	return netip.Addr{}, false
}

// invalid is the one shape of every validation message: the flag, the
// offending value, and what is allowed.
func invalid(flag string, value any, why string) error {
	return fmt.Errorf("invalid --%s %q: %s", flag, fmt.Sprint(value), why)
}

// Validate reports every problem at once, each naming its flag and value.
func (c Config) Validate() error {
	_, err := c.complete()
	return err
}

// complete validates c and parses its lists on the way, each once.
func (c Config) complete() (*completed, error) {
	cc := &completed{cfg: c}
	var errs []error
	if c.DataDir == "" {
		errs = append(errs, invalid(FlagDataDir, c.DataDir, "must not be empty"))
	}
	errs = append(errs, c.Server.validate(cc)...)
	errs = append(errs, c.Etcd.validate()...)
	errs = append(errs, c.Etcd.validateRaftTimes()...)
	errs = append(errs, c.Site.validate(c.Etcd, c.Server)...)
	errs = append(errs, c.Cache.validate(cc)...)
	errs = append(errs, c.Memory.validate(cc)...)
	errs = append(errs, c.Mirror.validate()...)
	if c.Log.Format != LogFormatText && c.Log.Format != LogFormatJSON {
		errs = append(errs, invalid(FlagLogFormat, c.Log.Format, "must be text or json"))
	}
	if c.Update.RestoreOnNewerData && c.Site.Enabled() {
		// The snapshot is of this member alone: restored, it founds a
		// one-member site beside the others (a split brain), which any
		// gateway whose --join names it would then join.
		errs = append(errs, invalid(FlagRestoreOnNewerData, true, fmt.Sprintf("a member of a site (--%s %s) cannot go back alone: it would found a new site from its old snapshot beside the others; take the site back together (README, \"A site of several gateways\")",
			FlagPeerAdvertiseAddress, c.Site.PeerAdvertiseAddress)))
	}
	if c.Update.TrialPeriod.Duration < 0 {
		errs = append(errs, invalid(FlagUpdateTrialPeriod, c.Update.TrialPeriod, "must not be negative (0 commits only on kubestore update commit)"))
	}
	if c.Log.Verbosity < 0 {
		errs = append(errs, invalid(FlagVerbosity, c.Log.Verbosity, "must not be negative"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return cc, nil
}

func (s Server) validate(cc *completed) []error {
	var errs []error
	if net.ParseIP(s.BindAddress) == nil {
		errs = append(errs, invalid(FlagBindAddress, s.BindAddress, "must be an IP address"))
	}
	advertise, advertiseErr := netip.ParseAddr(s.AdvertiseAddress)
	if s.AdvertiseAddress != "" {
		if advertiseErr != nil {
			errs = append(errs, invalid(FlagAdvertiseAddress, s.AdvertiseAddress, "must be an IP address"))
		} else if why := notAnEndpoint(advertise); why != "" {
			errs = append(errs, invalid(FlagAdvertiseAddress, s.AdvertiseAddress, why+": the Service default/kubernetes cannot name it (pods could not reach it)"))
		}
	}
	if s.SecurePort < 0 || s.SecurePort > 65535 {
		errs = append(errs, invalid(FlagSecurePort, s.SecurePort, "must be between 0 and 65535"))
	}
	for _, san := range s.TLSSANs {
		if san == "" || strings.ContainsAny(san, " /,") {
			errs = append(errs, invalid(FlagTLSSAN, san, "must be a DNS name or an IP address"))
		}
	}
	errs = append(errs,
		positive(FlagShutdownTimeout, s.ShutdownTimeout.Duration),
		positive(FlagRequestTimeout, s.RequestTimeout.Duration),
		positive(FlagMinRequestTimeout, s.MinRequestTimeout.Duration),
	)
	if s.MaxRequestsInFlight < 0 {
		errs = append(errs, invalid(FlagMaxRequestsInFlight, s.MaxRequestsInFlight, "must not be negative (0 means unlimited)"))
	}
	if s.MaxMutatingRequestsInFlight < 0 {
		errs = append(errs, invalid(FlagMaxMutatingRequestsInFlight, s.MaxMutatingRequestsInFlight, "must not be negative (0 means unlimited)"))
	}
	if s.MaxRequestBodyBytes <= 0 {
		errs = append(errs, invalid(FlagMaxRequestBodyBytes, s.MaxRequestBodyBytes, "must be positive"))
	}
	var err error
	if cc.featureGates, err = ParseFeatureGates(s.FeatureGates); err != nil {
		errs = append(errs, err)
	}
	if s.UnixSocket != "" {
		if !filepath.IsAbs(s.UnixSocket) {
			errs = append(errs, invalid(FlagUnixSocket, s.UnixSocket, "must be an absolute path"))
		} else if len(s.UnixSocket) > MaxUnixSocketPath {
			errs = append(errs, invalid(FlagUnixSocket, s.UnixSocket, fmt.Sprintf("is longer than the %d bytes a unix socket path may have", MaxUnixSocketPath)))
		}
	}
	if cc.controllers, err = parseControllers(s.Controllers); err != nil {
		errs = append(errs, err)
	}
	if cc.serviceCIDRs, err = ParseServiceClusterIPRange(s.ServiceClusterIPRange); err != nil {
		errs = append(errs, err)
	} else if advertiseErr == nil && advertise.Unmap().Is4() != cc.serviceCIDRs[0].Addr().Is4() {
		errs = append(errs, invalid(FlagAdvertiseAddress, s.AdvertiseAddress, "must be of the family of the first --"+FlagServiceClusterIPRange+" "+cc.serviceCIDRs[0].String()+", as the Service default/kubernetes"))
	}
	if err := validateIssuer(s.ServiceAccountIssuer); err != nil {
		errs = append(errs, err)
	}
	if s.UnixSocketGroup != "" && s.UnixSocket == "" {
		errs = append(errs, invalid(FlagUnixSocketGroup, s.UnixSocketGroup, "is only used with --unix-socket"))
	}
	return errs
}

func positive(flag string, d time.Duration) error {
	if d <= 0 {
		return invalid(flag, d, "must be a positive duration")
	}
	return nil
}

func (e Etcd) validate() []error {
	var errs []error
	for _, s := range e.Servers {
		if !strings.HasPrefix(s, "http://") && !strings.HasPrefix(s, "https://") &&
			!strings.HasPrefix(s, "unix://") && !strings.HasPrefix(s, "unixs://") {
			errs = append(errs, invalid(FlagEtcdServers, s, "must be a URL with scheme http, https, unix or unixs"))
		}
	}
	tlsFiles := map[string]string{FlagEtcdCAFile: e.CAFile, FlagEtcdCertFile: e.CertFile, FlagEtcdKeyFile: e.KeyFile}
	for _, flag := range sets.List(sets.KeySet(tlsFiles)) {
		if f := tlsFiles[flag]; f != "" && !e.External() {
			errs = append(errs, invalid(flag, f, "is only used with --etcd-servers"))
		}
	}
	switch {
	case e.CertFile != "" && e.KeyFile == "":
		errs = append(errs, invalid(FlagEtcdCertFile, e.CertFile, "needs --etcd-keyfile too"))
	case e.KeyFile != "" && e.CertFile == "":
		errs = append(errs, invalid(FlagEtcdKeyFile, e.KeyFile, "needs --etcd-certfile too"))
	}
	if !strings.HasPrefix(e.Prefix, "/") || e.Prefix == "/" {
		errs = append(errs, invalid(FlagEtcdPrefix, e.Prefix, `must start with "/" and not be "/" alone`))
	}
	if e.CompactionInterval.Duration < 0 {
		errs = append(errs, invalid(FlagEtcdCompactionInterval, e.CompactionInterval, "must not be negative (0 disables compaction)"))
	}
	errs = append(errs, positive(FlagEtcdStartTimeout, e.StartTimeout.Duration))
	if e.SnapshotCount == 0 {
		errs = append(errs, invalid(FlagEtcdSnapshotCount, e.SnapshotCount, "must be positive"))
	}
	if e.QuotaBackendBytes <= 0 {
		errs = append(errs, invalid(FlagEtcdQuotaBackendBytes, e.QuotaBackendBytes, "must be positive"))
	} else if strconv.IntSize == 32 && e.QuotaBackendBytes > 1<<30 {
		errs = append(errs, invalid(FlagEtcdQuotaBackendBytes, e.QuotaBackendBytes, "must be at most 1Gi on a 32-bit system (bbolt maps quota × 1.1 into the address space)"))
	}
	if e.BackendBatchInterval.Duration < 0 {
		errs = append(errs, invalid(FlagEtcdBackendBatchInterval, e.BackendBatchInterval, "must not be negative"))
	}
	if e.BackendBatchLimit < 0 {
		errs = append(errs, invalid(FlagEtcdBackendBatchLimit, e.BackendBatchLimit, "must not be negative"))
	}
	errs = append(errs, positive(FlagEtcdWatchProgressNotifyInterval, e.WatchProgressNotifyInterval.Duration))
	if e.MaxRequestBytes <= 0 {
		errs = append(errs, invalid(FlagEtcdMaxRequestBytes, e.MaxRequestBytes, "must be positive"))
	}
	if e.WALSegmentBytes < MinWALSegmentBytes || e.WALSegmentBytes > 1<<30 {
		errs = append(errs, invalid(FlagEtcdWALSegmentBytes, e.WALSegmentBytes, "must be between 2Mi and 1Gi"))
	}
	if e.ReservedDiskBytes < 0 {
		errs = append(errs, invalid(FlagEtcdReservedDiskBytes, e.ReservedDiskBytes, "must not be negative (0 refuses writes only on a read-only file system)"))
	}
	return errs
}

func (c Cache) validate(cc *completed) []error {
	var errs []error
	var err error
	if c.DefaultSize < 0 {
		errs = append(errs, invalid(FlagDefaultWatchCacheSize, c.DefaultSize, "must not be negative"))
	}
	if cc.cacheSizes, err = ParseWatchCacheSizes(c.Sizes); err != nil {
		errs = append(errs, err)
	}
	if c.HistoryWindow.Duration < MinHistoryWindow {
		errs = append(errs, invalid(FlagWatchCacheHistoryWindow, c.HistoryWindow, "must be at least "+MinHistoryWindow.String()))
	}
	if cc.historyWindows, err = ParseHistoryWindows(c.HistoryWindows); err != nil {
		errs = append(errs, err)
	}
	return errs
}

func (m Memory) validate(cc *completed) []error {
	var errs []error
	var err error
	if m.Limit != 0 && m.Limit < MinMemoryLimit {
		errs = append(errs, invalid(FlagMemoryLimit, m.Limit, "must be 0 (no limit) or at least "+ByteSize(MinMemoryLimit).String()))
	}
	if cc.maxObjects, err = ParseMaxObjects(m.MaxObjects); err != nil {
		errs = append(errs, err)
	}
	if cc.maxBytes, err = ParseMaxBytes(m.MaxBytes); err != nil {
		errs = append(errs, err)
	}
	return errs
}
