// Package server assembles kubestore's Kubernetes API server from the
// upstream generic API server (k8s.io/apiserver/pkg/server): the built-in
// kinds of package registry with the namespace lifecycle, health and
// metrics. Storage comes from package cacher; the PKI, admin kubeconfig,
// authentication and authorization from package access.
package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/google/uuid"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/endpoints/discovery/aggregated"
	genericapifilters "k8s.io/apiserver/pkg/endpoints/filters"
	openapinamer "k8s.io/apiserver/pkg/endpoints/openapi"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/apiserver/pkg/server/healthz"
	"k8s.io/apiserver/pkg/util/notfoundhandler"
	restclient "k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/kubestore/kubestore/access"
	"github.com/kubestore/kubestore/cacher"
	"github.com/kubestore/kubestore/config"
	"github.com/kubestore/kubestore/datadir"
	"github.com/kubestore/kubestore/registry"
	"github.com/kubestore/kubestore/server/openapi"
)

// certRenewalPeriod is how often the serving and admin certificates are
// checked for renewal while the server runs.
const certRenewalPeriod = 12 * time.Hour

// Server is kubestore's API server, ready to Run.
type Server struct {
	generic    *genericapiserver.GenericAPIServer
	url        string
	kubeconfig string
	access     *access.Access
}

// New builds the server on backend: it listens (so the address is known
// and written to admin.kubeconfig before Run), loads or creates the PKI,
// builds every resource's store and installs the API groups. Nothing is
// served until Run. On error nothing is left running.
func New(cc config.Completed, backend *cacher.Backend) (_ *Server, err error) {
	cfg := cc.Config()
	var cleanup []func()
	defer func() {
		if err != nil {
			for i := len(cleanup) - 1; i >= 0; i-- {
				cleanup[i]()
			}
		}
	}()

	if err := applyFeatureGates(cc.FeatureGates(), cfg.Server.FeatureGates); err != nil {
		return nil, err
	}
	kinds, err := registry.New()
	if err != nil {
		return nil, err
	}
	scheme, codecs := kinds.Scheme(), kinds.Codecs()
	dir := datadir.Dir(cfg.DataDir)

	ln, err := net.Listen("tcp", net.JoinHostPort(cfg.Server.BindAddress, strconv.Itoa(cfg.Server.SecurePort)))
	if err != nil {
		return nil, fmt.Errorf("invalid --%s/--%s: %w", config.FlagBindAddress, config.FlagSecurePort, err)
	}
	cleanup = append(cleanup, func() { ln.Close() })
	port := ln.Addr().(*net.TCPAddr).Port
	clientHost := clientAddress(cfg.Server.BindAddress)
	url := "https://" + net.JoinHostPort(clientHost, strconv.Itoa(port))

	pki, err := access.LoadPKI(dir, access.ServingHosts(cfg.Server))
	if err != nil {
		return nil, err
	}
	if err := pki.WriteKubeconfig(dir.Kubeconfig(), url); err != nil {
		return nil, fmt.Errorf("writing %s: %w", dir.Kubeconfig(), err)
	}

	build := BuildInfo()
	ev, err := newEffectiveVersion(build)
	if err != nil {
		return nil, err
	}

	c := genericapiserver.NewConfig(codecs)
	c.EffectiveVersion = ev
	c.SecureServing = &genericapiserver.SecureServingInfo{
		Listener:      ln,
		Cert:          pki.Serving(),
		ClientCA:      pki.ClientCA(),
		MinTLSVersion: tls.VersionTLS12,
	}
	c.ExternalAddress = net.JoinHostPort(clientHost, strconv.Itoa(port))
	c.LoopbackClientConfig = &restclient.Config{
		Host:            url,
		BearerToken:     uuid.NewString(),
		TLSClientConfig: restclient.TLSClientConfig{CAData: pki.CAPEM()},
	}
	acc, err := access.Load(cfg.Server)
	if err != nil {
		return nil, err
	}
	c.Authentication.Authenticator = acc.Authenticator(pki.ClientCA())
	c.Authorization.Authorizer = acc.Authorizer()
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
	c.OpenAPIV3Config = genericapiserver.DefaultOpenAPIV3Config(openapi.GetOpenAPIDefinitions, openapinamer.NewDefinitionNamer(scheme))
	c.OpenAPIV3Config.Info.Title = "Kubernetes"
	c.OpenAPIV3Config.Info.Version = build.Kubernetes
	c.AddHealthChecks(healthz.NamedCheck("etcd", func(r *http.Request) error { return backend.Check(r.Context()) }))

	transformers, err := access.EncryptionTransformers(cfg)
	if err != nil {
		return nil, err
	}
	getter := backend.RESTOptionsGetter(cacher.Resources{Scheme: scheme, Serializer: codecs, KeyPrefixes: kinds.KeyPrefixes(), Transformer: transformers})
	c.RESTOptionsGetter = getter

	api, err := kinds.NewStorage(getter)
	if err != nil {
		return nil, err
	}
	cleanup = append(cleanup, api.Destroy)
	nsLifecycle := api.NamespaceLifecycle()
	c.AdmissionControl = nsLifecycle

	// The chain of kube-apiserver: kubestore's server, then the
	// apiextensions server, then the NotFound handler.
	var delegate genericapiserver.DelegationTarget = genericapiserver.NewEmptyDelegateWithCustomHandler(notFound{
		upstream: notfoundhandler.New(c.Serializer, genericapifilters.NoMuxAndDiscoveryIncompleteKey),
		complete: genericapifilters.NoMuxAndDiscoveryIncompleteKey, serializer: c.Serializer})
	// Malformed query parameters are refused before any handler runs.
	c.BuildHandlerChainFunc = func(h http.Handler, c *genericapiserver.Config) http.Handler {
		return genericapiserver.DefaultBuildHandlerChain(checkQuery(h, c.Serializer), c)
	}
	var crds *customResources
	if cfg.Server.CustomResources {
		c.AggregatedDiscoveryGroupManager = aggregated.NewResourceManager("apis")
		crds, err = newCustomResourcesServer(*c, backend, transformers, nsLifecycle, delegate)
		if err != nil {
			return nil, err
		}
		delegate = crds.GenericAPIServer
	}
	gs, err := c.Complete(nil).New("kubestore", delegate)
	if err != nil {
		if crds != nil {
			crds.GenericAPIServer.Destroy()
		}
		return nil, fmt.Errorf("building API server: %w", err)
	}
	if crds != nil {
		gs.DiscoveryGroupManager.AddGroup(apiextensionsGroup())
		informer := crds.Informers.Apiextensions().V1().CustomResourceDefinitions()
		disc := &legacyCRDDiscovery{groups: gs.DiscoveryGroupManager, crds: informer.Lister()}
		if _, err := informer.Informer().AddEventHandler(disc.handler()); err != nil {
			return nil, err
		}
	}
	gs.ShutdownTimeout = cfg.Server.ShutdownTimeout.Duration / 4
	if err := api.Install(gs); err != nil {
		return nil, err
	}

	gs.AddPostStartHookOrDie("storage-readiness", gs.StorageReadinessHook.Hook)
	gs.AddPostStartHookOrDie("kubestore-system-namespaces", func(ctx genericapiserver.PostStartHookContext) error {
		return api.EnsureSystemNamespaces(ctx)
	})
	var deleteCustom func(ctx context.Context, namespace string) (int, error)
	if crds != nil {
		custom, err := newCustomContents(crds)
		if err != nil {
			return nil, err
		}
		deleteCustom = custom.deleteIn
	}
	nsController := api.NamespaceController(deleteCustom)
	gs.AddPostStartHookOrDie("kubestore-namespace-controller", func(ctx genericapiserver.PostStartHookContext) error {
		go nsController.Run(ctx)
		return nil
	})
	if crds != nil {
		gs.AddPostStartHookOrDie("kubestore-custom-resources-openapi", func(ctx genericapiserver.PostStartHookContext) error {
			return crds.serveOpenAPIV3(ctx, gs.OpenAPIV3VersionedService)
		})
	}
	gs.AddPostStartHookOrDie("kubestore-certificate-renewal", func(ctx genericapiserver.PostStartHookContext) error {
		go wait.UntilWithContext(ctx, func(context.Context) {
			if err := pki.Renew(); err != nil {
				klog.ErrorS(err, "Renewing the serving certificate")
			}
			if err := pki.WriteKubeconfig(dir.Kubeconfig(), url); err != nil {
				klog.ErrorS(err, "Renewing the admin certificate")
			}
		}, certRenewalPeriod)
		return nil
	})

	if cfg.Server.UnixSocket != "" {
		sock, err := listenUnix(cfg.Server)
		if err != nil {
			return nil, err
		}
		cleanup = append(cleanup, func() { sock.listener.Close() })
		grace := cfg.Server.ShutdownTimeout.Duration / 4
		gs.AddPostStartHookOrDie("kubestore-unix-socket", func(ctx genericapiserver.PostStartHookContext) error {
			go sock.serve(ctx, gs.Handler, grace)
			return nil
		})
	}
	gs.AddPostStartHookOrDie("kubestore-release-startup-memory", func(ctx genericapiserver.PostStartHookContext) error {
		go releaseStartupMemory(ctx)
		return nil
	})

	klog.InfoS("kubestore API server", "url", url, "kubeconfig", dir.Kubeconfig(), "dataDir", cfg.DataDir, "etcd", backend.Endpoints())
	return &Server{generic: gs, url: url, kubeconfig: dir.Kubeconfig(), access: acc}, nil
}

