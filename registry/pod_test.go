package registry

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// resources is a cpu and memory list; "" leaves the resource out.
func resources(cpu, memory string) corev1.ResourceList {
	l := corev1.ResourceList{}
	if cpu != "" {
		l[corev1.ResourceCPU] = resource.MustParse(cpu)
	}
	if memory != "" {
		l[corev1.ResourceMemory] = resource.MustParse(memory)
	}
	return l
}

func container(name string, requests, limits corev1.ResourceList) corev1.Container {
	return corev1.Container{Name: name, Resources: corev1.ResourceRequirements{Requests: requests, Limits: limits}}
}

// The cases of TestComputePodQOS in k8s.io/kubernetes
// pkg/apis/core/v1/helper/qos/qos_test.go, the pod-level ones with
// PodLevelResources on (its default since 1.34).
func TestPodQOS(t *testing.T) {
	hugepages := func(l corev1.ResourceList) corev1.ResourceList {
		l["hugepages-2Mi"] = resource.MustParse("1Gi")
		return l
	}
	tests := []struct {
		name           string
		containers     []corev1.Container
		initContainers []corev1.Container
		pod            *corev1.ResourceRequirements
		want           corev1.PodQOSClass
	}{
		{name: "guaranteed", want: corev1.PodQOSGuaranteed, containers: []corev1.Container{
			container("guaranteed", resources("100m", "100Mi"), resources("100m", "100Mi")),
		}},
		{name: "guaranteed-guaranteed", want: corev1.PodQOSGuaranteed, containers: []corev1.Container{
			container("guaranteed", resources("100m", "100Mi"), resources("100m", "100Mi")),
			container("guaranteed", resources("100m", "100Mi"), resources("100m", "100Mi")),
		}},
		{name: "best-effort-best-effort", want: corev1.PodQOSBestEffort, containers: []corev1.Container{
			container("best-effort", resources("", ""), resources("", "")),
			container("best-effort", resources("", ""), resources("", "")),
		}},
		{name: "best-effort", want: corev1.PodQOSBestEffort, containers: []corev1.Container{
			container("best-effort", resources("", ""), resources("", "")),
		}},
		{name: "best-effort-burstable", want: corev1.PodQOSBurstable, containers: []corev1.Container{
			container("best-effort", resources("", ""), resources("", "")),
			container("burstable", resources("1", ""), resources("2", "")),
		}},
		{name: "best-effort-guaranteed", want: corev1.PodQOSBurstable, containers: []corev1.Container{
			container("best-effort", resources("", ""), resources("", "")),
			container("guaranteed", resources("10m", "100Mi"), resources("10m", "100Mi")),
		}},
		{name: "burstable-cpu-guaranteed-memory", want: corev1.PodQOSBurstable, containers: []corev1.Container{
			container("burstable", resources("", "100Mi"), resources("", "100Mi")),
		}},
		{name: "burstable-no-limits", want: corev1.PodQOSBurstable, containers: []corev1.Container{
			container("burstable", resources("100m", "100Mi"), resources("", "")),
		}},
		{name: "burstable-guaranteed", want: corev1.PodQOSBurstable, containers: []corev1.Container{
			container("burstable", resources("1", "100Mi"), resources("2", "100Mi")),
			container("guaranteed", resources("100m", "100Mi"), resources("100m", "100Mi")),
		}},
		{name: "burstable-unbounded-but-requests-match-limits", want: corev1.PodQOSBurstable, containers: []corev1.Container{
			container("burstable", resources("100m", "100Mi"), resources("200m", "200Mi")),
			container("burstable-unbounded", resources("100m", "100Mi"), resources("", "")),
		}},
		{name: "burstable-1", want: corev1.PodQOSBurstable, containers: []corev1.Container{
			container("burstable", resources("10m", "100Mi"), resources("100m", "200Mi")),
		}},
		{name: "burstable-2", want: corev1.PodQOSBurstable, containers: []corev1.Container{
			container("burstable", resources("0", "0"), resources("100m", "200Mi")),
		}},
		{name: "best-effort-hugepages", want: corev1.PodQOSBestEffort, containers: []corev1.Container{
			container("best-effort", hugepages(resources("0", "0")), hugepages(resources("0", "0"))),
		}},
		{name: "init-container", want: corev1.PodQOSBurstable,
			containers:     []corev1.Container{container("best-effort", resources("", ""), resources("", ""))},
			initContainers: []corev1.Container{container("burstable", resources("10m", "100Mi"), resources("100m", "200Mi"))},
		},
		{name: "guaranteed-with-pod-level-resources", want: corev1.PodQOSGuaranteed,
			containers: []corev1.Container{container("best-effort", resources("", ""), resources("", ""))},
			pod:        &corev1.ResourceRequirements{Requests: resources("10m", "100Mi"), Limits: resources("10m", "100Mi")},
		},
		{name: "guaranteed-with-pod-and-container-level-resources", want: corev1.PodQOSGuaranteed,
			containers: []corev1.Container{container("burstable", resources("3m", "10Mi"), resources("5m", "20Mi"))},
			pod:        &corev1.ResourceRequirements{Requests: resources("10m", "100Mi"), Limits: resources("10m", "100Mi")},
		},
		{name: "burstable-with-pod-level-resources", want: corev1.PodQOSBurstable,
			containers: []corev1.Container{container("best-effort", resources("", ""), resources("", ""))},
			pod:        &corev1.ResourceRequirements{Requests: resources("10m", "10Mi"), Limits: resources("20m", "50Mi")},
		},
		{name: "burstable-with-pod-and-container-level-resources", want: corev1.PodQOSBurstable,
			containers: []corev1.Container{container("burstable", resources("5m", "10Mi"), resources("5m", "10Mi"))},
			pod:        &corev1.ResourceRequirements{Requests: resources("10m", "10Mi"), Limits: resources("20m", "50Mi")},
		},
		{name: "burstable-with-pod-and-container-level-requests", want: corev1.PodQOSBurstable,
			containers: []corev1.Container{container("burstable", resources("5m", "10Mi"), resources("", ""))},
			pod:        &corev1.ResourceRequirements{Requests: resources("10m", "10Mi"), Limits: resources("", "")},
		},
		{name: "burstable-with-pod-and-container-level-resources-2", want: corev1.PodQOSBurstable,
			containers: []corev1.Container{
				container("burstable", resources("5m", "10Mi"), resources("", "")),
				container("guaranteed", resources("5m", "10Mi"), resources("5m", "10Mi")),
			},
			pod: &corev1.ResourceRequirements{Requests: resources("10m", "10Mi"), Limits: resources("5m", "")},
		},
		// Upstream's PodLevelResourcesFixKubeletQOSClass behaviour: pod-level
		// resources without cpu or memory leave the containers to decide.
		{name: "empty pod-level resources", want: corev1.PodQOSGuaranteed,
			containers: []corev1.Container{container("guaranteed", resources("100m", "100Mi"), resources("100m", "100Mi"))},
			pod:        &corev1.ResourceRequirements{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := &corev1.PodSpec{Containers: tt.containers, InitContainers: tt.initContainers, Resources: tt.pod}
			if got := podQOS(spec); got != tt.want {
				t.Errorf("podQOS = %s, want %s", got, tt.want)
			}
		})
	}
}
