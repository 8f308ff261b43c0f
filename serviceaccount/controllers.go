package serviceaccount

import (
	"bytes"
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/kubestore/kubestore/mirrored"
)

// RootCAConfigMap is the ConfigMap every namespace gets, with the CA
// bundle under RootCAKey (kube-controller-manager's root CA publisher).
const (
	RootCAConfigMap = "kube-root-ca.crt"
	RootCAKey       = "ca.crt"
	descriptionKey  = "kubernetes.io/description"
	description     = "Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints such as the internal service IP or kubernetes.default.svc. No other usage is guaranteed across distributions of Kubernetes clusters."
)

// refreshBundle is how often the published CAs are read again, so that a
// kubestore joining the etcd shows in every namespace's bundle.
const refreshBundle = time.Minute

// CoreSource lists and watches a core v1 resource, selected by selector.
type CoreSource func(resource string, selector fields.Selector) cache.ListerWatcher

// Controllers keeps a default ServiceAccount (when accounts) and the
// kube-root-ca.crt ConfigMap (when rootCA) in every namespace that is not
// terminating, recreating or correcting them, as kube-controller-manager's
// serviceaccount and root-ca-certificate-publisher controllers do. Writes
// are creates and resourceVersion-checked updates, so several kubestores
// on one etcd converge: they publish one bundle of every CA. They read
// through source (kubestore's watch cache, registry.Storage.ListerWatcher)
// and write through cfg's client.
func Controllers(ctx context.Context, cfg *rest.Config, keys *Keys, st State, accounts, rootCA bool, source CoreSource) error {
	client, err := corev1client.NewForConfig(cfg)
	if err != nil {
		return err
	}
	// Plain informers: client-go's informer factory would link every API
	// group's informers into the binary (18 MB).
	informer := func(resource string, obj runtime.Object, selector fields.Selector) cache.SharedIndexInformer {
		return cache.NewSharedIndexInformer(source(resource, selector), obj, 0, cache.Indexers{})
	}
	queue := workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "kubestore_serviceaccount_controllers"})
	defer queue.ShutDown()
	enqueueNamespace := func(obj any) {
		if m, err := metaOf(obj); err == nil {
			if m.GetNamespace() != "" {
				queue.Add(m.GetNamespace())
			} else {
				queue.Add(m.GetName())
			}
		}
	}
	handler := cache.ResourceEventHandlerFuncs{AddFunc: enqueueNamespace, UpdateFunc: func(_, obj any) { enqueueNamespace(obj) }, DeleteFunc: enqueueNamespace}
	namespaces := informer("namespaces", &corev1.Namespace{}, fields.Everything())
	infs := []cache.SharedIndexInformer{namespaces}
	var accountsInf, configMapsInf cache.SharedIndexInformer
	if accounts {
		accountsInf = informer("serviceaccounts", &corev1.ServiceAccount{}, fields.OneTermEqualSelector("metadata.name", DefaultName))
		infs = append(infs, accountsInf)
	}
	if rootCA {
		configMapsInf = informer("configmaps", &corev1.ConfigMap{}, fields.OneTermEqualSelector("metadata.name", RootCAConfigMap))
		infs = append(infs, configMapsInf)
	}
	// Every goroutine started here ends before Controllers returns.
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	var synced []cache.InformerSynced
	for _, inf := range infs {
		if _, err := inf.AddEventHandler(handler); err != nil {
			return err
		}
		wg.Go(func() { inf.RunWithContext(ctx) })
		synced = append(synced, inf.HasSynced)
	}
	get := func(inf cache.SharedIndexInformer, namespace, name string) (any, bool) {
		key := name
		if namespace != "" {
			key = namespace + "/" + name
		}
		obj, ok, _ := inf.GetStore().GetByKey(key)
		return obj, ok
	}
	has := func(inf cache.SharedIndexInformer, namespace, name string) bool {
		_, ok := get(inf, namespace, name)
		return ok
	}
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return nil
	}
	reconcile := func(ctx context.Context, name string) error {
		obj, ok := get(namespaces, "", name)
		if !ok || obj.(*corev1.Namespace).Status.Phase == corev1.NamespaceTerminating {
			return nil
		}
		if accounts && !has(accountsInf, name, DefaultName) {
			// Marked replaceable: a mirrored default ServiceAccount of the
			// cluster takes its place.
			sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: DefaultName,
				Annotations: map[string]string{mirrored.AnnotationReplaceable: "true"}}}
			_, err := client.ServiceAccounts(name).Create(ctx, sa, metav1.CreateOptions{})
			if err != nil && !apierrors.IsAlreadyExists(err) && !apierrors.IsForbidden(err) {
				return err
			}
		}
		if rootCA {
			bundle := string(keys.CABundle())
			obj, ok := get(configMapsInf, name, RootCAConfigMap)
			var cm *corev1.ConfigMap
			if ok {
				cm = obj.(*corev1.ConfigMap)
			}
			switch {
			case !ok:
				_, err := client.ConfigMaps(name).Create(ctx, &corev1.ConfigMap{
					ObjectMeta: metav1.ObjectMeta{Name: RootCAConfigMap, Annotations: map[string]string{descriptionKey: description}},
					Data:       map[string]string{RootCAKey: bundle}}, metav1.CreateOptions{})
				if apierrors.IsAlreadyExists(err) || apierrors.IsForbidden(err) {
					err = nil // another kubestore's, or the namespace is going
				}
				return err
			case mirrored.Is(cm.Annotations):
				return nil // the upstream cluster's copy, mirrored
			case cm.Data[RootCAKey] == bundle && len(cm.Data) == 1 && cm.Annotations[descriptionKey] == description:
				return nil
			}
			// Another kubestore may know a CA this one has not read yet:
			// read the published ones before writing, so that two never
			// undo each other's bundle.
			if err := keys.Refresh(ctx, st); err != nil {
				return err
			}
			if bundle = string(keys.CABundle()); cm.Data[RootCAKey] == bundle && len(cm.Data) == 1 && cm.Annotations[descriptionKey] == description {
				return nil
			}
			cm = cm.DeepCopy()
			cm.Data = map[string]string{RootCAKey: bundle}
			if cm.Annotations == nil {
				cm.Annotations = map[string]string{}
			}
			cm.Annotations[descriptionKey] = description
			if _, err := client.ConfigMaps(name).Update(ctx, cm, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return err
			}
		}
		return nil
	}
	wg.Go(func() {
		t := time.NewTicker(refreshBundle)
		defer t.Stop()
		published := keys.CABundle()
		for {
			select {
			case <-ctx.Done():
				queue.ShutDown()
				return
			case <-t.C:
				if err := keys.Refresh(ctx, st); err != nil {
					klog.ErrorS(err, "Reading the published service account keys and CAs")
					continue
				}
			case <-keys.BundleChanged():
				// A rotation's step here (Keys.PublishCA).
			}
			if bundle := keys.CABundle(); rootCA && !bytes.Equal(published, bundle) {
				published = bundle
				for _, name := range namespaces.GetStore().ListKeys() {
					queue.Add(name)
				}
			}
		}
	})
	for {
		name, quit := queue.Get()
		if quit {
			return nil
		}
		if err := reconcile(ctx, name); err != nil {
			klog.V(2).InfoS("ServiceAccount controllers: will retry", "namespace", name, "err", err)
			queue.AddRateLimited(name)
		} else {
			queue.Forget(name)
		}
		queue.Done(name)
	}
}

func metaOf(obj any) (metav1.Object, error) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	return meta.Accessor(obj)
}
