package cacher

import (
	"runtime"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// decodedPod is a pod as a decode makes it: nothing shared with another.
func decodedPod(t *testing.T, name, node, image string) *corev1.Pod {
	t.Helper()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", ManagedFields: []metav1.ManagedFieldsEntry{{
			Manager: "agent", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1",
			FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{"f:containers":{}}}`)},
		}}},
		Spec: corev1.PodSpec{
			NodeName: node,
			Containers: []corev1.Container{{Name: "agent", Image: image, Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}}}},
			Volumes:     []corev1.Volume{{Name: "cred", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: name}}}},
			Tolerations: []corev1.Toleration{{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists}},
		},
	}
	raw, err := p.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	out := &corev1.Pod{}
	if err := out.Unmarshal(raw); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestSharedParts(t *testing.T) {
	parts := newSharedParts()
	a := decodedPod(t, "a", "n1", "agent:v1")
	b := decodedPod(t, "b", "n2", "agent:v1")
	c := decodedPod(t, "c", "n3", "agent:v2")
	for _, p := range []*corev1.Pod{a, b, c} {
		parts.share(p)
	}
	same := func(x, y *corev1.Pod) (containers, volumes, tolerations, fields bool) {
		return &x.Spec.Containers[0] == &y.Spec.Containers[0], &x.Spec.Volumes[0] == &y.Spec.Volumes[0],
			&x.Spec.Tolerations[0] == &y.Spec.Tolerations[0], &x.ManagedFields[0].FieldsV1.Raw[0] == &y.ManagedFields[0].FieldsV1.Raw[0]
	}
	if containers, volumes, tolerations, fields := same(a, b); !containers || volumes || !tolerations || !fields {
		t.Errorf("a and b share containers %v (want true), volumes %v (want false: other secrets), tolerations %v, fieldsV1 %v (want true)",
			containers, volumes, tolerations, fields)
	}
	if containers, _, tolerations, _ := same(a, c); containers || !tolerations {
		t.Errorf("a and c (another image) share containers %v (want false), tolerations %v (want true)", containers, tolerations)
	}
	if b.Spec.NodeName != "n2" || b.Spec.Containers[0].Image != "agent:v1" || c.Spec.Containers[0].Image != "agent:v2" || b.Spec.Volumes[0].Secret.SecretName != "b" {
		t.Errorf("sharing changed a value: b %+v, c %+v", b.Spec, c.Spec)
	}

	// A part no object holds any more is collected, its entry dropped.
	entries := func() (n int) {
		parts.mu.Lock()
		defer parts.mu.Unlock()
		for _, b := range parts.entries {
			for _, e := range b {
				if e.ref.Value() != nil {
					n++
				}
			}
		}
		return n
	}
	before := entries()
	a, b = nil, nil
	runtime.GC()
	runtime.GC()
	if after := entries(); after >= before {
		t.Errorf("live parts after a and b were dropped: %d, before %d", after, before)
	}
	d := decodedPod(t, "d", "n4", "agent:v1")
	parts.share(d)
	if d.Spec.Containers[0].Image != "agent:v1" {
		t.Errorf("d's container after its parts were collected: %+v", d.Spec.Containers[0])
	}
	runtime.KeepAlive(c)
}
