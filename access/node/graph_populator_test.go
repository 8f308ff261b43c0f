package node

import (
	"context"
	"testing"
	"time"

	certsv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
)

// These tests are kubestore's.

func TestAddGraphEventHandlersAllNil(t *testing.T) {
	synced, err := AddGraphEventHandlers(NewGraph(), nil, nil, nil, nil, nil, nil)
	if err != nil || len(synced) != 0 {
		t.Errorf("expected no handlers and no error, got %d handlers, %v", len(synced), err)
	}
}

// TestAddGraphEventHandlers populates the graph from informers as kubestore
// does: without persistent volumes (and nodes, which the graph does not
// need).
func TestAddGraphEventHandlers(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	client := fake.NewClientset(
		&corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "pod1", Namespace: "ns1", UID: "uid1"},
			Spec: corev1.PodSpec{
				NodeName:           "node1",
				ServiceAccountName: "sa1",
				Volumes:            []corev1.Volume{{VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "s1"}}}},
			},
		},
		&corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "unscheduled", Namespace: "ns1", UID: "uid2"},
			Spec: corev1.PodSpec{
				Volumes: []corev1.Volume{{VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "s2"}}}},
			},
		},
		&storagev1.VolumeAttachment{
			ObjectMeta: metav1.ObjectMeta{Name: "va1"},
			Spec:       storagev1.VolumeAttachmentSpec{NodeName: "node1"},
		},
		&resourceapi.ResourceSlice{
			ObjectMeta: metav1.ObjectMeta{Name: "slice1"},
			Spec:       resourceapi.ResourceSliceSpec{NodeName: new("node1")},
		},
		&certsv1.PodCertificateRequest{
			ObjectMeta: metav1.ObjectMeta{Name: "pcr1", Namespace: "ns1"},
			Spec:       certsv1.PodCertificateRequestSpec{PodName: "pod1", ServiceAccountName: "sa1", NodeName: types.NodeName("node1")},
		},
	)
	factory := informers.NewSharedInformerFactory(client, 0)

	g := NewGraph()
	synced, err := AddGraphEventHandlers(g,
		nil,
		factory.Core().V1().Pods(),
		nil,
		factory.Storage().V1().VolumeAttachments(),
		factory.Resource().V1().ResourceSlices(),
		factory.Certificates().V1().PodCertificateRequests(),
	)
	if err != nil {
		t.Fatal(err)
	}
	if len(synced) != 4 {
		t.Fatalf("expected 4 HasSynced functions, got %d", len(synced))
	}
	factory.Start(ctx.Done())
	defer func() {
		// Shutdown waits for the informers, which stop with ctx.
		cancel()
		factory.Shutdown()
	}()
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		t.Fatal("handlers did not sync")
	}

	authz := NewAuthorizer(g)
	node1 := &user.DefaultInfo{Name: "system:node:node1", Groups: []string{user.NodesGroup}}
	decide := func(attrs authorizer.AttributesRecord) authorizer.Decision {
		t.Helper()
		attrs.User = node1
		attrs.ResourceRequest = true
		decision, _, err := authz.Authorize(ctx, attrs)
		if err != nil {
			t.Fatal(err)
		}
		return decision
	}
	secret1 := authorizer.AttributesRecord{Verb: "get", Resource: "secrets", Namespace: "ns1", Name: "s1"}
	secret2 := authorizer.AttributesRecord{Verb: "get", Resource: "secrets", Namespace: "ns1", Name: "s2"}
	va1 := authorizer.AttributesRecord{Verb: "get", APIGroup: "storage.k8s.io", Resource: "volumeattachments", Name: "va1"}
	slice1 := authorizer.AttributesRecord{Verb: "get", APIGroup: "resource.k8s.io", Resource: "resourceslices", Name: "slice1"}
	pcr1 := authorizer.AttributesRecord{Verb: "get", APIGroup: "certificates.k8s.io", Resource: "podcertificaterequests", Namespace: "ns1", Name: "pcr1"}
	sa1 := authorizer.AttributesRecord{Verb: "get", Resource: "serviceaccounts", Namespace: "ns1", Name: "sa1"}

	for name, attrs := range map[string]authorizer.AttributesRecord{"secret": secret1, "volume attachment": va1, "resource slice": slice1, "pod certificate request": pcr1, "service account": sa1} {
		if d := decide(attrs); d != authorizer.DecisionAllow {
			t.Errorf("%s: expected %v, got %v", name, authorizer.DecisionAllow, d)
		}
	}
	if d := decide(secret2); d != authorizer.DecisionNoOpinion {
		t.Errorf("secret of an unscheduled pod: expected %v, got %v", authorizer.DecisionNoOpinion, d)
	}

	// Events after the sync reach the graph: scheduling a pod, moving an
	// attachment, deleting objects.
	eventually := func(what string, attrs authorizer.AttributesRecord, want authorizer.Decision) {
		t.Helper()
		err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
			return decide(attrs) == want, nil
		})
		if err != nil {
			t.Errorf("%s: expected %v, got %v", what, want, decide(attrs))
		}
	}
	unscheduled, err := client.CoreV1().Pods("ns1").Get(ctx, "unscheduled", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	unscheduled.Spec.NodeName = "node1"
	if _, err := client.CoreV1().Pods("ns1").Update(ctx, unscheduled, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually("secret of a pod scheduled to the node", secret2, authorizer.DecisionAllow)

	if err := client.CoreV1().Pods("ns1").Delete(ctx, "pod1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually("secret of a deleted pod", secret1, authorizer.DecisionNoOpinion)

	va, err := client.StorageV1().VolumeAttachments().Get(ctx, "va1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	va.Spec.NodeName = "node2"
	if _, err := client.StorageV1().VolumeAttachments().Update(ctx, va, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually("volume attachment moved to another node", va1, authorizer.DecisionNoOpinion)

	if err := client.ResourceV1().ResourceSlices().Delete(ctx, "slice1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually("deleted resource slice", slice1, authorizer.DecisionNoOpinion)

	if err := client.CertificatesV1().PodCertificateRequests("ns1").Delete(ctx, "pcr1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually("deleted pod certificate request", pcr1, authorizer.DecisionNoOpinion)
}

// TestGraphPopulatorTombstones checks that deletions delivered as
// tombstones reach the graph.
func TestGraphPopulatorTombstones(t *testing.T) {
	g := NewGraph()
	p := &graphPopulator{graph: g}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "pod1", Namespace: "ns1"},
		Spec:       corev1.PodSpec{NodeName: "node1"},
	}
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "pv1"},
		Spec:       corev1.PersistentVolumeSpec{ClaimRef: &corev1.ObjectReference{Namespace: "ns1", Name: "pvc1"}},
	}
	va := &storagev1.VolumeAttachment{ObjectMeta: metav1.ObjectMeta{Name: "va1"}, Spec: storagev1.VolumeAttachmentSpec{NodeName: "node1"}}
	slice := &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "slice1"}, Spec: resourceapi.ResourceSliceSpec{NodeName: new("node1")}}
	pcr := &certsv1.PodCertificateRequest{ObjectMeta: metav1.ObjectMeta{Name: "pcr1", Namespace: "ns1"}, Spec: certsv1.PodCertificateRequestSpec{NodeName: "node1"}}

	p.addPod(pod)
	p.addPV(pv)
	p.addVolumeAttachment(va)
	p.addResourceSlice(slice)
	p.addPCR(pcr)
	if len(g.graph.vertices) == 0 {
		t.Fatal("expected vertices")
	}

	tombstone := func(obj any) cache.DeletedFinalStateUnknown {
		return cache.DeletedFinalStateUnknown{Key: "key", Obj: obj}
	}
	p.deletePod(tombstone(pod))
	p.deletePV(tombstone(pv))
	p.deleteVolumeAttachment(tombstone(va))
	p.deleteResourceSlice(tombstone(slice))
	p.deletePCR(tombstone(pcr))
	// an unexpected type is ignored
	p.deletePod(tombstone("not a pod"))

	if len(g.graph.vertices) != 0 {
		t.Errorf("expected an empty graph, got vertices %v", allVertices(g))
	}
	for vertexType, namespaces := range g.vertices {
		if len(namespaces) != 0 {
			t.Errorf("expected no %s vertices, got %v", vertexTypes[vertexType], namespaces)
		}
	}
}
