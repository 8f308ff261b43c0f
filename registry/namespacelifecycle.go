package registry

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilcache "k8s.io/apimachinery/pkg/util/cache"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/admission"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/klog/v2"
)

// systemNamespaces exist from the first start and cannot be deleted, as on
// a cluster.
var systemNamespaces = []string{metav1.NamespaceDefault, metav1.NamespaceSystem, metav1.NamespacePublic, corev1.NamespaceNodeLease}

// immortalNamespaces may not be deleted (kube-apiserver's
// NamespaceLifecycle admission).
var immortalNamespaces = sets.New(metav1.NamespaceDefault, metav1.NamespaceSystem, metav1.NamespacePublic)

// namespaceLifecycle is the admission kube-apiserver's NamespaceLifecycle
// plugin performs: no new object in a missing or terminating namespace, and
// no deletion of the system namespaces.
type namespaceLifecycle struct {
	namespaces *genericregistry.Store
	// deleted holds namespaces whose deletion was admitted lately: the
	// watch cache may still show them Active, so they are read from etcd.
	deleted *utilcache.LRUExpireCache
}

// Upstream's: how long after a namespace's deletion reads of it bypass
// the cache, and how many such namespaces are remembered.
const (
	forceLiveLookupTTL  = 30 * time.Second
	forceLiveLookupSize = 100
)

var _ admission.ValidationInterface = (*namespaceLifecycle)(nil)

func (l *namespaceLifecycle) Handles(op admission.Operation) bool {
	return op == admission.Create || op == admission.Delete
}

func (l *namespaceLifecycle) Validate(ctx context.Context, a admission.Attributes, _ admission.ObjectInterfaces) error {
	isNamespace := a.GetResource().GroupResource() == corev1.Resource("namespaces")
	if a.GetOperation() == admission.Delete {
		if isNamespace && a.GetSubresource() == "" {
			if immortalNamespaces.Has(a.GetName()) {
				return apierrors.NewForbidden(a.GetResource().GroupResource(), a.GetName(), fmt.Errorf("this namespace may not be deleted"))
			}
			l.deleted.Add(a.GetName(), true, forceLiveLookupTTL)
		}
		return nil
	}
	if isNamespace || a.GetNamespace() == "" {
		return nil
	}
	ns, err := l.lookup(ctx, a.GetNamespace())
	if err != nil {
		return err
	}
	if ns.Status.Phase != corev1.NamespaceTerminating {
		return nil
	}
	err = admission.NewForbidden(a, fmt.Errorf("unable to create new content in namespace %s because it is being terminated", a.GetNamespace()))
	if se, ok := err.(*apierrors.StatusError); ok && se.ErrStatus.Details != nil {
		se.ErrStatus.Details.Causes = append(se.ErrStatus.Details.Causes, metav1.StatusCause{
			Type: corev1.NamespaceTerminatingCause, Message: fmt.Sprintf("namespace %s is being terminated", a.GetNamespace()), Field: "metadata.namespace",
		})
	}
	return err
}

// lookup reads a namespace from the watch cache and, if the cache has not
// seen it or may not have seen its deletion yet, from etcd: a namespace
// created just before the object must not be reported missing, nor one
// being deleted active.
func (l *namespaceLifecycle) lookup(ctx context.Context, name string) (*corev1.Namespace, error) {
	ctx = genericapirequest.WithNamespace(ctx, metav1.NamespaceNone)
	obj, err := l.namespaces.Get(ctx, name, &metav1.GetOptions{ResourceVersion: "0"})
	_, deleted := l.deleted.Get(name)
	if apierrors.IsNotFound(err) || (err == nil && deleted && obj.(*corev1.Namespace).Status.Phase == corev1.NamespaceActive) {
		obj, err = l.namespaces.Get(ctx, name, &metav1.GetOptions{})
	}
	if apierrors.IsNotFound(err) {
		// The store names the resource of the request; the missing
		// object is the namespace.
		return nil, apierrors.NewNotFound(corev1.Resource("namespaces"), name)
	}
	if err != nil {
		return nil, err
	}
	return obj.(*corev1.Namespace), nil
}

// NamespaceLifecycle is the admission of kube-apiserver's
// NamespaceLifecycle plugin: no new object in a missing or terminating
// namespace, and no deletion of the system namespaces.
func (s *Storage) NamespaceLifecycle() admission.ValidationInterface {
	return &namespaceLifecycle{namespaces: s.namespaces.store, deleted: utilcache.NewLRUExpireCache(forceLiveLookupSize)}
}

// NamespaceStores are what the namespace controller (package namespaces)
// empties and deletes a terminating namespace through: the namespaces
// resource, whose delete is kube-apiserver's (it removes a namespace only
// once no finalizer is left); its finalize subresource, which removes the
// kubernetes finalizer; its status, where the deletion's conditions go;
// and the store of every namespaced built-in resource, in the catalog's
// order.
func (s *Storage) NamespaceStores() (namespaces interface {
	rest.Getter
	rest.Watcher
	rest.GracefulDeleter
}, finalize, status rest.Updater, contents []*genericregistry.Store) {
	for _, d := range s.api.defs {
		if d.namespaced {
			contents = append(contents, s.stores[d])
		}
	}
	return s.namespaces, s.finalize, s.nsStatus, contents
}

// EnsureSystemNamespaces creates the namespaces every cluster has, retrying
// for up to a minute while the store is not ready.
func (s *Storage) EnsureSystemNamespaces(ctx context.Context) error {
	scheme, namespaces := s.api.scheme, s.namespaces
	ctx = genericapirequest.WithNamespace(ctx, metav1.NamespaceNone)
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		for _, name := range systemNamespaces {
			ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
			scheme.Default(ns)
			_, err := namespaces.Create(ctx, ns, rest.ValidateAllObjectFunc, &metav1.CreateOptions{})
			if err != nil && !apierrors.IsAlreadyExists(err) {
				klog.V(2).InfoS("Creating system namespace", "namespace", name, "err", err)
				return false, nil
			}
		}
		return true, nil
	})
}
