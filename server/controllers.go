package server

import (
	"context"
	"fmt"
	"net"
	"net/netip"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	genericapiserver "k8s.io/apiserver/pkg/server"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	networkingv1client "k8s.io/client-go/kubernetes/typed/networking/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/kubestore/kubestore/certificates"
	"github.com/kubestore/kubestore/config"
	"github.com/kubestore/kubestore/gc"
	"github.com/kubestore/kubestore/namespaces"
	"github.com/kubestore/kubestore/podgc"
	"github.com/kubestore/kubestore/registry"
	"github.com/kubestore/kubestore/serviceaccount"
	"github.com/kubestore/kubestore/serviceip"
)

// controllerDescriptor is one controller kubestore runs beside the API, as
// kube-controller-manager's ControllerDescriptor: its name in
// --controllers, what it reads and how, how several kubestores on one etcd
// share it, and how it starts. Controllers that upstream runs as one (the
// ServiceAccount and root CA publisher share their informers) start
// together, from the first of them enabled.
type controllerDescriptor struct {
	name string
	// reads is where the controller's data comes from.
	reads string
	// shared is how it stays right with several kubestores on one etcd.
	shared string
	// prepare, when set, adds what the controller needs of the stores and
	// admission, before they are built.
	prepare func(b *builder) error
	// start adds the controller's workers and hooks to s; with enabled it
	// knows which of its group are on.
	start func(b *builder, s *Server, enabled func(string) bool) error
	// with names the controllers started by this one's start.
	with []string
}

// podGCTiming is the pod garbage collector's (tests shorten it).
var podGCTiming = podgc.DefaultTiming

