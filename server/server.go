// Package server assembles kubestore's Kubernetes API server from the
// upstream generic API server (k8s.io/apiserver/pkg/server): the built-in
// kinds of package registry with the namespace lifecycle, health and
// metrics. Storage comes from package cacher; the PKI, admin kubeconfig,
// authentication and authorization from package access.
package server

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/endpoints/discovery/aggregated"
	genericapifilters "k8s.io/apiserver/pkg/endpoints/filters"
	openapinamer "k8s.io/apiserver/pkg/endpoints/openapi"
	"k8s.io/apiserver/pkg/registry/generic"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/apiserver/pkg/server/healthz"
	"k8s.io/apiserver/pkg/storage/value"
	"k8s.io/apiserver/pkg/util/notfoundhandler"
	restclient "k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"k8s.io/kube-openapi/pkg/handler3"

	"github.com/kubestore/kubestore/access"
	"github.com/kubestore/kubestore/cacher"
	"github.com/kubestore/kubestore/carotation"
	"github.com/kubestore/kubestore/config"
	"github.com/kubestore/kubestore/datadir"
	"github.com/kubestore/kubestore/kubelets"
	"github.com/kubestore/kubestore/manifests"
	"github.com/kubestore/kubestore/memory"
	"github.com/kubestore/kubestore/mirror"
	"github.com/kubestore/kubestore/namespaces"
	"github.com/kubestore/kubestore/records"
	"github.com/kubestore/kubestore/registry"
	"github.com/kubestore/kubestore/server/openapi"
	"github.com/kubestore/kubestore/serviceaccount"
	"github.com/kubestore/kubestore/site"
)

// certRenewalPeriod is how often the serving and admin certificates are
// checked for renewal while the server runs.
const certRenewalPeriod = 12 * time.Hour

// Storage is what the server needs of its backend, package cacher's
// Backend: the stores' options, the health of etcd, and the fatal failure
// of an embedded etcd, which ends serving.
type Storage interface {
	RESTOptionsGetter(r cacher.Resources) generic.RESTOptionsGetter
	CustomResourcesRESTOptionsGetter(transformer func(schema.GroupResource) value.Transformer) generic.RESTOptionsGetter
	// RawStore is the mirror's.
	RawStore(getter generic.RESTOptionsGetter, gr schema.GroupResource, newFunc, newListFunc func() runtime.Object) (*cacher.RawStore, error)
	Check(ctx context.Context) error
	Endpoints() []string
	// Client is the shared etcd client (a site's joins change the
	// membership through it; kubestore's own records are on it).
	Client() *clientv3.Client
	// Prefix is --etcd-prefix.
	Prefix() string
	// Records are kubestore's own records on the client.
	Records() *records.Store
	// Leader is the site's leader as the embedded member knows it.
	Leader() uint64
	Failed() <-chan struct{}
	Failure() error
}

var _ Storage = (*cacher.Backend)(nil)

// Server is kubestore's API server, ready to Run.
type Server struct {
	generic    *genericapiserver.GenericAPIServer
	storage    Storage
	url        string
	kubeconfig string
	access     *access.Access
	workers    *workers
	// systemNamespaces is closed once kube-system and the other system
	// namespaces exist; workers start after it.
	systemNamespaces chan struct{}
	// afterStop runs once the server has stopped serving.
	afterStop []func()
	// restart receives why the server asks to be started again.
	restart chan string
	// pressure drops what is rebuilt on demand near the memory limit.
	pressure *memory.Pressure
}

// ErrRestart ends Server.Run when the server asks to be started again
// (kubestore's main starts it in place of the process): the embedded etcd
// reads some of its configuration only at its start.
var ErrRestart = errors.New("starting again")

// requestRestart stops the server, which then returns ErrRestart.
func (s *Server) requestRestart(reason string) {
	select {
	case s.restart <- reason:
	default:
	}
}

