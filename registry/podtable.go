package registry

import (
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
)

// podRow is kube-apiserver's printPod (pkg/printers/internalversion):
// sidecars (init containers that always restart) count as containers once
// started, and their restarts count after initialization.
func podRow(pod *corev1.Pod) []any {
	restarts, lastRestart := 0, metav1.Time{}
	sidecarRestarts, lastSidecarRestart := 0, metav1.Time{}
	noteRestart := func(cs corev1.ContainerStatus, count *int, last *metav1.Time) {
		*count += int(cs.RestartCount)
		if t := cs.LastTerminationState.Terminated; t != nil && last.Before(&t.FinishedAt) {
			*last = t.FinishedAt
		}
	}
	total, ready := len(pod.Spec.Containers), 0
	sidecars := sets.New[string]()
	for _, c := range pod.Spec.InitContainers {
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			sidecars.Insert(c.Name)
			total++
		}
	}
	reason := string(pod.Status.Phase)
	if pod.Status.Reason != "" {
		reason = pod.Status.Reason
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Reason == corev1.PodReasonSchedulingGated {
			reason = corev1.PodReasonSchedulingGated
		}
	}

	// Init containers run in order; the first one not done explains the pod.
	initializing := false
	for i, cs := range pod.Status.InitContainerStatuses {
		noteRestart(cs, &restarts, &lastRestart)
		sidecar := sidecars.Has(cs.Name)
		if sidecar {
			noteRestart(cs, &sidecarRestarts, &lastSidecarRestart)
		}
		switch {
		case cs.State.Terminated != nil && cs.State.Terminated.ExitCode == 0:
			continue
		case sidecar && cs.Started != nil && *cs.Started:
			if cs.Ready {
				ready++
			}
			continue
		case cs.State.Terminated != nil:
			reason = "Init:" + terminationReason(cs.State.Terminated)
		case cs.State.Waiting != nil && cs.State.Waiting.Reason != "" && cs.State.Waiting.Reason != "PodInitializing":
			reason = "Init:" + cs.State.Waiting.Reason
		default:
			reason = fmt.Sprintf("Init:%d/%d", i, len(pod.Spec.InitContainers))
		}
		initializing = true
		break
	}
	if !initializing || podCondition(pod, corev1.PodInitialized) {
		restarts, lastRestart = sidecarRestarts, lastSidecarRestart
		running := false
		for i := len(pod.Status.ContainerStatuses) - 1; i >= 0; i-- {
			cs := pod.Status.ContainerStatuses[i]
			noteRestart(cs, &restarts, &lastRestart)
			switch {
			case cs.State.Waiting != nil && cs.State.Waiting.Reason != "":
				reason = cs.State.Waiting.Reason
			case cs.State.Terminated != nil:
				reason = terminationReason(cs.State.Terminated)
			case cs.Ready && cs.State.Running != nil:
				running = true
				ready++
			}
		}
		if reason == "Completed" && running {
			reason = "NotReady"
			if podCondition(pod, corev1.PodReady) {
				reason = "Running"
			}
		}
	}
	if pod.DeletionTimestamp != nil && pod.Status.Reason == "NodeLost" {
		reason = "Unknown"
	} else if pod.DeletionTimestamp != nil && pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed {
		reason = "Terminating"
	}

	restartsCell := strconv.Itoa(restarts)
	if restarts != 0 && !lastRestart.IsZero() {
		restartsCell = fmt.Sprintf("%d (%s ago)", restarts, age(lastRestart))
	}
	gates := "<none>"
	if n := len(pod.Spec.ReadinessGates); n > 0 {
		met := 0
		for _, g := range pod.Spec.ReadinessGates {
			if podCondition(pod, g.ConditionType) {
				met++
			}
		}
		gates = fmt.Sprintf("%d/%d", met, n)
	}
	ip := podIP(pod)
	return []any{pod.Name, fmt.Sprintf("%d/%d", ready, total), reason, restartsCell, age(pod.CreationTimestamp),
		orNone(ip), orNone(pod.Spec.NodeName), orNone(pod.Status.NominatedNodeName), gates}
}

// podIP is the first of podIPs, as upstream reads its internal type, which
// has no podIP; podIP when a client sets only that.
func podIP(pod *corev1.Pod) string {
	if len(pod.Status.PodIPs) > 0 {
		return pod.Status.PodIPs[0].IP
	}
	return pod.Status.PodIP
}

// podCondition reports whether the pod's condition t is True.
func podCondition(pod *corev1.Pod, t corev1.PodConditionType) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == t && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// podRowConditions mark a finished pod's row Completed, as upstream's
// printPod does.
func podRowConditions(pod *corev1.Pod) []metav1.TableRowCondition {
	switch pod.Status.Phase {
	case corev1.PodSucceeded:
		return []metav1.TableRowCondition{{Type: metav1.RowCompleted, Status: metav1.ConditionTrue, Reason: string(pod.Status.Phase), Message: "The pod has completed successfully."}}
	case corev1.PodFailed:
		return []metav1.TableRowCondition{{Type: metav1.RowCompleted, Status: metav1.ConditionTrue, Reason: string(pod.Status.Phase), Message: "The pod failed."}}
	}
	return nil
}

func terminationReason(t *corev1.ContainerStateTerminated) string {
	switch {
	case t.Reason != "":
		return t.Reason
	case t.Signal != 0:
		return fmt.Sprintf("Signal:%d", t.Signal)
	}
	return fmt.Sprintf("ExitCode:%d", t.ExitCode)
}
