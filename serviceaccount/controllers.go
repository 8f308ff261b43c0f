package serviceaccount

import (
	"bytes"
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/kubestore/kubestore/mirror"
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

// Controllers keeps a default ServiceAccount (when accounts) and the
// kube-root-ca.crt ConfigMap (when rootCA) in every namespace that is not
// terminating, recreating or correcting them, as kube-controller-manager's
// serviceaccount and root-ca-certificate-publisher controllers do. Writes
// are creates and resourceVersion-checked updates, so several kubestores
// on one etcd converge: they publish one bundle of every CA.
func Controllers(ctx context.Context, cfg *rest.Config, keys *Keys, st State, accounts, rootCA bool) error {
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	byName := func(name string) informers.SharedInformerOption {
		return informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", name).String()
		})
	}
	all := informers.NewSharedInformerFactory(client, 0)
	namespaces := all.Core().V1().Namespaces()
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
	if _, err := namespaces.Informer().AddEventHandler(handler); err != nil {
		return err
	}
	synced := []cache.InformerSynced{namespaces.Informer().HasSynced}
	var accountLister func(ns string) bool
	if accounts {
		f := informers.NewSharedInformerFactoryWithOptions(client, 0, byName(DefaultName))
		inf := f.Core().V1().ServiceAccounts()
		if _, err := inf.Informer().AddEventHandler(handler); err != nil {
			return err
		}
		accountLister = func(ns string) bool { _, err := inf.Lister().ServiceAccounts(ns).Get(DefaultName); return err == nil }
		synced = append(synced, inf.Informer().HasSynced)
		f.Start(ctx.Done())
		defer f.Shutdown()
	}
	var configMaps func(ns string) (*corev1.ConfigMap, error)
	if rootCA {
		f := informers.NewSharedInformerFactoryWithOptions(client, 0, byName(RootCAConfigMap))
		inf := f.Core().V1().ConfigMaps()
		if _, err := inf.Informer().AddEventHandler(handler); err != nil {
			return err
		}
		configMaps = func(ns string) (*corev1.ConfigMap, error) { return inf.Lister().ConfigMaps(ns).Get(RootCAConfigMap) }
		synced = append(synced, inf.Informer().HasSynced)
		f.Start(ctx.Done())
		defer f.Shutdown()
	}
	all.Start(ctx.Done())
	defer all.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return nil
	}
	sync := func(ctx context.Context, name string) error {
		ns, err := namespaces.Lister().Get(name)
		if apierrors.IsNotFound(err) || ns != nil && ns.Status.Phase == corev1.NamespaceTerminating {
			return nil
		}
		if err != nil {
			return err
		}
		if accounts && !accountLister(name) {
			_, err := client.CoreV1().ServiceAccounts(name).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: DefaultName}}, metav1.CreateOptions{})
			if err != nil && !apierrors.IsAlreadyExists(err) && !apierrors.IsForbidden(err) {
				return err
			}
		}
		if rootCA {
			bundle := string(keys.CABundle())
			cm, err := configMaps(name)
			switch {
			case apierrors.IsNotFound(err):
				_, err = client.CoreV1().ConfigMaps(name).Create(ctx, &corev1.ConfigMap{
					ObjectMeta: metav1.ObjectMeta{Name: RootCAConfigMap, Annotations: map[string]string{descriptionKey: description}},
					Data:       map[string]string{RootCAKey: bundle}}, metav1.CreateOptions{})
				if apierrors.IsAlreadyExists(err) || apierrors.IsForbidden(err) {
					err = nil // another kubestore's, or the namespace is going
				}
				return err
			case err != nil:
				return err
			case cm.Annotations[mirror.AnnotationRule] != "":
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
			if _, err := client.CoreV1().ConfigMaps(name).Update(ctx, cm, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return err
			}
		}
		return nil
	}
	go func() {
		t := time.NewTicker(refreshBundle)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				queue.ShutDown()
				return
			case <-t.C:
				before := keys.CABundle()
				if err := keys.Refresh(ctx, st); err != nil {
					klog.ErrorS(err, "Reading the published service account keys and CAs")
					continue
				}
				if rootCA && !bytes.Equal(before, keys.CABundle()) {
					nss, _ := namespaces.Lister().List(everything)
					for _, ns := range nss {
						queue.Add(ns.Name)
					}
				}
			}
		}
	}()
	for {
		name, quit := queue.Get()
		if quit {
			return nil
		}
		if err := sync(ctx, name); err != nil {
			klog.V(2).InfoS("ServiceAccount controllers: will retry", "namespace", name, "err", err)
			queue.AddRateLimited(name)
		} else {
			queue.Forget(name)
		}
		queue.Done(name)
	}
}

var everything = labels.Everything()

func metaOf(obj any) (metav1.Object, error) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	return meta.Accessor(obj)
}