// controllerDescriptors are every controller, in the order they start.
func controllerDescriptors() []controllerDescriptor {
	return []controllerDescriptor{
		{
			name:   config.ControllerNamespace,
			reads:  "the registry's stores: namespaces from the watch cache, each namespace's contents listed and deleted through them",
			shared: "idempotent deletes",
			start: func(b *builder, s *Server, _ func(string) bool) error {
				nsStore, finalize, status, contents := b.api.NamespaceStores()
				s.addWorker("kubestore-namespace-controller", namespaces.NewController(nsStore, finalize, status, contents, b.deleteCustom).Run)
				return nil
			},
		},
		{
			name:   config.ControllerGarbageCollector,
			reads:  "the registry's stores: a metadata informer per resource on its watch cache (custom resources: the loopback client); each object judged read again from etcd; discovery read at the start and after a CRD changes",
			shared: "one collector, elected with the etcd election " + gc.ElectionKey + " (no write while held); deletes with uid and resourceVersion preconditions",
			start: func(b *builder, s *Server, _ func(string) bool) error {
				loopback, local := workerLoopback(b.gs.LoopbackClientConfig), b.api.ListerWatcher
				lead, identity := b.records.Lead, b.processIdentity()
				s.addWorker("kubestore-garbage-collector", func(ctx context.Context) {
					if err := gc.RunWithLeaderElection(ctx, loopback, local, lead, identity); err != nil {
						klog.ErrorS(err, "Garbage collector")
					}
				})
				return nil
			},
		},
		{
			name:   config.ControllerPodGC,
			reads:  "pods and nodes listed from the watch cache through the loopback client every 20 s; a node missing for 40 s read again from etcd",
			shared: "the status applied by its field manager (PodGC), the delete with the pod's uid as a precondition",
			start: func(b *builder, s *Server, _ func(string) bool) error {
				client, err := corev1client.NewForConfig(workerLoopback(b.gs.LoopbackClientConfig))
				if err != nil {
					return err
				}
				s.addWorker("kubestore-pod-garbage-collector", podgc.New(client, podGCTiming).Run)
				return nil
			},
		},
		{
			name:   config.ControllerServiceAccount,
			with:   []string{config.ControllerRootCAPublisher},
			reads:  "the registry's stores: typed informers of namespaces, ServiceAccounts and ConfigMaps on their watch caches",
			shared: "creates only (AlreadyExists to the others); the CA bundle read from etcd before each write",
			prepare: func(b *builder) error {
				if b.cc.ControllerEnabled(config.ControllerServiceAccount) {
					// Only while default ServiceAccounts are made: otherwise
					// no pod without one named could be created.
					b.admission = append(b.admission, serviceaccount.NewAdmission(b.saLookup))
				}
				return nil
			},
			start: func(b *builder, s *Server, enabled func(string) bool) error {
				accounts, rootCA := enabled(config.ControllerServiceAccount), enabled(config.ControllerRootCAPublisher)
				loopback, st, keys := workerLoopback(b.gs.LoopbackClientConfig), b.records, b.saKeys
				core := func(resource string, selector fields.Selector) cache.ListerWatcher {
					return b.listerWatcher(corev1.SchemeGroupVersion.WithResource(resource), selector)
				}
				s.addWorker("kubestore-serviceaccount-controllers", func(ctx context.Context) {
					if err := serviceaccount.Controllers(ctx, loopback, keys, st, accounts, rootCA, core); err != nil {
						klog.ErrorS(err, "ServiceAccount controllers")
					}
				})
				return nil
			},
		},
		{
			name:   config.ControllerCSRSigning,
			with:   []string{config.ControllerCSRApproving},
			reads:  "the registry's stores: a typed informer of CertificateSigningRequests on their watch cache",
			shared: "status written on the resourceVersion read: a second signer gets a conflict and finds it issued",
			start: func(b *builder, s *Server, enabled func(string) bool) error {
				loopback := workerLoopback(b.gs.LoopbackClientConfig)
				opts := certificates.Options{Approve: enabled(config.ControllerCSRApproving),
					CSRs: b.listerWatcher(certificatesv1.SchemeGroupVersion.WithResource("certificatesigningrequests"), nil)}
				if enabled(config.ControllerCSRSigning) {
					// kubestore's CA, the one its client certificates are
					// verified with: a kubelet's issued certificate logs it in.
					opts.CA = b.pkiFiles.CA
				}
				s.addWorker("kubestore-certificate-controllers", func(ctx context.Context) {
					if err := certificates.Run(ctx, loopback, opts); err != nil {
						klog.ErrorS(err, "Certificate signing request controllers")
					}
				})
				return nil
			},
		},
		{
			name:   config.ControllerClusterIPAllocate,
			reads:  "etcd: one record per IP, claimed by the registry on create; the repair loop lists Services and the default ServiceCIDR's pass reads it from the watch cache",
			shared: "each IP claimed by an atomic create in etcd; the default ServiceCIDR created once, its status written on the resourceVersion read",
			prepare: func(b *builder) error {
				ctx, cancel := context.WithTimeout(context.Background(), b.cfg.Etcd.StartTimeout.Duration)
				defer cancel()
				var err error
				if b.clusterIPs, err = registry.NewClusterIPs(ctx, b.cc.ServiceCIDRs(), b.records); err != nil {
					return fmt.Errorf("service cluster IPs: %w", err)
				}
				return nil
			},
			start: startClusterIPs,
		},
	}
}

// listerWatcher reads a built-in resource for an in-process controller
// from its store's watch cache (registry.Storage.ListerWatcher), selected
// by selector when not nil.
func (b *builder) listerWatcher(gvr schema.GroupVersionResource, selector fields.Selector) cache.ListerWatcher {
	lw, ok := b.api.ListerWatcher(gvr, selector, false)
	if !ok {
		// Every controller's resource is built in: a programming error.
		panic(fmt.Sprintf("no store serves %s", gvr))
	}
	return lw
}

// processIdentity names this process in the etcd elections it campaigns
// in (records.Store.Lead): its node, its site and its data dir, the same
// across restarts, so that a killed holder's election is taken over by its
// restart at once; two processes never share a data dir.
func (b *builder) processIdentity() string {
	return b.cfg.Mirror.EffectiveNodeName() + "/" + b.cfg.Site.Name() + "/" + b.cfg.DataDir
}

// enabled reports whether d or one it starts with is enabled.
func (d controllerDescriptor) enabled(cc config.Completed) bool {
	on := cc.ControllerEnabled(d.name)
	for _, w := range d.with {
		on = on || cc.ControllerEnabled(w)
	}
	return on
}

