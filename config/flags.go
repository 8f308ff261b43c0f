package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/urfave/cli/v2"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// Flag names. Validation messages and the YAML keys' documentation refer to
// these.
const (
	FlagConfig                          = "config"
	FlagDataDir                         = "data-dir"
	FlagBindAddress                     = "bind-address"
	FlagAdvertiseAddress                = "advertise-address"
	FlagSecurePort                      = "secure-port"
	FlagTLSSAN                          = "tls-san"
	FlagShutdownTimeout                 = "shutdown-timeout"
	FlagRequestTimeout                  = "request-timeout"
	FlagMinRequestTimeout               = "min-request-timeout"
	FlagMaxRequestsInFlight             = "max-requests-inflight"
	FlagMaxMutatingRequestsInFlight     = "max-mutating-requests-inflight"
	FlagMaxRequestBodyBytes             = "max-request-body-bytes"
	FlagFeatureGates                    = "feature-gates"
	FlagTokenAuthFile                   = "token-auth-file"
	FlagAuthorizationPolicyFile         = "authorization-policy-file"
	FlagUnixSocket                      = "unix-socket"
	FlagUnixSocketGroup                 = "unix-socket-group"
	FlagEncryptionProviderConfig        = "encryption-provider-config"
	FlagCustomResources                 = "custom-resources"
	FlagManifestsDir                    = "manifests-dir"
	FlagEtcdServers                     = "etcd-servers"
	FlagEtcdCAFile                      = "etcd-cafile"
	FlagEtcdCertFile                    = "etcd-certfile"
	FlagEtcdKeyFile                     = "etcd-keyfile"
	FlagEtcdPrefix                      = "etcd-prefix"
	FlagEtcdCompactionInterval          = "etcd-compaction-interval"
	FlagEtcdStartTimeout                = "etcd-start-timeout"
	FlagEtcdSnapshotCount               = "etcd-snapshot-count"
	FlagEtcdSnapshotCatchUpEntries      = "etcd-snapshot-catchup-entries"
	FlagEtcdQuotaBackendBytes           = "etcd-quota-backend-bytes"
	FlagEtcdBackendBatchInterval        = "etcd-backend-batch-interval"
	FlagEtcdBackendBatchLimit           = "etcd-backend-batch-limit"
	FlagEtcdMaxRequestBytes             = "etcd-max-request-bytes"
	FlagEtcdWALSegmentBytes             = "etcd-wal-segment-bytes"
	FlagEtcdReservedDiskBytes           = "etcd-reserved-disk-bytes"
	FlagEtcdWatchProgressNotifyInterval = "etcd-watch-progress-notify-interval"
	FlagWatchCache                      = "watch-cache"
	FlagDefaultWatchCacheSize           = "default-watch-cache-size"
	FlagWatchCacheSizes                 = "watch-cache-sizes"
	FlagWatchCacheHistoryWindow         = "watch-cache-history-window"
	FlagWatchCacheHistoryWindows        = "watch-cache-history-windows"
	FlagMemoryLimit                     = "memory-limit"
	FlagMaxObjects                      = "max-objects"
	FlagMaxBytes                        = "max-bytes"
	FlagProfiling                       = "profiling"
	FlagVerbosity                       = "v"
	FlagLogFormat                       = "log-format"
	FlagUpstreamKubeconfig              = "upstream-kubeconfig"
	FlagNodeName                        = "node-name"
	FlagTunnelEndpoint                  = "tunnel-endpoint"
	FlagTunnelCAFile                    = "tunnel-ca-file"
	FlagControllers                     = "controllers"
	FlagServiceClusterIPRange           = "service-cluster-ip-range"
	FlagServiceAccountIssuer            = "service-account-issuer"
	FlagUpdateTrialPeriod               = "update-trial-period"
	FlagRestoreOnNewerData              = "restore-on-newer-data"
	FlagEtcdHeartbeatInterval           = "etcd-heartbeat-interval"
	FlagEtcdElectionTimeout             = "etcd-election-timeout"
	FlagMemberName                      = "member-name"
	FlagPeerAdvertiseAddress            = "peer-advertise-address"
	FlagPeerBindAddress                 = "peer-bind-address"
	FlagPeerPort                        = "peer-port"
	FlagJoin                            = "join"
	FlagJoinToken                       = "join-token"
)

