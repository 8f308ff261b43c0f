package registry

import (
	"fmt"
	"slices"

	certificatesv1 "k8s.io/api/certificates/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	nodev1 "k8s.io/api/node/v1"
	resourcev1 "k8s.io/api/resource/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
)

// newScheme registers every served kind twice: under its external version
// and under runtime.APIVersionInternal, with the same Go type. The generic
// handlers decode into the internal version and the stores keep it; with no
// internal types outside k8s.io/kubernetes, both are the k8s.io/api type and
// conversion is the scheme's same-type path (it only sets the kind).
// Defaulting and the field-selector labels of each kind, which live in
// k8s.io/kubernetes upstream, are registered here from the catalog.
func newScheme(catalog []*resourceDef) (*runtime.Scheme, serializer.CodecFactory, error) {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		corev1.AddToScheme, coordinationv1.AddToScheme, discoveryv1.AddToScheme, networkingv1.AddToScheme,
		resourcev1.AddToScheme, certificatesv1.AddToScheme,
		storagev1.AddToScheme, nodev1.AddToScheme,
	} {
		if err := add(s); err != nil {
			return nil, serializer.CodecFactory{}, err
		}
	}
	if err := addReviewTypes(s); err != nil {
		return nil, serializer.CodecFactory{}, err
	}
	if err := addConnectOptionConversions(s); err != nil {
		return nil, serializer.CodecFactory{}, err
	}
	// The generic server encodes Status and discovery documents as
	// unversioned types of the legacy "v1".
	unversioned := schema.GroupVersion{Group: "", Version: "v1"}
	s.AddUnversionedTypes(unversioned, &metav1.Status{}, &metav1.APIVersions{}, &metav1.APIGroupList{}, &metav1.APIGroup{}, &metav1.APIResourceList{})

	for _, d := range catalog {
		internal := schema.GroupVersion{Group: d.gvr.Group, Version: runtime.APIVersionInternal}
		s.AddKnownTypes(internal, d.newFunc(), d.newListFunc())
		if d.defaults != nil {
			s.AddTypeDefaultingFunc(d.newFunc(), d.defaults)
		}
		if err := s.AddFieldLabelConversionFunc(d.gvk(), d.fieldLabelConversion); err != nil {
			return nil, serializer.CodecFactory{}, err
		}
		for _, as := range d.alsoServedAs {
			s.AddKnownTypes(as.gv, as.newFunc(), as.listFunc())
			metav1.AddToGroupVersion(s, as.gv)
			s.AddKnownTypes(schema.GroupVersion{Group: as.gv.Group, Version: runtime.APIVersionInternal}, d.newFunc(), d.newListFunc())
			if err := as.addConversions(s); err != nil {
				return nil, serializer.CodecFactory{}, err
			}
			if err := s.SetVersionPriority(as.gv); err != nil {
				return nil, serializer.CodecFactory{}, err
			}
		}
	}
	for _, gv := range []schema.GroupVersion{corev1.SchemeGroupVersion, coordinationv1.SchemeGroupVersion, discoveryv1.SchemeGroupVersion, networkingv1.SchemeGroupVersion, resourcev1.SchemeGroupVersion, certificatesv1.SchemeGroupVersion, storagev1.SchemeGroupVersion, nodev1.SchemeGroupVersion} {
		if err := s.SetVersionPriority(gv); err != nil {
			return nil, serializer.CodecFactory{}, err
		}
	}
	return s, serializer.NewCodecFactory(s), nil
}

// fieldLabelConversion accepts the field-selector labels a kind supports,
// refusing others with kube-apiserver's message.
func (d *resourceDef) fieldLabelConversion(label, value string) (string, string, error) {
	switch {
	case label == "metadata.name", label == "metadata.namespace":
		return label, value, nil
	case slices.Contains(d.fieldLabels, label):
		return label, value, nil
	}
	return "", "", fmt.Errorf("field label not supported: %s", label)
}
