package server

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsinternal "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsapiserver "k8s.io/apiextensions-apiserver/pkg/apiserver"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/generic"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/kubestore/kubestore/access"
	"github.com/kubestore/kubestore/config"
	"github.com/kubestore/kubestore/kubelets"
	"github.com/kubestore/kubestore/mirror"
	"github.com/kubestore/kubestore/records"
	"github.com/kubestore/kubestore/registry"
	"github.com/kubestore/kubestore/serviceip"
	"github.com/kubestore/kubestore/tunnel"
)

// mirrorStores are the local stores the mirror writes, one per resource,
// built on first use: the built-in kinds, CustomResourceDefinitions and
// the custom resources whose definition is stored.
type mirrorStores struct {
	backend Storage
	kinds   *registry.API
	builtin generic.RESTOptionsGetter
	crds    *customResources

	mu     sync.Mutex
	stores map[schema.GroupResource]*mirror.Store
	closed bool
}

var crdResource = apiextensionsv1.SchemeGroupVersion.WithResource("customresourcedefinitions")

// Builtin reports whether gr is a resource kubestore serves itself (not a
// custom resource).
func (s *mirrorStores) Builtin(gr schema.GroupResource) bool {
	_, ok := s.kinds.Kind(gr)
	return ok || gr == crdResource.GroupResource()
}

func (s *mirrorStores) Store(_ context.Context, gr schema.GroupResource) (*mirror.Store, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, mirror.ErrStopping
	}
	if st, ok := s.stores[gr]; ok {
		return st, nil
	}
	st, err := s.build(gr)
	if err != nil {
		return nil, err
	}
	s.stores[gr] = st
	return st, nil
}

func (s *mirrorStores) build(gr schema.GroupResource) (*mirror.Store, error) {
	if k, ok := s.kinds.Kind(gr); ok {
		raw, err := s.backend.RawStore(s.builtin, gr, k.New, k.NewList)
		if err != nil {
			return nil, err
		}
		return &mirror.Store{RawStore: raw, GVR: k.GVR, GVK: k.GVK, Namespaced: k.Namespaced, New: k.New, NewList: k.NewList, Attrs: k.Attrs,
			Convert: func(u map[string]any) (runtime.Object, error) {
				obj := k.New()
				return obj, runtime.DefaultUnstructuredConverter.FromUnstructured(u, obj)
			}}, nil
	}
	if s.crds == nil {
		return nil, fmt.Errorf("%s is not served: not a built-in resource, and --%s is off", gr, "custom-resources")
	}
	if gr == crdResource.GroupResource() {
		newFunc := func() runtime.Object { return &apiextensionsinternal.CustomResourceDefinition{} }
		newList := func() runtime.Object { return &apiextensionsinternal.CustomResourceDefinitionList{} }
		raw, err := s.backend.RawStore(s.crds.restOptions, gr, newFunc, newList)
		if err != nil {
			return nil, err
		}
		return &mirror.Store{RawStore: raw, GVR: crdResource, GVK: apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"), New: newFunc, NewList: newList, Attrs: mirror.MetadataAttrs(false),
			Convert: func(u map[string]any) (runtime.Object, error) {
				out := newFunc()
				err := apiextensionsapiserver.Scheme.Convert(&unstructured.Unstructured{Object: u}, out, nil)
				return out, err
			}}, nil
	}
	crd, err := s.crds.Informers.Apiextensions().V1().CustomResourceDefinitions().Lister().Get(gr.String())
	if err != nil {
		return nil, fmt.Errorf("the CustomResourceDefinition of %s is not stored yet: %w", gr, err)
	}
	version := ""
	for _, v := range crd.Spec.Versions {
		if v.Storage {
			version = v.Name
		}
	}
	newFunc := func() runtime.Object { return &unstructured.Unstructured{} }
	newList := func() runtime.Object { return &unstructured.UnstructuredList{} }
	raw, err := s.backend.RawStore(s.crds.customResourceOptions, gr, newFunc, newList)
	if err != nil {
		return nil, err
	}
	namespaced := crd.Spec.Scope == apiextensionsv1.NamespaceScoped
	return &mirror.Store{RawStore: raw, GVR: gr.WithVersion(version), GVK: gr.WithVersion(version).GroupVersion().WithKind(crd.Spec.Names.Kind), Namespaced: namespaced,
		New: newFunc, NewList: newList, Attrs: mirror.MetadataAttrs(namespaced),
		Convert: func(u map[string]any) (runtime.Object, error) { return &unstructured.Unstructured{Object: u}, nil }}, nil
}

// close closes every store; Store fails from then on.
func (s *mirrorStores) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	for _, st := range s.stores {
		st.Close()
	}
}

// mirror builds the mirror of --upstream-kubeconfig, when set: its stores,
// the write-through filter (installed by the handler chain) and, later,
// its worker and /mirrorz.
func (b *builder) mirror() error {
	if !b.cfg.Mirror.Enabled() {
		return nil
	}
	stores := &mirrorStores{backend: b.storage, kinds: b.kinds, builtin: b.c.RESTOptionsGetter, crds: b.crds,
		stores: map[schema.GroupResource]*mirror.Store{}}
	m, err := mirror.New(b.cfg.Mirror, stores, b.records)
	if err != nil {
		return err
	}
	// Processes sharing one etcd stream each rule once, elected.
	if b.cfg.Site.Enabled() || b.cfg.Etcd.External() {
		identity := b.processIdentity()
		m.SetElector(func(ctx context.Context, key string, fn func(context.Context)) {
			b.records.Lead(ctx, key, identity, fn)
		})
	}
	m.SetView(b.nodeView())
	m.SetTokenTrust(b.trusted)
	b.trusted.SetFetcher(m.JWKS)
	b.access.SetClusterAuthorizer(m.ClusterAuthorizer())
	b.undo(stores.close)
	b.mirrorStores, b.mirrorer = stores, m
	return nil
}

