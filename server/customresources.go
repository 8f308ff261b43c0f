package server

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/emicklei/go-restful/v3"

	apiextensionshelpers "k8s.io/apiextensions-apiserver/pkg/apihelpers"
	apiextensionsinternal "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsapiserver "k8s.io/apiextensions-apiserver/pkg/apiserver"
	apiextensionsinformers "k8s.io/apiextensions-apiserver/pkg/client/informers/externalversions/apiextensions/v1"
	apiextensionslisters "k8s.io/apiextensions-apiserver/pkg/client/listers/apiextensions/v1"
	openapiv3controller "k8s.io/apiextensions-apiserver/pkg/controller/openapiv3"
	apiextensionsopenapi "k8s.io/apiextensions-apiserver/pkg/generated/openapi"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/util/wait"
	utilversion "k8s.io/apimachinery/pkg/version"
	"k8s.io/apiserver/pkg/admission"
	openapinamer "k8s.io/apiserver/pkg/endpoints/openapi"
	"k8s.io/apiserver/pkg/registry/generic"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/apiserver/pkg/storage/value"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/kube-openapi/pkg/builder3"
	"k8s.io/kube-openapi/pkg/common"
	"k8s.io/kube-openapi/pkg/common/restfuladapter"
	"k8s.io/kube-openapi/pkg/handler3"
	"k8s.io/utils/ptr"

	"github.com/kubestore/kubestore/cacher"
	"github.com/kubestore/kubestore/mirror"
	"github.com/kubestore/kubestore/mirrored"
	"github.com/kubestore/kubestore/namespaces"
	"github.com/kubestore/kubestore/server/openapi"
)

// newCustomResourcesServer builds the upstream apiextensions-apiserver
// that serves apiextensions.k8s.io/v1 and every custom resource, as
// kube-apiserver builds it (pkg/controlplane/apiserver/apiextensions.go):
// from a copy of kubestore's generic config, so it shares authentication,
// authorization, the loopback client, admission and the aggregated
// discovery, with its own post-start hooks. CustomResourceDefinitions are
// stored like built-in resources; custom objects as JSON, both through
// the backend's getters (watch cache, per-resource settings, budgets).
// delegate serves what it does not (the NotFound handler at the end of the
// chain).
func newCustomResourcesServer(base genericapiserver.Config, backend Storage, transformers func(schema.GroupResource) value.Transformer,
	nsLifecycle admission.ValidationInterface, delegate genericapiserver.DelegationTarget) (*customResources, error) {
	c := base
	// Hooks, health checks and the equivalent-resource registry are the
	// server's own; the checks of the copy would be registered twice.
	c.PostStartHooks = map[string]genericapiserver.PostStartHookConfigEntry{}
	c.HealthzChecks, c.LivezChecks, c.ReadyzChecks = nil, nil, nil
	c.EquivalentResourceRegistry = nil
	definitions := backend.RESTOptionsGetter(cacher.Resources{
		Scheme:      apiextensionsapiserver.Scheme,
		Serializer:  apiextensionsapiserver.Codecs,
		Transformer: transformers,
	})
	c.RESTOptionsGetter = definitions
	c.MergedResourceConfig = apiextensionsapiserver.DefaultAPIResourceConfigSource()
	c.AdmissionControl = admission.NewChainHandler(nsLifecycle, conversionCheck{}, mirror.Annotations())
	// Server-side apply of CRDs needs the apiextensions types' schemas,
	// custom resources the metav1 and autoscaling/v1 Scale ones.
	// Its /openapi/v3 is never served (the top server's is, with the
	// documents serveOpenAPIV3 adds): SkipOpenAPIInstallation is the
	// base's.
	c.OpenAPIV3Config = genericapiserver.DefaultOpenAPIV3Config(customResourceDefinitions,
		openapinamer.NewDefinitionNamer(apiextensionsapiserver.Scheme))
	c.OpenAPIV3Config.GetOperationIDAndTagsFromRoute = openapi.OperationIDs(c.OpenAPIV3Config.GetOperationIDAndTags)
	c.OpenAPIV3Config.Info.Title = base.OpenAPIV3Config.Info.Title
	c.OpenAPIV3Config.Info.Version = base.OpenAPIV3Config.Info.Version

	objects := backend.CustomResourcesRESTOptionsGetter(transformers)
	ec := &apiextensionsapiserver.Config{
		GenericConfig: &genericapiserver.RecommendedConfig{Config: c},
		ExtraConfig: apiextensionsapiserver.ExtraConfig{
			CRDRESTOptionsGetter: objects,
			// One server: a new CRD is established at once, not after
			// the 5 s an HA control plane waits.
			MasterCount: 1,
		},
	}
	s, err := ec.Complete().New(delegate)
	if err != nil {
		return nil, fmt.Errorf("building the apiextensions API server: %w", err)
	}
	s.GenericAPIServer.AddPostStartHookOrDie("apiextensions-storage-readiness", s.GenericAPIServer.StorageReadinessHook.Hook)
	return &customResources{CustomResourceDefinitions: s, openAPIV3: c.OpenAPIV3Config, restOptions: definitions, customResourceOptions: objects}, nil
}

