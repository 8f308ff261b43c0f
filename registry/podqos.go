package registry

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
)

// podQOS computes the pod's quality-of-service class as kube-apiserver's
// ComputePodQOS (pkg/apis/core/helper/qos) does with PodLevelResources on,
// its default since 1.34: pod-level cpu and memory, when the pod sets
// them, decide; otherwise the sums over every container and init
// container. Guaranteed needs cpu and memory limits and requests equal to
// them; zero and other resources do not count.
func podQOS(s *corev1.PodSpec) corev1.PodQOSClass {
	requests, limits := corev1.ResourceList{}, corev1.ResourceList{}
	guaranteed := true
	if podLevelResourcesSet(s) {
		addQOSResources(requests, s.Resources.Requests)
		addQOSResources(limits, s.Resources.Limits)
		guaranteed = hasQOSLimits(s.Resources.Limits)
	} else {
		for _, c := range slices.Concat(s.Containers, s.InitContainers) {
			addQOSResources(requests, c.Resources.Requests)
			addQOSResources(limits, c.Resources.Limits)
			guaranteed = guaranteed && hasQOSLimits(c.Resources.Limits)
		}
	}
	if len(requests) == 0 && len(limits) == 0 {
		return corev1.PodQOSBestEffort
	}
	for name, req := range requests {
		if lim, ok := limits[name]; !ok || lim.Cmp(req) != 0 {
			guaranteed = false
		}
	}
	if guaranteed && len(requests) == len(limits) {
		return corev1.PodQOSGuaranteed
	}
	return corev1.PodQOSBurstable
}

var qosResources = []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory}

// podLevelResourcesSet: upstream uses the pod-level resources only when
// they name cpu or memory (the PodLevelResourcesFixKubeletQOSClass
// behaviour), so an empty spec.resources does not make a pod BestEffort.
func podLevelResourcesSet(s *corev1.PodSpec) bool {
	if s.Resources == nil {
		return false
	}
	for _, name := range qosResources {
		_, req := s.Resources.Requests[name]
		_, lim := s.Resources.Limits[name]
		if req || lim {
			return true
		}
	}
	return false
}

// addQOSResources adds the positive cpu and memory quantities of from to
// sum.
func addQOSResources(sum, from corev1.ResourceList) {
	for _, name := range qosResources {
		q, ok := from[name]
		if !ok || q.Sign() <= 0 {
			continue
		}
		q = q.DeepCopy()
		if s, ok := sum[name]; ok {
			q.Add(s)
		}
		sum[name] = q
	}
}

// hasQOSLimits: both cpu and memory limits are set and positive.
func hasQOSLimits(limits corev1.ResourceList) bool {
	for _, name := range qosResources {
		if q, ok := limits[name]; !ok || q.Sign() <= 0 {
			return false
		}
	}
	return true
}