// nodeView is where the node's pods reach this gateway's API: the
// endpoint of their view of the cluster's Service default/kubernetes
// (mirror.View), the advertised address on the API's port; without one
// the pods see the cluster's endpoints.
func (b *builder) nodeView() mirror.View {
	hosts := map[netip.Addr]bool{}
	for _, h := range access.ServingHosts(b.cfg.Server, b.cfg.Site) {
		if ip, err := netip.ParseAddr(h); err == nil {
			hosts[ip] = true
		}
	}
	v := mirror.View{Covers: func(ip netip.Addr) bool { return hosts[ip.Unmap()] }}
	address, ok := b.cfg.Server.AdvertisedAddress()
	if !ok {
		klog.InfoS("The node's pods see the cluster's endpoints of the Service default/kubernetes, not this gateway: set --" + config.FlagAdvertiseAddress + " to an address of the node that kubestore listens on (--" + config.FlagBindAddress + ")")
		return v
	}
	port := b.ln.tcp.Addr().(*net.TCPAddr).Port
	ep := serviceip.NewKubernetesEndpoint(address, int32(port))
	v.Endpoint = net.JoinHostPort(address.String(), strconv.Itoa(port))
	v.Subsets, v.AddressType, v.Endpoints, v.Ports = ep.Subsets, ep.AddressType, ep.Endpoints, ep.Ports
	return v
}

// tunnels builds the gateway's tunnel to each --tunnel-endpoint: as the
// node, with the upstream kubeconfig's credentials (its client
// certificate, or its bearer token), verifying the endpoint with
// --tunnel-ca-file or else the upstream kubeconfig's own TLS settings.
// Each answers only for the node's own kubelet, as the local Node reports
// it.
func (b *builder) tunnels() ([]*tunnel.Client, error) {
	m := b.cfg.Mirror
	if len(m.TunnelEndpoints) == 0 {
		return nil, nil
	}
	up, err := mirror.LoadUpstream(m)
	if err != nil {
		return nil, err
	}
	tlsCfg, err := rest.TLSConfigFor(up)
	if err != nil {
		return nil, fmt.Errorf("invalid --%s %q: its TLS settings: %w", config.FlagUpstreamKubeconfig, m.UpstreamKubeconfig, err)
	}
	if tlsCfg == nil {
		tlsCfg = &tls.Config{}
	}
	// The upstream's server name is not the endpoint's.
	tlsCfg.ServerName = ""
	if m.TunnelCAFile != "" {
		pem, err := os.ReadFile(m.TunnelCAFile)
		if err != nil {
			return nil, fmt.Errorf("invalid --%s %q: %w", config.FlagTunnelCAFile, m.TunnelCAFile, err)
		}
		roots := x509.NewCertPool()
		if !roots.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("invalid --%s %q: holds no PEM certificate", config.FlagTunnelCAFile, m.TunnelCAFile)
		}
		tlsCfg.RootCAs, tlsCfg.InsecureSkipVerify = roots, false
	}
	nodes, name := b.api.Getter("nodes"), m.EffectiveNodeName()
	node := func(ctx context.Context) (*corev1.Node, error) {
		return kubelets.GetNode(request.WithNamespace(ctx, metav1.NamespaceNone), nodes, name)
	}
	var out []*tunnel.Client
	for _, e := range m.TunnelEndpoints {
		out = append(out, &tunnel.Client{Endpoint: e, TLS: tlsCfg, NodeName: name, Token: up.BearerToken, TokenFile: up.BearerTokenFile, Node: node})
	}
	return out, nil
}

// mirrorz answers the link's state: 200 ok when every stream is connected
// and in sync (and every tunnel is open), 503 with the reasons otherwise;
// ?verbose lists each stream and tunnel. It is not part of /readyz: the
// local store serves either way.
func mirrorz(m *mirror.Mirror, tunnels []*tunnel.Client) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		problems := m.Problems()
		if !m.Connected() {
			problems = append([]string{"upstream " + m.Upstream() + " not reachable"}, problems...)
		}
		var tunnelLines []string
		for _, tun := range tunnels {
			st := tun.Status()
			tunnelLines = append(tunnelLines, fmt.Sprintf("tunnel %s connected=%t since=%s", st.Endpoint, st.Connected, st.Since.UTC().Format(time.RFC3339)))
			if !st.Connected {
				problems = append(problems, fmt.Sprintf("tunnel to %s not connected: %s", st.Endpoint, st.LastError))
			}
		}
		if len(problems) > 0 {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		if _, verbose := r.URL.Query()["verbose"]; verbose {
			fmt.Fprintf(w, "upstream %s connected=%t\n", m.Upstream(), m.Connected())
			for _, l := range tunnelLines {
				fmt.Fprintln(w, l)
			}
			fmt.Fprintf(w, "%s\n", strings.Join(m.Report(), "\n"))
		}
		if len(problems) > 0 {
			fmt.Fprintf(w, "mirror not in sync:\n%s\n", strings.Join(problems, "\n"))
			return
		}
		fmt.Fprintln(w, "ok")
	})
}

var _ mirror.Stores = (*mirrorStores)(nil)
var _ mirror.State = (*records.Store)(nil)