// customResources is the apiextensions server of the chain.
type customResources struct {
	*apiextensionsapiserver.CustomResourceDefinitions
	openAPIV3 *common.OpenAPIV3Config
	// restOptions are the definitions' storage options,
	// customResourceOptions the custom objects'.
	restOptions, customResourceOptions generic.RESTOptionsGetter
}

// serveOpenAPIV3 adds apiextensions.k8s.io/v1 and the schemas of the
// established CRDs to the top server's /openapi/v3, the merge
// kube-apiserver's aggregator does: kubectl looks a kind up there before
// it sends an object for server-side field validation, and
// kubectl explain reads it. It runs once the top server has built its
// OpenAPI service, on the first request for it, and again each time the
// service is built after a drop; built ends with that service.
func (s *customResources) serveOpenAPIV3(built context.Context, service *handler3.OpenAPIService, w *workers) error {
	for _, ws := range s.GenericAPIServer.Handler.GoRestfulContainer.RegisteredWebServices() {
		// apis/apiextensions.k8s.io and its versions; the top server has
		// the rest (/version).
		gv := strings.TrimPrefix(ws.RootPath(), "/")
		if !strings.HasPrefix(gv, "apis/") {
			continue
		}
		spec, err := builder3.BuildOpenAPISpecFromRoutes(restfuladapter.AdaptWebServices([]*restful.WebService{ws}), s.openAPIV3)
		if err != nil {
			return fmt.Errorf("building the OpenAPI v3 of %s: %w", gv, err)
		}
		service.UpdateGroupVersion(gv, spec)
	}
	informer := s.Informers.Apiextensions().V1().CustomResourceDefinitions()
	controller := openapiv3controller.NewController(handlersUntil(built, informer))
	w.start(func(ctx context.Context) {
		ctx, cancel := context.WithCancel(ctx)
		defer context.AfterFunc(built, cancel)()
		controller.Run(service, ctx.Done())
	})
	ctx, cancel := context.WithCancel(w.ctx)
	defer context.AfterFunc(built, cancel)()
	return waitPublished(ctx, service, informer.Lister())
}

// handlersUntil is informer, but the event handlers added through it are
// removed when ctx ends: upstream's OpenAPI v3 controller adds its own and
// never removes it, and through it the shared informer would keep every
// dropped OpenAPI service alive.
func handlersUntil(ctx context.Context, informer apiextensionsinformers.CustomResourceDefinitionInformer) apiextensionsinformers.CustomResourceDefinitionInformer {
	return crdInformer{informer, removingInformer{informer.Informer(), ctx}}
}

type crdInformer struct {
	apiextensionsinformers.CustomResourceDefinitionInformer
	informer cache.SharedIndexInformer
}

func (i crdInformer) Informer() cache.SharedIndexInformer { return i.informer }

type removingInformer struct {
	cache.SharedIndexInformer
	ctx context.Context
}

func (i removingInformer) AddEventHandler(h cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
	reg, err := i.SharedIndexInformer.AddEventHandler(h)
	if err == nil {
		context.AfterFunc(i.ctx, func() {
			if err := i.SharedIndexInformer.RemoveEventHandler(reg); err != nil {
				klog.ErrorS(err, "Removing a dropped OpenAPI v3 service's CRD event handler")
			}
		})
	}
	return reg, err
}

// crdOpenAPIWait bounds how long the first /openapi/v3 request waits for
// the established custom resources' documents.
const crdOpenAPIWait = 5 * time.Second

