/*
Copyright 2017 The Kubernetes Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

// Ported from k8s.io/kubernetes plugin/pkg/admission/noderestriction/admission_test.go@v1.37.2.
// Changes: core/v1 (and the other versioned) types instead of the internal
// ones, so makeTestPod's "core" and "v1" pods are both *corev1.Pod; the
// plugin is built with New and called through Validate; resources and kinds
// are the versions kubestore serves (v1); feature gates are fixed at their
// v1.37 defaults, so the cases' features/setupFunc fields are gone, and the
// cases that flipped a gate away from its default are adapted (marked
// "gate fixed") to expect the default's outcome; authorizer expectations
// are compared with reflect.DeepEqual instead of go-cmp.

package noderestriction

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"reflect"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	resourcev1 "k8s.io/api/resource/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	corev1lister "k8s.io/client-go/listers/core/v1"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

func makeTestPod(namespace, name, node string, mirror bool) (*corev1.Pod, *corev1.Pod) {
	corePod := &corev1.Pod{}
	corePod.Namespace = namespace
	corePod.UID = types.UID("pod-uid")
	corePod.Name = name
	corePod.Spec.NodeName = node
	v1Pod := &corev1.Pod{}
	v1Pod.Namespace = namespace
	v1Pod.UID = types.UID("pod-uid")
	v1Pod.Name = name
	v1Pod.Spec.NodeName = node
	if mirror {
		corePod.Annotations = map[string]string{corev1.MirrorPodAnnotationKey: "true"}
		v1Pod.Annotations = map[string]string{corev1.MirrorPodAnnotationKey: "true"}

		// Insert a valid owner reference by default.
		controller := true
		owner := metav1.OwnerReference{
			APIVersion: "v1",
			Kind:       "Node",
			Name:       node,
			UID:        types.UID(node + "-uid"),
			Controller: &controller,
		}
		corePod.OwnerReferences = []metav1.OwnerReference{owner}
		v1Pod.OwnerReferences = []metav1.OwnerReference{owner}
	}
	return corePod, v1Pod
}

func makeTestServiceAccount(namespace, name string, uid types.UID) *corev1.ServiceAccount {
	sa := &corev1.ServiceAccount{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: namespace,
			Name:      name,
			UID:       types.UID(uid),
		},
	}

	return sa
}

func withLabels(pod *corev1.Pod, labels map[string]string) *corev1.Pod {
	labeledPod := pod.DeepCopy()
	if labels == nil {
		labeledPod.Labels = nil
		return labeledPod
	}
	// Clone.
	labeledPod.Labels = map[string]string{}
	for key, value := range labels {
		labeledPod.Labels[key] = value
	}
	return labeledPod
}

func makeTestPodEviction(name string) *policyv1.Eviction {
	eviction := &policyv1.Eviction{}
	eviction.Name = name
	eviction.Namespace = "ns"
	return eviction
}

func makeTokenRequest(podname string, poduid types.UID, audiences []string) *authenticationv1.TokenRequest {
	tr := &authenticationv1.TokenRequest{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "ns",
		},
		Spec: authenticationv1.TokenRequestSpec{
			Audiences: audiences,
		},
	}
	if podname != "" {
		tr.Spec.BoundObjectRef = &authenticationv1.BoundObjectReference{
			Kind:       "Pod",
			APIVersion: "v1",
			Name:       podname,
			UID:        poduid,
		}
	}
	return tr
}

func setAllLabels(node *corev1.Node, value string) *corev1.Node {
	node = setAllowedCreateLabels(node, value)
	node = setAllowedUpdateLabels(node, value)
	node = setForbiddenCreateLabels(node, value)
	node = setForbiddenUpdateLabels(node, value)
	return node
}

func setAllowedCreateLabels(node *corev1.Node, value string) *corev1.Node {
	node = setAllowedUpdateLabels(node, value)
	return node
}

func setAllowedUpdateLabels(node *corev1.Node, value string) *corev1.Node {
	node = node.DeepCopy()
	if node.Labels == nil {
		node.Labels = map[string]string{}
	}
	if value == "" {
		value = "value"
	}
	// non-kube labels
	node.Labels["foo"] = value
	node.Labels["example.com/foo"] = value

	// kubelet labels
	node.Labels["kubernetes.io/hostname"] = value
	node.Labels["failure-domain.beta.kubernetes.io/zone"] = value
	node.Labels["failure-domain.beta.kubernetes.io/region"] = value
	node.Labels["topology.kubernetes.io/zone"] = value
	node.Labels["topology.kubernetes.io/region"] = value
	node.Labels["beta.kubernetes.io/instance-type"] = value
	node.Labels["node.kubernetes.io/instance-type"] = value
	node.Labels["beta.kubernetes.io/os"] = value
	node.Labels["beta.kubernetes.io/arch"] = value
	node.Labels["kubernetes.io/os"] = value
	node.Labels["kubernetes.io/arch"] = value

	// kubelet label prefixes
	node.Labels["kubelet.kubernetes.io/foo"] = value
	node.Labels["foo.kubelet.kubernetes.io/foo"] = value
	node.Labels["node.kubernetes.io/foo"] = value
	node.Labels["foo.node.kubernetes.io/foo"] = value

	// test all explicitly allowed labels and prefixes
	for _, key := range kubeletLabels.List() {
		node.Labels[key] = value
	}
	for _, namespace := range kubeletLabelNamespaces.List() {
		node.Labels[namespace+"/foo"] = value
		node.Labels["foo."+namespace+"/foo"] = value
	}

	return node
}

func setForbiddenCreateLabels(node *corev1.Node, value string) *corev1.Node {
	node = node.DeepCopy()
	if node.Labels == nil {
		node.Labels = map[string]string{}
	}
	if value == "" {
		value = "value"
	}
	// node restriction labels are forbidden
	node.Labels["node-restriction.kubernetes.io/foo"] = value
	node.Labels["foo.node-restriction.kubernetes.io/foo"] = value
	node.Labels["other.kubernetes.io/foo"] = value
	node.Labels["other.k8s.io/foo"] = value
	return node
}

func setForbiddenUpdateLabels(node *corev1.Node, value string) *corev1.Node {
	node = node.DeepCopy()
	if node.Labels == nil {
		node.Labels = map[string]string{}
	}
	if value == "" {
		value = "value"
	}
	// node restriction labels are forbidden
	node.Labels["node-restriction.kubernetes.io/foo"] = value
	node.Labels["foo.node-restriction.kubernetes.io/foo"] = value
	// arbitrary kubernetes labels are forbidden on update
	node.Labels["other.kubernetes.io/foo"] = value
	node.Labels["other.k8s.io/foo"] = value
	return node
}

type admitTestCase struct {
	name                 string
	podsGetter           corev1lister.PodLister
	nodesGetter          corev1lister.NodeLister
	serviceAccountGetter corev1lister.ServiceAccountLister
	csiDriverGetter      storagelisters.CSIDriverLister
	pvcGetter            corev1lister.PersistentVolumeClaimLister
	pvGetter             corev1lister.PersistentVolumeLister
	attributes           admission.Attributes
	err                  string
	authz                authorizer.UnconditionalAuthorizer
}

func (a *admitTestCase) run(t *testing.T) {
	t.Run(a.name, func(t *testing.T) {
		authz := a.authz
		if authz == nil {
			// Upstream leaves the authorizer nil where a case expects no
			// authorization check; here such a call fails the case.
			authz = &uncallableAuthorizer{}
		}
		if u, ok := authz.(*uncallableAuthorizer); ok {
			u.t = t
		}
		c := New(a.podsGetter, a.nodesGetter, a.serviceAccountGetter, a.csiDriverGetter, a.pvcGetter, a.pvGetter, authz)
		err := c.Validate(context.TODO(), a.attributes, nil)
		if (err == nil) != (len(a.err) == 0) {
			t.Errorf("nodePlugin.Validate() error = %v, expected %v", err, a.err)
			return
		}
		if len(a.err) > 0 && !strings.Contains(err.Error(), a.err) {
			t.Errorf("nodePlugin.Validate() error = %v, expected %v", err, a.err)
		}

		if fakeAuthz, ok := a.authz.(*fakeAuthorizer); ok {
			if !fakeAuthz.alreadyCalled {
				t.Errorf("fake authorizer did not receive a call during the test case")
			}
		}
	})
}

func Test_nodePlugin_Admit(t *testing.T) {
	var (
		trueRef = true
		mynode  = &user.DefaultInfo{Name: "system:node:mynode", Groups: []string{"system:nodes"}}
		bob     = &user.DefaultInfo{Name: "bob"}

		mynodeObjMeta          = metav1.ObjectMeta{Name: "mynode", UID: "mynode-uid"}
		mynodeObjMetaOwnerRefA = metav1.ObjectMeta{Name: "mynode", UID: "mynode-uid", OwnerReferences: []metav1.OwnerReference{{Name: "fooerA", Controller: &trueRef}}}
		mynodeObjMetaOwnerRefB = metav1.ObjectMeta{Name: "mynode", UID: "mynode-uid", OwnerReferences: []metav1.OwnerReference{{Name: "fooerB", Controller: &trueRef}}}

		mynodeObj        = &corev1.Node{ObjectMeta: mynodeObjMeta}
		mynodeObjConfigA = &corev1.Node{ObjectMeta: mynodeObjMeta, Spec: corev1.NodeSpec{ConfigSource: &corev1.NodeConfigSource{
			ConfigMap: &corev1.ConfigMapNodeConfigSource{
				Name:             "foo",
				Namespace:        "bar",
				UID:              "fooUID",
				KubeletConfigKey: "kubelet",
			}}}}
		mynodeObjConfigB = &corev1.Node{ObjectMeta: mynodeObjMeta, Spec: corev1.NodeSpec{ConfigSource: &corev1.NodeConfigSource{
			ConfigMap: &corev1.ConfigMapNodeConfigSource{
				Name:             "qux",
				Namespace:        "bar",
				UID:              "quxUID",
				KubeletConfigKey: "kubelet",
			}}}}

		mynodeObjTaintA    = &corev1.Node{ObjectMeta: mynodeObjMeta, Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: "mykey", Value: "A"}}}}
		mynodeObjTaintB    = &corev1.Node{ObjectMeta: mynodeObjMeta, Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: "mykey", Value: "B"}}}}
		mynodeObjOwnerRefA = &corev1.Node{ObjectMeta: mynodeObjMetaOwnerRefA}
		mynodeObjOwnerRefB = &corev1.Node{ObjectMeta: mynodeObjMetaOwnerRefB}
		othernodeObj       = &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "othernode"}}

		coremymirrorpod, v1mymirrorpod           = makeTestPod("ns", "mymirrorpod", "mynode", true)
		coreothermirrorpod, v1othermirrorpod     = makeTestPod("ns", "othermirrorpod", "othernode", true)
		coreunboundmirrorpod, v1unboundmirrorpod = makeTestPod("ns", "unboundmirrorpod", "", true)
		coremypod, v1mypod                       = makeTestPod("ns", "mypod", "mynode", false)
		coreotherpod, v1otherpod                 = makeTestPod("ns", "otherpod", "othernode", false)
		coreunboundpod, v1unboundpod             = makeTestPod("ns", "unboundpod", "", false)
		coreunnamedpod, _                        = makeTestPod("ns", "", "mynode", false)

		mymirrorpodEviction      = makeTestPodEviction("mymirrorpod")
		othermirrorpodEviction   = makeTestPodEviction("othermirrorpod")
		unboundmirrorpodEviction = makeTestPodEviction("unboundmirrorpod")
		mypodEviction            = makeTestPodEviction("mypod")
		otherpodEviction         = makeTestPodEviction("otherpod")
		unboundpodEviction       = makeTestPodEviction("unboundpod")
		unnamedEviction          = makeTestPodEviction("")

		configmapResource = corev1.Resource("configmap").WithVersion("v1")
		configmapKind     = corev1.SchemeGroupVersion.WithKind("ConfigMap")

		podResource  = corev1.Resource("pods").WithVersion("v1")
		podKind      = corev1.SchemeGroupVersion.WithKind("Pod")
		evictionKind = policyv1.SchemeGroupVersion.WithKind("Eviction")

		nodeResource = corev1.Resource("nodes").WithVersion("v1")
		nodeKind     = corev1.SchemeGroupVersion.WithKind("Node")

		svcacctResource  = corev1.Resource("serviceaccounts").WithVersion("v1")
		tokenrequestKind = corev1.SchemeGroupVersion.WithKind("TokenRequest")

		leaseResource = coordinationv1.SchemeGroupVersion.WithResource("leases")
		leaseKind     = coordinationv1.SchemeGroupVersion.WithKind("Lease")
		lease         = &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{
				Name:      "mynode",
				Namespace: corev1.NamespaceNodeLease,
			},
			Spec: coordinationv1.LeaseSpec{
				HolderIdentity:       ptr.To("mynode"),
				LeaseDurationSeconds: ptr.To[int32](40),
				RenewTime:            &metav1.MicroTime{Time: time.Now()},
			},
		}
		leaseWrongNS = &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{
				Name:      "mynode",
				Namespace: "foo",
			},
			Spec: coordinationv1.LeaseSpec{
				HolderIdentity:       ptr.To("mynode"),
				LeaseDurationSeconds: ptr.To[int32](40),
				RenewTime:            &metav1.MicroTime{Time: time.Now()},
			},
		}
		leaseWrongName = &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{
				Name:      "foo",
				Namespace: corev1.NamespaceNodeLease,
			},
			Spec: coordinationv1.LeaseSpec{
				HolderIdentity:       ptr.To("mynode"),
				LeaseDurationSeconds: ptr.To[int32](40),
				RenewTime:            &metav1.MicroTime{Time: time.Now()},
			},
		}

		csiNodeResource = storagev1.Resource("csinodes").WithVersion("v1")
		csiNodeKind     = schema.GroupVersionKind{Group: "storage.k8s.io", Version: "v1", Kind: "CSINode"}
		nodeInfo        = &storagev1.CSINode{
			ObjectMeta: metav1.ObjectMeta{
				Name: "mynode",
			},
			Spec: storagev1.CSINodeSpec{
				Drivers: []storagev1.CSINodeDriver{
					{
						Name:         "com.example.csi/mydriver",
						NodeID:       "com.example.csi/mynode",
						TopologyKeys: []string{"com.example.csi/zone"},
					},
				},
			},
		}
		nodeInfoWrongName = &storagev1.CSINode{
			ObjectMeta: metav1.ObjectMeta{
				Name: "foo",
			},
			Spec: storagev1.CSINodeSpec{
				Drivers: []storagev1.CSINodeDriver{
					{
						Name:         "com.example.csi/mydriver",
						NodeID:       "com.example.csi/foo",
						TopologyKeys: []string{"com.example.csi/zone"},
					},
				},
			},
		}

		existingNodesIndex = cache.NewIndexer(cache.MetaNamespaceKeyFunc, nil)
		existingNodes      = corev1lister.NewNodeLister(existingNodesIndex)

		noExistingPodsIndex = cache.NewIndexer(cache.MetaNamespaceKeyFunc, nil)
		noExistingPods      = corev1lister.NewPodLister(noExistingPodsIndex)

		existingPodsIndex = cache.NewIndexer(cache.MetaNamespaceKeyFunc, nil)
		existingPods      = corev1lister.NewPodLister(existingPodsIndex)

		labelsA = map[string]string{
			"label-a": "value-a",
		}
		labelsAB = map[string]string{
			"label-a": "value-a",
			"label-b": "value-b",
		}
		aLabeledPod  = withLabels(coremypod, labelsA)
		abLabeledPod = withLabels(coremypod, labelsAB)

		privKey, _ = rsa.GenerateKey(rand.Reader, 2048)

		csiDriverWithAudience = &storagev1.CSIDriver{
			ObjectMeta: metav1.ObjectMeta{
				Name: "com.example.csi.mydriver",
			},
			Spec: storagev1.CSIDriverSpec{
				TokenRequests: []storagev1.TokenRequest{
					{
						Audience: "foo",
					},
				},
			},
		}

		azureFileCSIDriver = &storagev1.CSIDriver{
			ObjectMeta: metav1.ObjectMeta{
				Name: "file.csi.azure.com",
			},
			Spec: storagev1.CSIDriverSpec{
				TokenRequests: []storagev1.TokenRequest{
					{
						Audience: "foo",
					},
				},
			},
		}

		csiDriverIndex  = cache.NewIndexer(cache.MetaNamespaceKeyFunc, nil)
		csiDriverLister = storagelisters.NewCSIDriverLister(csiDriverIndex)

		noexistingCSIDriverIndex  = cache.NewIndexer(cache.MetaNamespaceKeyFunc, nil)
		noexistingCSIDriverLister = storagelisters.NewCSIDriverLister(noexistingCSIDriverIndex)

		pvcWithCSIDriver = &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{
				Name:      "pvclaim",
				Namespace: "ns",
			},
			Spec: corev1.PersistentVolumeClaimSpec{
				VolumeName: "pvname",
			},
		}

		pvcWithIntreeAzureFile = &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{
				Name:      "pvclaim-azurefile",
				Namespace: "ns",
			},
			Spec: corev1.PersistentVolumeClaimSpec{
				VolumeName: "pvname-azurefile",
			},
		}

		ephemeralVolumePVCWithCSIDriver = &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{
				Name:      "myephemeralpod-myvol",
				Namespace: "ns",
			},
			Spec: corev1.PersistentVolumeClaimSpec{
				VolumeName: "pvname",
			},
		}

		pvcIndex  = cache.NewIndexer(cache.MetaNamespaceKeyFunc, nil)
		pvcLister = corev1lister.NewPersistentVolumeClaimLister(pvcIndex)

		noexistingPVCIndex  = cache.NewIndexer(cache.MetaNamespaceKeyFunc, nil)
		noexistingPVCLister = corev1lister.NewPersistentVolumeClaimLister(noexistingPVCIndex)

		pvWithCSIDriver = &corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{
				Name: "pvname",
			},
			Spec: corev1.PersistentVolumeSpec{
				PersistentVolumeSource: corev1.PersistentVolumeSource{
					CSI: &corev1.CSIPersistentVolumeSource{Driver: "com.example.csi.mydriver"},
				},
			},
		}

		pvWithIntreeAzureFile = &corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{
				Name: "pvname-azurefile",
			},
			Spec: corev1.PersistentVolumeSpec{
				ClaimRef: &corev1.ObjectReference{
					Namespace: "ns",
				},
				PersistentVolumeSource: corev1.PersistentVolumeSource{
					AzureFile: &corev1.AzureFilePersistentVolumeSource{ShareName: "default", SecretName: "secret"},
				},
			},
		}

		pvIndex  = cache.NewIndexer(cache.MetaNamespaceKeyFunc, nil)
		pvLister = corev1lister.NewPersistentVolumeLister(pvIndex)

		noexistingPVIndex  = cache.NewIndexer(cache.MetaNamespaceKeyFunc, nil)
		noexistingPVLister = corev1lister.NewPersistentVolumeLister(noexistingPVIndex)
	)

	// create pods for validating the service account node audience restriction
	projectedVolumeSourceEmptyAudience := &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Audience: ""}}}}
	projectedVolumeSource := &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Audience: "foo"}}}}
	csiDriverVolumeSource := &corev1.CSIVolumeSource{Driver: "com.example.csi.mydriver"}
	persistentVolumeClaimVolumeSource := &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "pvclaim"}
	persistentVolumeClaimVolumeSourceAzureFile := &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "pvclaim-azurefile"}
	ephemeralVolumeSource := &corev1.EphemeralVolumeSource{VolumeClaimTemplate: &corev1.PersistentVolumeClaimTemplate{}}

	coremypodWithProjectedServiceAccountEmptyAudience, v1mypodWithProjectedServiceAccountEmptyAudience := makeTestPod("ns", "mysapod", "mynode", false)
	v1mypodWithProjectedServiceAccountEmptyAudience.Spec.Volumes = []corev1.Volume{{VolumeSource: corev1.VolumeSource{Projected: projectedVolumeSourceEmptyAudience}}}

	coremypodWithProjectedServiceAccount, v1mypodWithProjectedServiceAccount := makeTestPod("ns", "mysapod", "mynode", false)
	v1mypodWithProjectedServiceAccount.Spec.Volumes = []corev1.Volume{{VolumeSource: corev1.VolumeSource{Projected: projectedVolumeSource}}}

	coremypodWithCSI, v1mypodWithCSI := makeTestPod("ns", "mycsipod", "mynode", false)
	v1mypodWithCSI.Spec.Volumes = []corev1.Volume{{VolumeSource: corev1.VolumeSource{CSI: csiDriverVolumeSource}}}

	coremypodWithPVCRefCSI, v1mypodWithPVCRefCSI := makeTestPod("ns", "mypvcpod", "mynode", false)
	v1mypodWithPVCRefCSI.Spec.Volumes = []corev1.Volume{{VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: persistentVolumeClaimVolumeSource}}}

	coremypodWithEphemeralVolume, v1mypodWithEphemeralVolume := makeTestPod("ns", "myephemeralpod", "mynode", false)
	v1mypodWithEphemeralVolume.Spec.Volumes = []corev1.Volume{{Name: "myvol", VolumeSource: corev1.VolumeSource{Ephemeral: ephemeralVolumeSource}}}

	coremypodWithPVCAndCSI, v1mypodWithPVCAndCSI := makeTestPod("ns", "mypvcandcsipod", "mynode", false)
	v1mypodWithPVCAndCSI.Spec.Volumes = []corev1.Volume{{VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: persistentVolumeClaimVolumeSource}}, {VolumeSource: corev1.VolumeSource{CSI: csiDriverVolumeSource}}}

	coremypodIntreeInlineVolToCSI, v1mypodIntreeInlineVolToCSI := makeTestPod("ns", "myintreeinlinevoltocsipod", "mynode", false)
	v1mypodIntreeInlineVolToCSI.Spec.Volumes = []corev1.Volume{{VolumeSource: corev1.VolumeSource{AzureFile: &corev1.AzureFileVolumeSource{ShareName: "default", SecretName: "secret"}}}}

	coremypodIntreePVToCSI, v1mypodIntreePVToCSI := makeTestPod("ns", "myintreepvtocsipod", "mynode", false)
	v1mypodIntreePVToCSI.Spec.Volumes = []corev1.Volume{{VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: persistentVolumeClaimVolumeSourceAzureFile}}}

	checkNilError(t, csiDriverIndex.Add(csiDriverWithAudience))
	checkNilError(t, csiDriverIndex.Add(azureFileCSIDriver))
	checkNilError(t, pvcIndex.Add(pvcWithCSIDriver))
	checkNilError(t, pvcIndex.Add(pvcWithIntreeAzureFile))
	checkNilError(t, pvcIndex.Add(ephemeralVolumePVCWithCSIDriver))
	checkNilError(t, pvIndex.Add(pvWithCSIDriver))
	checkNilError(t, pvIndex.Add(pvWithIntreeAzureFile))

	existingPodsIndex.Add(v1mymirrorpod)
	existingPodsIndex.Add(v1othermirrorpod)
	existingPodsIndex.Add(v1unboundmirrorpod)
	existingPodsIndex.Add(v1mypod)
	existingPodsIndex.Add(v1otherpod)
	existingPodsIndex.Add(v1unboundpod)

	checkNilError(t, existingPodsIndex.Add(v1mypodWithProjectedServiceAccountEmptyAudience))
	checkNilError(t, existingPodsIndex.Add(v1mypodWithProjectedServiceAccount))
	checkNilError(t, existingPodsIndex.Add(v1mypodWithCSI))
	checkNilError(t, existingPodsIndex.Add(v1mypodWithPVCRefCSI))
	checkNilError(t, existingPodsIndex.Add(v1mypodWithEphemeralVolume))
	checkNilError(t, existingPodsIndex.Add(v1mypodWithPVCAndCSI))
	checkNilError(t, existingPodsIndex.Add(v1mypodIntreePVToCSI))
	checkNilError(t, existingPodsIndex.Add(v1mypodIntreeInlineVolToCSI))

	existingNodesIndex.Add(&corev1.Node{ObjectMeta: mynodeObjMeta})

	sapod, _ := makeTestPod("ns", "mysapod", "mynode", true)
	sapod.Spec.ServiceAccountName = "foo"

	secretpod, _ := makeTestPod("ns", "mysecretpod", "mynode", true)
	secretpod.Spec.Volumes = []corev1.Volume{{VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "foo"}}}}

	configmappod, _ := makeTestPod("ns", "myconfigmappod", "mynode", true)
	configmappod.Spec.Volumes = []corev1.Volume{{VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "foo"}}}}}

	ctbpod, _ := makeTestPod("ns", "myctbpod", "mynode", true)
	ctbpod.Spec.Volumes = []corev1.Volume{{VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{{ClusterTrustBundle: &corev1.ClusterTrustBundleProjection{Name: ptr.To("foo")}}}}}}}

	pvcpod, _ := makeTestPod("ns", "mypvcpod", "mynode", true)
	pvcpod.Spec.Volumes = []corev1.Volume{{VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "foo"}}}}

	claimpod, _ := makeTestPod("ns", "myclaimpod", "mynode", true)
	claimpod.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "myclaim", ResourceClaimName: ptr.To("myexternalclaim")}}

	extendedResourceClaimPod, _ := makeTestPod("ns", "myclaimpod", "mynode", true)
	extendedResourceClaimPod.Status.ExtendedResourceClaimStatus = &corev1.PodExtendedResourceClaimStatus{ResourceClaimName: "myclaim"}

	nodeAllocatableResourceClaimPod, _ := makeTestPod("ns", "myclaimpod", "mynode", true)
	nodeAllocatableResourceClaimPod.Status.NodeAllocatableResourceClaimStatuses = []corev1.NodeAllocatableResourceClaimStatus{
		{
			ResourceClaimName: "myclaim",
			Containers:        []string{"mycontainer"},
			Mapping: []corev1.NodeAllocatableMappedResources{{
				Name:     corev1.ResourceCPU,
				Quantity: new(resource.MustParse("1")),
			}},
		},
	}

	nodeAllocatableOverheadResourceClaimPod, _ := makeTestPod("ns", "myclaimpod", "mynode", true)
	nodeAllocatableOverheadResourceClaimPod.Status.NodeAllocatableResourceClaimStatuses = []corev1.NodeAllocatableResourceClaimStatus{
		{
			ResourceClaimName: "myclaim",
			Containers:        []string{"mycontainer"},
			Overhead: []corev1.NodeAllocatableOverheadResources{{
				Name:         corev1.ResourceMemory,
				PerPod:       new(resource.MustParse("1Gi")),
				PerContainer: new(resource.MustParse("500Mi")),
			}},
		},
	}

	pcrServiceAccountIndex := cache.NewIndexer(cache.MetaNamespaceKeyFunc, nil)
	pcrServiceAccounts := corev1lister.NewServiceAccountLister(pcrServiceAccountIndex)

	pcrSA := makeTestServiceAccount("ns", "pcr-sa", "pcr-sa-uid")
	checkNilError(t, pcrServiceAccountIndex.Add(pcrSA))

	pcrNodeIndex := cache.NewIndexer(cache.MetaNamespaceKeyFunc, nil)
	pcrNodes := corev1lister.NewNodeLister(pcrNodeIndex)

	pcrNode1 := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: "pcr-node-1",
			UID:  "pcr-node-1-uid",
		},
	}
	checkNilError(t, pcrNodeIndex.Add(pcrNode1))
	pcrNode1UserInfo := &user.DefaultInfo{Name: "system:node:pcr-node-1", Groups: []string{"system:nodes"}}

	pcrNode2 := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: "pcr-node-1",
			UID:  "pcr-node-1-uid",
		},
	}
	checkNilError(t, pcrNodeIndex.Add(pcrNode2))
	pcrNode2UserInfo := &user.DefaultInfo{Name: "system:node:pcr-node-2", Groups: []string{"system:nodes"}}

	pcrPodIndex := cache.NewIndexer(cache.MetaNamespaceKeyFunc, nil)
	pcrPods := corev1lister.NewPodLister(pcrPodIndex)

	_, v1PodRequestingPCR := makeTestPod("ns", "pcrpod", pcrNode1.ObjectMeta.Name, false)
	v1PodRequestingPCR.Spec.ServiceAccountName = pcrSA.Name
	v1PodRequestingPCR.Spec.Volumes = []corev1.Volume{{
		Name: "pod-cert",
		VolumeSource: corev1.VolumeSource{
			Projected: &corev1.ProjectedVolumeSource{
				Sources: []corev1.VolumeProjection{{
					PodCertificate: &corev1.PodCertificateProjection{
						SignerName: "example.com/foo",
					},
				}},
			},
		},
	}}
	checkNilError(t, pcrPodIndex.Add(v1PodRequestingPCR))

	_, v1PodNoPCRVolume := makeTestPod("ns", "pcrpod-novolume", pcrNode1.ObjectMeta.Name, false)
	v1PodNoPCRVolume.Spec.ServiceAccountName = pcrSA.Name
	checkNilError(t, pcrPodIndex.Add(v1PodNoPCRVolume))

	_, v1PodWrongSignerPCRVolume := makeTestPod("ns", "pcrpod-wrongsigner", pcrNode1.ObjectMeta.Name, false)
	v1PodWrongSignerPCRVolume.Spec.ServiceAccountName = pcrSA.Name
	v1PodWrongSignerPCRVolume.Spec.Volumes = []corev1.Volume{{
		Name: "pod-cert",
		VolumeSource: corev1.VolumeSource{
			Projected: &corev1.ProjectedVolumeSource{
				Sources: []corev1.VolumeProjection{{
					PodCertificate: &corev1.PodCertificateProjection{
						SignerName: "example.com/other",
					},
				}},
			},
		},
	}}
	checkNilError(t, pcrPodIndex.Add(v1PodWrongSignerPCRVolume))

	tests := []admitTestCase{
		// Mirror pods bound to us
		{
			name:       "allow creating a mirror pod bound to self",
			podsGetter: noExistingPods,
			attributes: admission.NewAttributesRecord(coremymirrorpod, nil, podKind, coremymirrorpod.Namespace, coremymirrorpod.Name, podResource, "", admission.Create, &metav1.CreateOptions{}, false, mynode),
			err:        "",
		},
		{
			name:       "forbid update of mirror pod bound to self",
			podsGetter: existingPods,
			attributes: admission.NewAttributesRecord(coremymirrorpod, coremymirrorpod, podKind, coremymirrorpod.Namespace, coremymirrorpod.Name, podResource, "", admission.Update, &metav1.UpdateOptions{}, false, mynode),
			err:        "forbidden: unexpected operation",
		},
		{
			name:       "allow delete of mirror pod bound to self",
			podsGetter: existingPods,
			attributes: admission.NewAttributesRecord(nil, nil, podKind, coremymirrorpod.Namespace, coremymirrorpod.Name, podResource, "", admission.Delete, &metav1.DeleteOptions{}, false, mynode),
			err:        "",
		},
		{
			name:       "forbid create of mirror pod status bound to self",
			podsGetter: noExistingPods,
			attributes: admission.NewAttributesRecord(coremymirrorpod, nil, podKind, coremymirrorpod.Namespace, coremymirrorpod.Name, podResource, "status", admission.Create, &metav1.CreateOptions{}, false, mynode),
			err:        "forbidden: unexpected operation",
		},
		{
			name:       "allow update of mirror pod status bound to self",
			podsGetter: existingPods,
			attributes: admission.NewAttributesRecord(coremymirrorpod, coremymirrorpod, podKind, coremymirrorpod.Namespace, coremymirrorpod.Name, podResource, "status", admission.Update, &metav1.UpdateOptions{}, false, mynode),
			err:        "",
		},
		{
			name:       "forbid delete of mirror pod status bound to self",
			podsGetter: existingPods,
			attributes: admission.NewAttributesRecord(nil, nil, podKind, coremymirrorpod.Namespace, coremymirrorpod.Name, podResource, "status", admission.Delete, &metav1.DeleteOptions{}, false, mynode),
			err:        "forbidden: unexpected operation",
		},
		{
			name:       "allow create of eviction for mirror pod bound to self",
			podsGetter: existingPods,
			attributes: admission.NewAttributesRecord(mymirrorpodEviction, nil, evictionKind, coremymirrorpod.Namespace, coremymirrorpod.Name, podResource, "eviction", admission.Create, &metav1.CreateOptions{}, false, mynode),
			err:        "",
		},
		{
			name:       "forbid update of eviction for mirror pod bound to self",
			podsGetter: existingPods,
			attributes: admission.NewAttributesRecord(mymirrorpodEviction, nil, evictionKind, coremymirrorpod.Namespace, coremymirrorpod.Name, podResource, "eviction", admission.Update, &metav1.UpdateOptions{}, false, mynode),
			err:        "forbidden: unexpected operation",
		},
		{
			name:       "forbid delete of eviction for mirror pod bound to self",
			podsGetter: existingPods,
			attributes: admission.NewAttributesRecord(mymirrorpodEviction, nil, evictionKind, coremymirrorpod.Namespace, coremymirrorpod.Name, podResource, "eviction", admission.Delete, &metav1.DeleteOptions{}, false, mynode),
			err:        "forbidden: unexpected operation",
		},
		{
			name:       "allow create of unnamed eviction for mirror pod bound to self",
			podsGetter: existingPods,
			attributes: admission.NewAttributesRecord(unnamedEviction, nil, evictionKind, coremymirrorpod.Namespace, coremymirrorpod.Name, podResource, "eviction", admission.Create, &metav1.CreateOptions{}, false, mynode),
			err:        "",
		},

		// Mirror pods bound to another node
		{
			name:       "forbid creating a mirror pod bound to another",
			podsGetter: noExistingPods,
			attributes: admission.NewAttributesRecord(coreothermirrorpod, nil, podKind, coreothermirrorpod.Namespace, coreothermirrorpod.Name, podResource, "", admission.Create, &metav1.CreateOptions{}, false, mynode),
			err:        "spec.nodeName set to itself",
		},
		{
			name:       "forbid update of mirror pod bound to another",
			podsGetter: existingPods,
			attributes: admission.NewAttributesRecord(coreothermirrorpod, coreothermirrorpod, podKind, coreothermirrorpod.Namespace, coreothermirrorpod.Name, podResource, "", admission.Update, &metav1.UpdateOptions{}, false, mynode),
			err:        "forbidden: unexpected operation",
		},
		{
			name:       "forbid delete of mirror pod bound to another",
			podsGetter: existingPods,
			attributes: admission.NewAttributesRecord(nil, nil, podKind, coreothermirrorpod.Namespace, coreothermirrorpod.Name, podResource, "", admission.Delete, &metav1.DeleteOptions{}, false, mynode),
			err:        "spec.nodeName set to itself",
		},
		{
			name:       "forbid create of mirror pod status bound to another",
			podsGetter: noExistingPods,
			attributes: admission.NewAttributesRecord(coreothermirrorpod, nil, podKind, coreothermirrorpod.Namespace, coreothermirrorpod.Name, podResource, "status", admission.Create, &metav1.CreateOptions{}, false, mynode),
			err:        "forbidden: unexpected operation",
		},
		{
			name:       "forbid update of mirror pod status bound to another",
			podsGetter: existingPods,
			attributes: admission.NewAttributesRecord(coreothermirrorpod, coreothermirrorpod, podKind, coreothermirrorpod.Namespace, coreothermirrorpod.Name, podResource, "status", admission.Update, &metav1.UpdateOptions{}, false, mynode),
			err:        "spec.nodeName set to itself",
		},
		{
			name:       "forbid delete of mirror pod status bound to another",
			podsGetter: existingPods,
			attributes: admission.NewAttributesRecord(nil, nil, podKind, coreothermirrorpod.Namespace, coreothermirrorpod.Name, podResource, "status", admission.Delete, &metav1.DeleteOptions{}, false, mynode),
			err:        "forbidden: unexpected operation",
		},
		{
			name:       "forbid create of eviction for mirror pod bound to another",
			podsGetter: existingPods,
			attributes: admission.NewAttributesRecord(othermirrorpodEviction, nil, evictionKind, coreothermirrorpod.Namespace, coreothermirrorpod.Name, podResource, "eviction", admission.Create, &metav1.CreateOptions{}, false, mynode),
			err:        "spec.nodeName set to itself",
		},
		{
			name:       "forbid update of eviction for mirror pod bound to another",
			podsGetter: existingPods,
			attributes: admission.NewAttributesRecord(othermirrorpodEviction, nil, evictionKind, coreothermirrorpod.Namespace, coreothermirrorpod.Name, podResource, "eviction", admission.Update, &metav1.UpdateOptions{}, false, mynode),
			err:        "forbidden: unexpected operation",
		},
		{
			name:       "forbid delete of eviction for mirror pod bound to another",
			podsGetter: existingPods,
			attributes: admission.NewAttributesRecord(othermirrorpodEviction, nil, evictionKind, coreothermirrorpod.Namespace, coreothermirrorpod.Name, podResource, "eviction", admission.Delete, &metav1.DeleteOptions{}, false, mynode),
			err:        "forbidden: unexpected operation",
		},
		{
			name:       "forbid create of unnamed eviction for mirror pod to another",
			podsGetter: existingPods,
			attributes: admission.NewAttributesRecord(unnamedEviction, nil, evictionKind, coreothermirrorpod.Namespace, coreothermirrorpod.Name, podResource, "eviction", admission.Create, &metav1.CreateOptions{}, false, mynode),
			err:        "spec.nodeName set to itself",
		},

		// Mirror pods not bound to any node
		{
			name:       "forbid creating a mirror pod unbound",
			podsGetter: noExistingPods,
			attributes: admission.NewAttributesRecord(coreunboundmirrorpod, nil, podKind, coreunboundmirrorpod.Namespace, coreunboundmirrorpod.Name, podResource, "", admission.Create, &metav1.CreateOptions{}, false, mynode),
			err:        "spec.nodeName set to itself",
		},
		{
			name:       "forbid update of mirror pod unbound",
			podsGetter: existingPods,
			attributes: admission.NewAttributesRecord(coreunboundmirrorpod, coreunboundmirrorpod, podKind, coreunboundmirrorpod.Namespace, coreunboundmirrorpod.Name, podResource, "", admission.Update, &metav1.UpdateOptions{}, false, mynode),
			err:        "forbidden: unexpected operation",
		},
		{
			name:       "forbid delete of mirror pod unbound",
			podsGetter: existingPods,
			attributes: admission.NewAttributesRecord(nil, nil, podKind, coreunboundmirrorpod.Namespace, coreunboundmirrorpod.Name, podResource, "", admission.Delete, &metav1.DeleteOptions{}, false, mynode),
			err:        "spec.nodeName set to itself",
		},
		{
			name:       "forbid create of mirror pod status unbound",
			podsGetter: noExistingPods,
			attributes: admission.NewAttributesRecord(coreunboundmirrorpod, nil, podKind, coreunboundmirrorpod.Namespace, coreunboundmirrorpod.Name, podResource, "status", admission.Create, &metav1.CreateOptions{}, false, mynode),
			err:        "forbidden: unexpected operation",
		},
		{
			name:       "forbid update of mirror pod status unbound",
			podsGetter: existingPods,
			attributes: admission.NewAttributesRecord(coreunboundmirrorpod, coreunboundmirrorpod, podKind, coreunboundmirrorpod.Namespace, coreunboundmirrorpod.Name, podResource, "status", admission.Update, &metav1.UpdateOptions{}, false, mynode),
			err:        "spec.nodeName set to itself",
		},
		{
			name:       "forbid delete of mirror pod status unbound",
			podsGetter: existingPods,
			attributes: admission.NewAttributesRecord(nil, nil, podKind, coreunboundmirrorpod.Namespace, coreunboundmirrorpod.Name, podResource, "status", admission.Delete, &metav1.DeleteOptions{}, false, mynode),
			err:        "forbidden: unexpected operation",
		},
		{
			name:       "forbid create of eviction for mirror pod unbound",
			podsGetter: existingPods,
			attributes: admission.NewAttributesRecord(unboundmirrorpodEviction, nil, evictionKind, coreunboundmirrorpod.Namespace, coreunboundmirrorpod.Name, podResource, "eviction", admission.Create, &metav1.CreateOptions{}, false, mynode),
			err:        "spec.nodeName set to itself",
		},
		{
			name:       "forbid update of eviction for mirror pod unbound",
			podsGetter: existingPods,
			attributes: admission.NewAttributesRecord(unboundmirrorpodEviction, nil, evictionKind, coreunboundmirrorpod.Namespace, coreunboundmirrorpod.Name, podResource, "eviction", admission.Update, &metav1.UpdateOptions{}, false, mynode),
			err:        "forbidden: unexpected operation",
		},
		{
			name:       "forbid delete of eviction for mirror pod unbound",
			podsGetter: existingPods,
			attributes: admission.NewAttributesRecord(unboundmirrorpodEviction, nil, evictionKind, coreunboundmirrorpod.Namespace, coreunboundmirrorpod.Name, podResource, "eviction", admission.Delete, &metav1.DeleteOptions{}, false, mynode),
			err:        "forbidden: unexpected operation",
		},
		{
			name:       "forbid create of unnamed eviction for mirror pod unbound",
			podsGetter: existingPods,
			attributes: admission.NewAttributesRecord(unnamedEviction, nil, evictionKind, coreunboundmirrorpod.Namespace, coreunboundmirrorpod.Name, podResource, "eviction", admission.Create, &metav1.CreateOptions{}, false, mynode),
			err:        "spec.nodeName set to itself",
		},

		// Normal pods bound to us
		{
			name:       "forbid creating a normal pod bound to self",
			podsGetter: noExistingPods,
			attributes: admission.NewAttributesRecord(coremypod, nil, podKind, coremypod.Namespace, coremypod.Name, podResource, "", admission.Create, &metav1.CreateOptions{}, false, mynode),
			err:        "can only create mirror pods",
		},
		{
			name:       "forbid update of normal pod bound to self",
			podsGetter: existingPods,
			attributes: admission.NewAttributesRecord(coremypod, coremypod, podKind, coremypod.Namespace, coremypod.Name, podResource, "", admission.Update, &metav1.UpdateOptions{}, false, mynode),
			err:        "forbidden: unexpected operation",
		},
		{
			name:       "allow delete of normal pod bound to self",
			podsGetter: existingPods,
			attributes: admission.NewAttributesRecord(nil, nil, podKind, coremypod.Namespace, coremypod.Name, podResource, "", admission.Delete, &metav1.DeleteOptions{}, false, mynode),
			err:        "",
		},
		{
			name:       "forbid create of normal pod status bound to self",
			podsGetter: noExistingPods,
			attributes: admission.NewAttributesRecord(coremypod, nil, podKind, coremypod.Namespace, coremypod.Name, podResource, "status", admission.Create, &metav1.CreateOptions{}, false, mynode),
			err:        "forbidden: unexpected operation",
		},
		{
			name:       "allow update of normal pod status bound to self",
			podsGetter: existingPods,
			attributes: admission.NewAttributesRecord(coremypod, coremypod, podKind, coremypod.Namespace, coremypod.Name, podResource, "status", admission.Update, &metav1.UpdateOptions{}, false, mynode),
			err:        "",
		},
		{
			name:       "forbid delete of normal pod status bound to self",
			podsGetter: existingPods,
			attributes: admission.NewAttributesRecord(nil, nil, podKind, coremypod.Namespace, coremypod.Name, podResource, "status", admission.Delete, &metav1.DeleteOptions{}, false, mynode),
			err:        "forbidden: unexpected operation",
		},
		{
			name:       "forbid addition of pod status preexisting labels",
			podsGetter: noExistingPods,
			attributes: admission.NewAttributesRecord(abLabeledPod, aLabeledPod, podKind, coremypod.Namespace, coremypod.Name, podResource, "status", admission.Update, &metav1.UpdateOptions{}, false, mynode),
			err:        "cannot update labels through pod status",
		},
		{
			name:       "forbid deletion of pod status preexisting labels",
			podsGetter: noExistingPods,
			attributes: admission.NewAttributesRecord(aLabeledPod, abLabeledPod, podKind, coremypod.Namespace, coremypod.Name, podResource, "status", admission.Update, &metav1.UpdateOptions{}, false, mynode),
			err:        "cannot update labels through pod status",
		},
		{
			name:       "forbid deletion of all pod status preexisting labels",
			podsGetter: noExistingPods,
			attributes: admission.NewAttributesRecord(aLabeledPod, coremypod, podKind, coremypod.Namespace, coremypod.Name, podResource, "status", admission.Update, &metav1.UpdateOptions{}, false, mynode),
			err:        "cannot update labels through pod status",
		},
		{
			name:       "forbid addition of pod status labels",
			podsGetter: noExistingPods,
			attributes: admission.NewAttributesRecord(coremypod, aLabeledPod, podKind, coremypod.Namespace, coremypod.Name, podResource, "status", admission.Update, &metav1.UpdateOptions{}, false, mynode),
			err:        "cannot update labels through pod status",
		},
		{
			name:       "forbid update of eviction for normal pod bound to self",
			podsGetter: existingPods,
			attributes: admission.NewAttributesRecord(mypodEviction, nil, evictionKind, coremypod.Namespace, coremypod.Name, podResource, "eviction", admission.Update, &metav1.UpdateOptions{}, false, mynode),
			err:        "forbidden: unexpected operation",
		},
		{
			name:       "forbid delete of eviction for normal pod bound to self",
			podsGetter: existingPods,
			attributes: admission.NewAttributesRecord(mypodEviction, nil, evictionKind, coremypod.Namespace, coremypod.Name, podResource, "eviction", admission.Delete, &metav1.DeleteOptions{}, false, mynode),
			err:        "forbidden: unexpected operation",
		},
		{
			name:       "allow create of unnamed eviction for normal pod bound to self",
			podsGetter: existingPods,
			attributes: admission.NewAttributesRecord(unnamedEviction, nil, evictionKind, coremypod.Namespace, coremypod.Name, podResource, "eviction", admission.Create, &metav1.CreateOptions{}, false, mynode),
			err:        "",
		},

		// Normal pods bound to another
		{
			name:       "forbid creating a normal pod bound to another",
			podsGetter: noExistingPods,
			attributes: admission.NewAttributesRecord(coreotherpod, nil, podKind, coreotherpod.Namespace, coreotherpod.Name, podResource, "", admission.Create, &metav1.CreateOptions{}, false, mynode),
			err:        "can only create mirror pods",
		},
		{
			name:       "forbid update of normal pod bound to another",
			podsGetter: existingPods,
			attributes: admission.NewAttributesRecord(coreotherpod, coreotherpod, podKind, coreotherpod.Namespace, coreotherpod.Name, podResource, "", admission.Update, &metav1.UpdateOptions{}, false, mynode),
			err:        "forbidden: unexpected operation",
		},
		{
			name:       "forbid delete of normal pod bound to another",
			podsGetter: existingPods,
			attributes: admission.NewAttributesRecord(nil, nil, podKind, coreotherpod.Namespace, coreotherpod.Name, podResource, "", admission.Delete, &metav1.UpdateOptions{}, false, mynode),
			err:        "spec.nodeName set to itself",
		},
		{
			name:       "forbid create of normal pod status bound to another",
			podsGetter: noExistingPods,
			attributes: admission.NewAttributesRecord(coreotherpod, nil, podKind, coreotherpod.Namespace, coreotherpod.Name, podResource, "status", admission.Create, &metav1.CreateOptions{}, false, mynode),
			err:        "forbidden: unexpected operation",
		},
		{
			name:       "forbid update of normal pod status bound to another",
			podsGetter: existingPods,
			attributes: admission.NewAttributesRecord(coreotherpod, coreotherpod, podKind, coreotherpod.Namespace, coreotherpod.Name, podResource, "status", admission.Update, &metav1.UpdateOptions{}, false, mynode),
			err:        "spec.nodeName set to itself",
		},
		{
			name:       "forbid delete of normal pod status bound to another",
			podsGetter: existingPods,
			attributes: admission.NewAttributesRecord(nil, nil, podKind, coreotherpod.Namespace, coreotherpod.Name, podResource, "status", admission.Delete, &metav1.DeleteOptions{}, false, mynode),
			err:        "forbidden: unexpected operation",
		},
		{
			name:       "forbid create of eviction for normal pod bound to another",
			podsGetter: existingPods,
			attributes: admission.NewAttributesRecord(otherpodEviction, nil, evictionKind, otherpodEviction.Namespace, otherpodEviction.Name, podResource, "eviction", admission.Create, &metav1.CreateOptions{}, false, mynode),
			err:        "spec.nodeName set to itself",
		},
		{
			name:       "forbid update of eviction for normal pod bound to another",
			podsGetter: existingPods,
			attributes: admission.NewAttributesRecord(otherpodEviction, nil, evictionKind, otherpodEviction.Namespace, otherpodEviction.Name, podResource, "eviction", admission.Update, &metav1.UpdateOptions{}, false, mynode),
			err:        "forbidden: unexpected operation",
		},
		{
			name:       "forbid delete of eviction for normal pod bound to another",
			podsGetter: existingPods,
			attributes: admission.NewAttributesRecord(otherpodEviction, nil, evictionKind, otherpodEviction.Namespace, otherpodEviction.Name, podResource, "eviction", admission.Delete, &metav1.UpdateOptions{}, false, mynode),
			err:        "forbidden: unexpected operation",
		},
		{
			name:       "forbid create of unnamed eviction for normal pod bound to another",
			podsGetter: existingPods,
			attributes: admission.NewAttributesRecord(unnamedEviction, nil, evictionKind, coreotherpod.Namespace, coreotherpod.Name, podResource, "eviction", admission.Create, &metav1.CreateOptions{}, false, mynode),
			err:        "spec.nodeName set to itself",
		},

		// Normal pods not bound to any node
		{
			name:       "forbid creating a normal pod unbound",
			podsGetter: noExistingPods,
			attributes: admission.NewAttributesRecord(coreunboundpod, nil, podKind, coreunboundpod.Namespace, coreunboundpod.Name, podResource, "", admission.Create, &metav1.CreateOptions{}, false, mynode),
			err:        "can only create mirror pods",
		},
		{
			name:       "forbid update of normal pod unbound",
			podsGetter: existingPods,
			attributes: admission.NewAttributesRecord(coreunboundpod, coreunboundpod, podKind, coreunboundpod.Namespace, coreunboundpod.Name, podResource, "", admission.Update, &metav1.UpdateOptions{}, false, mynode),
			err:        "forbidden: unexpected operation",
		},
		{
			name:       "forbid delete of normal pod unbound",
			podsGetter: existingPods,
			attributes: admission.NewAttributesRecord(nil, nil, podKind, coreunboundpod.Namespace, coreunboundpod.Name, podResource, "", admission.Delete, &metav1.DeleteOptions{}, false, mynode),
			err:        "spec.nodeName set to itself",
		},
		{
			name:       "forbid create of normal pod status unbound",
			podsGetter: noExistingPods,
			attributes: admission.NewAttributesRecord(coreunboundpod, nil, podKind, coreunboundpod.Namespace, coreunboundpod.Name, podResource, "status", admission.Create, &metav1.CreateOptions{}, false, mynode),
			err:        "forbidden: unexpected operation",
		},
		{
			name:       "forbid update of normal pod status unbound",
			podsGetter: existingPods,
			attributes: admission.NewAttributesRecord(coreunboundpod, coreunboundpod, podKind, coreunboundpod.Namespace, coreunboundpod.Name, podResource, "status", admission.Update, &metav1.UpdateOptions{}, false, mynode),
			err:        "spec.nodeName set to itself",
		},
		{
			name:       "forbid delete of normal pod status unbound",
			podsGetter: existingPods,
			attributes: admission.NewAttributesRecord(nil, nil, podKind, coreunboundpod.Namespace, coreunboundpod.Name, podResource, "status", admission.Delete, &metav1.DeleteOptions{}, false, mynode),
			err:        "forbidden: unexpected operation",
		},
		{
			name:       "forbid create of eviction for normal pod unbound",
			podsGetter: existingPods,
			attributes: admission.NewAttributesRecord(unboundpodEviction, nil, evictionKind, coreunboundpod.Namespace, coreunboundpod.Name, podResource, "eviction", admission.Create, &metav1.CreateOptions{}, false, mynode),
			err:        "spec.nodeName set to itself",
		},
		{
			name:       "forbid update of eviction for normal pod unbound",
			podsGetter: existingPods,
			attributes: admission.NewAttributesRecord(unboundpodEviction, nil, evictionKind, coreunboundpod.Namespace, coreunboundpod.Name, podResource, "eviction", admission.Update, &metav1.UpdateOptions{}, false, mynode),
			err:        "forbidden: unexpected operation",
		},
		{
			name:       "forbid delete of eviction for normal pod unbound",
			podsGetter: existingPods,
			attributes: admission.NewAttributesRecord(unboundpodEviction, nil, evictionKind, coreunboundpod.Namespace, coreunboundpod.Name, podResource, "eviction", admission.Delete, &metav1.DeleteOptions{}, false, mynode),
			err:        "forbidden: unexpected operation",
		},
		{
			name:       "forbid create of unnamed eviction for normal unbound",
			podsGetter: existingPods,
			attributes: admission.NewAttributesRecord(unnamedEviction, nil, evictionKind, coreunboundpod.Namespace, coreunboundpod.Name, podResource, "eviction", admission.Create, &metav1.CreateOptions{}, false, mynode),
			err:        "spec.nodeName set to itself",
		},

		// Missing pod
		{
			name:       "forbid delete of unknown pod",
			podsGetter: noExistingPods,
			attributes: admission.NewAttributesRecord(nil, nil, podKind, coreunboundpod.Namespace, coreunboundpod.Name, podResource, "", admission.Delete, &metav1.DeleteOptions{}, false, mynode),
			err:        "not found",
		},
		{
			name:       "forbid create of eviction for unknown pod",
			podsGetter: noExistingPods,
			attributes: admission.NewAttributesRecord(mypodEviction, nil, evictionKind, coremypod.Namespace, coremypod.Name, podResource, "eviction", admission.Create, &metav1.CreateOptions{}, false, mynode),
			err:        "not found",
		},
		{
			name:       "forbid update of eviction for unknown pod",
			podsGetter: noExistingPods,
			attributes: admission.NewAttributesRecord(mypodEviction, nil, evictionKind, coremypod.Namespace, coremypod.Name, podResource, "eviction", admission.Update, &metav1.UpdateOptions{}, false, mynode),
			err:        "forbidden: unexpected operation",
		},
		{
			name:       "forbid delete of eviction for unknown pod",
			podsGetter: noExistingPods,
			attributes: admission.NewAttributesRecord(mypodEviction, nil, evictionKind, coremypod.Namespace, coremypod.Name, podResource, "eviction", admission.Delete, &metav1.DeleteOptions{}, false, mynode),
			err:        "forbidden: unexpected operation",
		},
		{
			name:       "forbid create of unnamed eviction for unknown pod",
			podsGetter: noExistingPods,
			attributes: admission.NewAttributesRecord(unnamedEviction, nil, evictionKind, coremypod.Namespace, coremypod.Name, podResource, "eviction", admission.Create, &metav1.CreateOptions{}, false, mynode),
			err:        "not found",
		},

		// Eviction for unnamed pod
		{
			name:       "allow create of eviction for unnamed pod",
			podsGetter: existingPods,
			attributes: admission.NewAttributesRecord(mypodEviction, nil, evictionKind, coreunnamedpod.Namespace, coreunnamedpod.Name, podResource, "eviction", admission.Create, &metav1.CreateOptions{}, false, mynode),
			// use the submitted eviction resource name as the pod name
			err: "",
		},
		{
			name:       "forbid update of eviction for unnamed pod",
			podsGetter: existingPods,
			attributes: admission.NewAttributesRecord(mypodEviction, nil, evictionKind, coreunnamedpod.Namespace, coreunnamedpod.Name, podResource, "eviction", admission.Update, &metav1.UpdateOptions{}, false, mynode),
			err:        "forbidden: unexpected operation",
		},
		{
			name:       "forbid delete of eviction for unnamed pod",
			podsGetter: existingPods,
			attributes: admission.NewAttributesRecord(mypodEviction, nil, evictionKind, coreunnamedpod.Namespace, coreunnamedpod.Name, podResource, "eviction", admission.Delete, &metav1.DeleteOptions{}, false, mynode),
			err:        "forbidden: unexpected operation",
		},
		{
			name:       "forbid create of unnamed eviction for unnamed pod",
			podsGetter: existingPods,
			attributes: admission.NewAttributesRecord(unnamedEviction, nil, evictionKind, coreunnamedpod.Namespace, coreunnamedpod.Name, podResource, "eviction", admission.Create, &metav1.CreateOptions{}, false, mynode),
			err:        "could not determine pod from request data",
		},

		// Resource pods
		{
			name:       "forbid create of pod referencing service account",
			podsGetter: noExistingPods,
			attributes: admission.NewAttributesRecord(sapod, nil, podKind, sapod.Namespace, sapod.Name, podResource, "", admission.Create, &metav1.CreateOptions{}, false, mynode),
			err:        "can not create pods that reference serviceaccounts",
		},
		{
			name:       "forbid create of pod referencing secret",
			podsGetter: noExistingPods,
			attributes: admission.NewAttributesRecord(secretpod, nil, podKind, secretpod.Namespace, secretpod.Name, podResource, "", admission.Create, &metav1.CreateOptions{}, false, mynode),
			err:        "reference secrets",
		},
		{
			name:       "forbid create of pod referencing configmap",
			podsGetter: noExistingPods,
			attributes: admission.NewAttributesRecord(configmappod, nil, podKind, configmappod.Namespace, configmappod.Name, podResource, "", admission.Create, &metav1.CreateOptions{}, false, mynode),
			err:        "reference configmaps",
		},
		{
			name:       "forbid create of pod referencing clustertrustbundle",
			podsGetter: noExistingPods,
			attributes: admission.NewAttributesRecord(ctbpod, nil, podKind, ctbpod.Namespace, ctbpod.Name, podResource, "", admission.Create, &metav1.CreateOptions{}, false, mynode),
			err:        "reference clustertrustbundles",
		},
		{
			name:       "forbid create of pod referencing persistentvolumeclaim",
			podsGetter: noExistingPods,
			attributes: admission.NewAttributesRecord(pvcpod, nil, podKind, pvcpod.Namespace, pvcpod.Name, podResource, "", admission.Create, &metav1.CreateOptions{}, false, mynode),
			err:        "can not create pods that reference persistentvolumeclaims",
		},
		{
			name:       "forbid create of pod referencing resourceclaim",
			podsGetter: noExistingPods,
			attributes: admission.NewAttributesRecord(claimpod, nil, podKind, claimpod.Namespace, claimpod.Name, podResource, "", admission.Create, &metav1.CreateOptions{}, false, mynode),
			err:        "reference resourceclaim",
		},
		{
			name:       "forbid update of pod's extended resource claim status",
			podsGetter: existingPods,
			attributes: admission.NewAttributesRecord(extendedResourceClaimPod, claimpod, podKind, extendedResourceClaimPod.Namespace, extendedResourceClaimPod.Name, podResource, "status", admission.Update, &metav1.UpdateOptions{}, false, mynode),
			err:        "annot update extended resource claim status",
		},
		{
			name:       "forbid update of pod's node allocatable resource claim status",
			podsGetter: existingPods,
			attributes: admission.NewAttributesRecord(nodeAllocatableResourceClaimPod, claimpod, podKind, nodeAllocatableResourceClaimPod.Namespace, nodeAllocatableResourceClaimPod.Name, podResource, "status", admission.Update, &metav1.UpdateOptions{}, false, mynode),
			err:        "cannot update node allocatable resource claim statuses",
		},
		{
			name:       "forbid update of pod's node allocatable overhead resource claim status",
			podsGetter: existingPods,
			attributes: admission.NewAttributesRecord(nodeAllocatableOverheadResourceClaimPod, claimpod, podKind, nodeAllocatableOverheadResourceClaimPod.Namespace, nodeAllocatableOverheadResourceClaimPod.Name, podResource, "status", admission.Update, &metav1.UpdateOptions{}, false, mynode),
			err:        "cannot update node allocatable resource claim statuses",
		},

		// My node object
		{
			name:       "allow create of my node",
			podsGetter: noExistingPods,
			attributes: admission.NewAttributesRecord(mynodeObj, nil, nodeKind, mynodeObj.Namespace, mynodeObj.Name, nodeResource, "", admission.Create, &metav1.CreateOptions{}, false, mynode),
			err:        "",
		},
		{
			name:       "allow create of my node pulling name from object",
			podsGetter: noExistingPods,
			attributes: admission.NewAttributesRecord(mynodeObj, nil, nodeKind, mynodeObj.Namespace, "mynode", nodeResource, "", admission.Create, &metav1.CreateOptions{}, false, mynode),
			err:        "",
		},
		{
			name:       "allow create of my node with taints",
			podsGetter: noExistingPods,
			attributes: admission.NewAttributesRecord(mynodeObjTaintA, nil, nodeKind, mynodeObj.Namespace, "mynode", nodeResource, "", admission.Create, &metav1.CreateOptions{}, false, mynode),
			err:        "",
		},
		{
			name:       "allow create of my node with labels",
			podsGetter: noExistingPods,
			attributes: admission.NewAttributesRecord(setAllowedCreateLabels(mynodeObj, ""), nil, nodeKind, mynodeObj.Namespace, "mynode", nodeResource, "", admission.Create, &metav1.CreateOptions{}, false, mynode),
			err:        "",
		},
		{
			name:       "forbid create of my node with forbidden labels",
			podsGetter: noExistingPods,
			attributes: admission.NewAttributesRecord(setForbiddenCreateLabels(mynodeObj, ""), nil, nodeKind, mynodeObj.Namespace, "mynode", nodeResource, "", admission.Create, &metav1.CreateOptions{}, false, mynode),
			err:        `is not allowed to set the following labels: foo.node-restriction.kubernetes.io/foo, node-restriction.kubernetes.io/foo, other.k8s.io/foo, other.kubernetes.io/foo`,
		},
		{
			name:       "allow update of my node",
			podsGetter: existingPods,
			attributes: admission.NewAttributesRecord(mynodeObj, mynodeObj, nodeKind, mynodeObj.Namespace, mynodeObj.Name, nodeResource, "", admission.Update, &metav1.UpdateOptions{}, false, mynode),
			err:        "",
		},
		{
			name:       "allow delete of my node",
			podsGetter: existingPods,
			attributes: admission.NewAttributesRecord(nil, nil, nodeKind, mynodeObj.Namespace, mynodeObj.Name, nodeResource, "", admission.Delete, &metav1.DeleteOptions{}, false, mynode),
			err:        "",
		},
		{
			name:       "allow update of my node status",
			podsGetter: existingPods,
			attributes: admission.NewAttributesRecord(mynodeObj, mynodeObj, nodeKind, mynodeObj.Namespace, mynodeObj.Name, nodeResource, "status", admission.Update, &metav1.UpdateOptions{}, false, mynode),
			err:        "",
		},
		{
			name:       "forbid create of my node with non-nil configSource",
			podsGetter: noExistingPods,
			attributes: admission.NewAttributesRecord(mynodeObjConfigA, nil, nodeKind, mynodeObj.Namespace, mynodeObj.Name, nodeResource, "", admission.Create, &metav1.CreateOptions{}, false, mynode),
			err:        "is not allowed to create pods with a non-nil configSource",
		},
		{
			name:       "forbid update of my node: nil configSource to new non-nil configSource",
			podsGetter: existingPods,
			attributes: admission.NewAttributesRecord(mynodeObjConfigA, mynodeObj, nodeKind, mynodeObj.Namespace, mynodeObj.Name, nodeResource, "", admission.Update, &metav1.UpdateOptions{}, false, mynode),
			err:        "update configSource to a new non-nil configSource",
		},
		{
			name:       "forbid update of my node: non-nil configSource to new non-nil configSource",
			podsGetter: existingPods,
			attributes: admission.NewAttributesRecord(mynodeObjConfigB, mynodeObjConfigA, nodeKind, mynodeObj.Namespace, mynodeObj.Name, nodeResource, "", admission.Update, &metav1.UpdateOptions{}, false, mynode),
			err:        "update configSource to a new non-nil configSource",
		},
		{
			name:       "allow update of my node: non-nil configSource unchanged",
			podsGetter: existingPods,
			attributes: admission.NewAttributesRecord(mynodeObjConfigA, mynodeObjConfigA, nodeKind, mynodeObj.Namespace, mynodeObj.Name, nodeResource, "", admission.Update, &metav1.UpdateOptions{}, false, mynode),
			err:        "",
		},
		{
			name:       "allow update of my node: non-nil configSource to nil configSource",
			podsGetter: existingPods,
			attributes: admission.NewAttributesRecord(mynodeObj, mynodeObjConfigA, nodeKind, mynodeObj.Namespace, mynodeObj.Name, nodeResource, "", admission.Update, &metav1.UpdateOptions{}, false, mynode),
			err:        "",
		},
		{
			name:       "allow update of my node: no change to taints",
			podsGetter: existingPods,
			attributes: admission.NewAttributesRecord(mynodeObjTaintA, mynodeObjTaintA, nodeKind, mynodeObj.Namespace, mynodeObj.Name, nodeResource, "", admission.Update, &metav1.UpdateOptions{}, false, mynode),
			err:        "",
		},
		{
			name:       "allow update of my node: add allowed labels",
			podsGetter: existingPods,
			attributes: admission.NewAttributesRecord(setAllowedUpdateLabels(mynodeObj, ""), mynodeObj, nodeKind, mynodeObj.Namespace, mynodeObj.Name, nodeResource, "", admission.Update, &metav1.UpdateOptions{}, false, mynode),
			err:        "",
		},
		{
			name:       "allow update of my node: remove allowed labels",
			podsGetter: existingPods,
			attributes: admission.NewAttributesRecord(mynodeObj, setAllowedUpdateLabels(mynodeObj, ""), nodeKind, mynodeObj.Namespace, mynodeObj.Name, nodeResource, "", admission.Update, &metav1.UpdateOptions{}, false, mynode),
			err:        "",
		},
		{
			name:       "allow update of my node: modify allowed labels",
			podsGetter: existingPods,
			attributes: admission.NewAttributesRecord(setAllowedUpdateLabels(mynodeObj, "b"), setAllowedUpdateLabels(mynodeObj, "a"), nodeKind, mynodeObj.Namespace, mynodeObj.Name, nodeResource, "", admission.Update, &metav1.UpdateOptions{}, false, mynode),
			err:        "",
		},
		{
			name:       "allow update of my node: no change to labels",
			podsGetter: existingPods,
			attributes: admission.NewAttributesRecord(setAllLabels(mynodeObj, ""), setAllLabels(mynodeObj, ""), nodeKind, mynodeObj.Namespace, mynodeObj.Name, nodeResource, "", admission.Update, &metav1.UpdateOptions{}, false, mynode),
			err:        "",
		},
		{
			name:       "allow update of my node: add allowed labels while forbidden labels exist unmodified",
			podsGetter: existingPods,
			attributes: admission.NewAttributesRecord(setAllLabels(mynodeObj, ""), setForbiddenUpdateLabels(mynodeObj, ""), nodeKind, mynodeObj.Namespace, mynodeObj.Name, nodeResource, "", admission.Update, &metav1.UpdateOptions{}, false, mynode),
			err:        "",
		},
		{
			name:       "allow update of my node: remove allowed labels while forbidden labels exist unmodified",
			podsGetter: existingPods,
			attributes: admission.NewAttributesRecord(setForbiddenUpdateLabels(mynodeObj, ""), setAllLabels(mynodeObj, ""), nodeKind, mynodeObj.Namespace, mynodeObj.Name, nodeResource, "", admission.Update, &metav1.UpdateOptions{}, false, mynode),
			err:        "",
		},
		{
			name:       "forbid update of my node: add taints",
			podsGetter: existingPods,
			attributes: admission.NewAttributesRecord(mynodeObjTaintA, mynodeObj, nodeKind, mynodeObj.Namespace, mynodeObj.Name, nodeResource, "", admission.Update, &metav1.UpdateOptions{}, false, mynode),
			err:        "is not allowed to modify taints",
		},
		{
			name:       "forbid update of my node: remove taints",
			podsGetter: existingPods,
			attributes: admission.NewAttributesRecord(mynodeObj, mynodeObjTaintA, nodeKind, mynodeObj.Namespace, mynodeObj.Name, nodeResource, "", admission.Update, &metav1.UpdateOptions{}, false, mynode),
			err:        "is not allowed to modify taints",
		},
		{
			name:       "forbid update of my node: change taints",
			podsGetter: existingPods,
			attributes: admission.NewAttributesRecord(mynodeObjTaintA, mynodeObjTaintB, nodeKind, mynodeObj.Namespace, mynodeObj.Name, nodeResource, "", admission.Update, &metav1.UpdateOptions{}, false, mynode),
			err:        "is not allowed to modify taints",
		},
		{
			name:       "forbid update of my node: add labels",
			podsGetter: existingPods,
			attributes: admission.NewAttributesRecord(setForbiddenUpdateLabels(mynodeObj, ""), mynodeObj, nodeKind, mynodeObj.Namespace, mynodeObj.Name, nodeResource, "", admission.Update, &metav1.UpdateOptions{}, false, mynode),
			err:        `is not allowed to modify labels: foo.node-restriction.kubernetes.io/foo, node-restriction.kubernetes.io/foo, other.k8s.io/foo, other.kubernetes.io/foo`,
		},
		{
			name:       "forbid update of my node: remove labels",
			podsGetter: existingPods,
			attributes: admission.NewAttributesRecord(mynodeObj, setForbiddenUpdateLabels(mynodeObj, ""), nodeKind, mynodeObj.Namespace, mynodeObj.Name, nodeResource, "", admission.Update, &metav1.UpdateOptions{}, false, mynode),
			err:        `is not allowed to modify labels: foo.node-restriction.kubernetes.io/foo, node-restriction.kubernetes.io/foo, other.k8s.io/foo, other.kubernetes.io/foo`,
		},
		{
			name:       "forbid update of my node: change labels",
			podsGetter: existingPods,
			attributes: admission.NewAttributesRecord(setForbiddenUpdateLabels(mynodeObj, "new"), setForbiddenUpdateLabels(mynodeObj, "old"), nodeKind, mynodeObj.Namespace, mynodeObj.Name, nodeResource, "", admission.Update, &metav1.UpdateOptions{}, false, mynode),
			err:        `is not allowed to modify labels: foo.node-restriction.kubernetes.io/foo, node-restriction.kubernetes.io/foo, other.k8s.io/foo, other.kubernetes.io/foo`,
		},
		{
			name:       "forbid update of my node: add owner reference",
			podsGetter: existingPods,
			attributes: admission.NewAttributesRecord(mynodeObjOwnerRefA, mynodeObj, nodeKind, mynodeObj.Namespace, mynodeObj.Name, nodeResource, "", admission.Update, &metav1.UpdateOptions{}, false, mynode),
			err:        "node \"mynode\" is not allowed to modify ownerReferences",
		},
		{
			name:       "forbid update of my node: remove owner reference",
			podsGetter: existingPods,
			attributes: admission.NewAttributesRecord(mynodeObj, mynodeObjOwnerRefA, nodeKind, mynodeObj.Namespace, mynodeObj.Name, nodeResource, "", admission.Update, &metav1.UpdateOptions{}, false, mynode),
			err:        "node \"mynode\" is not allowed to modify ownerReferences",
		},
		{
			name:       "forbid update of my node: change owner reference",
			podsGetter: existingPods,
			attributes: admission.NewAttributesRecord(mynodeObjOwnerRefA, mynodeObjOwnerRefB, nodeKind, mynodeObj.Namespace, mynodeObj.Name, nodeResource, "", admission.Update, &metav1.UpdateOptions{}, false, mynode),
			err:        "node \"mynode\" is not allowed to modify ownerReferences",
		},

		// Other node object
		{
			name:       "forbid create of other node",
			podsGetter: noExistingPods,
			attributes: admission.NewAttributesRecord(othernodeObj, nil, nodeKind, othernodeObj.Namespace, othernodeObj.Name, nodeResource, "", admission.Create, &metav1.CreateOptions{}, false, mynode),
			err:        "is not allowed to modify node",
		},
		{
			name:       "forbid create of other node pulling name from object",
			podsGetter: noExistingPods,
			attributes: admission.NewAttributesRecord(othernodeObj, nil, nodeKind, othernodeObj.Namespace, "", nodeResource, "", admission.Create, &metav1.CreateOptions{}, false, mynode),
			err:        "is not allowed to modify node",
		},
		{
			name:       "forbid update of other node",
			podsGetter: existingPods,
			attributes: admission.NewAttributesRecord(othernodeObj, othernodeObj, nodeKind, othernodeObj.Namespace, othernodeObj.Name, nodeResource, "", admission.Update, &metav1.UpdateOptions{}, false, mynode),
			err:        "is not allowed to modify node",
		},
		{
			name:       "forbid delete of other node",
			podsGetter: existingPods,
			attributes: admission.NewAttributesRecord(nil, nil, nodeKind, othernodeObj.Namespace, othernodeObj.Name, nodeResource, "", admission.Delete, &metav1.DeleteOptions{}, false, mynode),
			err:        "is not allowed to modify node",
		},
		{
			name:       "forbid update of other node status",
			podsGetter: existingPods,
			attributes: admission.NewAttributesRecord(othernodeObj, othernodeObj, nodeKind, othernodeObj.Namespace, othernodeObj.Name, nodeResource, "status", admission.Update, &metav1.UpdateOptions{}, false, mynode),
			err:        "is not allowed to modify node",
		},

		// Service accounts
		{
			name:       "forbid create of unbound token",
			podsGetter: noExistingPods,
			attributes: admission.NewAttributesRecord(makeTokenRequest("", "", []string{"foo"}), nil, tokenrequestKind, "ns", "mysa", svcacctResource, "token", admission.Create, &metav1.CreateOptions{}, false, mynode),
			err:        "not bound to a pod",
		},
		{
			name:       "forbid create of token bound to nonexistant pod",
			podsGetter: noExistingPods,
			attributes: admission.NewAttributesRecord(makeTokenRequest("nopod", "someuid", []string{"foo"}), nil, tokenrequestKind, "ns", "mysa", svcacctResource, "token", admission.Create, &metav1.CreateOptions{}, false, mynode),
			err:        "not found",
		},
		{
			name:       "forbid create of token bound to pod without uid",
			podsGetter: existingPods,
			attributes: admission.NewAttributesRecord(makeTokenRequest(coremypod.Name, "", []string{"foo"}), nil, tokenrequestKind, "ns", "mysa", svcacctResource, "token", admission.Create, &metav1.CreateOptions{}, false, mynode),
			err:        "pod binding without a uid",
		},
		{
			name:       "forbid create of token bound to pod scheduled on another node",
			podsGetter: existingPods,
			attributes: admission.NewAttributesRecord(makeTokenRequest(coreotherpod.Name, coreotherpod.UID, []string{"foo"}), nil, tokenrequestKind, coreotherpod.Namespace, "mysa", svcacctResource, "token", admission.Create, &metav1.CreateOptions{}, false, mynode),
			err:        "pod scheduled on a different node",
		},
		{
			name:       "allow create of token bound to pod scheduled this node",
			podsGetter: existingPods,
			attributes: admission.NewAttributesRecord(makeTokenRequest(coremypod.Name, coremypod.UID, []string{"foo"}), nil, tokenrequestKind, coremypod.Namespace, "mysa", svcacctResource, "token", admission.Create, &metav1.CreateOptions{}, false, mynode),
			// gate fixed: upstream runs this with ServiceAccountNodeAudienceRestriction
			// off; on, the pod does not use audience "foo", so the node needs a grant.
			authz: saAuthorizerBuilder{
				t:                  t,
				serviceAccountName: "mysa",
				namespace:          coremypod.Namespace,
				requestAudience:    "foo",
				decision:           authorizer.DecisionAllow,
			}.build(),
		},
		// Service accounts tests with token audience restrictions
		{
			name:       "allow create of token when audience in PSAT volume and ServiceAccountNodeAudienceRestriction is enabled, empty audience",
			podsGetter: existingPods,
			attributes: admission.NewAttributesRecord(makeTokenRequest(coremypodWithProjectedServiceAccountEmptyAudience.Name, coremypodWithProjectedServiceAccountEmptyAudience.UID, []string{"foo"}), nil, tokenrequestKind, coremypod.Namespace, "mysa", svcacctResource, "token", admission.Create, &metav1.CreateOptions{}, false, mynode),
		},
		{
			name:       "allow create of token when audience in PSAT volume and ServiceAccountNodeAudienceRestriction is enabled, single audience",
			podsGetter: existingPods,
			attributes: admission.NewAttributesRecord(makeTokenRequest(coremypodWithProjectedServiceAccount.Name, coremypodWithProjectedServiceAccount.UID, []string{"foo"}), nil, tokenrequestKind, coremypod.Namespace, "mysa", svcacctResource, "token", admission.Create, &metav1.CreateOptions{}, false, mynode),
		},
		{
			name:       "forbid create of token with multiple audiences in token request and ServiceAccountNodeAudienceRestriction is enabled",
			podsGetter: existingPods,
			attributes: admission.NewAttributesRecord(makeTokenRequest(coremypodWithProjectedServiceAccount.Name, coremypodWithProjectedServiceAccount.UID, []string{"foo", "bar"}), nil, tokenrequestKind, coremypod.Namespace, "mysa", svcacctResource, "token", admission.Create, &metav1.CreateOptions{}, false, mynode),
			err:        "node may only request 0 or 1 audiences",
		},
		{
			name:       "forbid create of token when audience not in pod spec and ServiceAccountNodeAudienceRestriction is enabled",
			podsGetter: existingPods,
			attributes: admission.NewAttributesRecord(makeTokenRequest(coremypod.Name, coremypod.UID, []string{"foo"}), nil, tokenrequestKind, coremypod.Namespace, "mysa", svcacctResource, "token", admission.Create, &metav1.CreateOptions{}, false, mynode),
			err:        `serviceaccounts "mysa" is forbidden: system:node:mynode is not authorized to request tokens for audience "foo"`,
			authz: saAuthorizerBuilder{
				t:                  t,
				serviceAccountName: "mysa",
				namespace:          coremypod.Namespace,
				requestAudience:    "foo",
				decision:           authorizer.DecisionDeny,
			}.build(),
		},
		{
			name:            "allow create of token when audience in pod --> csi --> driver --> tokenrequest with audience and ServiceAccountNodeAudienceRestriction is enabled",
			podsGetter:      existingPods,
			csiDriverGetter: csiDriverLister,
			attributes:      admission.NewAttributesRecord(makeTokenRequest(coremypodWithCSI.Name, v1mypodWithCSI.UID, []string{"foo"}), nil, tokenrequestKind, coremypod.Namespace, "mysa", svcacctResource, "token", admission.Create, &metav1.CreateOptions{}, false, mynode),
		},
		{
			name:            "forbid create of token when audience in pod --> csi --> driver --> tokenrequest does not have audience and ServiceAccountNodeAudienceRestriction is enabled",
			podsGetter:      existingPods,
			csiDriverGetter: csiDriverLister,
			attributes:      admission.NewAttributesRecord(makeTokenRequest(coremypodWithCSI.Name, v1mypodWithCSI.UID, []string{"bar"}), nil, tokenrequestKind, coremypod.Namespace, "mysa", svcacctResource, "token", admission.Create, &metav1.CreateOptions{}, false, mynode),
			err:             `system:node:mynode is not authorized to request tokens for audience "bar"`,
			authz: saAuthorizerBuilder{
				t:                  t,
				serviceAccountName: "mysa",
				namespace:          coremypod.Namespace,
				requestAudience:    "bar",
				decision:           authorizer.DecisionDeny,
			}.build(),
		},
		{
			name:            "forbid create of token when audience in pod --> csi --> driver --> tokenrequest with audience and ServiceAccountNodeAudienceRestriction is enabled, csidriver not found",
			podsGetter:      existingPods,
			csiDriverGetter: noexistingCSIDriverLister,
			attributes:      admission.NewAttributesRecord(makeTokenRequest(coremypodWithCSI.Name, v1mypodWithCSI.UID, []string{"foo"}), nil, tokenrequestKind, coremypod.Namespace, "mysa", svcacctResource, "token", admission.Create, &metav1.CreateOptions{}, false, mynode),
			err:             `error validating audience "foo": csidriver.storage.k8s.io "com.example.csi.mydriver" not found`,
		},
		{
			name:            "allow create of token when audience in pod --> pvc --> pv --> csi --> driver --> tokenrequest with audience and ServiceAccountNodeAudienceRestriction is enabled",
			podsGetter:      existingPods,
			csiDriverGetter: csiDriverLister,
			pvcGetter:       pvcLister,
			pvGetter:        pvLister,
			attributes:      admission.NewAttributesRecord(makeTokenRequest(coremypodWithPVCRefCSI.Name, v1mypodWithPVCRefCSI.UID, []string{"foo"}), nil, tokenrequestKind, coremypod.Namespace, "mysa", svcacctResource, "token", admission.Create, &metav1.CreateOptions{}, false, mynode),
		},
		{
			name:            "forbid create of token when audience in pod --> pvc --> pv --> csi --> driver --> tokenrequest does not have audience and ServiceAccountNodeAudienceRestriction is enabled",
			podsGetter:      existingPods,
			csiDriverGetter: csiDriverLister,
			pvcGetter:       pvcLister,
			pvGetter:        pvLister,
			attributes:      admission.NewAttributesRecord(makeTokenRequest(coremypodWithPVCRefCSI.Name, v1mypodWithPVCRefCSI.UID, []string{"bar"}), nil, tokenrequestKind, coremypod.Namespace, "mysa", svcacctResource, "token", admission.Create, &metav1.CreateOptions{}, false, mynode),
			err:             `system:node:mynode is not authorized to request tokens for audience "bar"`,
			authz: saAuthorizerBuilder{
				t:                  t,
				serviceAccountName: "mysa",
				namespace:          coremypod.Namespace,
				requestAudience:    "bar",
				decision:           authorizer.DecisionDeny,
			}.build(),
		},
		{
			name:            "forbid create of token when audience in pod --> pvc --> pv --> csi --> driver --> tokenrequest with audience and ServiceAccountNodeAudienceRestriction is enabled, pvc not found",
			podsGetter:      existingPods,
			csiDriverGetter: csiDriverLister,
			pvcGetter:       noexistingPVCLister,
			pvGetter:        pvLister,
			attributes:      admission.NewAttributesRecord(makeTokenRequest(coremypodWithPVCRefCSI.Name, v1mypodWithPVCRefCSI.UID, []string{"foo"}), nil, tokenrequestKind, coremypod.Namespace, "mysa", svcacctResource, "token", admission.Create, &metav1.CreateOptions{}, false, mynode),
			err:             `error validating audience "foo": persistentvolumeclaim "pvclaim" not found`,
		},
		{
			name:            "forbid create of token when audience in pod --> pvc --> pv --> csi --> driver --> tokenrequest with audience and ServiceAccountNodeAudienceRestriction is enabled, pv not found",
			podsGetter:      existingPods,
			csiDriverGetter: csiDriverLister,
			pvcGetter:       pvcLister,
			pvGetter:        noexistingPVLister,
			attributes:      admission.NewAttributesRecord(makeTokenRequest(coremypodWithPVCRefCSI.Name, v1mypodWithPVCRefCSI.UID, []string{"foo"}), nil, tokenrequestKind, coremypod.Namespace, "mysa", svcacctResource, "token", admission.Create, &metav1.CreateOptions{}, false, mynode),
			err:             `error validating audience "foo": persistentvolume "pvname" not found`,
		},
		{
			name:            "allow create of token when audience in pod --> ephemeral --> pvc --> pv --> csi --> driver --> tokenrequest with audience and ServiceAccountNodeAudienceRestriction is enabled",
			podsGetter:      existingPods,
			csiDriverGetter: csiDriverLister,
			pvcGetter:       pvcLister,
			pvGetter:        pvLister,
			attributes:      admission.NewAttributesRecord(makeTokenRequest(coremypodWithEphemeralVolume.Name, v1mypodWithEphemeralVolume.UID, []string{"foo"}), nil, tokenrequestKind, coremypod.Namespace, "mysa", svcacctResource, "token", admission.Create, &metav1.CreateOptions{}, false, mynode),
		},
		{
			name:            "forbid create of token when audience in pod --> ephemeral --> pvc --> pv --> csi --> driver --> tokenrequest does not have audience and ServiceAccountNodeAudienceRestriction is enabled",
			podsGetter:      existingPods,
			csiDriverGetter: csiDriverLister,
			pvcGetter:       pvcLister,
			pvGetter:        pvLister,
			attributes:      admission.NewAttributesRecord(makeTokenRequest(coremypodWithEphemeralVolume.Name, v1mypodWithEphemeralVolume.UID, []string{"bar"}), nil, tokenrequestKind, coremypod.Namespace, "mysa", svcacctResource, "token", admission.Create, &metav1.CreateOptions{}, false, mynode),
			err:             `system:node:mynode is not authorized to request tokens for audience "bar"`,
			authz: saAuthorizerBuilder{
				t:                  t,
				serviceAccountName: "mysa",
				namespace:          coremypod.Namespace,
				requestAudience:    "bar",
				decision:           authorizer.DecisionDeny,
			}.build(),
		},
		{
			name:            "allow create of token when ServiceAccountNodeAudienceRestriction is disabled, pvc not found should not be checked",
			podsGetter:      existingPods,
			csiDriverGetter: csiDriverLister,
			pvcGetter:       noexistingPVCLister,
			attributes:      admission.NewAttributesRecord(makeTokenRequest(coremypodWithPVCAndCSI.Name, v1mypodWithPVCAndCSI.UID, []string{"foo"}), nil, tokenrequestKind, coremypod.Namespace, "mysa", svcacctResource, "token", admission.Create, &metav1.CreateOptions{}, false, mynode),
		},
		{
			name:            "allow create of token when audience in pod --> csi --> driver --> tokenrequest with audience and ServiceAccountNodeAudienceRestriction is enabled, pv not found",
			podsGetter:      existingPods,
			csiDriverGetter: csiDriverLister,
			pvcGetter:       pvcLister,
			pvGetter:        noexistingPVLister,
			attributes:      admission.NewAttributesRecord(makeTokenRequest(coremypodWithPVCAndCSI.Name, v1mypodWithPVCAndCSI.UID, []string{"foo"}), nil, tokenrequestKind, coremypod.Namespace, "mysa", svcacctResource, "token", admission.Create, &metav1.CreateOptions{}, false, mynode),
		},
		{
			name:            "allow create of token when ServiceAccountNodeAudienceRestriction is disabled, pv not found should not be checked",
			podsGetter:      existingPods,
			csiDriverGetter: csiDriverLister,
			pvcGetter:       pvcLister,
			pvGetter:        noexistingPVLister,
			// gate fixed: upstream runs this with ServiceAccountNodeAudienceRestriction
			// off; on, the PV lookup fails but the pod's CSI volume still grants "foo".
			attributes: admission.NewAttributesRecord(makeTokenRequest(coremypodWithPVCAndCSI.Name, v1mypodWithPVCAndCSI.UID, []string{"foo"}), nil, tokenrequestKind, coremypod.Namespace, "mysa", svcacctResource, "token", admission.Create, &metav1.CreateOptions{}, false, mynode),
		},
		{
			name:            "allow create of token when ServiceAccountNodeAudienceRestriction is disabled, csidriver not found should not be checked",
			podsGetter:      existingPods,
			csiDriverGetter: noexistingCSIDriverLister,
			// gate fixed: upstream runs this with ServiceAccountNodeAudienceRestriction
			// off and allows it; on, the missing CSIDriver is looked up and reported.
			attributes: admission.NewAttributesRecord(makeTokenRequest(coremypodWithCSI.Name, v1mypodWithCSI.UID, []string{"foo"}), nil, tokenrequestKind, coremypod.Namespace, "mysa", svcacctResource, "token", admission.Create, &metav1.CreateOptions{}, false, mynode),
			err:        `error validating audience "foo": csidriver.storage.k8s.io "com.example.csi.mydriver" not found`,
		},
		{
			name:            "intree pv to csi, allow create of token when audience in pod --> csi --> driver --> tokenrequest with audience, ServiceAccountNodeAudienceRestriction=true",
			podsGetter:      existingPods,
			csiDriverGetter: csiDriverLister,
			pvcGetter:       pvcLister,
			pvGetter:        pvLister,
			attributes:      admission.NewAttributesRecord(makeTokenRequest(coremypodIntreePVToCSI.Name, v1mypodIntreePVToCSI.UID, []string{"foo"}), nil, tokenrequestKind, coremypod.Namespace, "mysa", svcacctResource, "token", admission.Create, &metav1.CreateOptions{}, false, mynode),
		},
		{
			name:            "intree inline vol to csi, allow create of token when audience in pod --> csi --> driver --> tokenrequest with audience, ServiceAccountNodeAudienceRestriction=true",
			podsGetter:      existingPods,
			csiDriverGetter: csiDriverLister,
			attributes:      admission.NewAttributesRecord(makeTokenRequest(coremypodIntreeInlineVolToCSI.Name, v1mypodIntreeInlineVolToCSI.UID, []string{"foo"}), nil, tokenrequestKind, coremypod.Namespace, "mysa", svcacctResource, "token", admission.Create, &metav1.CreateOptions{}, false, mynode),
		},
		{
			name:            "allow create of token when ServiceAccountNodeAudienceRestriction is enabled, clusterrole and clusterrolebinding are configured",
			podsGetter:      existingPods,
			csiDriverGetter: noexistingCSIDriverLister,
			pvcGetter:       noexistingPVCLister,
			pvGetter:        noexistingPVLister,
			attributes:      admission.NewAttributesRecord(makeTokenRequest(coremypod.Name, v1mypod.UID, []string{"foo"}), nil, tokenrequestKind, coremypod.Namespace, "mysa", svcacctResource, "token", admission.Create, &metav1.CreateOptions{}, false, mynode),
			authz: saAuthorizerBuilder{
				t:                  t,
				serviceAccountName: "mysa",
				namespace:          coremypod.Namespace,
				requestAudience:    "foo",
				decision:           authorizer.DecisionAllow,
			}.build(),
		},
		{
			name:            "forbid create of token when ServiceAccountNodeAudienceRestriction is enabled, clusterrole and clusterrolebinding for audience not configured",
			podsGetter:      existingPods,
			csiDriverGetter: noexistingCSIDriverLister,
			pvcGetter:       noexistingPVCLister,
			pvGetter:        noexistingPVLister,
			attributes:      admission.NewAttributesRecord(makeTokenRequest(coremypod.Name, v1mypod.UID, []string{"foo"}), nil, tokenrequestKind, coremypod.Namespace, "mysa", svcacctResource, "token", admission.Create, &metav1.CreateOptions{}, false, mynode),
			authz: saAuthorizerBuilder{
				t:                  t,
				serviceAccountName: "mysa",
				namespace:          coremypod.Namespace,
				requestAudience:    "foo",
				decision:           authorizer.DecisionDeny,
			}.build(),
			err: `serviceaccounts "mysa" is forbidden: system:node:mynode is not authorized to request tokens for audience "foo"`,
		},

		// Unrelated objects
		{
			name:       "allow create of unrelated object",
			podsGetter: existingPods,
			attributes: admission.NewAttributesRecord(&corev1.ConfigMap{}, nil, configmapKind, "myns", "mycm", configmapResource, "", admission.Create, &metav1.CreateOptions{}, false, mynode),
			err:        "",
		},
		{
			name:       "allow update of unrelated object",
			podsGetter: existingPods,
			attributes: admission.NewAttributesRecord(&corev1.ConfigMap{}, &corev1.ConfigMap{}, configmapKind, "myns", "mycm", configmapResource, "", admission.Update, &metav1.UpdateOptions{}, false, mynode),
			err:        "",
		},
		{
			name:       "allow delete of unrelated object",
			podsGetter: existingPods,
			attributes: admission.NewAttributesRecord(nil, nil, configmapKind, "myns", "mycm", configmapResource, "", admission.Delete, &metav1.DeleteOptions{}, false, mynode),
			err:        "",
		},

		// Unrelated user
		{
			name:       "allow unrelated user creating a normal pod unbound",
			podsGetter: noExistingPods,
			attributes: admission.NewAttributesRecord(coreunboundpod, nil, podKind, coreunboundpod.Namespace, coreunboundpod.Name, podResource, "", admission.Create, &metav1.CreateOptions{}, false, bob),
			err:        "",
		},
		{
			name:       "allow unrelated user update of normal pod unbound",
			podsGetter: existingPods,
			attributes: admission.NewAttributesRecord(coreunboundpod, coreunboundpod, podKind, coreunboundpod.Namespace, coreunboundpod.Name, podResource, "", admission.Update, &metav1.UpdateOptions{}, false, bob),
			err:        "",
		},
		{
			name:       "allow unrelated user delete of normal pod unbound",
			podsGetter: existingPods,
			attributes: admission.NewAttributesRecord(nil, nil, podKind, coreunboundpod.Namespace, coreunboundpod.Name, podResource, "", admission.Delete, &metav1.DeleteOptions{}, false, bob),
			err:        "",
		},
		{
			name:       "allow unrelated user create of normal pod status unbound",
			podsGetter: noExistingPods,
			attributes: admission.NewAttributesRecord(coreunboundpod, nil, podKind, coreunboundpod.Namespace, coreunboundpod.Name, podResource, "status", admission.Create, &metav1.CreateOptions{}, false, bob),
			err:        "",
		},
		{
			name:       "allow unrelated user update of normal pod status unbound",
			podsGetter: existingPods,
			attributes: admission.NewAttributesRecord(coreunboundpod, coreunboundpod, podKind, coreunboundpod.Namespace, coreunboundpod.Name, podResource, "status", admission.Update, &metav1.UpdateOptions{}, false, bob),
			err:        "",
		},
		{
			name:       "allow unrelated user delete of normal pod status unbound",
			podsGetter: existingPods,
			attributes: admission.NewAttributesRecord(nil, nil, podKind, coreunboundpod.Namespace, coreunboundpod.Name, podResource, "status", admission.Delete, &metav1.DeleteOptions{}, false, bob),
			err:        "",
		},
		// Node leases
		{
			name:       "disallowed create lease in namespace other than kube-node-lease - feature enabled",
			attributes: admission.NewAttributesRecord(leaseWrongNS, nil, leaseKind, leaseWrongNS.Namespace, leaseWrongNS.Name, leaseResource, "", admission.Create, &metav1.CreateOptions{}, false, mynode),
			err:        "forbidden: ",
		},
		{
			name:       "disallowed update lease in namespace other than kube-node-lease - feature enabled",
			attributes: admission.NewAttributesRecord(leaseWrongNS, leaseWrongNS, leaseKind, leaseWrongNS.Namespace, leaseWrongNS.Name, leaseResource, "", admission.Update, &metav1.UpdateOptions{}, false, mynode),
			err:        "forbidden: ",
		},
		{
			name:       "disallowed delete lease in namespace other than kube-node-lease - feature enabled",
			attributes: admission.NewAttributesRecord(nil, nil, leaseKind, leaseWrongNS.Namespace, leaseWrongNS.Name, leaseResource, "", admission.Delete, &metav1.DeleteOptions{}, false, mynode),
			err:        "forbidden: ",
		},
		{
			name:       "disallowed create another node's lease - feature enabled",
			attributes: admission.NewAttributesRecord(leaseWrongName, nil, leaseKind, leaseWrongName.Namespace, leaseWrongName.Name, leaseResource, "", admission.Create, &metav1.CreateOptions{}, false, mynode),
			err:        "forbidden: ",
		},
		{
			name:       "disallowed update another node's lease - feature enabled",
			attributes: admission.NewAttributesRecord(leaseWrongName, leaseWrongName, leaseKind, leaseWrongName.Namespace, leaseWrongName.Name, leaseResource, "", admission.Update, &metav1.UpdateOptions{}, false, mynode),
			err:        "forbidden: ",
		},
		{
			name:       "disallowed delete another node's lease - feature enabled",
			attributes: admission.NewAttributesRecord(nil, nil, leaseKind, leaseWrongName.Namespace, leaseWrongName.Name, leaseResource, "", admission.Delete, &metav1.DeleteOptions{}, false, mynode),
			err:        "forbidden: ",
		},
		{
			name:       "allowed create node lease - feature enabled",
			attributes: admission.NewAttributesRecord(lease, nil, leaseKind, lease.Namespace, lease.Name, leaseResource, "", admission.Create, &metav1.CreateOptions{}, false, mynode),
			err:        "",
		},
		{
			name:       "allowed update node lease - feature enabled",
			attributes: admission.NewAttributesRecord(lease, lease, leaseKind, lease.Namespace, lease.Name, leaseResource, "", admission.Update, &metav1.UpdateOptions{}, false, mynode),
			err:        "",
		},
		{
			name:       "allowed delete node lease - feature enabled",
			attributes: admission.NewAttributesRecord(nil, nil, leaseKind, lease.Namespace, lease.Name, leaseResource, "", admission.Delete, &metav1.DeleteOptions{}, false, mynode),
			err:        "",
		},
		// CSINode
		{
			name:       "disallowed create another node's CSINode",
			attributes: admission.NewAttributesRecord(nodeInfoWrongName, nil, csiNodeKind, nodeInfoWrongName.Namespace, nodeInfoWrongName.Name, csiNodeResource, "", admission.Create, &metav1.CreateOptions{}, false, mynode),
			err:        "forbidden: ",
		},
		{
			name:       "disallowed update another node's CSINode",
			attributes: admission.NewAttributesRecord(nodeInfoWrongName, nodeInfoWrongName, csiNodeKind, nodeInfoWrongName.Namespace, nodeInfoWrongName.Name, csiNodeResource, "", admission.Update, &metav1.UpdateOptions{}, false, mynode),
			err:        "forbidden: ",
		},
		{
			name:       "disallowed delete another node's CSINode",
			attributes: admission.NewAttributesRecord(nil, nil, csiNodeKind, nodeInfoWrongName.Namespace, nodeInfoWrongName.Name, csiNodeResource, "", admission.Delete, &metav1.DeleteOptions{}, false, mynode),
			err:        "forbidden: ",
		},
		{
			name:       "allowed create node CSINode",
			attributes: admission.NewAttributesRecord(nodeInfo, nil, csiNodeKind, nodeInfo.Namespace, nodeInfo.Name, csiNodeResource, "", admission.Create, &metav1.CreateOptions{}, false, mynode),
			err:        "",
		},
		{
			name:       "allowed update node CSINode",
			attributes: admission.NewAttributesRecord(nodeInfo, nodeInfo, csiNodeKind, nodeInfo.Namespace, nodeInfo.Name, csiNodeResource, "", admission.Update, &metav1.UpdateOptions{}, false, mynode),
			err:        "",
		},
		{
			name:       "allowed delete node CSINode",
			attributes: admission.NewAttributesRecord(nil, nil, csiNodeKind, nodeInfo.Namespace, nodeInfo.Name, csiNodeResource, "", admission.Delete, &metav1.UpdateOptions{}, false, mynode),
			err:        "",
		},
		{
			name: "disallowed update CSINode status - feature disabled",
			attributes: admission.NewAttributesRecord(
				&storagev1.CSINode{
					ObjectMeta: metav1.ObjectMeta{Name: "mynode"},
					Spec:       nodeInfo.Spec,
					Status: storagev1.CSINodeStatus{
						StorageHealth: []storagev1.StorageHealth{
							{Name: "com.example.csi/mydriver", HealthConditions: []storagev1.StorageHealthCondition{{Status: storagev1.StorageDegraded, Reason: "DiskSlow"}}},
						},
					},
				},
				nodeInfo,
				csiNodeKind, nodeInfo.Namespace, nodeInfo.Name, csiNodeResource, "status",
				admission.Update, &metav1.UpdateOptions{}, false, mynode),
			err: "CSIVolumeHealth feature gate is disabled",
		},
		{
			name: "allowed update own CSINode status",
			attributes: admission.NewAttributesRecord(
				&storagev1.CSINode{
					ObjectMeta: metav1.ObjectMeta{Name: "mynode"},
					Spec:       nodeInfo.Spec,
					Status: storagev1.CSINodeStatus{
						StorageHealth: []storagev1.StorageHealth{
							{Name: "com.example.csi/mydriver", HealthConditions: []storagev1.StorageHealthCondition{{Status: storagev1.StorageDegraded, Reason: "DiskSlow"}}},
						},
					},
				},
				nodeInfo,
				csiNodeKind, nodeInfo.Namespace, nodeInfo.Name, csiNodeResource, "status",
				admission.Update, &metav1.UpdateOptions{}, false, mynode),
			// gate fixed: upstream runs this with CSIVolumeHealth on and allows it;
			// off, a node may not write CSINode status.
			err: "CSIVolumeHealth feature gate is disabled",
		},
		{
			name: "disallowed update another node's CSINode status",
			attributes: admission.NewAttributesRecord(
				nodeInfoWrongName, nodeInfoWrongName,
				csiNodeKind, nodeInfoWrongName.Namespace, nodeInfoWrongName.Name, csiNodeResource, "status",
				admission.Update, &metav1.UpdateOptions{}, false, mynode),
			// gate fixed: upstream runs this with CSIVolumeHealth on; the name check
			// comes first either way.
			err: "can only access CSINode with the same name as the requesting node",
		},
		{
			name: "disallowed modify CSINode Spec via status",
			attributes: admission.NewAttributesRecord(
				&storagev1.CSINode{
					ObjectMeta: metav1.ObjectMeta{Name: "mynode"},
					Spec: storagev1.CSINodeSpec{
						Drivers: []storagev1.CSINodeDriver{
							{
								Name:         "com.example.csi/evil",
								NodeID:       "evil",
								TopologyKeys: []string{"evil"},
							},
						},
					},
					Status: storagev1.CSINodeStatus{
						StorageHealth: []storagev1.StorageHealth{
							{Name: "com.example.csi/mydriver", HealthConditions: []storagev1.StorageHealthCondition{{Status: storagev1.StorageDegraded, Reason: "DiskSlow"}}},
						},
					},
				},
				nodeInfo,
				csiNodeKind, nodeInfo.Namespace, nodeInfo.Name, csiNodeResource, "status",
				admission.Update, &metav1.UpdateOptions{}, false, mynode),
			// gate fixed: upstream runs this with CSIVolumeHealth on and refuses the
			// spec change; off, the status write is refused outright.
			err: "CSIVolumeHealth feature gate is disabled",
		},
		// CSR
		{
			name:       "allowed CSR create correct node serving",
			attributes: createCSRAttributes("system:node:mynode", certificatesv1.KubeletServingSignerName, true, privKey, mynode),
			err:        "",
		},
		{
			name:       "allowed CSR create correct node client",
			attributes: createCSRAttributes("system:node:mynode", certificatesv1.KubeAPIServerClientKubeletSignerName, true, privKey, mynode),
			err:        "",
		},
		{
			name:       "allowed CSR create non-node CSR",
			attributes: createCSRAttributes("some-other-identity", certificatesv1.KubeAPIServerClientSignerName, true, privKey, mynode),
			err:        "",
		},
		{
			name:       "deny CSR create incorrect node",
			attributes: createCSRAttributes("system:node:othernode", certificatesv1.KubeletServingSignerName, true, privKey, mynode),
			err:        "forbidden: can only create a node CSR with CN=system:node:mynode",
		},
		{
			name:       "allow CSR create incorrect node with feature gate disabled",
			attributes: createCSRAttributes("system:node:othernode", certificatesv1.KubeletServingSignerName, true, privKey, mynode),
			// gate fixed: upstream runs this with
			// AllowInsecureKubeletCertificateSigningRequests on and allows it; off
			// (the default), the CN is checked.
			err: "forbidden: can only create a node CSR with CN=system:node:mynode",
		},
		{
			name:       "deny CSR create invalid",
			attributes: createCSRAttributes("system:node:mynode", certificatesv1.KubeletServingSignerName, false, privKey, mynode),
			err:        "unable to parse csr: asn1: syntax error: sequence truncated",
		},

		// PodCertificateRequest
		{
			name:                 "deny node1 create PCR when feature gate disabled",
			podsGetter:           pcrPods,
			serviceAccountGetter: pcrServiceAccounts,
			nodesGetter:          pcrNodes,
			attributes:           createPCRAttributes(v1PodRequestingPCR.ObjectMeta.Namespace, v1PodRequestingPCR.ObjectMeta.Name, v1PodRequestingPCR.ObjectMeta.UID, v1PodRequestingPCR.Spec.ServiceAccountName, "", pcrNode1.ObjectMeta.Name, pcrNode1.ObjectMeta.UID, pcrNode1UserInfo),
			// gate fixed: upstream runs this with PodCertificateRequest off and
			// refuses it for that; on, the empty service account UID is caught.
			err:   `names service account UID "", which differs from the running service account ("pcr-sa-uid")`,
			authz: &uncallableAuthorizer{},
		},
		{
			name:                 "allow node1 create PCR that references pod on node1",
			podsGetter:           pcrPods,
			serviceAccountGetter: pcrServiceAccounts,
			nodesGetter:          pcrNodes,
			attributes:           createPCRAttributes(v1PodRequestingPCR.ObjectMeta.Namespace, v1PodRequestingPCR.ObjectMeta.Name, v1PodRequestingPCR.ObjectMeta.UID, pcrSA.ObjectMeta.Name, pcrSA.ObjectMeta.UID, pcrNode1.ObjectMeta.Name, pcrNode1.ObjectMeta.UID, pcrNode1UserInfo),
			authz:                &uncallableAuthorizer{},
		},
		{
			name:                 "deny create node2 create PCR that references pod on node1",
			podsGetter:           pcrPods,
			serviceAccountGetter: pcrServiceAccounts,
			nodesGetter:          pcrNodes,
			attributes:           createPCRAttributes(v1PodRequestingPCR.ObjectMeta.Namespace, v1PodRequestingPCR.ObjectMeta.Name, v1PodRequestingPCR.ObjectMeta.UID, pcrSA.ObjectMeta.Name, pcrSA.ObjectMeta.UID, pcrNode1.ObjectMeta.Name, pcrNode1.ObjectMeta.UID, pcrNode2UserInfo),
			authz:                &uncallableAuthorizer{},
			err:                  `PodCertificateRequest.Spec.NodeName="pcr-node-1", which is not the requesting node "pcr-node-2"`,
		},
		{
			name:                 "deny node1 create PCR that references nonexistent pod",
			podsGetter:           pcrPods,
			serviceAccountGetter: pcrServiceAccounts,
			nodesGetter:          pcrNodes,
			attributes:           createPCRAttributes("ns", "nonexistent-pod", "nonexistent-pod-uid", pcrSA.ObjectMeta.Name, pcrSA.ObjectMeta.UID, pcrNode1.ObjectMeta.Name, pcrNode1.ObjectMeta.UID, pcrNode1UserInfo),
			authz:                &uncallableAuthorizer{},
			err:                  `pod "nonexistent-pod" not found`,
		},
		{
			name:                 "deny node1 create PCR that references nonexistent sa",
			podsGetter:           pcrPods,
			serviceAccountGetter: pcrServiceAccounts,
			nodesGetter:          pcrNodes,
			attributes:           createPCRAttributes(v1PodRequestingPCR.ObjectMeta.Namespace, v1PodRequestingPCR.ObjectMeta.Name, v1PodRequestingPCR.ObjectMeta.UID, "nonexistent-sa", "nonexistent-sa-uid", pcrNode1.ObjectMeta.Name, pcrNode1.ObjectMeta.UID, pcrNode1UserInfo),
			authz:                &uncallableAuthorizer{},
			err:                  `PodCertificateRequest for pod "ns/pcrpod" contains serviceAccountName ("nonexistent-sa") that differs from running pod ("pcr-sa")`,
		},
		{
			name:                 "deny node1 create PCR that references nonexistent node",
			podsGetter:           pcrPods,
			serviceAccountGetter: pcrServiceAccounts,
			nodesGetter:          pcrNodes,
			attributes:           createPCRAttributes(v1PodRequestingPCR.ObjectMeta.Namespace, v1PodRequestingPCR.ObjectMeta.Name, v1PodRequestingPCR.ObjectMeta.UID, pcrSA.ObjectMeta.Name, pcrSA.ObjectMeta.UID, "nonexistent-node", "nonexistent-node-uid", pcrNode1UserInfo),
			authz:                &uncallableAuthorizer{},
			err:                  `PodCertificateRequest.Spec.NodeName="nonexistent-node", which is not the requesting node "pcr-node-1"`,
		},
		{
			name:                 "deny node1 create PCR with mismatched pod UID",
			podsGetter:           pcrPods,
			serviceAccountGetter: pcrServiceAccounts,
			nodesGetter:          pcrNodes,
			attributes:           createPCRAttributes(v1PodRequestingPCR.ObjectMeta.Namespace, v1PodRequestingPCR.ObjectMeta.Name, "wrong-uid", pcrSA.ObjectMeta.Name, pcrSA.ObjectMeta.UID, pcrNode1.ObjectMeta.Name, pcrNode1.ObjectMeta.UID, pcrNode1UserInfo),
			authz:                &uncallableAuthorizer{},
			err:                  `PodCertificateRequest for pod "ns/pcrpod" contains pod UID ("wrong-uid") which differs from running pod "pod-uid"`,
		},
		{
			name:                 "deny node1 create PCR with mismatched SA UID",
			podsGetter:           pcrPods,
			serviceAccountGetter: pcrServiceAccounts,
			nodesGetter:          pcrNodes,
			attributes: createPCRAttributes(
				v1PodRequestingPCR.ObjectMeta.Namespace,
				v1PodRequestingPCR.ObjectMeta.Name,
				v1PodRequestingPCR.ObjectMeta.UID,
				pcrSA.ObjectMeta.Name,
				"wrong-uid",
				pcrNode1.ObjectMeta.Name,
				pcrNode1.ObjectMeta.UID,
				pcrNode1UserInfo,
			),
			authz: &uncallableAuthorizer{},
			err:   `PodCertificateRequest for pod "ns/pcrpod" names service account UID "wrong-uid", which differs from the running service account ("pcr-sa-uid")`,
		},
		{
			name:                 "deny node1 create PCR with mismatched node UID",
			podsGetter:           pcrPods,
			serviceAccountGetter: pcrServiceAccounts,
			nodesGetter:          pcrNodes,
			attributes: createPCRAttributes(
				v1PodRequestingPCR.ObjectMeta.Namespace,
				v1PodRequestingPCR.ObjectMeta.Name,
				v1PodRequestingPCR.ObjectMeta.UID,
				pcrSA.ObjectMeta.Name,
				pcrSA.ObjectMeta.UID,
				pcrNode1.ObjectMeta.Name,
				"wrong-uid",
				pcrNode1UserInfo,
			),
			authz: &uncallableAuthorizer{},
			err:   `PodCertificateRequest for pod "ns/pcrpod" names node UID "wrong-uid", inconsistent with the running node ("pcr-node-1-uid")`,
		},
		{
			name:                 "deny node1 create PCR for pod without podCertificate volume",
			podsGetter:           pcrPods,
			serviceAccountGetter: pcrServiceAccounts,
			nodesGetter:          pcrNodes,
			attributes:           createPCRAttributes(v1PodNoPCRVolume.ObjectMeta.Namespace, v1PodNoPCRVolume.ObjectMeta.Name, v1PodNoPCRVolume.ObjectMeta.UID, pcrSA.ObjectMeta.Name, pcrSA.ObjectMeta.UID, pcrNode1.ObjectMeta.Name, pcrNode1.ObjectMeta.UID, pcrNode1UserInfo),
			authz: &fakeAuthorizer{
				t:          t,
				userName:   "system:node:" + pcrNode1.ObjectMeta.Name,
				groups:     []string{"system:nodes"},
				verb:       "request-serviceaccounts-podcertificate-signer",
				apiGroup:   "certificates.k8s.io",
				apiVersion: "v1",
				resource:   "example.com:foo",
				namespace:  v1PodNoPCRVolume.ObjectMeta.Namespace,
				name:       pcrSA.ObjectMeta.Name,
				decision:   authorizer.DecisionDeny,
			},
			err: `pod "ns/pcrpod-novolume" does not mount a podCertificate projected volume for signer "example.com/foo"`,
		},
		{
			name:                 "deny node1 create PCR for pod without podCertificate volume",
			podsGetter:           pcrPods,
			serviceAccountGetter: pcrServiceAccounts,
			nodesGetter:          pcrNodes,
			attributes:           createPCRAttributes(v1PodNoPCRVolume.ObjectMeta.Namespace, v1PodNoPCRVolume.ObjectMeta.Name, v1PodNoPCRVolume.ObjectMeta.UID, pcrSA.ObjectMeta.Name, pcrSA.ObjectMeta.UID, pcrNode1.ObjectMeta.Name, pcrNode1.ObjectMeta.UID, pcrNode1UserInfo),
			authz: &fakeAuthorizer{
				t:          t,
				userName:   "system:node:" + pcrNode1.ObjectMeta.Name,
				groups:     []string{"system:nodes"},
				verb:       "request-serviceaccounts-podcertificate-signer",
				apiGroup:   "certificates.k8s.io",
				apiVersion: "v1",
				resource:   "example.com:foo",
				namespace:  v1PodNoPCRVolume.ObjectMeta.Namespace,
				name:       pcrSA.ObjectMeta.Name,
				decision:   authorizer.DecisionNoOpinion,
			},
			err: `pod "ns/pcrpod-novolume" does not mount a podCertificate projected volume for signer "example.com/foo"`,
		},
		{
			name:                 "deny node1 create PCR for pod with podCertificate volume for wrong signer",
			podsGetter:           pcrPods,
			serviceAccountGetter: pcrServiceAccounts,
			nodesGetter:          pcrNodes,
			attributes:           createPCRAttributes(v1PodWrongSignerPCRVolume.ObjectMeta.Namespace, v1PodWrongSignerPCRVolume.ObjectMeta.Name, v1PodWrongSignerPCRVolume.ObjectMeta.UID, pcrSA.ObjectMeta.Name, pcrSA.ObjectMeta.UID, pcrNode1.ObjectMeta.Name, pcrNode1.ObjectMeta.UID, pcrNode1UserInfo),
			authz: &fakeAuthorizer{
				t:          t,
				userName:   "system:node:" + pcrNode1.ObjectMeta.Name,
				groups:     []string{"system:nodes"},
				verb:       "request-serviceaccounts-podcertificate-signer",
				apiGroup:   "certificates.k8s.io",
				apiVersion: "v1",
				resource:   "example.com:foo",
				namespace:  v1PodWrongSignerPCRVolume.ObjectMeta.Namespace,
				name:       pcrSA.ObjectMeta.Name,
				decision:   authorizer.DecisionDeny,
			},
			err: `pod "ns/pcrpod-wrongsigner" does not mount a podCertificate projected volume for signer "example.com/foo"`,
		},
		{
			name:                 "allow node1 create PCR for pod without podCertificate volume when bypass is granted",
			podsGetter:           pcrPods,
			serviceAccountGetter: pcrServiceAccounts,
			nodesGetter:          pcrNodes,
			attributes:           createPCRAttributes(v1PodNoPCRVolume.ObjectMeta.Namespace, v1PodNoPCRVolume.ObjectMeta.Name, v1PodNoPCRVolume.ObjectMeta.UID, pcrSA.ObjectMeta.Name, pcrSA.ObjectMeta.UID, pcrNode1.ObjectMeta.Name, pcrNode1.ObjectMeta.UID, pcrNode1UserInfo),
			authz: &fakeAuthorizer{
				t:          t,
				userName:   "system:node:" + pcrNode1.ObjectMeta.Name,
				groups:     []string{"system:nodes"},
				verb:       "request-serviceaccounts-podcertificate-signer",
				apiGroup:   "certificates.k8s.io",
				apiVersion: "v1",
				resource:   "example.com:foo",
				namespace:  v1PodNoPCRVolume.ObjectMeta.Namespace,
				name:       pcrSA.ObjectMeta.Name,
				decision:   authorizer.DecisionAllow,
			},
		},
	}
	for _, tt := range tests {
		if tt.nodesGetter == nil {
			tt.nodesGetter = existingNodes
		}

		tt.run(t)
	}
}

func Test_nodePlugin_Admit_OwnerReference(t *testing.T) {
	expectedNodeIndex := cache.NewIndexer(cache.MetaNamespaceKeyFunc, nil)
	expectedNodeIndex.Add(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "mynode", UID: "mynode-uid"}})
	expectedNode := corev1lister.NewNodeLister(expectedNodeIndex)

	unexpectedNodeIndex := cache.NewIndexer(cache.MetaNamespaceKeyFunc, nil)
	unexpectedNodeIndex.Add(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "mynode", UID: "mynode-unexpected-uid"}})
	unexpectedNode := corev1lister.NewNodeLister(unexpectedNodeIndex)

	noNodesIndex := cache.NewIndexer(cache.MetaNamespaceKeyFunc, nil)
	noNodes := corev1lister.NewNodeLister(noNodesIndex)

	noExistingPodsIndex := cache.NewIndexer(cache.MetaNamespaceKeyFunc, nil)
	noExistingPods := corev1lister.NewPodLister(noExistingPodsIndex)

	mynode := &user.DefaultInfo{Name: "system:node:mynode", Groups: []string{"system:nodes"}}
	validOwner := metav1.OwnerReference{
		APIVersion: "v1",
		Kind:       "Node",
		Name:       "mynode",
		UID:        "mynode-uid",
		Controller: ptr.To(true),
	}
	invalidName := validOwner
	invalidName.Name = "other"
	invalidKind := validOwner
	invalidKind.Kind = "Pod"
	invalidAPI := validOwner
	invalidAPI.APIVersion = "v2"
	invalidControllerNil := validOwner
	invalidControllerNil.Controller = nil
	invalidControllerFalse := validOwner
	invalidControllerFalse.Controller = ptr.To(false)
	invalidBlockDeletion := validOwner
	invalidBlockDeletion.BlockOwnerDeletion = ptr.To(true)

	tests := []struct {
		name        string
		owners      []metav1.OwnerReference
		nodesGetter corev1lister.NodeLister
		expectErr   string
	}{
		{
			name:      "no owner",
			owners:    nil,
			expectErr: "pods \"test\" is forbidden: node \"mynode\" can only create pods with an owner reference set to itself",
		},
		{
			name:   "valid owner",
			owners: []metav1.OwnerReference{validOwner},
		},
		{
			name:      "duplicate owner",
			owners:    []metav1.OwnerReference{validOwner, validOwner},
			expectErr: "can only create pods with a single owner reference set to itself",
		},
		{
			name:      "invalid name",
			owners:    []metav1.OwnerReference{invalidName},
			expectErr: "can only create pods with an owner reference set to itself",
		},
		{
			name:        "invalid UID",
			owners:      []metav1.OwnerReference{validOwner},
			nodesGetter: unexpectedNode,
			expectErr:   "UID mismatch",
		},
		{
			name:        "node not found",
			owners:      []metav1.OwnerReference{validOwner},
			nodesGetter: noNodes,
			expectErr:   "not found",
		},
		{
			name:      "invalid API version",
			owners:    []metav1.OwnerReference{invalidAPI},
			expectErr: "can only create pods with an owner reference set to itself",
		},
		{
			name:      "invalid kind",
			owners:    []metav1.OwnerReference{invalidKind},
			expectErr: "can only create pods with an owner reference set to itself",
		},
		{
			name:      "nil controller",
			owners:    []metav1.OwnerReference{invalidControllerNil},
			expectErr: "can only create pods with a controller owner reference set to itself",
		},
		{
			name:      "false controller",
			owners:    []metav1.OwnerReference{invalidControllerFalse},
			expectErr: "can only create pods with a controller owner reference set to itself",
		},
		{
			name:      "invalid blockOwnerDeletion",
			owners:    []metav1.OwnerReference{invalidBlockDeletion},
			expectErr: "must not set blockOwnerDeletion on an owner reference",
		},
	}

	for _, test := range tests {
		if test.nodesGetter == nil {
			test.nodesGetter = expectedNode
		}

		pod, _ := makeTestPod("ns", "test", "mynode", true)
		pod.OwnerReferences = test.owners
		a := &admitTestCase{
			name:        test.name,
			podsGetter:  noExistingPods,
			nodesGetter: test.nodesGetter,
			attributes:  createPodAttributes(pod, mynode),
			err:         test.expectErr,
		}
		a.run(t)
	}
}

func Test_getModifiedLabels(t *testing.T) {
	tests := []struct {
		name string
		a    map[string]string
		b    map[string]string
		want sets.String
	}{
		{
			name: "empty",
			a:    nil,
			b:    nil,
			want: sets.NewString(),
		},
		{
			name: "no change",
			a:    map[string]string{"x": "1", "y": "2", "z": "3"},
			b:    map[string]string{"x": "1", "y": "2", "z": "3"},
			want: sets.NewString(),
		},
		{
			name: "added",
			a:    map[string]string{},
			b:    map[string]string{"a": "0"},
			want: sets.NewString("a"),
		},
		{
			name: "removed",
			a:    map[string]string{"z": "3"},
			b:    map[string]string{},
			want: sets.NewString("z"),
		},
		{
			name: "changed",
			a:    map[string]string{"z": "3"},
			b:    map[string]string{"z": "4"},
			want: sets.NewString("z"),
		},
		{
			name: "added empty",
			a:    map[string]string{},
			b:    map[string]string{"a": ""},
			want: sets.NewString("a"),
		},
		{
			name: "removed empty",
			a:    map[string]string{"z": ""},
			b:    map[string]string{},
			want: sets.NewString("z"),
		},
		{
			name: "changed to empty",
			a:    map[string]string{"z": "3"},
			b:    map[string]string{"z": ""},
			want: sets.NewString("z"),
		},
		{
			name: "changed from empty",
			a:    map[string]string{"z": ""},
			b:    map[string]string{"z": "3"},
			want: sets.NewString("z"),
		},
		{
			name: "added, removed, and changed",
			a:    map[string]string{"a": "1", "b": "2"},
			b:    map[string]string{"a": "2", "c": "3"},
			want: sets.NewString("a", "b", "c"),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := getModifiedLabels(tt.a, tt.b); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("getModifiedLabels() = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestAdmitPVCStatus(t *testing.T) {
	expectedNodeIndex := cache.NewIndexer(cache.MetaNamespaceKeyFunc, nil)
	expectedNodeIndex.Add(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "mynode", UID: "mynode-uid"}})
	expectedNode := corev1lister.NewNodeLister(expectedNodeIndex)
	noExistingPodsIndex := cache.NewIndexer(cache.MetaNamespaceKeyFunc, nil)
	noExistingPods := corev1lister.NewPodLister(noExistingPodsIndex)
	mynode := &user.DefaultInfo{Name: "system:node:mynode", Groups: []string{"system:nodes"}}

	nodeExpansionFailed := corev1.PersistentVolumeClaimNodeResizeInfeasible

	tests := []struct {
		name                    string
		resource                schema.GroupVersionResource
		subresource             string
		newObj                  runtime.Object
		oldObj                  runtime.Object
		expansionFeatureEnabled bool
		expectError             string
	}{
		{
			name: "should not allow full pvc update from nodes",
			oldObj: makeTestPVC(
				corev1.PersistentVolumeClaimResizing,
				"10G", nil,
			),
			subresource: "",
			newObj: makeTestPVC(
				"", "10G", nil,
			),
			expectError: "is forbidden: may only update PVC status",
		},
		{
			name: "should allow capacity and condition updates, if expansion is enabled",
			oldObj: makeTestPVC(
				corev1.PersistentVolumeClaimResizing,
				"10G", nil,
			),
			expansionFeatureEnabled: true,
			subresource:             "status",
			newObj: makeTestPVC(
				corev1.PersistentVolumeClaimFileSystemResizePending,
				"10G", nil,
			),
			expectError: "",
		},
		{
			name: "should not allow updates to allocatedResources with just expansion enabled",
			oldObj: makeTestPVC(
				corev1.PersistentVolumeClaimResizing,
				"10G", nil,
			),
			subresource:             "status",
			expansionFeatureEnabled: true,
			newObj: makeTestPVC(
				corev1.PersistentVolumeClaimFileSystemResizePending,
				"15G", nil,
			),
			// gate fixed: upstream runs this with RecoverVolumeExpansionFailure
			// off and refuses it; on (GA), allocatedResources may change.
			expectError: "",
		},
		{
			name: "should allow updates to allocatedResources with expansion and recovery enabled",
			oldObj: makeTestPVC(
				corev1.PersistentVolumeClaimResizing,
				"10G", nil,
			),
			subresource:             "status",
			expansionFeatureEnabled: true,
			newObj: makeTestPVC(
				corev1.PersistentVolumeClaimFileSystemResizePending,
				"15G", nil,
			),
			expectError: "",
		},
		{
			name: "should allow updates to resizeStatus with expansion and recovery enabled",
			oldObj: makeTestPVC(
				corev1.PersistentVolumeClaimResizing,
				"10G", nil,
			),
			subresource:             "status",
			expansionFeatureEnabled: true,
			newObj: makeTestPVC(
				corev1.PersistentVolumeClaimResizing,
				"10G", &nodeExpansionFailed,
			),
			expectError: "",
		},
	}

	for i := range tests {
		test := tests[i]
		t.Run(test.name, func(t *testing.T) {
			operation := admission.Update
			apiResource := corev1.SchemeGroupVersion.WithResource("persistentvolumeclaims")
			attributes := admission.NewAttributesRecord(
				test.newObj, test.oldObj, schema.GroupVersionKind{},
				metav1.NamespaceDefault, "foo", apiResource, test.subresource, operation, &metav1.CreateOptions{}, false, mynode)
			a := &admitTestCase{
				name:        test.name,
				podsGetter:  noExistingPods,
				nodesGetter: expectedNode,
				attributes:  attributes,
				err:         test.expectError,
			}
			a.run(t)
		})

	}
}

func makeTestPVC(
	condition corev1.PersistentVolumeClaimConditionType,
	allocatedResources string,
	resizeStatus *corev1.ClaimResourceStatus) *corev1.PersistentVolumeClaim {
	pvc := &corev1.PersistentVolumeClaim{
		Spec: corev1.PersistentVolumeClaimSpec{
			VolumeName: "volume1",
			Resources: corev1.VolumeResourceRequirements{
				Requests: corev1.ResourceList{
					corev1.ResourceStorage: resource.MustParse("10G"),
				},
			},
		},
		Status: corev1.PersistentVolumeClaimStatus{
			Capacity: corev1.ResourceList{
				corev1.ResourceStorage: resource.MustParse(allocatedResources),
			},
			Phase: corev1.ClaimBound,
			AllocatedResources: corev1.ResourceList{
				corev1.ResourceStorage: resource.MustParse(allocatedResources),
			},
		},
	}
	if resizeStatus != nil {
		claimStatusMap := map[corev1.ResourceName]corev1.ClaimResourceStatus{
			corev1.ResourceStorage: *resizeStatus,
		}
		pvc.Status.AllocatedResourceStatuses = claimStatusMap
	}

	if len(condition) > 0 {
		pvc.Status.Conditions = []corev1.PersistentVolumeClaimCondition{
			{
				Type:   condition,
				Status: corev1.ConditionTrue,
			},
		}
	}

	return pvc
}

func createPodAttributes(pod *corev1.Pod, user user.Info) admission.Attributes {
	podResource := corev1.Resource("pods").WithVersion("v1")
	podKind := corev1.SchemeGroupVersion.WithKind("Pod")
	return admission.NewAttributesRecord(pod, nil, podKind, pod.Namespace, pod.Name, podResource, "", admission.Create, &metav1.CreateOptions{}, false, user)
}

func createCSRAttributes(cn, signer string, validCsr bool, key any, user user.Info) admission.Attributes {
	csrResource := certificatesv1.Resource("certificatesigningrequests").WithVersion("v1")
	csrKind := certificatesv1.SchemeGroupVersion.WithKind("CertificateSigningRequest")

	csrPem := []byte("-----BEGIN CERTIFICATE REQUEST-----\n-----END CERTIFICATE REQUEST-----")
	if validCsr {
		structuredCsr := x509.CertificateRequest{
			Subject: pkix.Name{
				CommonName: cn,
			},
		}
		csrDer, _ := x509.CreateCertificateRequest(rand.Reader, &structuredCsr, key)
		csrPem = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: csrDer})
	}

	csreq := &certificatesv1.CertificateSigningRequest{
		Spec: certificatesv1.CertificateSigningRequestSpec{
			Request:    csrPem,
			SignerName: signer,
		},
	}
	return admission.NewAttributesRecord(csreq, nil, csrKind, "", "", csrResource, "", admission.Create, &metav1.CreateOptions{}, false, user)
}

func createPCRAttributes(namespace string, podName string, podUID types.UID, serviceAccountName string, serviceAccountUID types.UID, nodeName string, nodeUID types.UID, user user.Info) admission.Attributes {
	pcrResource := certificatesv1.SchemeGroupVersion.WithResource("podcertificaterequests")
	pcrKind := certificatesv1.SchemeGroupVersion.WithKind("PodCertificateRequest")

	pcr := &certificatesv1.PodCertificateRequest{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: namespace,
			Name:      "foo",
		},
		Spec: certificatesv1.PodCertificateRequestSpec{
			SignerName:         "example.com/foo",
			PodName:            podName,
			PodUID:             types.UID(podUID),
			ServiceAccountName: serviceAccountName,
			ServiceAccountUID:  types.UID(serviceAccountUID),
			NodeName:           types.NodeName(nodeName),
			NodeUID:            types.UID(nodeUID),
			// Leave PKIXPublicKey and ProofOfPossession nil, since we're not
			// actually running validation.
		},
	}

	return admission.NewAttributesRecord(
		pcr,
		nil,
		pcrKind,
		pcr.ObjectMeta.Namespace,
		pcr.ObjectMeta.Name,
		pcrResource,
		"",
		admission.Create,
		&metav1.CreateOptions{},
		false,
		user,
	)
}

func TestAdmitResourceSlice(t *testing.T) {
	apiResource := resourcev1.SchemeGroupVersion.WithResource("resourceslices")
	nodename := "mynode"
	mynode := &user.DefaultInfo{Name: "system:node:" + nodename, Groups: []string{"system:nodes"}}
	createErr := "can only create ResourceSlice with the same NodeName as the requesting node"
	deleteErr := "can only delete ResourceSlice with the same NodeName as the requesting node"

	sliceNode := &resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{
			Name: "something",
		},
		Spec: resourcev1.ResourceSliceSpec{
			NodeName: ptr.To(nodename),
		},
	}
	sliceOtherNode := &resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{
			Name: "something",
		},
		Spec: resourcev1.ResourceSliceSpec{
			NodeName: ptr.To(nodename + "-other"),
		},
	}
	sliceNoNode := &resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{
			Name: "something",
		},
		Spec: resourcev1.ResourceSliceSpec{
			NodeName: nil,
		},
	}

	tests := map[string]struct {
		operation      admission.Operation
		options        runtime.Object
		obj, oldObj    runtime.Object
		featureEnabled bool
		expectError    string
	}{
		"create allowed, enabled": {
			operation:      admission.Create,
			options:        &metav1.CreateOptions{},
			obj:            sliceNode,
			featureEnabled: true,
			expectError:    "",
		},
		"create disallowed, enabled": {
			operation:      admission.Create,
			options:        &metav1.CreateOptions{},
			obj:            sliceOtherNode,
			featureEnabled: true,
			expectError:    createErr,
		},
		"create disallowed, no node name, enabled": {
			operation:      admission.Create,
			options:        &metav1.CreateOptions{},
			obj:            sliceNoNode,
			featureEnabled: true,
			expectError:    createErr,
		},
		"create allowed, disabled": {
			operation:      admission.Create,
			options:        &metav1.CreateOptions{},
			obj:            sliceNode,
			featureEnabled: false,
			expectError:    "",
		},
		"create disallowed, disabled": {
			operation:      admission.Create,
			options:        &metav1.CreateOptions{},
			obj:            sliceOtherNode,
			featureEnabled: false,
			expectError:    createErr,
		},
		"create disallowed, no node name, disabled": {
			operation:      admission.Create,
			options:        &metav1.CreateOptions{},
			obj:            sliceNoNode,
			featureEnabled: false,
			expectError:    createErr,
		},
		"update allowed, same node": {
			operation:      admission.Update,
			options:        &metav1.UpdateOptions{},
			obj:            sliceNode,
			featureEnabled: true,
			expectError:    "",
		},
		"update allowed, other node": {
			operation:      admission.Update,
			options:        &metav1.UpdateOptions{},
			obj:            sliceOtherNode,
			featureEnabled: true,
			expectError:    "",
		},
		"update allowed, no node": {
			operation:      admission.Update,
			options:        &metav1.UpdateOptions{},
			obj:            sliceNoNode,
			featureEnabled: true,
			expectError:    "",
		},
		"delete allowed, enabled": {
			operation:      admission.Delete,
			options:        &metav1.DeleteOptions{},
			oldObj:         sliceNode,
			featureEnabled: true,
			expectError:    "",
		},
		"delete disallowed, enabled": {
			operation:      admission.Delete,
			options:        &metav1.DeleteOptions{},
			oldObj:         sliceOtherNode,
			featureEnabled: true,
			expectError:    deleteErr,
		},
		"delete disallowed, no node name, enabled": {
			operation:      admission.Delete,
			options:        &metav1.DeleteOptions{},
			oldObj:         sliceNoNode,
			featureEnabled: true,
			expectError:    deleteErr,
		},
		"delete allowed, disabled": {
			operation:      admission.Delete,
			options:        &metav1.DeleteOptions{},
			oldObj:         sliceNode,
			featureEnabled: false,
			expectError:    "",
		},
		"delete disallowed, disabled": {
			operation:      admission.Delete,
			options:        &metav1.DeleteOptions{},
			oldObj:         sliceOtherNode,
			featureEnabled: false,
			expectError:    deleteErr,
		},
		"delete disallowed, no node name, disabled": {
			operation:      admission.Delete,
			options:        &metav1.DeleteOptions{},
			oldObj:         sliceNoNode,
			featureEnabled: false,
			expectError:    deleteErr,
		},
	}

	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			attributes := admission.NewAttributesRecord(
				test.obj, test.oldObj, schema.GroupVersionKind{},
				"", "foo", apiResource, "", test.operation, test.options, false, mynode)
			// DynamicResourceAllocation is fixed on (GA, locked), but no check
			// depends on it, upstream neither: featureEnabled no longer matters.
			a := &admitTestCase{
				name:       name,
				attributes: attributes,
				err:        test.expectError,
			}
			a.run(t)
		})

	}
}

func checkNilError(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("unexpected error: %v", err)
	}
}

// An authorizer that fails the test if it is called.  Some flows through the
// noderestriction admission plugin are expected not to make authorization
// checks, use this implementation to enforce that.
type uncallableAuthorizer struct {
	t *testing.T
}

var _ authorizer.UnconditionalAuthorizer = (*uncallableAuthorizer)(nil)

func (f *uncallableAuthorizer) Authorize(ctx context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	f.t.Errorf("the admission logic called the authorizer when it was not supposed to")
	return authorizer.DecisionNoOpinion, "", nil
}

type fakeAuthorizer struct {
	t        *testing.T
	userName string
	groups   []string

	verb string

	apiGroup   string
	apiVersion string

	resource  string
	namespace string
	name      string

	decision authorizer.Decision
	err      error

	alreadyCalled bool
}

var _ authorizer.UnconditionalAuthorizer = (*fakeAuthorizer)(nil)

func (f *fakeAuthorizer) Authorize(ctx context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	if f.alreadyCalled {
		f.t.Errorf("authorizer called more than once; the admission logic should call the authorizer at most once")
		return authorizer.DecisionNoOpinion, "", nil
	}
	f.alreadyCalled = true

	if f.err != nil {
		return f.decision, "forced error", f.err
	}

	expectedAttrs := authorizer.AttributesRecord{
		User:       &user.DefaultInfo{Name: f.userName, Groups: f.groups},
		Verb:       f.verb,
		Namespace:  f.namespace,
		APIGroup:   f.apiGroup,
		APIVersion: f.apiVersion,
		Resource:   f.resource,
		Name:       f.name,

		ResourceRequest: true,
	}

	if !reflect.DeepEqual(expectedAttrs, a) {
		f.t.Errorf("unexpected authorizer attributes:\ngot  %#v\nwant %#v", a, expectedAttrs)
	}

	return f.decision, "", nil
}

type saAuthorizerBuilder struct {
	t                  *testing.T
	serviceAccountName string
	namespace          string
	requestAudience    string
	decision           authorizer.Decision
	err                error
}

func (s saAuthorizerBuilder) build() *fakeAuthorizer {
	return &fakeAuthorizer{
		t: s.t,

		userName: "system:node:mynode",
		groups:   []string{"system:nodes"},

		verb: "request-serviceaccounts-token-audience",

		apiGroup:   "",
		apiVersion: "v1",

		resource:  s.requestAudience,
		namespace: s.namespace,
		name:      s.serviceAccountName,

		decision: s.decision,
		err:      s.err,
	}
}
