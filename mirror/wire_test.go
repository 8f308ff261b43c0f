package mirror

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	nodev1 "k8s.io/api/node/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
)

// wireObjects are objects of the default rules' kinds with the fields whose
// JSON has a form of its own: quantities, times, micro-times, int-or-string,
// bytes, pointers to empty values.
func wireObjects() []runtime.Object {
	now := metav1.NewTime(time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC))
	meta := func(name, ns string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Namespace: ns, UID: "5b1c", ResourceVersion: "42", CreationTimestamp: now,
			Labels: map[string]string{"app": "a"}, Annotations: map[string]string{"a": ""},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: "n1", UID: "9", Controller: ptr.To(true)}},
			ManagedFields:   []metav1.ManagedFieldsEntry{{Manager: "kubelet", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", Time: &now, FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{}}`)}}},
		}
	}
	return []runtime.Object{
		&corev1.Pod{ObjectMeta: meta("p", "default"), Spec: corev1.PodSpec{
			NodeName: "n1", TerminationGracePeriodSeconds: ptr.To[int64](30),
			Containers: []corev1.Container{{Name: "c", Image: "busybox", Command: []string{"sh"},
				Resources:      corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("64Mi")}},
				ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Port: intstr.FromString("http")}}},
				Ports:          []corev1.ContainerPort{{ContainerPort: 80, Protocol: corev1.ProtocolTCP}},
			}},
			Volumes: []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
		}, Status: corev1.PodStatus{Phase: corev1.PodRunning, StartTime: &now,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "c", Ready: true, RestartCount: 2,
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}}},
		}},
		&corev1.Node{ObjectMeta: meta("n1", ""), Status: corev1.NodeStatus{
			Capacity:  corev1.ResourceList{corev1.ResourcePods: resource.MustParse("110"), corev1.ResourceMemory: resource.MustParse("3951340Ki")},
			Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.0.0.1"}},
			Images:    []corev1.ContainerImage{{Names: []string{"busybox"}, SizeBytes: 1 << 20}},
		}},
		&coordinationv1.Lease{ObjectMeta: meta("n1", "kube-node-lease"), Spec: coordinationv1.LeaseSpec{
			HolderIdentity: ptr.To("n1"), LeaseDurationSeconds: ptr.To[int32](40),
			RenewTime: &metav1.MicroTime{Time: time.Date(2026, 12, 7, 10, 0, 1, 123456000, time.UTC)},
		}},
		&discoveryv1.EndpointSlice{ObjectMeta: meta("s-1", "default"), AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.1"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}, NodeName: ptr.To("n1")}},
			Ports:     []discoveryv1.EndpointPort{{Name: ptr.To(""), Port: ptr.To[int32](80), Protocol: ptr.To(corev1.ProtocolTCP)}},
		},
		&corev1.Service{ObjectMeta: meta("s", "default"), Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.10", ClusterIPs: []string{"10.96.0.10"},
			Ports: []corev1.ServicePort{{Name: "dns", Port: 53, TargetPort: intstr.FromInt32(53), Protocol: corev1.ProtocolUDP}}}},
		&corev1.Secret{ObjectMeta: meta("s", "default"), Type: corev1.SecretTypeOpaque, Data: map[string][]byte{"k": {0, 1, 2}, "e": {}}},
		&corev1.ConfigMap{ObjectMeta: meta("c", "default"), Data: map[string]string{"k": "v"}, BinaryData: map[string][]byte{"b": {0xff}}},
		&corev1.ServiceAccount{ObjectMeta: meta("default", "default"), AutomountServiceAccountToken: ptr.To(false)},
		&storagev1.CSINode{ObjectMeta: meta("n1", ""), Spec: storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{{Name: "d", NodeID: "n1", TopologyKeys: nil}}}},
		&storagev1.CSIDriver{ObjectMeta: meta("d", ""), Spec: storagev1.CSIDriverSpec{AttachRequired: ptr.To(false)}},
		&nodev1.RuntimeClass{ObjectMeta: meta("rc", ""), Handler: "runc", Overhead: &nodev1.Overhead{PodFixed: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m")}}},
		&corev1.Event{ObjectMeta: meta("e", "default"), InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "p"}, Reason: "Started", Count: 1,
			FirstTimestamp: now, EventTime: metav1.NewMicroTime(now.Time), Source: corev1.EventSource{Component: "kubelet", Host: "n1"}},
	}
}

