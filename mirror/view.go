package mirror

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/storage"
	"k8s.io/klog/v2"

	"github.com/kubestore/kubestore/mirrored"
)

// view is the mirror's View and what it has said of the Service's
// address.
type view struct {
	View
	mu sync.Mutex
	// uncovered is the cluster's Service address the serving certificate
	// does not cover, once said.
	uncovered string
}

// kubernetesService names the Service whose endpoints the node sees as
// the gateway's.
const kubernetesService = "kubernetes"

var (
	endpointsResource      = schema.GroupResource{Resource: "endpoints"}
	endpointSlicesResource = schema.GroupResource{Group: "discovery.k8s.io", Resource: "endpointslices"}
	servicesResource       = schema.GroupResource{Resource: "services"}
)

// SetView makes the node's view of default/kubernetes lead to v; call it
// before Run.
func (m *Mirror) SetView(v View) { m.view = &view{View: v} }

// viewed reports whether obj of gr is one of the objects the node sees
// differently: the Endpoints or the EndpointSlice of default/kubernetes.
func viewed(gr schema.GroupResource, obj metav1.Object) bool {
	if obj.GetNamespace() != metav1.NamespaceDefault {
		return false
	}
	switch gr {
	case endpointsResource:
		return obj.GetName() == kubernetesService
	case endpointSlicesResource:
		return obj.GetLabels()[discoveryv1.LabelServiceName] == kubernetesService
	}
	return false
}

// viewOf puts the node's view on obj, the cluster's object of gr, and
// says which (the annotation's value), or "" when the node sees it as the
// cluster has it. The cluster's Service is checked against the serving
// certificate.
func (m *Mirror) viewOf(gr schema.GroupResource, obj runtime.Object) string {
	v := m.view
	if v == nil {
		return ""
	}
	a, err := meta.Accessor(obj)
	if err != nil {
		return ""
	}
	if svc, ok := obj.(*corev1.Service); ok && gr == servicesResource && a.GetNamespace() == metav1.NamespaceDefault && a.GetName() == kubernetesService {
		v.checkCovered(svc)
		return ""
	}
	if v.Endpoint == "" || !viewed(gr, a) {
		return ""
	}
	switch o := obj.(type) {
	case *corev1.Endpoints:
		o.Subsets = v.Subsets
	case *discoveryv1.EndpointSlice:
		o.AddressType, o.Endpoints, o.Ports = v.AddressType, v.Endpoints, v.Ports
	default:
		return ""
	}
	return v.Endpoint
}

// checkCovered says, once per address, when the gateway's serving
// certificate does not cover the address the node's pods call the API at.
func (v *view) checkCovered(svc *corev1.Service) {
	if v.Covers == nil {
		return
	}
	for _, s := range svc.Spec.ClusterIPs {
		ip, err := netip.ParseAddr(s)
		if err != nil || v.Covers(ip) {
			continue
		}
		v.mu.Lock()
		said := v.uncovered == s
		v.uncovered = s
		v.mu.Unlock()
		if !said {
			klog.InfoS("The cluster's Service default/kubernetes is at an address kubestore's serving certificate does not cover: the node's pods that call it will refuse the gateway; set --service-cluster-ip-range to the cluster's or add --tls-san", "address", s)
		}
	}
}

// uncoveredService is the address of the cluster's Service default/kubernetes
// that the gateway's serving certificate does not cover, if any.
func (m *Mirror) uncoveredService() string {
	if m.view == nil {
		return ""
	}
	m.view.mu.Lock()
	defer m.view.mu.Unlock()
	return m.view.uncovered
}

// refreshView brings the copies viewed before to the current view, when
// the gateway's endpoint changed since (a restart with another
// --advertise-address or port): at once from the copy where there is an
// endpoint, else (the view is gone) from the cluster's object, once the
// link is up.
func (m *Mirror) refreshView(ctx context.Context) {
	if m.view == nil {
		return
	}
	// The Service as the last run left it: the serving certificate may
	// cover other addresses now.
	if store, err := m.stores.Store(ctx, servicesResource); err == nil {
		svc := store.New()
		if err := store.Get(ctx, store.Key(metav1.NamespaceDefault, kubernetesService), storage.GetOptions{}, svc); err == nil && m.mirroredBy(store, svc) != nil {
			m.viewOf(servicesResource, svc)
		}
	}
	for _, gr := range []schema.GroupResource{endpointsResource, endpointSlicesResource} {
		if len(m.rulesFor(gr)) == 0 {
			continue
		}
		for ctx.Err() == nil {
			err := m.refreshViewOf(ctx, gr)
			if err == nil {
				break
			}
			klog.V(2).InfoS("Mirror: refreshing the node's view of default/kubernetes; will retry", "resource", gr, "err", err)
			select {
			case <-ctx.Done():
			case <-m.linkComesUp():
			case <-time.After(upProbeEvery):
			}
		}
	}
}

func (m *Mirror) refreshViewOf(ctx context.Context, gr schema.GroupResource) error {
	store, err := m.stores.Store(ctx, gr)
	if err != nil {
		return err
	}
	obj := store.New()
	key := store.Key(metav1.NamespaceDefault, kubernetesService)
	if err := store.Get(ctx, key, storage.GetOptions{}, obj); err != nil {
		if storage.IsNotFound(err) {
			return nil
		}
		return err
	}
	a, err := meta.Accessor(obj)
	if err != nil {
		return err
	}
	r := m.mirroredBy(store, obj)
	if r == nil || !viewed(gr, a) || a.GetAnnotations()[mirrored.AnnotationView] == m.view.Endpoint {
		return nil
	}
	if m.view.Endpoint == "" {
		if !m.Connected() {
			return fmt.Errorf("upstream %s not reachable", m.host)
		}
		u, err := m.dyn.Resource(store.GVR).Namespace(metav1.NamespaceDefault).Get(ctx, kubernetesService, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			_, err = m.remove(ctx, r, store, metav1.NamespaceDefault, kubernetesService, "", false)
			return err
		}
		if err != nil {
			return err
		}
		_, err = m.applyObject(ctx, r, store, u, applyHow{})
		return err
	}
	err = store.GuaranteedUpdate(ctx, key, store.New(), false, nil, func(input runtime.Object, _ storage.ResponseMeta) (runtime.Object, *uint64, error) {
		out := input.DeepCopyObject()
		a, err := meta.Accessor(out)
		if err != nil {
			return nil, nil, err
		}
		if !viewed(gr, a) {
			return nil, nil, errUnchanged
		}
		ann := a.GetAnnotations()
		ann[mirrored.AnnotationView] = m.viewOf(gr, out)
		a.SetAnnotations(ann)
		return out, nil, nil
	}, nil)
	if errors.Is(err, errUnchanged) || storage.IsNotFound(err) {
		return nil
	}
	return err
}