// waitPublished returns once service lists every served version of every
// established CRD: the OpenAPI controller adds them right after it starts,
// and the request that built the service must see them (kubectl looks its
// kind up there and, without it, validates against /openapi/v2, which
// kubestore does not serve).
func waitPublished(ctx context.Context, service *handler3.OpenAPIService, crds apiextensionslisters.CustomResourceDefinitionLister) error {
	list, err := crds.List(labels.Everything())
	if err != nil {
		return err
	}
	var want []string
	for _, crd := range list {
		if !apiextensionshelpers.IsCRDConditionTrue(crd, apiextensionsv1.Established) {
			continue
		}
		for _, v := range crd.Spec.Versions {
			if v.Served {
				want = append(want, "apis/"+crd.Spec.Group+"/"+v.Name)
			}
		}
	}
	published := func(context.Context) (bool, error) {
		rec := httptest.NewRecorder()
		service.HandleDiscovery(rec, httptest.NewRequest(http.MethodGet, openapi.V3Path, nil))
		var d handler3.OpenAPIV3Discovery
		if err := json.Unmarshal(rec.Body.Bytes(), &d); err != nil {
			return false, nil
		}
		for _, p := range want {
			if _, ok := d.Paths[p]; !ok {
				return false, nil
			}
		}
		return true, nil
	}
	ctx, cancel := context.WithTimeout(ctx, crdOpenAPIWait)
	defer cancel()
	if err := wait.PollUntilContextCancel(ctx, 10*time.Millisecond, true, published); err != nil {
		return fmt.Errorf("the OpenAPI v3 of %d custom resource versions not published in %s: %w", len(want), crdOpenAPIWait, err)
	}
	return nil
}

// customResourceDefinitions are the OpenAPI definitions the apiextensions
// server reads: apiextensions-apiserver's types, apimachinery's (the
// metav1 types of every route: Status, DeleteOptions, WatchEvent, Patch,
// the discovery lists), autoscaling/v1's Scale, and every definition they
// reference. The server keeps its config, and so these, for its life
// (the CRD documents of /openapi/v3 are built from its routes on the
// first request): all of kubestore's types held 5.5 MB of schemas for
// nothing (docs/PERFORMANCE.md).
func customResourceDefinitions(ref common.ReferenceCallback) map[string]common.OpenAPIDefinition {
	all := openapi.GetOpenAPIDefinitions(ref)
	for name, d := range apiextensionsopenapi.GetOpenAPIDefinitions(ref) {
		if _, ok := all[name]; !ok {
			all[name] = d
		}
	}
	defs := map[string]common.OpenAPIDefinition{}
	var add func(name string)
	add = func(name string) {
		d, ok := all[name]
		if _, done := defs[name]; done || !ok {
			return
		}
		defs[name] = d
		for _, dep := range d.Dependencies {
			add(dep)
		}
	}
	for name := range all {
		if strings.HasPrefix(name, "io.k8s.apiextensions-apiserver.") || strings.HasPrefix(name, "io.k8s.apimachinery.") ||
			strings.HasPrefix(name, "io.k8s.api.autoscaling.v1.") {
			add(name)
		}
	}
	return defs
}

// conversionCheck refuses CRDs whose versions are converted by a webhook:
// kubestore resolves no services to call, so it would accept the CRD and
// then fail every read of its objects in another version.
type conversionCheck struct{}

var _ admission.ValidationInterface = conversionCheck{}

func (conversionCheck) Handles(op admission.Operation) bool {
	return op == admission.Create || op == admission.Update
}

func (conversionCheck) Validate(_ context.Context, a admission.Attributes, _ admission.ObjectInterfaces) error {
	if a.GetResource().GroupResource() != apiextensionsv1.Resource("customresourcedefinitions") || a.GetSubresource() != "" {
		return nil
	}
	crd, ok := a.GetObject().(*apiextensionsinternal.CustomResourceDefinition)
	if !ok || crd.Spec.Conversion == nil || crd.Spec.Conversion.Strategy != apiextensionsinternal.WebhookConverter {
		return nil
	}
	return apierrors.NewInvalid(apiextensionsv1.Kind("CustomResourceDefinition"), a.GetName(), field.ErrorList{
		field.Invalid(field.NewPath("spec", "conversion", "strategy"), crd.Spec.Conversion.Strategy,
			"conversion webhooks are not supported by kubestore; use None (objects change versions by their apiVersion only)"),
	})
}

// legacyCRDDiscovery lists the groups of established CRDs in the legacy
// /apis discovery document of the top server, the work kube-apiserver's
// aggregator does (its crdRegistrationController). The aggregated document
// is shared by the servers of the chain and needs no help.
type legacyCRDDiscovery struct {
	groups genericapiserverGroupManager
	crds   apiextensionsLister
}

// genericapiserverGroupManager is the part of the top server's legacy
// /apis handler this uses.
type genericapiserverGroupManager interface {
	AddGroup(metav1.APIGroup)
	RemoveGroup(string)
}

type apiextensionsLister interface {
	List(labels.Selector) ([]*apiextensionsv1.CustomResourceDefinition, error)
}