// TestWireProtobufDecodesAsJSON: every object the mirror reads as protobuf
// is the unstructured object client-go's dynamic client decodes from
// kube-apiserver's JSON of it, alone and in a list.
func TestWireProtobufDecodesAsJSON(t *testing.T) {
	w, err := newWire()
	if err != nil {
		t.Fatal(err)
	}
	// The clients build on the wire, on one connection pool.
	if _, _, err := w.clients(&rest.Config{Host: "https://127.0.0.1:1"}); err != nil {
		t.Fatal(err)
	}
	scheme := w.scheme
	encoder := protobuf.NewSerializer(scheme, scheme)
	decoder := w.proto.Serializer
	for _, obj := range wireObjects() {
		gvks, _, err := scheme.ObjectKinds(obj)
		if err != nil {
			t.Fatal(err)
		}
		gvk := gvks[0]
		obj.GetObjectKind().SetGroupVersionKind(gvk)
		gvr, _ := meta.UnsafeGuessKindToResource(gvk)
		if !w.protobuf(gvr) {
			t.Errorf("%s is read as JSON", gvr)
		}

		var pb bytes.Buffer
		if err := encoder.Encode(obj, &pb); err != nil {
			t.Fatal(err)
		}
		js, err := json.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		want := &unstructured.Unstructured{}
		if _, _, err := unstructured.UnstructuredJSONScheme.Decode(js, nil, want); err != nil {
			t.Fatal(err)
		}
		for _, into := range []runtime.Object{nil, &unstructured.Unstructured{}} {
			got, _, err := decoder.Decode(pb.Bytes(), nil, into)
			if err != nil {
				t.Fatalf("%s: %v", gvk.Kind, err)
			}
			if !equality.Semantic.DeepEqual(got, want) {
				t.Errorf("%s from protobuf:\n%#v\nfrom JSON:\n%#v", gvk.Kind, got.(*unstructured.Unstructured).Object, want.Object)
			}
		}
		// A forwarded write's answer, as JSON.
		asJSON, err := w.asJSON(pb.Bytes(), nil)
		if err != nil {
			t.Fatal(err)
		}
		got := &unstructured.Unstructured{}
		if err := got.UnmarshalJSON(asJSON); err != nil {
			t.Fatal(err)
		}
		if !equality.Semantic.DeepEqual(got, want) {
			t.Errorf("%s's answer as JSON:\n%s\nthe upstream's JSON:\n%s", gvk.Kind, asJSON, js)
		}

		// A forwarded write's body: protobuf, the same object, also when
		// the body has what the Go type would omit (the write-through
		// leaves an empty map of annotations).
		up := want.DeepCopy()
		up.Object["metadata"].(map[string]any)["annotations"] = map[string]any{}
		obj.(metav1.Object).SetAnnotations(nil)
		body, contentType, err := w.body(gvr, up)
		if err != nil || contentType != runtime.ContentTypeProtobuf {
			t.Errorf("%s goes up as %s (%v)", gvk.Kind, contentType, err)
		} else if sent, _, err := encoder.Decode(body, nil, nil); err != nil || !equality.Semantic.DeepEqual(sent, obj) {
			t.Errorf("%s goes up as %#v (%v), not %#v", gvk.Kind, sent, err, obj)
		}
		// A field this build does not know goes up as it came, in JSON.
		unknown := want.DeepCopy()
		unknown.Object["spec2"] = map[string]any{"new": "field"}
		if body, contentType, err := w.body(gvr, unknown); err != nil || contentType != runtime.ContentTypeJSON || !bytes.Contains(body, []byte(`"spec2":{"new":"field"}`)) {
			t.Errorf("%s with an unknown field goes up as %s %s (%v)", gvk.Kind, contentType, body, err)
		}

		// The same object as the only item of its list.
		listGVK := gvk.GroupVersion().WithKind(gvk.Kind + "List")
		typedList, err := scheme.New(listGVK)
		if err != nil {
			t.Fatal(err)
		}
		typedJSON := []byte(`{"apiVersion":"` + listGVK.GroupVersion().String() + `","kind":"` + listGVK.Kind + `","metadata":{"resourceVersion":"43","continue":"c"},"items":[` + string(js) + `]}`)
		if err := json.Unmarshal(typedJSON, typedList); err != nil {
			t.Fatal(err)
		}
		typedList.GetObjectKind().SetGroupVersionKind(listGVK)
		pb.Reset()
		if err := encoder.Encode(typedList, &pb); err != nil {
			t.Fatal(err)
		}
		js, _ = json.Marshal(typedList)
		wantList := &unstructured.UnstructuredList{}
		if _, _, err := unstructured.UnstructuredJSONScheme.Decode(js, nil, wantList); err != nil {
			t.Fatal(err)
		}
		gotList, _, err := decoder.Decode(pb.Bytes(), nil, &unstructured.UnstructuredList{})
		if err != nil {
			t.Fatalf("%s: %v", listGVK.Kind, err)
		}
		if !equality.Semantic.DeepEqual(gotList, wantList) {
			t.Errorf("%s from protobuf:\n%#v\nfrom JSON:\n%#v", listGVK.Kind, gotList, wantList)
		}
	}

	// A Status stays typed, as client-go's errors read it.
	var pb bytes.Buffer
	status := &metav1.Status{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Status"}, Status: metav1.StatusFailure, Code: 410, Reason: metav1.StatusReasonExpired}
	if err := encoder.Encode(status, &pb); err != nil {
		t.Fatal(err)
	}
	got, _, err := decoder.Decode(pb.Bytes(), nil, &unstructured.Unstructured{})
	if err != nil {
		t.Fatal(err)
	}
	if s, ok := got.(*metav1.Status); !ok || s.Code != 410 {
		t.Errorf("a Status decodes as %#v", got)
	}
	// A refusal's Status as JSON, as the forward reads the upstream's.
	asJSON, err := w.asJSON(pb.Bytes(), errors.New("refused"))
	if err := upstreamStatus(err, asJSON); !apierrors.IsResourceExpired(err) && !apierrors.IsGone(err) {
		t.Errorf("a refusal's Status as JSON %s reads as %v", asJSON, err)
	}
	if _, err := w.asJSON(append(slices.Clone(protobufMagic), 0xff, 0xff), nil); !errors.As(err, new(errUnreadable)) {
		t.Errorf("an answer that does not decode gives %v", err)
	}
	if body, err := w.asJSON([]byte(`{"kind":"Status"}`), nil); err != nil || string(body) != `{"kind":"Status"}` {
		t.Errorf("JSON is changed to %q, %v", body, err)
	}
}
