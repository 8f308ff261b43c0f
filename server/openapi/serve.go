package openapi

import (
	"context"
	"fmt"
	"net/http"
	"sync"

	restful "github.com/emicklei/go-restful/v3"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/apiserver/pkg/server/mux"
	"k8s.io/apiserver/pkg/server/routes"
	"k8s.io/klog/v2"
	builder2 "k8s.io/kube-openapi/pkg/builder"
	"k8s.io/kube-openapi/pkg/common"
	"k8s.io/kube-openapi/pkg/common/restfuladapter"
	"k8s.io/kube-openapi/pkg/handler"
	"k8s.io/kube-openapi/pkg/handler3"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// V3Path is where kube-apiserver serves its OpenAPI v3 documents.
const V3Path = "/openapi/v3"

// lazyOpenAPIV3 serves /openapi/v3 as kube-apiserver does, from upstream's
// own builder (routes.OpenAPI.InstallV3), but builds the documents on the
// first request instead of in PrepareRun: built, they hold ~6 MB of heap
// and their definitions ~5 MB more, and most devices never read them (the
// kubelet, kube-proxy and client-go informers do not; kubectl does, before
// it sends an object). Once built they stay until dropped under memory
// pressure (memory.Pressure), and the next request builds them again.
type lazyOpenAPIV3 struct {
	mu      sync.Mutex
	build   func(context.Context) *handler3.OpenAPIService
	service *handler3.OpenAPIService
	// drop ends the context the service was built with.
	drop context.CancelFunc
}

func (l *lazyOpenAPIV3) get() *handler3.OpenAPIService {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.service == nil {
		ctx, cancel := context.WithCancel(context.Background())
		l.service, l.drop = l.build(ctx), cancel
	}
	return l.service
}

// release drops the built documents; false when none were built.
func (l *lazyOpenAPIV3) release() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.service == nil {
		return false
	}
	l.drop()
	l.service, l.drop = nil, nil
	return true
}

// ServeV3Lazily installs /openapi/v3 on gs for the web services gs has
// when the first request comes; built is called with the service once it
// exists (the custom resources add their documents to it), and a context
// that ends when it is dropped. gs's config must have
// SkipOpenAPIInstallation set. drop frees the built documents, which the
// next request builds again, and reports whether any were built.
func ServeV3Lazily(gs *genericapiserver.GenericAPIServer, cfg *common.OpenAPIV3Config, built func(context.Context, *handler3.OpenAPIService)) (drop func() bool) {
	l := &lazyOpenAPIV3{build: func(ctx context.Context) *handler3.OpenAPIService {
		klog.V(2).InfoS("Building the OpenAPI v3 documents on their first request")
		// The definitions, generated once for every group built here
		// and dropped with this copy of the config.
		withDefs := *cfg
		withDefs.Definitions = cfg.GetDefinitions(v3Ref(cfg))
		// A scratch mux: the paths are served below, by this service.
		service := routes.OpenAPI{V3Config: &withDefs}.InstallV3(gs.Handler.GoRestfulContainer, mux.NewPathRecorderMux("openapi-v3"))
		if built != nil {
			built(ctx, service)
		}
		return service
	}}
	gs.Handler.NonGoRestfulMux.Handle(V3Path, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		l.get().HandleDiscovery(w, r)
	}))
	gs.Handler.NonGoRestfulMux.HandlePrefix(V3Path+"/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		l.get().HandleGroupVersion(w, r)
	}))
	return l.release
}

// DropDefinitions drops the definitions DefaultOpenAPIV3Config generated
// into cfg, once every API group is installed: the installs share them
// for server-side apply's types (each would generate its own copy
// otherwise, and keep what its types reference), and afterwards the
// builders generate them again when they are nil
// (k8s.io/kube-openapi/pkg/builder3), as ServeV3Lazily does.
func DropDefinitions(cfg *common.OpenAPIV3Config) {
	cfg.Definitions = nil
}

// OperationIDs is GetOperationIDAndTagsFromRoute for a config whose
// GetOperationIDAndTags is get, as kube-openapi's builders set it on their
// first build when it is nil (newOpenAPI in k8s.io/kube-openapi
// pkg/builder and pkg/builder3), without their closure: theirs calls
// through that first build's builder, and so keeps it and all it built
// for as long as the config lives. The built-in groups' config kept
// core/v1's install schemas for the server's life that way (2.5 MB,
// docs/PERFORMANCE.md), and the v2 config would have kept the first
// /openapi/v2 document through every drop.
func OperationIDs(get func(*restful.Route) (string, []string, error)) func(common.Route) (string, []string, error) {
	return func(r common.Route) (string, []string, error) {
		route, ok := r.(*restfuladapter.RouteAdapter)
		if !ok {
			return "", nil, fmt.Errorf("config.GetOperationIDAndTags specified but route is not a restful v1 Route")
		}
		return get(route.Route)
	}
}

// v3Ref is the reference DefaultOpenAPIV3Config gives definitions:
// a schema under #/components/schemas by its definition name.
func v3Ref(cfg *common.OpenAPIV3Config) common.ReferenceCallback {
	return func(name string) spec.Ref {
		defName, _ := cfg.GetDefinitionName(name)
		return spec.MustCreateRef("#/components/schemas/" + common.EscapeJsonPointer(defName))
	}
}

// v2Path is where kube-apiserver serves its OpenAPI v2 document.
const v2Path = "/openapi/v2"

// ServeV2Lazily serves /openapi/v2 as kube-apiserver does, for the
// built-in kinds, built on its first request as /openapi/v3 is. kubectl
// validates an object by it when it cannot find the kind's server-side
// field validation in /openapi/v3 (it looks for it on the kind's PATCH:
// a kind without one, a TokenReview or a SelfSubjectAccessReview, is
// validated on the client, from v2), so without it `kubectl create -f` of
// such a kind fails ("failed to download openapi"). drop frees the built
// document, which the next request builds again, and reports whether it
// was built.
func ServeV2Lazily(gs *genericapiserver.GenericAPIServer, cfg *common.Config) (drop func() bool) {
	var mu sync.Mutex
	var served http.Handler
	gs.Handler.NonGoRestfulMux.Handle(v2Path, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		if served == nil {
			served = buildV2(gs, cfg)
		}
		h := served
		mu.Unlock()
		h.ServeHTTP(w, r)
	}))
	return func() bool {
		mu.Lock()
		defer mu.Unlock()
		built := served != nil
		served = nil
		return built
	}
}

// buildV2 builds the /openapi/v2 document of gs's routes and its handler.
func buildV2(gs *genericapiserver.GenericAPIServer, cfg *common.Config) http.Handler {
	klog.V(2).InfoS("Building the OpenAPI v2 document on its first request")
	doc, err := builder2.BuildOpenAPISpecFromRoutes(restfuladapter.AdaptWebServices(gs.Handler.GoRestfulContainer.RegisteredWebServices()), cfg)
	if err != nil {
		klog.ErrorS(err, "Building the OpenAPI v2 document")
		return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, "building the OpenAPI v2 document failed: "+err.Error(), http.StatusInternalServerError)
		})
	}
	doc.Definitions = handler.PruneDefaults(doc.Definitions)
	m := mux.NewPathRecorderMux("openapi-v2")
	handler.NewOpenAPIService(doc).RegisterOpenAPIVersionedService(v2Path, m)
	return m
}