// prepareControllers runs the prepare step of every enabled controller.
func (b *builder) prepareControllers() error {
	for _, d := range controllerDescriptors() {
		if d.prepare != nil && d.enabled(b.cc) {
			if err := d.prepare(b); err != nil {
				return err
			}
		}
	}
	return nil
}

// startControllers starts every enabled controller's workers, once per
// group of controllers that start together.
func (b *builder) startControllers(s *Server) error {
	for _, d := range controllerDescriptors() {
		if !d.enabled(b.cc) {
			continue
		}
		if err := d.start(b, s, b.cc.ControllerEnabled); err != nil {
			return fmt.Errorf("starting %s: %w", d.name, err)
		}
	}
	return nil
}

// startClusterIPs starts the allocator's repair loop (serviceip.Repair) and
// the default ServiceCIDR "kubernetes" (serviceip.DefaultServiceCIDR),
// which stands for the range as kube-apiserver keeps it: /readyz waits for
// it, as upstream's start does, and then it is checked every 10 s. The
// allocator itself is the Services' store's (see builder.stores).
func startClusterIPs(b *builder, s *Server, _ func(string) bool) error {
	ips := b.clusterIPs
	loopback := workerLoopback(b.gs.LoopbackClientConfig)
	cidrs := b.cc.ServiceCIDRs()
	listCIDRs := b.cachedList(networkingv1.SchemeGroupVersion.WithResource("servicecidrs"), nil)
	b.gs.AddPostStartHookOrDie("kubestore-default-service-cidr", func(ctx genericapiserver.PostStartHookContext) error {
		client, err := networkingv1client.NewForConfig(loopback)
		if err != nil {
			return err
		}
		d := serviceip.NewDefaultServiceCIDR(cidrs, cachedServiceCIDRs{client.ServiceCIDRs(), listCIDRs})
		d.Start(ctx)
		s.workers.start(d.Run)
		return nil
	})
	listServices := b.cachedList(corev1.SchemeGroupVersion.WithResource("services"), nil)
	if !b.cfg.Mirror.Enabled() {
		// Mirrored, default/kubernetes is the cluster's.
		b.startKubernetesService(s, cidrs[0], loopback)
	}
	s.addWorker("kubestore-clusterip-repair", func(ctx context.Context) {
		serviceip.Repair(ctx, ips, func(ctx context.Context) ([]corev1.Service, error) {
			l, err := listServices(ctx)
			if err != nil {
				return nil, err
			}
			return l.(*corev1.ServiceList).Items, nil
		})
	})
	return nil
}

// startKubernetesService keeps the Service default/kubernetes at the
// first address of cidr and its endpoint (serviceip.KubernetesService):
// --advertise-address, or the bind address when pods can reach it.
// Processes sharing one etcd keep it elected.
func (b *builder) startKubernetesService(s *Server, cidr netip.Prefix, loopback *rest.Config) {
	address, ok := b.cfg.Server.AdvertisedAddress()
	if !ok {
		klog.InfoS("The Service default/kubernetes has no endpoint: pods on this node cannot reach the API; set --" + config.FlagAdvertiseAddress + " to an address of the node that kubestore listens on (--" + config.FlagBindAddress + ")")
	}
	// Each read lists default/kubernetes alone from its watch cache.
	only := fields.SelectorFromSet(fields.Set{"metadata.namespace": metav1.NamespaceDefault, "metadata.name": serviceip.KubernetesServiceName})
	read := cachedKubernetesService{
		services:  b.cachedList(corev1.SchemeGroupVersion.WithResource("services"), only),
		endpoints: b.cachedList(corev1.SchemeGroupVersion.WithResource("endpoints"), only),
		slices:    b.cachedList(discoveryv1.SchemeGroupVersion.WithResource("endpointslices"), only),
	}
	port := b.ln.tcp.Addr().(*net.TCPAddr).Port
	elected := b.cfg.Site.Enabled() || b.cfg.Etcd.External()
	identity := b.processIdentity()
	// It writes the v1 Endpoints kube-apiserver's reconciler writes too:
	// the API's deprecation warning is not news to it.
	loopback = rest.CopyConfig(loopback)
	loopback.WarningHandler = rest.NoWarnings{}
	s.addWorker("kubestore-kubernetes-service", func(ctx context.Context) {
		client, err := serviceip.NewKubernetesServiceWriter(loopback)
		if err != nil {
			klog.ErrorS(err, "The Service default/kubernetes")
			return
		}
		k := serviceip.NewKubernetesService(cidr, port, address, read, client)
		if !elected {
			k.Run(ctx)
			return
		}
		b.records.Lead(ctx, serviceip.KubernetesServiceElection, identity, k.Run)
	})
}

