// Package registry holds the built-in kinds kubestore serves: for each kind
// its defaulting, validation, selectable fields and kubectl columns, the
// rules upstream keeps in k8s.io/kubernetes, transcribed one file per kind;
// the scheme they are registered in; and their stores on the storage
// package cacher provides, ready to install in a generic API server, with
// the namespace lifecycle (admission, system namespaces; the controller is
// package namespaces) and the Services' ClusterIP allocator (its repair and
// the default ServiceCIDR are package serviceip's).
//
//	api, err := registry.New()
//	getter := backend.RESTOptionsGetter(cacher.Resources{Scheme: api.Scheme(), Serializer: api.Codecs(), KeyPrefixes: api.KeyPrefixes()})
//	storage, err := api.NewStorage(getter, nil) // or registry.NewClusterIPs(...)
//	defer storage.Destroy()
//	err = storage.Install(genericServer)
package registry

import (
	"fmt"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
)

// API is every built-in kind with the scheme and codecs they are
// registered in.
type API struct {
	defs   []*resourceDef
	scheme *runtime.Scheme
	codecs serializer.CodecFactory
}

// New builds the catalog and its scheme. Each call builds them afresh, so
// servers in one process share nothing.
func New() (*API, error) {
	defs := catalog()
	scheme, codecs, err := newScheme(defs)
	if err != nil {
		return nil, fmt.Errorf("building scheme: %w", err)
	}
	return &API{defs: defs, scheme: scheme, codecs: codecs}, nil
}

// Scheme registers every kind under its version and the internal one,
// with its defaulting and field selectors.
func (a *API) Scheme() *runtime.Scheme { return a.scheme }

// Codecs are the scheme's codecs.
func (a *API) Codecs() serializer.CodecFactory { return a.codecs }

// KeyPrefixes are each resource's etcd key prefix, kube-apiserver's.
func (a *API) KeyPrefixes() map[schema.GroupResource]string {
	m := make(map[schema.GroupResource]string, len(a.defs))
	for _, d := range a.defs {
		m[d.gvr.GroupResource()] = d.keyPrefix
	}
	return m
}

// catalog lists every built-in resource kubestore serves. Each call returns
// fresh definitions.
func catalog() []*resourceDef {
	return []*resourceDef{
		namespaceDef(),
		podDef(),
		nodeDef(),
		configMapDef(),
		secretDef(),
		serviceDef(),
		endpointsDef(),
		eventDef(),
		serviceAccountDef(),
		leaseDef(),
		endpointSliceDef(),
		serviceCIDRDef(),
		resourceSliceDef(),
		certificateSigningRequestDef(),
		podCertificateRequestDef(),
		storageClassDef(),
		volumeAttachmentDef(),
		csiNodeDef(),
		csiDriverDef(),
		runtimeClassDef(),
	}
}

// Kind describes one built-in resource to code that stores it below the
// REST layer (the mirror).
type Kind struct {
	GVR        schema.GroupVersionResource
	GVK        schema.GroupVersionKind
	Namespaced bool
	// New and NewList make the stored types.
	New, NewList func() runtime.Object
	// Attrs are an object's labels and selectable fields, as list and
	// watch select them.
	Attrs func(obj runtime.Object) (labels.Set, fields.Set, error)
}

// Kind is the built-in resource gr, if kubestore serves it.
func (a *API) Kind(gr schema.GroupResource) (Kind, bool) {
	for _, d := range a.defs {
		if d.gvr.GroupResource() == gr {
			return Kind{GVR: d.gvr, GVK: d.gvk(), Namespaced: d.namespaced, New: d.newFunc, NewList: d.newListFunc, Attrs: d.getAttrs}, true
		}
	}
	return Kind{}, false
}