func (d *legacyCRDDiscovery) handler() cache.ResourceEventHandler {
	sync := func(objs ...any) {
		groups := map[string]bool{}
		for _, obj := range objs {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if crd, ok := obj.(*apiextensionsv1.CustomResourceDefinition); ok {
				groups[crd.Spec.Group] = true
			}
		}
		for _, g := range slices.Sorted(maps.Keys(groups)) {
			d.sync(g)
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { sync(obj) },
		UpdateFunc: func(old, obj any) { sync(old, obj) },
		DeleteFunc: func(obj any) { sync(obj) },
	}
}

// sync sets one group's entry from the established CRDs that serve it, as
// apiextensions-apiserver's DiscoveryController computes /apis/<group>.
func (d *legacyCRDDiscovery) sync(group string) {
	crds, err := d.crds.List(labels.Everything())
	if err != nil {
		klog.ErrorS(err, "Listing CustomResourceDefinitions for discovery")
		return
	}
	seen := map[string]bool{}
	var versions []metav1.GroupVersionForDiscovery
	for _, crd := range crds {
		if crd.Spec.Group != group || !apiextensionshelpers.IsCRDConditionTrue(crd, apiextensionsv1.Established) {
			continue
		}
		for _, v := range crd.Spec.Versions {
			if v.Served && !seen[v.Name] {
				seen[v.Name] = true
				versions = append(versions, metav1.GroupVersionForDiscovery{GroupVersion: group + "/" + v.Name, Version: v.Name})
			}
		}
	}
	if len(versions) == 0 {
		d.groups.RemoveGroup(group)
		return
	}
	sort.Slice(versions, func(i, j int) bool {
		return utilversion.CompareKubeAwareVersionStrings(versions[i].Version, versions[j].Version) > 0
	})
	d.groups.AddGroup(metav1.APIGroup{Name: group, Versions: versions, PreferredVersion: versions[0]})
}

// apiextensionsGroup is apiextensions.k8s.io in the legacy /apis list.
func apiextensionsGroup() metav1.APIGroup {
	v1 := metav1.GroupVersionForDiscovery{GroupVersion: apiextensionsv1.SchemeGroupVersion.String(), Version: apiextensionsv1.SchemeGroupVersion.Version}
	return metav1.APIGroup{Name: apiextensionsv1.GroupName, Versions: []metav1.GroupVersionForDiscovery{v1}, PreferredVersion: v1}
}

// customContents deletes the custom objects of a terminating namespace,
// as kube-controller-manager's namespace controller does for every
// namespaced resource in discovery: through the API (the loopback client),
// for every established namespaced CRD.
type customContents struct {
	crds   apiextensionsLister
	client dynamic.Interface
}

func newCustomContents(s *customResources) (*customContents, error) {
	client, err := dynamic.NewForConfig(s.GenericAPIServer.LoopbackClientConfig)
	if err != nil {
		return nil, err
	}
	return &customContents{crds: s.Informers.Apiextensions().V1().CustomResourceDefinitions().Lister(), client: client}, nil
}

func (c *customContents) deleteIn(ctx context.Context, namespace string) (left namespaces.Remaining, err error) {
	crds, err := c.crds.List(labels.Everything())
	if err != nil {
		return left, err
	}
	for _, crd := range crds {
		if crd.Spec.Scope != apiextensionsv1.NamespaceScoped || !apiextensionshelpers.IsCRDConditionTrue(crd, apiextensionsv1.Established) {
			continue
		}
		i := slices.IndexFunc(crd.Spec.Versions, func(v apiextensionsv1.CustomResourceDefinitionVersion) bool { return v.Served })
		if i < 0 {
			continue
		}
		gvr := schema.GroupVersionResource{Group: crd.Spec.Group, Version: crd.Spec.Versions[i].Name, Resource: crd.Status.AcceptedNames.Plural}
		r := c.client.Resource(gvr).Namespace(namespace)
		l, err := r.List(ctx, metav1.ListOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return left, fmt.Errorf("listing %s: %w", gvr.GroupResource(), err)
		}
		deleted := 0
		for _, o := range l.Items {
			// The mirror's copies are the upstream's to delete (as in
			// namespaces' deleteContent).
			if mirrored.Is(o.GetAnnotations()) {
				continue
			}
			err := r.Delete(ctx, o.GetName(), metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: ptr.To(o.GetUID())}})
			if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
				return left, fmt.Errorf("deleting %s %s: %w", gvr.GroupResource(), o.GetName(), err)
			}
			deleted++
		}
		if deleted > 0 {
			// Left: copies, and what finalizers hold.
			if l, err = r.List(ctx, metav1.ListOptions{}); err != nil {
				return left, fmt.Errorf("listing %s: %w", gvr.GroupResource(), err)
			}
		}
		for _, o := range l.Items {
			left.Add(gvr.Resource+"."+gvr.Group, o.GetFinalizers())
			if mirrored.Is(o.GetAnnotations()) {
				left.Copies++
			}
		}
	}
	return left, nil
}
