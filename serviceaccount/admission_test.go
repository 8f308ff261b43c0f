package serviceaccount

import (
	"context"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/utils/ptr"
)

// A pod created on kubestore gets the token volume kube-apiserver's
// ServiceAccount admission projects (issue 50: pods had none, so no
// in-cluster client could start), unless the pod or its ServiceAccount
// opts out; a container that mounts something at the path keeps it.
func TestAdmissionMountsTheTokenVolume(t *testing.T) {
	sa := func(name string, automount *bool) *corev1.ServiceAccount {
		return &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}, AutomountServiceAccountToken: automount}
	}
	a := NewAdmission(func() (Lookup, error) {
		return objects{sas: map[string]*corev1.ServiceAccount{"ns/default": sa("default", nil), "ns/quiet": sa("quiet", ptr.To(false))}}, nil
	})
	admit := func(p *corev1.Pod) *corev1.Pod {
		t.Helper()
		attrs := admission.NewAttributesRecord(p, nil, corev1.SchemeGroupVersion.WithKind("Pod"), "ns", p.Name,
			corev1.SchemeGroupVersion.WithResource("pods"), "", admission.Create, &metav1.CreateOptions{}, false, &user.DefaultInfo{})
		if err := a.Admit(context.Background(), attrs, nil); err != nil {
			t.Fatal(err)
		}
		return p
	}
	newPod := func(name, account string, automount *bool) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}, Spec: corev1.PodSpec{
			ServiceAccountName: account, AutomountServiceAccountToken: automount,
			InitContainers: []corev1.Container{{Name: "init"}},
			Containers:     []corev1.Container{{Name: "a"}, {Name: "b", VolumeMounts: []corev1.VolumeMount{{Name: "own", MountPath: TokenMountPath}}}},
		}}
	}
	tokenVolume := func(p *corev1.Pod) *corev1.Volume {
		for i := range p.Spec.Volumes {
			if strings.HasPrefix(p.Spec.Volumes[i].Name, "kube-api-access-") {
				return &p.Spec.Volumes[i]
			}
		}
		return nil
	}

	p := admit(newPod("plain", "", nil))
	v := tokenVolume(p)
	if p.Spec.ServiceAccountName != DefaultName || v == nil || v.Projected == nil || len(v.Projected.Sources) != 3 {
		t.Fatalf("a pod without a ServiceAccount: account %q, volume %+v", p.Spec.ServiceAccountName, v)
	}
	src := v.Projected.Sources
	if src[0].ServiceAccountToken == nil || src[0].ServiceAccountToken.Path != "token" || *src[0].ServiceAccountToken.ExpirationSeconds != 3607 ||
		src[1].ConfigMap == nil || src[1].ConfigMap.Name != RootCAConfigMap || src[1].ConfigMap.Items[0].Path != "ca.crt" ||
		src[2].DownwardAPI == nil || src[2].DownwardAPI.Items[0].FieldRef.FieldPath != "metadata.namespace" || *v.Projected.DefaultMode != 0o644 {
		t.Errorf("the token volume is not kube-apiserver's: %+v", v.Projected)
	}
	want := corev1.VolumeMount{Name: v.Name, ReadOnly: true, MountPath: TokenMountPath}
	if m := p.Spec.InitContainers[0].VolumeMounts; len(m) != 1 || !reflect.DeepEqual(m[0], want) {
		t.Errorf("the init container mounts %+v, want %+v", m, want)
	}
	if m := p.Spec.Containers[0].VolumeMounts; len(m) != 1 || !reflect.DeepEqual(m[0], want) {
		t.Errorf("a container mounts %+v, want %+v", m, want)
	}
	if m := p.Spec.Containers[1].VolumeMounts; len(m) != 1 || m[0].Name != "own" {
		t.Errorf("a container with its own mount at the path mounts %+v, want its own only", m)
	}

	for name, p := range map[string]*corev1.Pod{
		"the pod opts out":               newPod("pod-out", "", ptr.To(false)),
		"its ServiceAccount opts out":    newPod("sa-out", "quiet", nil),
		"an unknown ServiceAccount's":    newPod("unknown", "nobody", ptr.To(false)),
		"a kubelet's static pod's image": mirrorPod(),
	} {
		if v := tokenVolume(admit(p)); v != nil {
			t.Errorf("%s: the pod got %s", name, v.Name)
		}
	}
	if v := tokenVolume(admit(newPod("pod-in", "quiet", ptr.To(true)))); v == nil {
		t.Error("a pod that opts in, of a ServiceAccount that opts out, got no token volume")
	}
	// A volume of the name already there is mounted, not added again.
	p = newPod("has-volume", "", nil)
	p.Spec.Volumes = []corev1.Volume{{Name: "kube-api-access-given"}}
	p = admit(p)
	if len(p.Spec.Volumes) != 1 || p.Spec.Containers[0].VolumeMounts[0].Name != "kube-api-access-given" {
		t.Errorf("a pod with a kube-api-access volume: volumes %+v, mounts %+v", p.Spec.Volumes, p.Spec.Containers[0].VolumeMounts)
	}
}

func mirrorPod() *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "static", Annotations: map[string]string{mirrorPodAnnotation: "x"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "a"}}}}
}