// Listeners are the server's sockets: HTTPS on --bind-address and
// --secure-port and, with --unix-socket, the plain-HTTP socket of local
// agents. They are opened first, before etcd starts, since they are the
// likeliest and cheapest start failures (a port or a socket path in use).
type Listeners struct {
	tcp  net.Listener
	unix *unixSocket
}

// Listen opens the listeners of s. On error none is left open.
func Listen(s config.Server) (*Listeners, error) {
	tcp, err := net.Listen("tcp", net.JoinHostPort(s.BindAddress, strconv.Itoa(s.SecurePort)))
	if err != nil {
		return nil, fmt.Errorf("invalid --%s/--%s: %w", config.FlagBindAddress, config.FlagSecurePort, err)
	}
	l := &Listeners{tcp: tcp}
	if s.UnixSocket != "" {
		if l.unix, err = listenUnix(s); err != nil {
			tcp.Close()
			return nil, err
		}
	}
	return l, nil
}

// Close closes listeners that New did not take over.
func (l *Listeners) Close() {
	l.tcp.Close()
	if l.unix != nil {
		l.unix.close()
	}
}

// failAt, when a test sets it, makes New fail after the named step, so
// that each step's undoing can be checked.
var failAt func(step string) error

// New builds the server on storage and the listeners, which it owns from
// now on: it writes admin.kubeconfig with the listener's address, loads or
// creates the PKI, builds every resource's store and installs the API
// groups. limits are the process's memory limits (memory.NewLimits), which
// its memory-pressure mode watches. Nothing is served until Run. On error
// nothing is left running and the listeners are closed.
func New(cc config.Completed, storage Storage, ln *Listeners, limits memory.Limits) (_ *Server, err error) {
	cfg := cc.Config()
	b := &builder{cc: cc, cfg: cfg, storage: storage, records: storage.Records(), ln: ln, dir: datadir.Dir(cfg.DataDir), limits: limits}
	defer func() {
		if err != nil {
			for i := len(b.cleanup) - 1; i >= 0; i-- {
				b.cleanup[i]()
			}
		}
	}()
	b.undo(ln.Close)
	for _, st := range []struct {
		name string
		run  func() error
	}{
		{"feature-gates", b.featureGates},
		{"pki", b.pki},
		{"access", b.genericConfig},
		{"storage", b.stores},
		{"custom-resources", b.customResources},
		{"mirror", b.mirror},
		{"generic-server", b.genericServer},
		{"install", b.install},
		{"hooks", b.workers},
	} {
		if err := st.run(); err != nil {
			return nil, err
		}
		if failAt != nil {
			if err := failAt(st.name); err != nil {
				return nil, err
			}
		}
	}
	klog.InfoS("kubestore API server", "url", b.url, "kubeconfig", b.dir.Kubeconfig(), "dataDir", cfg.DataDir, "etcd", storage.Endpoints())
	return b.server, nil
}

// builder holds what New's steps build, in their order, and how to undo it.
type builder struct {
	cc      config.Completed
	cfg     config.Config
	storage Storage
	// records are kubestore's own records, on storage's client.
	records *records.Store
	ln      *Listeners
	dir     datadir.Dir
	limits  memory.Limits
	cleanup []func()

	kinds        *registry.API
	url          string
	pkiFiles     *access.PKI
	access       *access.Access
	c            *genericapiserver.Config
	transformers func(schema.GroupResource) value.Transformer
	api          *registry.Storage
	nsLifecycle  admission.ValidationInterface
	clusterIPs   *registry.ClusterIPs
	// admission are the admission plugins of the enabled controllers;
	// deleteCustom empties a namespace of its custom resources.
	admission    []admission.Interface
	deleteCustom func(ctx context.Context, namespace string) (namespaces.Remaining, error)
	saKeys       *serviceaccount.Keys
	trusted      *serviceaccount.Trusted
	saLookup     func() (serviceaccount.Lookup, error)
	crds         *customResources
	mirrorStores *mirrorStores
	nodeAccess   *nodeAccess
	mirrorer     *mirror.Mirror
	siteHealth   *site.Health
	gs           *genericapiserver.GenericAPIServer
	server       *Server
}

