package registry

import (
	"context"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func podDef() *resourceDef {
	return &resourceDef{
		gvr:         corev1.SchemeGroupVersion.WithResource("pods"),
		kind:        "Pod",
		singular:    "pod",
		namespaced:  true,
		shortNames:  []string{"po"},
		categories:  []string{"all"},
		keyPrefix:   "pods",
		newFunc:     func() runtime.Object { return &corev1.Pod{} },
		newListFunc: func() runtime.Object { return &corev1.PodList{} },
		defaults:    func(obj any) { defaultPod(obj.(*corev1.Pod)) },
		fields:      podFields,
		fieldLabels: []string{"spec.nodeName", "spec.restartPolicy", "spec.schedulerName", "spec.serviceAccountName", "spec.hostNetwork", "status.phase", "status.podIP", "status.nominatedNodeName"},
		index:       &fieldIndex{field: "spec.nodeName", value: func(obj runtime.Object) string { return obj.(*corev1.Pod).Spec.NodeName }},
		validate: func(obj runtime.Object) field.ErrorList {
			return validatePodSpec(&obj.(*corev1.Pod).Spec, field.NewPath("spec"))
		},
		validateUpdate: func(obj, old runtime.Object) field.ErrorList {
			p, o := obj.(*corev1.Pod), old.(*corev1.Pod)
			spec := field.NewPath("spec")
			errs := ratchet(validatePodSpec(&p.Spec, spec), validatePodSpec(&o.Spec, spec))
			return append(errs, validatePodUpdate(p, o)...)
		},
		ownUpdateValidation: true,
		returnDeletedObject: true,
		gracefulDelete:      podGracefulDelete,
		status: &statusDef{
			keepStatus: func(obj, old runtime.Object) { obj.(*corev1.Pod).Status = old.(*corev1.Pod).Status },
			keepSpec: func(obj, old runtime.Object) {
				p, o := obj.(*corev1.Pod), old.(*corev1.Pod)
				p.Spec = o.Spec
				p.DeletionTimestamp = o.DeletionTimestamp
				p.OwnerReferences = o.OwnerReferences
			},
			resetOnCreate: func(obj runtime.Object) {
				p := obj.(*corev1.Pod)
				p.Status = corev1.PodStatus{Phase: corev1.PodPending, QOSClass: podQOS(&p.Spec)}
			},
			validate: func(obj, _ runtime.Object) field.ErrorList { return validatePodStatus(&obj.(*corev1.Pod).Status) },
		},
		columns: []metav1.TableColumnDefinition{
			nameCol,
			col("Ready", "string", "The aggregate readiness state of this pod for accepting traffic."),
			col("Status", "string", "The aggregate status of the containers in this pod."),
			col("Restarts", "string", "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted."),
			ageCol,
			wideCol("IP", "string", corev1.PodStatus{}.SwaggerDoc()["podIP"]),
			wideCol("Node", "string", corev1.PodSpec{}.SwaggerDoc()["nodeName"]),
			wideCol("Nominated Node", "string", corev1.PodStatus{}.SwaggerDoc()["nominatedNodeName"]),
			wideCol("Readiness Gates", "string", corev1.PodSpec{}.SwaggerDoc()["readinessGates"]),
		},
		row: func(obj runtime.Object) []any { return podRow(obj.(*corev1.Pod)) },
		rowConditions: func(obj runtime.Object) []metav1.TableRowCondition {
			return podRowConditions(obj.(*corev1.Pod))
		},
	}
}

func podFields(obj runtime.Object) fields.Set {
	p := obj.(*corev1.Pod)
	return fields.Set{
		"spec.nodeName":            p.Spec.NodeName,
		"spec.restartPolicy":       string(p.Spec.RestartPolicy),
		"spec.schedulerName":       p.Spec.SchedulerName,
		"spec.serviceAccountName":  p.Spec.ServiceAccountName,
		"spec.hostNetwork":         strconv.FormatBool(p.Spec.HostNetwork),
		"status.phase":             string(p.Status.Phase),
		"status.podIP":             podIP(p),
		"status.nominatedNodeName": p.Status.NominatedNodeName,
	}
}

// podGracefulDelete follows kube-apiserver: a pod bound to a node and not
// finished is only marked for deletion, and its node agent deletes it with
// grace period 0 once its containers stopped; any other pod goes at once.
func podGracefulDelete(_ context.Context, obj runtime.Object, options *metav1.DeleteOptions) bool {
	if options == nil {
		return false
	}
	pod := obj.(*corev1.Pod)
	period := int64(0)
	switch {
	case options.GracePeriodSeconds != nil:
		period = *options.GracePeriodSeconds
	case pod.Spec.TerminationGracePeriodSeconds != nil:
		period = *pod.Spec.TerminationGracePeriodSeconds
	}
	if pod.Spec.NodeName == "" || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		period = 0
	}
	if period < 0 {
		period = 1
	}
	options.GracePeriodSeconds = &period
	return true
}
