package noderestriction

// Tests kubestore adds to the ported upstream ones: they cover what the port
// changed (the helpers rewritten for core/v1, the CSI driver translation, the
// constructor) and checks upstream's table does not reach.

import (
	"context"
	"strings"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1beta1 "k8s.io/api/policy/v1beta1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/authentication/user"
	corev1lister "k8s.io/client-go/listers/core/v1"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

func TestNewValidateInitializationAndHandles(t *testing.T) {
	idx := func() cache.Indexer { return cache.NewIndexer(cache.MetaNamespaceKeyFunc, nil) }
	pods := corev1lister.NewPodLister(idx())
	nodes := corev1lister.NewNodeLister(idx())
	sas := corev1lister.NewServiceAccountLister(idx())
	drivers := storagelisters.NewCSIDriverLister(idx())
	pvcs := corev1lister.NewPersistentVolumeClaimLister(idx())
	pvs := corev1lister.NewPersistentVolumeLister(idx())
	authz := &uncallableAuthorizer{t: t}

	if err := New(pods, nodes, sas, drivers, pvcs, pvs, authz).ValidateInitialization(); err != nil {
		t.Errorf("ValidateInitialization() = %v, want nil", err)
	}
	for name, p := range map[string]*Plugin{
		"pod":             New(nil, nodes, sas, drivers, pvcs, pvs, authz),
		"node":            New(pods, nil, sas, drivers, pvcs, pvs, authz),
		"service account": New(pods, nodes, nil, drivers, pvcs, pvs, authz),
		"CSI driver":      New(pods, nodes, sas, nil, pvcs, pvs, authz),
		"PVC":             New(pods, nodes, sas, drivers, nil, pvs, authz),
		"PV":              New(pods, nodes, sas, drivers, pvcs, nil, authz),
		"an authorizer":   New(pods, nodes, sas, drivers, pvcs, pvs, nil),
	} {
		err := p.ValidateInitialization()
		if err == nil || !strings.Contains(err.Error(), "requires a "+name) && !strings.Contains(err.Error(), "requires "+name) {
			t.Errorf("without %s: ValidateInitialization() = %v", name, err)
		}
	}

	p := New(pods, nodes, sas, drivers, pvcs, pvs, authz)
	for op, want := range map[admission.Operation]bool{admission.Create: true, admission.Update: true, admission.Delete: true, admission.Connect: false} {
		if got := p.Handles(op); got != want {
			t.Errorf("Handles(%s) = %v, want %v", op, got, want)
		}
	}
}

func TestValidateExtraCases(t *testing.T) {
	mynode := &user.DefaultInfo{Name: "system:node:mynode", Groups: []string{"system:nodes"}}
	podResource := corev1.SchemeGroupVersion.WithResource("pods")
	podKind := corev1.SchemeGroupVersion.WithKind("Pod")
	nodeResource := corev1.SchemeGroupVersion.WithResource("nodes")
	nodeKind := corev1.SchemeGroupVersion.WithKind("Node")

	podsIndex := cache.NewIndexer(cache.MetaNamespaceKeyFunc, nil)
	pods := corev1lister.NewPodLister(podsIndex)
	_, mypod := makeTestPod("ns", "mypod", "mynode", false)
	_, otherpod := makeTestPod("ns", "otherpod", "othernode", false)
	checkNilError(t, podsIndex.Add(mypod))
	checkNilError(t, podsIndex.Add(otherpod))

	claimStatusPod := mypod.DeepCopy()
	claimStatusPod.Status.ResourceClaimStatuses = []corev1.PodResourceClaimStatus{{Name: "claim", ResourceClaimName: ptr.To("generated")}}

	withoutNodeGroup := &user.DefaultInfo{Name: "system:node:mynode"}
	noName := &user.DefaultInfo{Name: "system:node:", Groups: []string{"system:nodes"}}

	csiPVCsIndex := cache.NewIndexer(cache.MetaNamespaceKeyFunc, nil)
	csiPVsIndex := cache.NewIndexer(cache.MetaNamespaceKeyFunc, nil)
	csiDriversIndex := cache.NewIndexer(cache.MetaNamespaceKeyFunc, nil)
	checkNilError(t, csiDriversIndex.Add(&storagev1.CSIDriver{
		ObjectMeta: metav1.ObjectMeta{Name: "ebs.csi.aws.com"},
		Spec:       storagev1.CSIDriverSpec{TokenRequests: []storagev1.TokenRequest{{Audience: "foo"}}},
	}))
	checkNilError(t, csiPVCsIndex.Add(&corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "ebs-claim", Namespace: "ns"},
		Spec:       corev1.PersistentVolumeClaimSpec{VolumeName: "ebs-pv"},
	}))
	checkNilError(t, csiPVsIndex.Add(&corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "ebs-pv"},
		Spec: corev1.PersistentVolumeSpec{PersistentVolumeSource: corev1.PersistentVolumeSource{
			AWSElasticBlockStore: &corev1.AWSElasticBlockStoreVolumeSource{VolumeID: "aws://zone/not-a-volume"},
		}},
	}))
	_, ebsPod := makeTestPod("ns", "ebspod", "mynode", false)
	ebsPod.Spec.Volumes = []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "ebs-claim"}}}}
	checkNilError(t, podsIndex.Add(ebsPod))

	tokenFor := func(pod *corev1.Pod) *authenticationv1.TokenRequest {
		return &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
			Audiences:      []string{"foo"},
			BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
		}}
	}
	svcacctResource := corev1.SchemeGroupVersion.WithResource("serviceaccounts")
	tokenrequestKind := corev1.SchemeGroupVersion.WithKind("TokenRequest")

	tests := []admitTestCase{
		{
			name:       "forbid pod ephemeralcontainers subresource",
			podsGetter: pods,
			attributes: admission.NewAttributesRecord(mypod, mypod, podKind, "ns", "mypod", podResource, "ephemeralcontainers", admission.Update, &metav1.UpdateOptions{}, false, mynode),
			err:        `unexpected pod subresource "ephemeralcontainers"`,
		},
		{
			name:       "forbid pod resize subresource",
			podsGetter: pods,
			attributes: admission.NewAttributesRecord(mypod, mypod, podKind, "ns", "mypod", podResource, "resize", admission.Update, &metav1.UpdateOptions{}, false, mynode),
			err:        `unexpected pod subresource "resize"`,
		},
		{
			name:       "forbid update of pod's resource claim statuses",
			podsGetter: pods,
			attributes: admission.NewAttributesRecord(claimStatusPod, mypod, podKind, "ns", "mypod", podResource, "status", admission.Update, &metav1.UpdateOptions{}, false, mynode),
			err:        "cannot update resource claim statues",
		},
		{
			name:       "allow create of policy/v1beta1 eviction for pod bound to self",
			podsGetter: pods,
			attributes: admission.NewAttributesRecord(&policyv1beta1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: "mypod", Namespace: "ns"}}, nil, policyv1beta1.SchemeGroupVersion.WithKind("Eviction"), "ns", "", podResource, "eviction", admission.Create, &metav1.CreateOptions{}, false, mynode),
		},
		{
			name:       "forbid create of policy/v1beta1 eviction for pod bound to another",
			podsGetter: pods,
			attributes: admission.NewAttributesRecord(&policyv1beta1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: "otherpod", Namespace: "ns"}}, nil, policyv1beta1.SchemeGroupVersion.WithKind("Eviction"), "ns", "", podResource, "eviction", admission.Create, &metav1.CreateOptions{}, false, mynode),
			err:        "spec.nodeName set to itself",
		},
		{
			name:       "forbid create of eviction of unexpected type",
			podsGetter: pods,
			attributes: admission.NewAttributesRecord(&corev1.Pod{}, nil, policyv1beta1.SchemeGroupVersion.WithKind("Eviction"), "ns", "mypod", podResource, "eviction", admission.Create, &metav1.CreateOptions{}, false, mynode),
			err:        "unexpected type *v1.Pod",
		},
		{
			name:       "allow a system:node: user outside system:nodes",
			podsGetter: pods,
			attributes: admission.NewAttributesRecord(nil, nil, nodeKind, "", "othernode", nodeResource, "", admission.Delete, &metav1.DeleteOptions{}, false, withoutNodeGroup),
		},
		{
			name:       "allow a system:nodes member not named system:node:",
			podsGetter: pods,
			attributes: admission.NewAttributesRecord(nil, nil, nodeKind, "", "othernode", nodeResource, "", admission.Delete, &metav1.DeleteOptions{}, false, &user.DefaultInfo{Name: "bob", Groups: []string{"system:nodes"}}),
		},
		{
			name:       "forbid a node user without a node name",
			podsGetter: pods,
			attributes: admission.NewAttributesRecord(nil, nil, nodeKind, "", "othernode", nodeResource, "", admission.Delete, &metav1.DeleteOptions{}, false, noName),
			err:        `could not determine node from user "system:node:"`,
		},
		{
			name:            "forbid create of token when the pod's in-tree PV fails to translate",
			podsGetter:      pods,
			csiDriverGetter: storagelisters.NewCSIDriverLister(csiDriversIndex),
			pvcGetter:       corev1lister.NewPersistentVolumeClaimLister(csiPVCsIndex),
			pvGetter:        corev1lister.NewPersistentVolumeLister(csiPVsIndex),
			attributes:      admission.NewAttributesRecord(tokenFor(ebsPod), nil, tokenrequestKind, "ns", "mysa", svcacctResource, "token", admission.Create, &metav1.CreateOptions{}, false, mynode),
			err:             `error validating audience "foo": failed to translate Kubernetes ID to EBS Volume ID Invalid format for AWS volume (aws://zone/not-a-volume)`,
		},
	}
	for _, tt := range tests {
		tt.run(t)
	}

	// A node cannot create a mirror pod that uses an API object; upstream's
	// table covers some of hasAPIObjectReference, TestHasAPIObjectReference
	// the rest.
	t.Run("forbid create of mirror pod with CSI volume", func(t *testing.T) {
		nodesIndex := cache.NewIndexer(cache.MetaNamespaceKeyFunc, nil)
		checkNilError(t, nodesIndex.Add(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "mynode", UID: "mynode-uid"}}))
		pod, _ := makeTestPod("ns", "mirror", "mynode", true)
		pod.Spec.Volumes = []corev1.Volume{{Name: "csi", VolumeSource: corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{Driver: "d"}}}}
		p := New(pods, corev1lister.NewNodeLister(nodesIndex), nil, nil, nil, nil, &uncallableAuthorizer{t: t})
		err := p.Validate(context.Background(), createPodAttributes(pod, mynode), nil)
		if err == nil || !strings.Contains(err.Error(), "can not create pods that reference csidrivers (via CSI volumes)") {
			t.Errorf("Validate() = %v", err)
		}
	})
}