// undo registers f to run if a later step fails.
func (b *builder) undo(f func()) { b.cleanup = append(b.cleanup, f) }

func (b *builder) featureGates() error {
	if err := applyFeatureGates(b.cc.FeatureGates(), b.cfg.Server.FeatureGates, b.cc.SmallDevice()); err != nil {
		return err
	}
	var err error
	b.kinds, err = registry.New()
	return err
}

// pki loads or creates the PKI and writes the admin kubeconfig for the
// listener's address.
func (b *builder) pki() error {
	port := b.ln.tcp.Addr().(*net.TCPAddr).Port
	b.url = "https://" + net.JoinHostPort(clientAddress(b.cfg.Server.BindAddress), strconv.Itoa(port))
	var err error
	if b.pkiFiles, err = access.LoadPKI(b.dir, access.ServingHosts(b.cfg.Server, b.cfg.Site)); err != nil {
		return err
	}
	if b.cfg.Site.Enabled() {
		if err := b.pkiFiles.Peer(b.cfg.Site); err != nil {
			return err
		}
	}
	if err := b.pkiFiles.WriteKubeconfig(b.dir.Kubeconfig(), b.url); err != nil {
		return fmt.Errorf("writing %s: %w", b.dir.Kubeconfig(), err)
	}
	if b.saKeys, err = serviceaccount.LoadKeys(b.dir, b.cfg.Server.ServiceAccountIssuer, b.pkiFiles.CAPEM()); err != nil {
		return fmt.Errorf("service account signing key: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), b.cfg.Etcd.StartTimeout.Duration)
	defer cancel()
	if err := b.saKeys.Publish(ctx, b.records); err != nil {
		return fmt.Errorf("publishing the service account key: %w", err)
	}
	if b.cfg.Mirror.Enabled() {
		// The cluster's issuer, trusted for the node's pods' tokens the
		// mirror relays.
		if b.trusted, err = serviceaccount.LoadTrusted(ctx, b.records); err != nil {
			return err
		}
	}
	return nil
}

// tokenAuthenticators are the ServiceAccount tokens kubestore accepts: its
// own issuer's and, through the mirror, the cluster's.
func (b *builder) tokenAuthenticators() []authenticator.Token {
	tokens := []authenticator.Token{b.saKeys.Authenticator(b.saLookup)}
	if b.trusted != nil {
		tokens = append(tokens, b.trusted.Authenticator(b.saLookup))
	}
	return tokens
}

// genericConfig is the generic server's configuration: serving, access
// control, limits, OpenAPI, health, and the encryption of stored values.
func (b *builder) genericConfig() error {
	cfg, pki := b.cfg, b.pkiFiles
	build := BuildInfo()
	recordBuildInfo(build)
	ev, err := newEffectiveVersion(build)
	if err != nil {
		return err
	}
	c := genericapiserver.NewConfig(b.kinds.Codecs())
	c.EffectiveVersion = ev
	c.SecureServing = &genericapiserver.SecureServingInfo{
		Listener:      b.ln.tcp,
		Cert:          pki.Serving(),
		ClientCA:      pki.ClientCA(),
		MinTLSVersion: tls.VersionTLS12,
	}
	c.ExternalAddress = strings.TrimPrefix(b.url, "https://")
	// No client-side rate limit, as upstream's loopback client
	// (k8s.io/apiserver/pkg/server/config_selfclient.go): the admission
	// lookups of ServiceAccounts run on it, on the path of every pod
	// create, and client-go's default (5/s) limited pod creates to that.
	c.LoopbackClientConfig = &restclient.Config{
		QPS:             -1,
		Host:            b.url,
		BearerToken:     uuid.NewString(),
		TLSClientConfig: restclient.TLSClientConfig{CAData: pki.CAPEM()},
	}
	if b.access, err = access.Load(cfg.Server); err != nil {
		return err
	}
	b.saLookup = serviceaccount.ClientLookup(c.LoopbackClientConfig)
	c.Authentication.Authenticator = b.access.Authenticator(pki.ClientCA(), b.tokenAuthenticators()...)
	c.Authorization.Authorizer = b.access.Authorizer()
	genericapiserver.AuthorizeClientBearerToken(c.LoopbackClientConfig, &c.Authentication, &c.Authorization)
	c.RequestTimeout = cfg.Server.RequestTimeout.Duration
	c.MinRequestTimeout = int(cfg.Server.MinRequestTimeout.Seconds())
	c.MaxRequestsInFlight = cfg.Server.MaxRequestsInFlight
	c.MaxMutatingRequestsInFlight = cfg.Server.MaxMutatingRequestsInFlight
	c.MaxRequestBodyBytes = int64(cfg.Server.MaxRequestBodyBytes)
	// /debug/pprof, for the admin only (the authorizer), when asked.
	c.EnableProfiling = cfg.Memory.Profiling
	// On stop, watches end at once so clients reconnect (the watch
	// handlers see the shutdown signal); the server then waits this long
	// for them, and as long again for the HTTP server to close.
	c.ShutdownWatchTerminationGracePeriod = cfg.Server.ShutdownTimeout.Duration / 4
	// /openapi/v3 is built on its first request (openapi.ServeV3Lazily);
	// the config stays for server-side apply's types.
	c.SkipOpenAPIInstallation = true
	c.OpenAPIV3Config = genericapiserver.DefaultOpenAPIV3Config(openapi.GetOpenAPIDefinitions, openapinamer.NewDefinitionNamer(b.kinds.Scheme()))
	c.OpenAPIV3Config.GetOperationIDAndTagsFromRoute = openapi.OperationIDs(c.OpenAPIV3Config.GetOperationIDAndTags)
	c.OpenAPIV3Config.Info.Title = "Kubernetes"
	c.OpenAPIV3Config.Info.Version = build.Kubernetes
	c.AddHealthChecks(healthz.NamedCheck("etcd", func(r *http.Request) error { return b.storage.Check(r.Context()) }))
	if cfg.Site.Enabled() {
		b.siteHealth = site.NewHealth(b.dir, b.storage.Client(), b.storage.Leader)
		c.ReadyzChecks = append(c.ReadyzChecks, b.siteHealth)
	}
	// Malformed query parameters are refused before any handler runs.
	// Writes to mirrored objects go to the upstream, once authorized.
	c.BuildHandlerChainFunc = func(h http.Handler, c *genericapiserver.Config) http.Handler {
		if b.mirrorer != nil {
			h = b.mirrorer.WithWriteThrough(h, c.Serializer, b.kinds.Codecs().UniversalDeserializer(), c.MaxRequestBodyBytes)
		}
		h = genericapiserver.DefaultBuildHandlerChain(checkQuery(h, c.Serializer), c)
		if b.mirrorer != nil {
			h = b.mirrorer.WithPodCredentials(h)
		}
		if b.cfg.Site.Enabled() {
			h = site.WithJoin(h, b.dir, b.storage.Client(), b.storage.Leader, b.records)
		}
		return h
	}
	b.c = c
	b.transformers, err = access.EncryptionTransformers(cfg)
	return err
}

// stores builds every built-in resource's store and watch cache.
func (b *builder) stores() error {
	getter := b.storage.RESTOptionsGetter(cacher.Resources{Scheme: b.kinds.Scheme(), Serializer: b.kinds.Codecs(),
		KeyPrefixes: b.kinds.KeyPrefixes(), Transformer: b.transformers})
	b.c.RESTOptionsGetter = getter
	// What the controllers put into the stores and admission.
	if err := b.prepareControllers(); err != nil {
		return err
	}
	var err error
	if b.api, err = b.kinds.NewStorage(getter, b.clusterIPs); err != nil {
		return err
	}
	b.undo(b.api.Destroy)
	// The in-process informers hold the watch cache's objects, not copies.
	b.api.ReadWatchedObjectsWith(cacher.SharedObject)
	// One namespace lifecycle for built-in and custom resources: it
	// remembers the namespaces whose deletion it admitted.
	b.nsLifecycle = b.api.NamespaceLifecycle()
	// Who may approve and sign for a certificate signer: the authorizer's
	// answer, as kube-apiserver's certificates admission plugins ask it.
	// Each kubelet alone on its own node's objects.
	if b.nodeAccess, err = newNodeAccess(b); err != nil {
		return err
	}
	b.access.SetNodeAuthorizer(b.nodeAccess.authorizer)
	handlers := append([]admission.Interface{b.nsLifecycle, registry.NewCertificatesAdmission(b.c.Authorization.Authorizer), b.nodeAccess.admission, mirror.Annotations()}, b.admission...)
	b.c.AdmissionControl = admission.NewChainHandler(handlers...)
	b.api.AddCoreSubresource("serviceaccounts/token", serviceaccount.NewTokenREST(b.saKeys, b.saLookup))
	// pods/log, exec, attach, portforward, proxy and nodes/proxy reach
	// the node's kubelet as kube-apiserver's do.
	k := kubelets.New(b.api.Getter("pods"), b.api.Getter("nodes"), b.pkiFiles, b.c.Authorization.Authorizer, nil)
	b.undo(k.Close)
	for name, st := range k.Storage() {
		b.api.AddCoreSubresource(name, st)
	}
	return nil
}

// customResources builds the apiextensions server, when enabled, as the
// delegate of kubestore's own: the chain of kube-apiserver.
func (b *builder) customResources() error {
	if !b.cfg.Server.CustomResources {
		return nil
	}
	b.c.AggregatedDiscoveryGroupManager = aggregated.NewResourceManager("apis")
	var err error
	if b.crds, err = newCustomResourcesServer(*b.c, b.storage, b.transformers, b.nsLifecycle, b.notFound()); err != nil {
		return err
	}
	b.undo(b.crds.GenericAPIServer.Destroy)
	return nil
}

// notFound ends the chain: the NotFound handler.
func (b *builder) notFound() genericapiserver.DelegationTarget {
	return genericapiserver.NewEmptyDelegateWithCustomHandler(notFound{
		upstream: notfoundhandler.New(b.c.Serializer, genericapifilters.NoMuxAndDiscoveryIncompleteKey),
		complete: genericapifilters.NoMuxAndDiscoveryIncompleteKey, serializer: b.c.Serializer})
}

func (b *builder) genericServer() error {
	var delegate genericapiserver.DelegationTarget
	if b.crds != nil {
		delegate = b.crds.GenericAPIServer
	} else {
		delegate = b.notFound()
	}
	gs, err := b.c.Complete(nil).New("kubestore", delegate)
	if err != nil {
		return fmt.Errorf("building API server: %w", err)
	}
	// Destroys the stores the server installs and the delegates (every
	// destroy function is idempotent, upstream's contract).
	b.undo(gs.Destroy)
	gs.ShutdownTimeout = b.cfg.Server.ShutdownTimeout.Duration / 4
	b.gs = gs
	if b.crds != nil {
		gs.DiscoveryGroupManager.AddGroup(apiextensionsGroup())
		informer := b.crds.Informers.Apiextensions().V1().CustomResourceDefinitions()
		disc := &legacyCRDDiscovery{groups: gs.DiscoveryGroupManager, crds: informer.Lister()}
		if _, err := informer.Informer().AddEventHandler(disc.handler()); err != nil {
			return err
		}
	}
	return nil
}

func (b *builder) install() error {
	if err := b.api.Install(b.gs); err != nil {
		return err
	}
	tokens := b.access.TokenAuthenticator([]string{b.cfg.Server.ServiceAccountIssuer}, b.tokenAuthenticators()...)
	if err := b.kinds.InstallReviews(b.gs, tokens, b.c.Authorization.Authorizer, b.access); err != nil {
		return err
	}
	// Every API group is installed: server-side apply's types are built
	// from the definitions, which go now (openapi.DropDefinitions).
	openapi.DropDefinitions(b.c.OpenAPIV3Config)
	if b.crds != nil {
		openapi.DropDefinitions(b.crds.openAPIV3)
	}
	return nil
}

// workers adds the post-start hooks and kubestore's workers, which run
// from the start of serving until the stop.
func (b *builder) workers() error {
	gs, api, cfg, dir, url := b.gs, b.api, b.cfg, b.dir, b.url
	s := &Server{generic: gs, storage: b.storage, url: url, kubeconfig: dir.Kubeconfig(), access: b.access, workers: newWorkers(), restart: make(chan string, 1),
		systemNamespaces: make(chan struct{})}
	gs.AddPostStartHookOrDie("storage-readiness", gs.StorageReadinessHook.Hook)
	gs.AddPostStartHookOrDie("kubestore-system-namespaces", func(ctx genericapiserver.PostStartHookContext) error {
		if err := api.EnsureSystemNamespaces(ctx); err != nil {
			return err
		}
		close(s.systemNamespaces)
		return nil
	})
	var openAPIBuilt func(context.Context, *handler3.OpenAPIService)
	if crds := b.crds; crds != nil {
		custom, err := newCustomContents(crds)
		if err != nil {
			return err
		}
		b.deleteCustom = custom.deleteIn
		openAPIBuilt = func(ctx context.Context, service *handler3.OpenAPIService) {
			if err := crds.serveOpenAPIV3(ctx, service, s.workers); err != nil {
				klog.ErrorS(err, "Serving the OpenAPI v3 of the custom resources")
			}
		}
	}
	// Under memory pressure the OpenAPI documents are dropped first:
	// the next request builds them again.
	s.pressure = memory.NewPressure(b.limits)
	s.pressure.Droppable("OpenAPI v3 documents", openapi.ServeV3Lazily(gs, b.c.OpenAPIV3Config, openAPIBuilt))
	v2 := genericapiserver.DefaultOpenAPIConfig(openapi.GetOpenAPIDefinitions, openapinamer.NewDefinitionNamer(b.kinds.Scheme()))
	v2.GetOperationIDAndTagsFromRoute = openapi.OperationIDs(v2.GetOperationIDAndTags)
	v2.Info.Title, v2.Info.Version = b.c.OpenAPIV3Config.Info.Title, b.c.OpenAPIV3Config.Info.Version
	s.pressure.Droppable("OpenAPI v2 document", openapi.ServeV2Lazily(gs, v2))
	keys := b.saKeys
	gs.Handler.NonGoRestfulMux.Handle(serviceaccount.DiscoveryPath, keys.DiscoveryHandler(url+serviceaccount.JWKSPath))
	gs.Handler.NonGoRestfulMux.Handle(serviceaccount.JWKSPath, keys.JWKSHandler())
	s.addWorker("kubestore-node-authorizer", b.nodeAccess.run)
	if err := b.startControllers(s); err != nil {
		return err
	}
	pki := b.pkiFiles
	s.addWorker("kubestore-certificate-renewal", func(ctx context.Context) {
		wait.UntilWithContext(ctx, func(context.Context) {
			if err := pki.Renew(); err != nil {
				klog.ErrorS(err, "Renewing the serving certificate")
			}
			if err := pki.WriteKubeconfig(dir.Kubeconfig(), url); err != nil {
				klog.ErrorS(err, "Renewing the admin certificate")
			}
		}, certRenewalPeriod)
	})
	rotation := carotation.New(dir, pki, b.records, keys, cfg.Site.Name(),
		func() error { return pki.WriteKubeconfig(dir.Kubeconfig(), url) })
	if cfg.Site.Enabled() {
		// etcd read ca.crt at its start, and nothing changed it since: the
		// rotation's worker starts below.
		signing, previous, err := access.CAOf(dir)
		if err != nil {
			return err
		}
		trust := []*x509.Certificate{signing}
		if previous != nil {
			trust = append(trust, previous)
		}
		rotation.RestartPeerPort(b.storage.Client(), trust, s.requestRestart)
	}
	s.addWorker("kubestore-ca-rotation", rotation.Run)
	if sock := b.ln.unix; sock != nil {
		grace := cfg.Server.ShutdownTimeout.Duration / 4
		s.addWorker("kubestore-unix-socket", func(ctx context.Context) { sock.serve(ctx, gs.Handler, grace) })
	}
	if cfg.Server.ManifestsDir != "" {
		applier, err := manifests.New(cfg.Server.ManifestsDir, dir.Kubeconfig())
		if err != nil {
			return err
		}
		s.addWorker("kubestore-manifests", applier.Run)
	}
	if m := b.mirrorer; m != nil {
		tunnels, err := b.tunnels()
		if err != nil {
			return err
		}
		gs.Handler.NonGoRestfulMux.Handle("/mirrorz", mirrorz(m, tunnels))
		s.addWorker("kubestore-mirror", m.Run)
		for i, tun := range tunnels {
			s.addWorker(fmt.Sprintf("kubestore-tunnel-%d", i), tun.Run)
		}
		s.afterStop = append(s.afterStop, b.mirrorStores.close)
	}
	if h := b.siteHealth; h != nil {
		s.addWorker("kubestore-site-health", h.Run)
	}
	s.addWorker("kubestore-release-memory", memory.Release)
	s.addWorker("kubestore-memory-pressure", s.pressure.Run)
	// The workers stop first when the server stops, while requests are
	// still served: a controller's last write is not refused.
	gs.AddPreShutdownHookOrDie("kubestore-stop-workers", func() error {
		s.workers.stop()
		return nil
	})
	b.server = s
	return nil
}

// workerWriteTimeout bounds a worker's request that its stop no longer
// cancels (workerLoopback).
const workerWriteTimeout = 10 * time.Second

// workerLoopback is the loopback client config of the workers: a request
// in flight when the workers stop finishes (within workerWriteTimeout)
// instead of being cancelled under the server, which would log it as a
// handler timeout; a watch still ends at once.
func workerLoopback(cfg *restclient.Config) *restclient.Config {
	cfg = restclient.CopyConfig(cfg)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
			if req.URL.Query().Get("watch") == "true" {
				return rt.RoundTrip(req)
			}
			ctx, cancel := context.WithTimeout(context.WithoutCancel(req.Context()), workerWriteTimeout)
			resp, err := rt.RoundTrip(req.WithContext(ctx))
			if err != nil {
				cancel()
				return nil, err
			}
			// The body is read after RoundTrip returns: the timeout ends
			// when it is closed.
			resp.Body = &cancelOnClose{ReadCloser: resp.Body, cancel: cancel}
			return resp, nil
		})
	})
	return cfg
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// cancelOnClose cancels a request's context when its body is closed.
type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (c *cancelOnClose) Close() error {
	defer c.cancel()
	return c.ReadCloser.Close()
}