// startupSettleTime is how long after the start the start-up garbage and
// pages are released: the post-start hooks and the first clients' lists are
// done by then.
const startupSettleTime = 10 * time.Second

// releaseStartupMemory returns what only the start needed: the garbage of
// building the API (debug.FreeOSMemory) and the binary's start-up pages
// (releaseStartupPages). Both are measured in docs/PERFORMANCE.md.
func releaseStartupMemory(ctx context.Context) {
	select {
	case <-ctx.Done():
		return
	case <-time.After(startupSettleTime):
	}
	debug.FreeOSMemory()
	released, err := releaseStartupPages()
	if err != nil {
		klog.ErrorS(err, "Releasing start-up pages")
		return
	}
	klog.V(2).InfoS("Released start-up memory", "binaryMappings", released)
}

// Reload reads --token-auth-file and --authorization-policy-file again
// (kubestore does it on SIGHUP). On error the previous ones stay in force.
func (s *Server) Reload() error { return s.access.Reload() }

// URL is the https:// address clients on the device use.
func (s *Server) URL() string { return s.url }

// Kubeconfig is the path of the admin kubeconfig.
func (s *Server) Kubeconfig() string { return s.kubeconfig }

// Run serves until ctx is cancelled, then stops gracefully: /readyz fails,
// the listener closes, in-flight requests finish and watches end, and every
// store and cacher is destroyed. It returns when all of that is done.
func (s *Server) Run(ctx context.Context) error {
	err := s.generic.PrepareRun().RunWithContext(ctx)
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
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