// cachedKubernetesService reads default/kubernetes's objects from the
// watch caches (serviceip.KubernetesServiceReader).
type cachedKubernetesService struct {
	services, endpoints, slices func(context.Context) (runtime.Object, error)
}

// cachedGet is the object namespace/name of list (namespace "" for a
// cluster-scoped resource), or NotFound of resource: a Get from the watch
// cache. The object is the cache's: read only.
func cachedGet[T runtime.Object](ctx context.Context, list func(context.Context) (runtime.Object, error), resource schema.GroupResource, namespace, name string) (T, error) {
	var none T
	l, err := list(ctx)
	if err != nil {
		return none, err
	}
	items, err := apimeta.ExtractList(l)
	if err != nil {
		return none, err
	}
	for _, o := range items {
		if m, err := apimeta.Accessor(o); err == nil && m.GetNamespace() == namespace && m.GetName() == name {
			if t, ok := o.(T); ok {
				return t, nil
			}
		}
	}
	return none, apierrors.NewNotFound(resource, name)
}

func (c cachedKubernetesService) Service(ctx context.Context) (*corev1.Service, error) {
	return cachedGet[*corev1.Service](ctx, c.services, corev1.Resource("services"), metav1.NamespaceDefault, serviceip.KubernetesServiceName)
}

func (c cachedKubernetesService) Endpoints(ctx context.Context) (*corev1.Endpoints, error) {
	return cachedGet[*corev1.Endpoints](ctx, c.endpoints, corev1.Resource("endpoints"), metav1.NamespaceDefault, serviceip.KubernetesServiceName)
}

func (c cachedKubernetesService) EndpointSlice(ctx context.Context) (*discoveryv1.EndpointSlice, error) {
	return cachedGet[*discoveryv1.EndpointSlice](ctx, c.slices, discoveryv1.Resource("endpointslices"), metav1.NamespaceDefault, serviceip.KubernetesServiceName)
}

// cachedList lists a built-in resource from its watch cache (the objects
// selector selects, every one when nil), as a LIST
// with resourceVersion=0 would (what an informer's lister holds), without
// the loopback client's HTTP. The objects are the cache's: read only.
func (b *builder) cachedList(gvr schema.GroupVersionResource, selector fields.Selector) func(context.Context) (runtime.Object, error) {
	l := cache.ToListerWithContext(b.listerWatcher(gvr, selector))
	return func(ctx context.Context) (runtime.Object, error) {
		return l.ListWithContext(ctx, metav1.ListOptions{ResourceVersion: "0"})
	}
}

// cachedServiceCIDRs is the default ServiceCIDR controller's client: it
// reads ServiceCIDRs from the watch cache, as upstream's controller reads
// its informer's lister, and writes through the loopback client. Its pass
// every 10 s was a loopback GET, which ran the HTTP client, TLS and the
// server's whole filter chain on an idle server and brought their code
// back into memory each time (docs/PERFORMANCE.md). A stale read is
// harmless: every write carries the resourceVersion it read, and a
// Conflict makes the next pass read again.
type cachedServiceCIDRs struct {
	networkingv1client.ServiceCIDRInterface
	list func(context.Context) (runtime.Object, error)
}

func (c cachedServiceCIDRs) Get(ctx context.Context, name string, _ metav1.GetOptions) (*networkingv1.ServiceCIDR, error) {
	return cachedGet[*networkingv1.ServiceCIDR](ctx, c.list, networkingv1.Resource("servicecidrs"), "", name)
}