// addWorker runs fn in a worker from the start of serving until the stop.
func (s *Server) addWorker(name string, fn func(ctx context.Context)) {
	s.generic.AddPostStartHookOrDie(name, func(ctx genericapiserver.PostStartHookContext) error {
		// The system namespaces first: a controller's Lease lives in
		// kube-system (the hooks run at once, in no order).
		select {
		case <-s.systemNamespaces:
		case <-ctx.Done():
			return nil
		}
		s.workers.start(fn)
		return nil
	})
}

// Reload reads --token-auth-file and --authorization-policy-file again
// (kubestore does it on SIGHUP). On error the previous ones stay in force.
func (s *Server) Reload() error { return s.access.Reload() }

// URL is the https:// address clients on the device use.
func (s *Server) URL() string { return s.url }

// Kubeconfig is the path of the admin kubeconfig.
func (s *Server) Kubeconfig() string { return s.kubeconfig }

// Run serves until ctx is cancelled or the embedded etcd fails, then stops.
// This is the one place the stop's order is written down:
//
//  0. A stop asked for during the start first waits for the post-start
//     hooks (waitStarted).
//  1. /readyz fails and kubestore's workers (addWorker) stop and are
//     waited for: the controllers (namespace, garbage collector,
//     ServiceAccount, certificate signing requests, ClusterIP repair), the
//     node authorizer's graph, the certificate renewal, the CA rotation,
//     the manifests applier, the site's health, the memory release, the
//     mirror (each stream records where it stopped), the unix socket (its
//     connections, watches included, are closed within a quarter of
//     --shutdown-timeout).
//  2. The HTTPS listener stops accepting; watches end at once so clients
//     reconnect elsewhere; in-flight requests finish (a quarter of
//     --shutdown-timeout each for watches and for the HTTP server).
//  3. Every store's watch cache and the custom-resources server are
//     destroyed, and the mirror's stores closed (a write to a mirrored
//     object still in flight gets 503).
//
// Run returns when all of that is done: nil after a cancelled ctx, the
// storage's failure after one. The caller then closes the storage (the
// compactor, the etcd client, then the embedded etcd, which syncs its WAL
// and database) and releases the data directory's lock; its own watchdog
// exits the process if all of it takes longer than --shutdown-timeout.
func (s *Server) Run(ctx context.Context) error {
	prepared := s.generic.PrepareRun()
	hooks := slices.Collect(maps.Keys(s.generic.PostStartHooks()))
	runCtx, stop := context.WithCancelCause(context.WithoutCancel(ctx))
	defer stop(nil)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		select {
		case <-runCtx.Done():
			return // Run ended on its own
		case <-ctx.Done():
			s.waitStarted(runCtx, hooks)
			stop(context.Canceled)
		case <-s.storage.Failed():
			klog.ErrorS(s.storage.Failure(), "Stopping: the storage failed")
			s.waitStarted(runCtx, hooks)
			stop(s.storage.Failure())
		case reason := <-s.restart:
			klog.InfoS("Stopping to start again", "reason", reason)
			stop(ErrRestart)
		}
	}()
	err := prepared.RunWithContext(runCtx)
	stop(nil)
	<-watched
	// Already stopped by the pre-shutdown hook, unless the server failed
	// before it ran.
	s.workers.stop()
	for _, f := range s.afterStop {
		f()
	}
	if cause := context.Cause(runCtx); cause != nil && !errors.Is(cause, context.Canceled) {
		return cause
	}
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// startGrace bounds how long a stop asked for during the start waits for
// the post-start hooks.
const startGrace = 30 * time.Second