// EnvVar is the environment variable that sets a flag: KUBESTORE_ and the
// flag name in upper case with underscores.
func EnvVar(flag string) string {
	if flag == FlagVerbosity {
		return "KUBESTORE_VERBOSITY"
	}
	return "KUBESTORE_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// binding ties one flag to one field of Config. field selects the field in
// any Config, so the same binding shows the default in the help text and
// later copies a set flag into the loaded configuration.
type binding struct {
	name  string
	flag  func(def *Config) cli.Flag
	apply func(c *cli.Context, dst *Config)
}

func bind[T any](name, usage string, field func(*Config) *T) binding {
	b := binding{name: name}
	env := []string{EnvVar(name)}
	switch any(field(&Config{})).(type) {
	case *string:
		b.flag = func(def *Config) cli.Flag {
			return &cli.StringFlag{Name: name, Usage: usage, EnvVars: env, Value: any(*field(def)).(string)}
		}
		b.apply = func(c *cli.Context, dst *Config) { *any(field(dst)).(*string) = c.String(name) }
	case *int:
		b.flag = func(def *Config) cli.Flag {
			return &cli.IntFlag{Name: name, Usage: usage, EnvVars: env, Value: any(*field(def)).(int)}
		}
		b.apply = func(c *cli.Context, dst *Config) { *any(field(dst)).(*int) = c.Int(name) }
	case *uint64:
		b.flag = func(def *Config) cli.Flag {
			return &cli.Uint64Flag{Name: name, Usage: usage, EnvVars: env, Value: any(*field(def)).(uint64)}
		}
		b.apply = func(c *cli.Context, dst *Config) { *any(field(dst)).(*uint64) = c.Uint64(name) }
	case *bool:
		b.flag = func(def *Config) cli.Flag {
			return &cli.BoolFlag{Name: name, Usage: usage, EnvVars: env, Value: any(*field(def)).(bool)}
		}
		b.apply = func(c *cli.Context, dst *Config) { *any(field(dst)).(*bool) = c.Bool(name) }
	case *[]string:
		b.flag = func(def *Config) cli.Flag {
			return &cli.StringSliceFlag{Name: name, Usage: usage, EnvVars: env, Value: cli.NewStringSlice(any(*field(def)).([]string)...)}
		}
		b.apply = func(c *cli.Context, dst *Config) { *any(field(dst)).(*[]string) = c.StringSlice(name) }
	case *Duration:
		b.flag = func(def *Config) cli.Flag {
			v := *any(field(def)).(*Duration)
			return &cli.GenericFlag{Name: name, Usage: usage, EnvVars: env, Value: &v}
		}
		b.apply = func(c *cli.Context, dst *Config) { *any(field(dst)).(*Duration) = *c.Generic(name).(*Duration) }
	case *ByteSize:
		b.flag = func(def *Config) cli.Flag {
			v := *any(field(def)).(*ByteSize)
			return &cli.GenericFlag{Name: name, Usage: usage, EnvVars: env, Value: &v}
		}
		b.apply = func(c *cli.Context, dst *Config) { *any(field(dst)).(*ByteSize) = *c.Generic(name).(*ByteSize) }
	default:
		panic(fmt.Sprintf("config: no flag kind for %T", field(&Config{})))
	}
	return b
}

// bindings is the one list of configurable fields. The YAML key of each is
// its json tag in Config.
var bindings = []binding{
	bind(FlagDataDir, "directory holding all state (etcd/, pki/, admin.kubeconfig); default /var/lib/kubestore as root, the user's data directory otherwise",
		func(c *Config) *string { return &c.DataDir }),
	bind(FlagBindAddress, "IP address the HTTPS API listens on; 0.0.0.0 listens on every interface",
		func(c *Config) *string { return &c.Server.BindAddress }),
	bind(FlagAdvertiseAddress, "IP address the node's pods reach the API at, the endpoint of the Service default/kubernetes (kube-apiserver's flag); default the bind address when pods can reach it, else the Service has no endpoint",
		func(c *Config) *string { return &c.Server.AdvertiseAddress }),
	bind(FlagSecurePort, "HTTPS port; 0 picks a free port (written to admin.kubeconfig)",
		func(c *Config) *int { return &c.Server.SecurePort }),
	bind(FlagTLSSAN, "extra DNS names or IPs for the serving certificate (repeatable)",
		func(c *Config) *[]string { return &c.Server.TLSSANs }),
	bind(FlagShutdownTimeout, "bound on a graceful stop; a second signal stops at once",
		func(c *Config) *Duration { return &c.Server.ShutdownTimeout }),
	bind(FlagRequestTimeout, "timeout of non-watch requests",
		func(c *Config) *Duration { return &c.Server.RequestTimeout }),
	bind(FlagMinRequestTimeout, "minimum timeout of a watch; each watch gets a random timeout between it and twice it",
		func(c *Config) *Duration { return &c.Server.MinRequestTimeout }),
	bind(FlagMaxRequestsInFlight, "maximum concurrent non-mutating requests; 0 means unlimited",
		func(c *Config) *int { return &c.Server.MaxRequestsInFlight }),
	bind(FlagMaxMutatingRequestsInFlight, "maximum concurrent mutating requests; 0 means unlimited",
		func(c *Config) *int { return &c.Server.MaxMutatingRequestsInFlight }),
	bind(FlagMaxRequestBodyBytes, "largest accepted request body",
		func(c *Config) *ByteSize { return &c.Server.MaxRequestBodyBytes }),
	bind(FlagFeatureGates, "k8s.io/apiserver feature gates, Name=true|false, comma separated, as kube-apiserver's --feature-gates",
		func(c *Config) *[]string { return &c.Server.FeatureGates }),
	bind(FlagTokenAuthFile, "bearer tokens, kube-apiserver's CSV format (token,user,uid,\"group1,group2\"); reloaded on SIGHUP",
		func(c *Config) *string { return &c.Server.TokenAuthFile }),
	bind(FlagAuthorizationPolicyFile, "YAML policy granting users and groups verbs on resources in namespaces; reloaded on SIGHUP. Without it only the admin identity is authorized",
		func(c *Config) *string { return &c.Server.AuthorizationPolicyFile }),
	bind(FlagUnixSocket, "also serve plain HTTP on this unix socket (mode 0660), authenticating each peer by its uid (unix:<user>; root is the admin)",
		func(c *Config) *string { return &c.Server.UnixSocket }),
	bind(FlagUnixSocketGroup, "group (name or number) owning --unix-socket; empty keeps the process's group",
		func(c *Config) *string { return &c.Server.UnixSocketGroup }),
	bind(FlagEncryptionProviderConfig, "kube-apiserver EncryptionConfiguration file; empty uses <data-dir>/pki/encryption-config.yaml, generated with a secretbox key for secrets on first start",
		func(c *Config) *string { return &c.Server.EncryptionProviderConfig }),
	bind(FlagCustomResources, "serve CustomResourceDefinitions and custom resources (apiextensions.k8s.io); false does not build that API server at all",
		func(c *Config) *bool { return &c.Server.CustomResources }),
	bind(FlagManifestsDir, "directory of YAML/JSON manifests (*.yaml, *.yml, *.json, multi-document) applied by server-side apply once the server is ready and whenever a file changes",
		func(c *Config) *string { return &c.Server.ManifestsDir }),
	bind(FlagControllers, "controllers to run beside the API, comma separated: * for all, name to enable one, -name to disable one (kube-controller-manager's syntax); the controllers are "+strings.Join(Controllers, ", "),
		func(c *Config) *[]string { return &c.Server.Controllers }),
	bind(FlagServiceClusterIPRange, "CIDR ClusterIPs are allocated from, or an IPv4 and an IPv6 CIDR separated by a comma for dual stack, as kube-apiserver's flag",
		func(c *Config) *string { return &c.Server.ServiceClusterIPRange }),
	bind(FlagServiceAccountIssuer, "issuer (iss claim) of the ServiceAccount tokens kubestore signs, and of its OIDC discovery document",
		func(c *Config) *string { return &c.Server.ServiceAccountIssuer }),
	bind(FlagEtcdServers, "client URLs of an external etcd cluster; when set, no embedded etcd is started",
		func(c *Config) *[]string { return &c.Etcd.Servers }),
	bind(FlagEtcdCAFile, "CA bundle to verify the external etcd servers",
		func(c *Config) *string { return &c.Etcd.CAFile }),
	bind(FlagEtcdCertFile, "client certificate for the external etcd servers",
		func(c *Config) *string { return &c.Etcd.CertFile }),
	bind(FlagEtcdKeyFile, "client key for the external etcd servers",
		func(c *Config) *string { return &c.Etcd.KeyFile }),
	bind(FlagEtcdPrefix, "prefix of every key in etcd",
		func(c *Config) *string { return &c.Etcd.Prefix }),
	bind(FlagEtcdCompactionInterval, "interval of etcd compaction requests; 0 disables compaction",
		func(c *Config) *Duration { return &c.Etcd.CompactionInterval }),
	bind(FlagEtcdStartTimeout, "how long to wait for etcd to become ready at start",
		func(c *Config) *Duration { return &c.Etcd.StartTimeout }),
	bind(FlagEtcdSnapshotCount, "embedded etcd: applied entries between raft snapshots (fewer keep less log in memory)",
		func(c *Config) *uint64 { return &c.Etcd.SnapshotCount }),
	bind(FlagEtcdSnapshotCatchUpEntries, "embedded etcd: raft entries kept after a snapshot",
		func(c *Config) *uint64 { return &c.Etcd.SnapshotCatchUpEntries }),
	bind(FlagEtcdQuotaBackendBytes, "embedded etcd: database size quota; writes fail with a clear error beyond it (default 2Gi, 256Mi on 32-bit)",
		func(c *Config) *ByteSize { return &c.Etcd.QuotaBackendBytes }),
	bind(FlagEtcdBackendBatchInterval, "embedded etcd: longest time before bbolt commits a batch (the WAL is the commit point; this only trades flash writes for replay time)",
		func(c *Config) *Duration { return &c.Etcd.BackendBatchInterval }),
	bind(FlagEtcdBackendBatchLimit, "embedded etcd: most operations in one bbolt commit",
		func(c *Config) *int { return &c.Etcd.BackendBatchLimit }),
	bind(FlagEtcdMaxRequestBytes, "embedded etcd: largest request the etcd server accepts",
		func(c *Config) *ByteSize { return &c.Etcd.MaxRequestBytes }),
	bind(FlagEtcdWALSegmentBytes, "embedded etcd: size each WAL segment file is preallocated to; a fresh data directory holds two",
		func(c *Config) *ByteSize { return &c.Etcd.WALSegmentBytes }),
	bind(FlagEtcdReservedDiskBytes, "embedded etcd: free space kept on the data directory's file system; below it, or when it turns read-only, writes are refused with a clear error while reads go on",
		func(c *Config) *ByteSize { return &c.Etcd.ReservedDiskBytes }),
	bind(FlagEtcdWatchProgressNotifyInterval, "embedded etcd: how often a quiet watch is told the current revision, so bookmarks and the watch cache keep up",
		func(c *Config) *Duration { return &c.Etcd.WatchProgressNotifyInterval }),
	bind(FlagWatchCache, "serve reads and watches from the upstream watch cache; false sends every read to etcd",
		func(c *Config) *bool { return &c.Cache.Enabled }),
	bind(FlagDefaultWatchCacheSize, "watch cache setting of resources not in --watch-cache-sizes; 0 reads them straight from etcd",
		func(c *Config) *int { return &c.Cache.DefaultSize }),
	bind(FlagWatchCacheSizes, "per-resource watch cache settings, resource[.group]#size, comma separated; size 0 reads that resource straight from etcd, any other size caches it",
		func(c *Config) *[]string { return &c.Cache.Sizes }),
	bind(FlagWatchCacheHistoryWindow, "minimum duration of events each watch cache keeps for watches resuming from an older resourceVersion",
		func(c *Config) *Duration { return &c.Cache.HistoryWindow }),
	bind(FlagWatchCacheHistoryWindows, "per-resource history windows, resource[.group]#duration, comma separated",
		func(c *Config) *[]string { return &c.Cache.HistoryWindows }),
	bind(FlagMemoryLimit, "Go soft memory limit, e.g. 128Mi; 0 takes GOMEMLIMIT, else derived from the device's memory: half of MemTotal, or a cgroup's limit less a quarter of it (at least 32Mi) for the binary's pages and the page cache. Above 80% of it, creates are refused with 403. Resources without a --max-bytes budget get 1/8 of a limit given here",
		func(c *Config) *ByteSize { return &c.Memory.Limit }),
	bind(FlagMaxObjects, "per-resource object budgets, resource[.group]#count, comma separated; a create beyond one is refused with 403",
		func(c *Config) *[]string { return &c.Memory.MaxObjects }),
	bind(FlagMaxBytes, "per-resource budgets of stored (encoded) bytes, resource[.group]#size, comma separated; a write beyond one is refused with 403",
		func(c *Config) *[]string { return &c.Memory.MaxBytes }),
	bind(FlagProfiling, "serve /debug/pprof to the admin identity",
		func(c *Config) *bool { return &c.Memory.Profiling }),
	bind(FlagVerbosity, "log verbosity, as klog's -v",
		func(c *Config) *int { return &c.Log.Verbosity }),
	bind(FlagLogFormat, "log format on stderr: text or json",
		func(c *Config) *string { return &c.Log.Format }),
	bind(FlagUpdateTrialPeriod, "after an update to a newer release, commit it once the server has served healthily this long in one run (the data stays readable by the previous release until then; kubestore update commit commits at once); 0 commits only on that command",
		func(c *Config) *Duration { return &c.Update.TrialPeriod }),
	bind(FlagRestoreOnNewerData, "on data of a newer format than this release reads, restore the pre-update snapshot the newer release took (moving the newer data to a new <data-dir>/etcd.newer.<time>) instead of refusing to start",
		func(c *Config) *bool { return &c.Update.RestoreOnNewerData }),
	bind(FlagMemberName, "name of this gateway's etcd member in its site; empty is the host name",
		func(c *Config) *string { return &c.Site.MemberName }),
	bind(FlagPeerAdvertiseAddress, "IP or DNS name the site's other members reach this one at; setting it makes the embedded etcd a member of a site (mutual TLS from the site's CA on --peer-port); empty keeps it alone, with no TCP port",
		func(c *Config) *string { return &c.Site.PeerAdvertiseAddress }),
	bind(FlagPeerBindAddress, "IP address the site's peer traffic is served on",
		func(c *Config) *string { return &c.Site.PeerBindAddress }),
	bind(FlagPeerPort, "port of the site's peer traffic (etcd raft, mutual TLS)",
		func(c *Config) *int { return &c.Site.PeerPort }),
	bind(FlagJoin, "https://HOST:PORT of a member of a site: with no etcd data yet, join its site (as a learner, promoted once caught up) instead of starting one; at later starts, rejoin if the site removed this member",
		func(c *Config) *string { return &c.Site.Join }),
	bind(FlagJoinToken, "the site's join token (kubestore member token prints it on a member): it pins the site's CA and proves the joiner may join; give it as KUBESTORE_JOIN_TOKEN or in the config file, since a command line is readable by every local user",
		func(c *Config) *string { return &c.Site.JoinToken }),
	bind(FlagEtcdHeartbeatInterval, "embedded etcd of a site: raft heartbeat between members",
		func(c *Config) *Duration { return &c.Etcd.HeartbeatInterval }),
	bind(FlagEtcdElectionTimeout, "embedded etcd of a site: how long a follower waits for the leader before an election; at least 5 heartbeats",
		func(c *Config) *Duration { return &c.Etcd.ElectionTimeout }),
	bind(FlagUpstreamKubeconfig, "kubeconfig of an upstream cluster: mirror the objects of the config file's mirror.rules (by default this node's Node, pods, the ConfigMaps and Secrets they reference, Services and EndpointSlices) and forward writes to them there; empty mirrors nothing",
		func(c *Config) *string { return &c.Mirror.UpstreamKubeconfig }),
	bind(FlagNodeName, "node name that replaces $(NODE_NAME) in mirror.rules; empty is the host name",
		func(c *Config) *string { return &c.Mirror.NodeName }),
	bind(FlagTunnelEndpoint, "https://HOST[:PORT] of a tunnel endpoint of the cluster (kubestore tunnel-endpoint, one beside each kube-apiserver; repeatable): keep a tunnel open to each, as this node with the upstream kubeconfig's credentials, through which the cluster's kube-apiserver reaches this node's kubelet (kubectl logs, exec, port-forward from the cloud); none opens none",
		func(c *Config) *[]string { return &c.Mirror.TunnelEndpoints }),
	bind(FlagTunnelCAFile, "CA bundle that verifies the tunnel endpoint's serving certificate; empty is the upstream kubeconfig's CA, else the system's roots",
		func(c *Config) *string { return &c.Mirror.TunnelCAFile }),
}

// Flags returns the command-line flags of every setting plus --config, with
// the built-in defaults shown in the help text.
func Flags() []cli.Flag {
	def := Default()
	flags := []cli.Flag{&cli.StringFlag{
		Name:    FlagConfig,
		Usage:   "YAML configuration file; KUBESTORE_* variables and flags override it (see: kubestore config defaults)",
		EnvVars: []string{EnvVar(FlagConfig)},
	}}
	for _, b := range bindings {
		flags = append(flags, b.flag(&def))
	}
	return flags
}

// Load builds the effective configuration of a command: the defaults, then
// the --config file, then every flag or KUBESTORE_* variable that was set.
// It does not validate.
func Load(c *cli.Context) (Config, error) {
	cfg := Default()
	if path := lineageString(c, FlagConfig); path != "" {
		if err := cfg.overlayFile(path); err != nil {
			return Config{}, err
		}
	}
	for _, b := range bindings {
		// The same flags exist on the app and on its commands
		// ("kubestore --data-dir X kubeconfig" and "kubestore kubeconfig
		// --data-dir X"): the innermost command that set one wins.
		for _, lc := range c.Lineage() {
			if lc.IsSet(b.name) {
				b.apply(lc, &cfg)
				break
			}
		}
	}
	return cfg, nil
}

// lineageString is the value of a string flag set on the command or any
// command above it.
func lineageString(c *cli.Context, name string) string {
	for _, lc := range c.Lineage() {
		if lc.IsSet(name) {
			return lc.String(name)
		}
	}
	return ""
}

// ReadFile returns the defaults overlaid with a YAML configuration file.
func ReadFile(path string) (Config, error) {
	cfg := Default()
	err := cfg.overlayFile(path)
	return cfg, err
}

func (c *Config) overlayFile(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("invalid --%s %q: %w", FlagConfig, path, err)
	}
	return c.overlayYAML(path, data)
}

// overlayYAML sets the fields present in data, refusing unknown,
// duplicate or mis-cased keys.
func (c *Config) overlayYAML(name string, data []byte) error {
	fail := func(err error) error {
		return fmt.Errorf("invalid --%s %q: %s", FlagConfig, name, strings.TrimPrefix(err.Error(), "error converting YAML to JSON: "))
	}
	js, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return fail(err)
	}
	// A list in the file replaces the default one. Decoding into the
	// default list instead would reuse its elements, and a rule would keep
	// the fields its file entry does not set.
	var lists struct {
		Mirror struct {
			Rules *[]MirrorRule `json:"rules"`
		} `json:"mirror"`
	}
	if json.Unmarshal(js, &lists) == nil && lists.Mirror.Rules != nil {
		c.Mirror.Rules = nil
	}
	strict, err := kjson.UnmarshalStrict(js, c)
	if err != nil {
		return fail(err)
	}
	if len(strict) > 0 {
		return fail(errors.Join(strict...))
	}
	return nil
}

// YAML renders the configuration as a file --config accepts.
func (c Config) YAML() ([]byte, error) { return yaml.Marshal(c) }
