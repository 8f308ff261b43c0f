// Package podgc is kubestore's pod garbage collector: the part of
// kube-controller-manager's (k8s.io/kubernetes pkg/controller/podgc,
// gcOrphaned) that a store without kube-controller-manager needs. A pod
// bound to a node that does not exist is never run nor finally deleted by
// any kubelet: left alone it stays, Terminating for good once deleted, and
// holds its namespace's deletion (issue 50). Such a pod is marked Failed
// with the DisruptionTarget condition and deleted at once, as upstream
// does, once its node has been missing for the quarantine (40 s) and a
// read from etcd confirms it.
//
// The mirror's copies of an upstream's pods are not touched: the
// upstream's own collector decides on them. Several kubestores on one etcd
// may run it at once: the status is applied by its field manager, the
// delete carries the pod's uid as a precondition.
package podgc

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	corev1apply "k8s.io/client-go/applyconfigurations/core/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/kubestore/kubestore/mirrored"
)

// Timing is how often the collector looks, and how long a node must be
// missing before its pods are collected: upstream's gcCheckPeriod and
// quarantineTime.
type Timing struct {
	Period     time.Duration
	Quarantine time.Duration
}

// DefaultTiming is upstream's: every 20 s, after 40 s.
var DefaultTiming = Timing{Period: 20 * time.Second, Quarantine: 40 * time.Second}

// fieldManager is upstream's, for the status it applies.
const fieldManager = "PodGC"

// Controller collects the pods of nodes that do not exist.
type Controller struct {
	client corev1client.CoreV1Interface
	timing Timing
	// missing is, by node name, when its pods were first seen without
	// it.
	missing map[string]time.Time
}

// New returns the collector, which reads and writes through client.
func New(client corev1client.CoreV1Interface, timing Timing) *Controller {
	return &Controller{client: client, timing: timing, missing: map[string]time.Time{}}
}

// Run collects every Period until ctx ends.
func (c *Controller) Run(ctx context.Context) {
	wait.UntilWithContext(ctx, c.sweep, c.timing.Period)
}

// sweep is one pass: pods and nodes from the watch cache, each node that
// has been missing for the quarantine read again from etcd, and its pods
// collected.
func (c *Controller) sweep(ctx context.Context) {
	pods, err := c.client.Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		klog.V(2).InfoS("Pod garbage collector: listing pods", "err", err)
		return
	}
	nodes, err := c.client.Nodes().List(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		klog.V(2).InfoS("Pod garbage collector: listing nodes", "err", err)
		return
	}
	exists := map[string]bool{}
	for _, n := range nodes.Items {
		exists[n.Name] = true
	}
	orphans := map[string][]*corev1.Pod{}
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Spec.NodeName == "" || exists[p.Spec.NodeName] || mirrored.Is(p.Annotations) {
			continue
		}
		orphans[p.Spec.NodeName] = append(orphans[p.Spec.NodeName], p)
	}
	for node := range c.missing {
		if orphans[node] == nil {
			delete(c.missing, node)
		}
	}
	now := time.Now()
	for node, ps := range orphans {
		first, seen := c.missing[node]
		if !seen {
			c.missing[node] = now
			continue
		}
		if now.Sub(first) < c.timing.Quarantine {
			continue
		}
		// The cache may lag a node that registered just now: etcd says.
		if _, err := c.client.Nodes().Get(ctx, node, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			if err == nil {
				delete(c.missing, node)
			}
			continue
		}
		for _, p := range ps {
			c.collect(ctx, p)
		}
	}
}

// collect marks p Failed with the DisruptionTarget condition and deletes
// it without a grace period (upstream's markFailedAndDeletePod).
func (c *Controller) collect(ctx context.Context, p *corev1.Pod) {
	apply := corev1apply.Pod(p.Name, p.Namespace).WithStatus(corev1apply.PodStatus().WithConditions(
		corev1apply.PodCondition().WithType(corev1.DisruptionTarget).WithStatus(corev1.ConditionTrue).
			WithReason("DeletionByPodGC").WithMessage("PodGC: node no longer exists").WithLastTransitionTime(metav1.Now())))
	if p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
		apply.Status.WithPhase(corev1.PodFailed)
	}
	if _, err := c.client.Pods(p.Namespace).ApplyStatus(ctx, apply, metav1.ApplyOptions{FieldManager: fieldManager, Force: true}); err != nil {
		if !apierrors.IsNotFound(err) {
			klog.InfoS("Pod garbage collector: marking a pod whose node does not exist failed", "pod", klog.KObj(p), "node", p.Spec.NodeName, "err", err)
		}
		return
	}
	err := c.client.Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0), Preconditions: &metav1.Preconditions{UID: &p.UID}})
	switch {
	case err == nil:
		klog.InfoS("Pod garbage collector: deleted a pod whose node does not exist", "pod", klog.KObj(p), "node", p.Spec.NodeName)
	case !apierrors.IsNotFound(err) && !apierrors.IsConflict(err):
		klog.InfoS("Pod garbage collector: deleting a pod whose node does not exist", "pod", klog.KObj(p), "node", p.Spec.NodeName, "err", err)
	}
}