// waitStarted returns once every post-start hook (hooks, by name) has
// returned (at most
// startGrace, or when ctx ends): a stop begins only then. Upstream ends the
// process when a post-start hook fails, and the apiextensions server's
// hooks fail when the stop cancels their context while they wait for an
// informer (k8s.io/apiserver pkg/server/hooks.go runPostStartHook), so a
// SIGTERM in the first second would exit with 255 and a fatal line. Each
// hook's health check tells whether it has returned.
func (s *Server) waitStarted(ctx context.Context, hooks []string) {
	ctx, cancel := context.WithTimeout(ctx, startGrace)
	defer cancel()
	done := func() bool {
		for _, name := range hooks {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, "/healthz/poststarthook/"+name, nil)
			if err != nil {
				return true
			}
			req.Header.Set("Authorization", "Bearer "+s.generic.LoopbackClientConfig.BearerToken)
			w := &statusWriter{header: http.Header{}}
			s.generic.Handler.ServeHTTP(w, req)
			if w.status != http.StatusOK {
				return false
			}
		}
		return true
	}
	for !done() {
		select {
		case <-ctx.Done():
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// statusWriter keeps only the status of an in-process request.
type statusWriter struct {
	header http.Header
	status int
}

func (w *statusWriter) Header() http.Header { return w.header }
func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return len(b), nil
}
func (w *statusWriter) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
}

// clientAddress is the address local clients dial: the bind address, or
// loopback when bound to every interface.
func clientAddress(bind string) string {
	ip := net.ParseIP(bind)
	switch {
	case ip == nil, !ip.IsUnspecified():
		return bind
	case ip.To4() != nil:
		return "127.0.0.1"
	}
	return "::1"
}