func TestHasAPIObjectReference(t *testing.T) {
	vol := func(src corev1.VolumeSource) []corev1.Volume { return []corev1.Volume{{Name: "v", VolumeSource: src}} }
	projected := func(p corev1.VolumeProjection) []corev1.Volume {
		return vol(corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{p}}})
	}
	tests := []struct {
		name     string
		spec     corev1.PodSpec
		want     bool
		resource string
		err      string
	}{
		{name: "none", spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}}},
		{name: "service account", spec: corev1.PodSpec{ServiceAccountName: "sa"}, want: true, resource: "serviceaccounts"},
		{name: "image pull secret", spec: corev1.PodSpec{ImagePullSecrets: []corev1.LocalObjectReference{{Name: "s"}}}, want: true, resource: "secrets"},
		{name: "empty image pull secret name", spec: corev1.PodSpec{ImagePullSecrets: []corev1.LocalObjectReference{{}}}},
		{name: "init container env secret", spec: corev1.PodSpec{InitContainers: []corev1.Container{{Env: []corev1.EnvVar{{Name: "e", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "s"}}}}}}}}, want: true, resource: "secrets"},
		{name: "ephemeral container envFrom secret", spec: corev1.PodSpec{EphemeralContainers: []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{EnvFrom: []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "s"}}}}}}}}, want: true, resource: "secrets"},
		{name: "container env configmap", spec: corev1.PodSpec{Containers: []corev1.Container{{Env: []corev1.EnvVar{{Name: "e", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "c"}}}}}}}}, want: true, resource: "configmaps"},
		{name: "container envFrom configmap", spec: corev1.PodSpec{Containers: []corev1.Container{{EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "c"}}}}}}}, want: true, resource: "configmaps"},
		{name: "resource claim", spec: corev1.PodSpec{ResourceClaims: []corev1.PodResourceClaim{{Name: "c"}}}, want: true, resource: "resourceclaims"},
		{name: "csi secret", spec: corev1.PodSpec{Volumes: vol(corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{Driver: "d", NodePublishSecretRef: &corev1.LocalObjectReference{Name: "s"}}})}, want: true, resource: "secrets"},
		{name: "csi", spec: corev1.PodSpec{Volumes: vol(corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{Driver: "d"}})}, want: true, resource: "csidrivers (via CSI volumes)"},
		{name: "azure file", spec: corev1.PodSpec{Volumes: vol(corev1.VolumeSource{AzureFile: &corev1.AzureFileVolumeSource{}})}, want: true, resource: "secrets (via azureFile volumes)"},
		{name: "glusterfs", spec: corev1.PodSpec{Volumes: vol(corev1.VolumeSource{Glusterfs: &corev1.GlusterfsVolumeSource{}})}, want: true, resource: "endpoints (via glusterFS volumes)"},
		{name: "ephemeral", spec: corev1.PodSpec{Volumes: vol(corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{}})}, want: true, resource: "persistentvolumeclaims (via ephemeral volumes)"},
		{name: "projected secret", spec: corev1.PodSpec{Volumes: projected(corev1.VolumeProjection{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "s"}}})}, want: true, resource: "secrets"},
		{name: "projected configmap", spec: corev1.PodSpec{Volumes: projected(corev1.VolumeProjection{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "c"}}})}, want: true, resource: "configmaps"},
		{name: "projected service account token", spec: corev1.PodSpec{Volumes: projected(corev1.VolumeProjection{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{}})}, want: true, resource: "serviceaccounts (via projected volumes)"},
		{name: "projected pod certificate", spec: corev1.PodSpec{Volumes: projected(corev1.VolumeProjection{PodCertificate: &corev1.PodCertificateProjection{}})}, want: true, resource: "podcertificates"},
		{name: "projected downward API", spec: corev1.PodSpec{Volumes: projected(corev1.VolumeProjection{DownwardAPI: &corev1.DownwardAPIProjection{}})}},
		{name: "unknown projected source", spec: corev1.PodSpec{Volumes: projected(corev1.VolumeProjection{})}, want: true, err: `unknown source for projected volume "v"`},
		{name: "host path and empty dir", spec: corev1.PodSpec{Volumes: []corev1.Volume{
			{Name: "h", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}},
			{Name: "e", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			{Name: "i", VolumeSource: corev1.VolumeSource{Image: &corev1.ImageVolumeSource{Reference: "img"}}},
		}}},
		{name: "unknown volume type", spec: corev1.PodSpec{Volumes: vol(corev1.VolumeSource{})}, want: true, err: `unknown volume type for volume  "v"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, resource, err := hasAPIObjectReference(&corev1.Pod{Spec: tt.spec})
			if got != tt.want || resource != tt.resource {
				t.Errorf("hasAPIObjectReference() = %v, %q, want %v, %q", got, resource, tt.want, tt.resource)
			}
			if (err == nil) != (tt.err == "") || err != nil && err.Error() != tt.err {
				t.Errorf("hasAPIObjectReference() error = %v, want %q", err, tt.err)
			}
		})
	}
}

func TestCSITranslation(t *testing.T) {
	inline := []struct {
		name   string
		src    corev1.VolumeSource
		driver string
		err    string
	}{
		{name: "aws ebs", src: corev1.VolumeSource{AWSElasticBlockStore: &corev1.AWSElasticBlockStoreVolumeSource{VolumeID: "aws://zone/vol-123"}}, driver: "ebs.csi.aws.com"},
		{name: "aws ebs bare id", src: corev1.VolumeSource{AWSElasticBlockStore: &corev1.AWSElasticBlockStoreVolumeSource{VolumeID: "vol-123"}}, driver: "ebs.csi.aws.com"},
		{name: "aws ebs bad id", src: corev1.VolumeSource{AWSElasticBlockStore: &corev1.AWSElasticBlockStoreVolumeSource{VolumeID: "aws://zone/disk"}}, err: "Invalid format for AWS volume"},
		{name: "azure disk managed", src: corev1.VolumeSource{AzureDisk: &corev1.AzureDiskVolumeSource{Kind: ptr.To(corev1.AzureDataDiskKind("managed"))}}, driver: "disk.csi.azure.com"},
		{name: "azure disk shared", src: corev1.VolumeSource{AzureDisk: &corev1.AzureDiskVolumeSource{Kind: ptr.To(corev1.AzureSharedBlobDisk)}}, err: "kind(Shared) is not supported in csi migration"},
		{name: "azure file", src: corev1.VolumeSource{AzureFile: &corev1.AzureFileVolumeSource{}}, driver: "file.csi.azure.com"},
		{name: "gce pd", src: corev1.VolumeSource{GCEPersistentDisk: &corev1.GCEPersistentDiskVolumeSource{}}, driver: "pd.csi.storage.gke.io"},
		{name: "cinder", src: corev1.VolumeSource{Cinder: &corev1.CinderVolumeSource{}}, driver: "cinder.csi.openstack.org"},
		{name: "portworx", src: corev1.VolumeSource{PortworxVolume: &corev1.PortworxVolumeSource{}}, driver: "pxd.portworx.com"},
		{name: "vsphere", src: corev1.VolumeSource{VsphereVolume: &corev1.VsphereVirtualDiskVolumeSource{}}, driver: "csi.vsphere.vmware.com"},
		{name: "nfs is not migratable", src: corev1.VolumeSource{NFS: &corev1.NFSVolumeSource{}}},
	}
	for _, tt := range inline {
		t.Run("inline "+tt.name, func(t *testing.T) {
			v := &corev1.Volume{Name: "v", VolumeSource: tt.src}
			if migratable := isInlineMigratable(v); migratable != (tt.driver != "" || tt.err != "") {
				t.Fatalf("isInlineMigratable() = %v", migratable)
			}
			if tt.driver == "" && tt.err == "" {
				return
			}
			driver, err := translateInlineVolumeToCSIDriver(v)
			if driver != tt.driver || (err == nil) != (tt.err == "") || err != nil && !strings.Contains(err.Error(), tt.err) {
				t.Errorf("translateInlineVolumeToCSIDriver() = %q, %v, want %q, %q", driver, err, tt.driver, tt.err)
			}
		})
	}

	pv := []struct {
		name   string
		pv     corev1.PersistentVolume
		driver string
		err    string
	}{
		{name: "azure file with claim namespace", pv: corev1.PersistentVolume{Spec: corev1.PersistentVolumeSpec{
			ClaimRef:               &corev1.ObjectReference{Namespace: "ns"},
			PersistentVolumeSource: corev1.PersistentVolumeSource{AzureFile: &corev1.AzureFilePersistentVolumeSource{}},
		}}, driver: "file.csi.azure.com"},
		{name: "azure file with secret namespace", pv: corev1.PersistentVolume{Spec: corev1.PersistentVolumeSpec{
			PersistentVolumeSource: corev1.PersistentVolumeSource{AzureFile: &corev1.AzureFilePersistentVolumeSource{SecretNamespace: ptr.To("ns")}},
		}}, driver: "file.csi.azure.com"},
		{name: "azure file without namespace", pv: corev1.PersistentVolume{Spec: corev1.PersistentVolumeSpec{
			PersistentVolumeSource: corev1.PersistentVolumeSource{AzureFile: &corev1.AzureFilePersistentVolumeSource{}},
		}}, err: "could not find a secret namespace in PersistentVolumeSource or ClaimRef"},
		{name: "gce pd regional", pv: corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{corev1.LabelTopologyZone: "us-central1-a__us-central1-b"}},
			Spec:       corev1.PersistentVolumeSpec{PersistentVolumeSource: corev1.PersistentVolumeSource{GCEPersistentDisk: &corev1.GCEPersistentDiskVolumeSource{}}},
		}, driver: "pd.csi.storage.gke.io"},
		{name: "gce pd two regions", pv: corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{corev1.LabelFailureDomainBetaZone: "us-central1-a__europe-west1-b"}},
			Spec:       corev1.PersistentVolumeSpec{PersistentVolumeSource: corev1.PersistentVolumeSource{GCEPersistentDisk: &corev1.GCEPersistentDiskVolumeSource{}}},
		}, err: "failed to get region from zones: multiple or no regions gotten from zones"},
		{name: "aws ebs bad scheme", pv: corev1.PersistentVolume{Spec: corev1.PersistentVolumeSpec{
			PersistentVolumeSource: corev1.PersistentVolumeSource{AWSElasticBlockStore: &corev1.AWSElasticBlockStoreVolumeSource{VolumeID: "aws://zone/"}},
		}}, err: "failed to translate Kubernetes ID to EBS Volume ID"},
		{name: "azure disk default kind", pv: corev1.PersistentVolume{Spec: corev1.PersistentVolumeSpec{
			PersistentVolumeSource: corev1.PersistentVolumeSource{AzureDisk: &corev1.AzureDiskVolumeSource{}},
		}}, driver: "disk.csi.azure.com"},
		{name: "local is not migratable", pv: corev1.PersistentVolume{Spec: corev1.PersistentVolumeSpec{
			PersistentVolumeSource: corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{}},
		}}},
	}
	for _, tt := range pv {
		t.Run("pv "+tt.name, func(t *testing.T) {
			if migratable := isPVMigratable(&tt.pv); migratable != (tt.driver != "" || tt.err != "") {
				t.Fatalf("isPVMigratable() = %v", migratable)
			}
			if tt.driver == "" && tt.err == "" {
				return
			}
			driver, err := translatePVToCSIDriver(&tt.pv)
			if driver != tt.driver || (err == nil) != (tt.err == "") || err != nil && !strings.Contains(err.Error(), tt.err) {
				t.Errorf("translatePVToCSIDriver() = %q, %v, want %q, %q", driver, err, tt.driver, tt.err)
			}
		})
	}
}
