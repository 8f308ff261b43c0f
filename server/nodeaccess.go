package server

import (
	"context"
	"fmt"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	certificatesv1listers "k8s.io/client-go/listers/certificates/v1"
	corev1listers "k8s.io/client-go/listers/core/v1"
	resourcev1listers "k8s.io/client-go/listers/resource/v1"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/kubestore/kubestore/access/node"
	"github.com/kubestore/kubestore/access/noderestriction"
)

// nodeAccess is what scopes each kubelet to its own node, as
// kube-apiserver's --authorization-mode=Node and NodeRestriction do: the
// Node authorizer's graph of which pod on which node references what
// (access/node), and the admission plugin (access/noderestriction). Both
// read the registry's stores through informers on their watch caches; the
// informers run from the server's start, and until they have synced a
// kubelet is refused what only the graph allows (it retries, as against a
// kube-apiserver that starts).
type nodeAccess struct {
	authorizer *node.Authorizer
	admission  admission.ValidationInterface
	informers  []cache.SharedIndexInformer
	synced     []cache.InformerSynced
}

// typedInformer is one of client-go's typed informers (Informer and
// Lister) over an informer of the registry's stores.
type typedInformer[L any] struct {
	informer cache.SharedIndexInformer
	lister   L
}

func (t typedInformer[L]) Informer() cache.SharedIndexInformer { return t.informer }
func (t typedInformer[L]) Lister() L                           { return t.lister }

// newNodeAccess builds the graph, the authorizer and the admission plugin
// on informers of b's stores; authz is the server's whole authorizer,
// which NodeRestriction asks about token audiences and PodCertificate
// signers.
func newNodeAccess(b *builder) (*nodeAccess, error) {
	na := &nodeAccess{}
	informer := func(gvr schema.GroupVersionResource, obj runtime.Object) cache.SharedIndexInformer {
		// The informers hold the watch cache's own objects (no copy, no
		// transform: they are shared, and read only; docs/CONTROLLERS.md).
		inf := cache.NewSharedIndexInformer(b.listerWatcher(gvr, nil), obj, 0, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
		na.informers = append(na.informers, inf)
		return inf
	}
	pods := informer(corev1.SchemeGroupVersion.WithResource("pods"), &corev1.Pod{})
	nodes := informer(corev1.SchemeGroupVersion.WithResource("nodes"), &corev1.Node{})
	accounts := informer(corev1.SchemeGroupVersion.WithResource("serviceaccounts"), &corev1.ServiceAccount{})
	drivers := informer(storagev1.SchemeGroupVersion.WithResource("csidrivers"), &storagev1.CSIDriver{})
	attachments := informer(storagev1.SchemeGroupVersion.WithResource("volumeattachments"), &storagev1.VolumeAttachment{})
	slices := informer(resourcev1.SchemeGroupVersion.WithResource("resourceslices"), &resourcev1.ResourceSlice{})
	pcrs := informer(certificatesv1.SchemeGroupVersion.WithResource("podcertificaterequests"), &certificatesv1.PodCertificateRequest{})

	graph := node.NewGraph()
	// No PersistentVolumes are served: nil, and empty listers below (a
	// lookup finds nothing, as upstream's would for a missing object).
	synced, err := node.AddGraphEventHandlers(graph,
		typedInformer[corev1listers.NodeLister]{nodes, corev1listers.NewNodeLister(nodes.GetIndexer())},
		typedInformer[corev1listers.PodLister]{pods, corev1listers.NewPodLister(pods.GetIndexer())},
		nil,
		typedInformer[storagelisters.VolumeAttachmentLister]{attachments, storagelisters.NewVolumeAttachmentLister(attachments.GetIndexer())},
		typedInformer[resourcev1listers.ResourceSliceLister]{slices, resourcev1listers.NewResourceSliceLister(slices.GetIndexer())},
		typedInformer[certificatesv1listers.PodCertificateRequestLister]{pcrs, certificatesv1listers.NewPodCertificateRequestLister(pcrs.GetIndexer())})
	if err != nil {
		return nil, err
	}
	na.synced = append(synced, nodes.HasSynced, accounts.HasSynced, drivers.HasSynced)
	na.authorizer = node.NewAuthorizer(graph)
	empty := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	plugin := noderestriction.New(
		corev1listers.NewPodLister(pods.GetIndexer()),
		corev1listers.NewNodeLister(nodes.GetIndexer()),
		corev1listers.NewServiceAccountLister(accounts.GetIndexer()),
		storagelisters.NewCSIDriverLister(drivers.GetIndexer()),
		corev1listers.NewPersistentVolumeClaimLister(empty),
		corev1listers.NewPersistentVolumeLister(empty),
		b.c.Authorization.Authorizer)
	if err := plugin.ValidateInitialization(); err != nil {
		return nil, fmt.Errorf("%s: %w", noderestriction.PluginName, err)
	}
	na.admission = plugin
	return na, nil
}

// run runs the informers until ctx ends.
func (na *nodeAccess) run(ctx context.Context) {
	for _, inf := range na.informers {
		go inf.RunWithContext(ctx)
	}
	if !cache.WaitForCacheSync(ctx.Done(), na.synced...) {
		return
	}
	klog.V(2).InfoS("The Node authorizer's graph is complete")
	<-ctx.Done()
}
