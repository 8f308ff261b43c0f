package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
)

const (
	benchNamespace = "bench"
	sentAnnotation = "bench.kubestore.io/sent"
)

// payload is 1 KiB of pseudo-random hex, different for each ConfigMap and
// round, so that compression (gzip responses, etcd's page reuse) gets no
// easier ride than with real configuration.
func payload(i, round int) string {
	r := rand.New(rand.NewPCG(uint64(i), uint64(round)))
	const hex = "0123456789abcdef"
	b := make([]byte, 1024)
	for k := range b {
		b[k] = hex[r.IntN(16)]
	}
	return string(b)
}

// createBenchNamespace creates the namespace the bench's objects live in.
func createBenchNamespace(ctx context.Context, c *kubernetes.Clientset) error {
	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: benchNamespace}}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating namespace %s: %w", benchNamespace, err)
	}
	return nil
}

func configMapName(i int) string { return fmt.Sprintf("cm-%05d", i) }

func configMap(i int) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Name:      configMapName(i),
			Namespace: benchNamespace,
			Labels:    map[string]string{"app": "bench", "shard": fmt.Sprint(i % 10)},
		},
		Data: map[string]string{"payload": payload(i, 0)},
	}
}

func nodeName(i int) string { return fmt.Sprintf("node-%03d", i) }

func node(i int) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: nodeName(i),
			Labels: map[string]string{
				"kubernetes.io/arch":               "arm64",
				"kubernetes.io/os":                 "linux",
				"kubernetes.io/hostname":           nodeName(i),
				"node.kubernetes.io/instance-type": "gateway-4g",
				"topology.kubernetes.io/zone":      fmt.Sprintf("site-%d", i%4),
			},
		},
		Spec: corev1.NodeSpec{PodCIDR: fmt.Sprintf("10.%d.%d.0/24", 100+i/256, i%256)},
		Status: corev1.NodeStatus{
			Capacity: corev1.ResourceList{
				corev1.ResourceCPU:    resource.MustParse("4"),
				corev1.ResourceMemory: resource.MustParse("4Gi"),
				corev1.ResourcePods:   resource.MustParse("110"),
			},
			Allocatable: corev1.ResourceList{
				corev1.ResourceCPU:    resource.MustParse("3800m"),
				corev1.ResourceMemory: resource.MustParse("3584Mi"),
				corev1.ResourcePods:   resource.MustParse("110"),
			},
			Conditions: []corev1.NodeCondition{
				{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", Message: "kubelet is posting ready status"},
				{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientMemory"},
				{Type: corev1.NodeDiskPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasNoDiskPressure"},
			},
			Addresses: []corev1.NodeAddress{
				{Type: corev1.NodeInternalIP, Address: fmt.Sprintf("192.168.%d.%d", i/250, 1+i%250)},
				{Type: corev1.NodeHostName, Address: nodeName(i)},
			},
			NodeInfo: corev1.NodeSystemInfo{
				KubeletVersion: "v1.37.2", OperatingSystem: "linux", Architecture: "arm64",
				ContainerRuntimeVersion: "containerd://2.1.4", KernelVersion: "6.12.0", OSImage: "Debian GNU/Linux 13",
			},
		},
	}
}

func podName(i int) string { return fmt.Sprintf("agent-%04d", i) }

// pod is shaped like a DaemonSet-managed agent on an edge node: two
// containers with resources, probes, env and mounts, the projected service
// account token volume, tolerations and an owner.
func pod(i, nodes int) *corev1.Pod {
	ctrl := true
	mounts := []corev1.VolumeMount{
		{Name: "config", MountPath: "/etc/agent"},
		{Name: "data", MountPath: "/var/lib/agent"},
		{Name: "kube-api-access", MountPath: "/var/run/secrets/kubernetes.io/serviceaccount", ReadOnly: true},
	}
	res := corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("128Mi")},
	}
	expiry := int64(3607)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:      podName(i),
			Namespace: benchNamespace,
			Labels: map[string]string{
				"app.kubernetes.io/name":     "edge-agent",
				"app.kubernetes.io/instance": fmt.Sprintf("agent-%d", i%10),
				"controller-revision-hash":   "6d9f7c8b5",
				"pod-template-generation":    "3",
			},
			Annotations: map[string]string{"kubectl.kubernetes.io/default-container": "agent"},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "apps/v1", Kind: "DaemonSet", Name: fmt.Sprintf("agent-%d", i%10),
				UID: types.UID(fmt.Sprintf("5f0c8a4e-1b2d-4c3e-9f8a-%012d", i%10)), Controller: &ctrl, BlockOwnerDeletion: &ctrl,
			}},
		},
		Spec: corev1.PodSpec{
			NodeName:           nodeName(i % nodes),
			ServiceAccountName: "default",
			PriorityClassName:  "system-node-critical",
			Containers: []corev1.Container{
				{
					Name:  "agent",
					Image: "registry.example.com/edge/agent:v2.14.3",
					Args:  []string{"--config=/etc/agent/agent.yaml", "--v=2", "--metrics-bind-address=:9100"},
					Env: []corev1.EnvVar{
						{Name: "NODE_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}},
						{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
						{Name: "LOG_LEVEL", Value: "info"},
					},
					Ports:          []corev1.ContainerPort{{Name: "metrics", ContainerPort: 9100, Protocol: corev1.ProtocolTCP}},
					Resources:      res,
					VolumeMounts:   mounts,
					LivenessProbe:  &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(9100)}}, PeriodSeconds: 10},
					ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/readyz", Port: intstr.FromInt32(9100)}}, PeriodSeconds: 5},
				},
				{
					Name:         "log-forwarder",
					Image:        "registry.example.com/edge/fluent-bit:3.2.1",
					Resources:    res,
					VolumeMounts: mounts[1:],
				},
			},
			Volumes: []corev1.Volume{
				{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "agent-config"}}}},
				{Name: "data", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/var/lib/agent"}}},
				{Name: "kube-api-access", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
					{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: &expiry}},
					{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"}, Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
				}}}},
			},
			Tolerations: []corev1.Toleration{
				{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
				{Key: "node.kubernetes.io/unreachable", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
				{Key: "node.kubernetes.io/disk-pressure", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
			},
		},
	}
}

// runningStatus is what a kubelet reports for the pod once it runs.
func runningStatus(p *corev1.Pod, i int) corev1.PodStatus {
	now := metav1.Now()
	var cs []corev1.ContainerStatus
	for _, c := range p.Spec.Containers {
		cs = append(cs, corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, ImageID: c.Image + "@sha256:" + strings.Repeat("ab", 32),
			ContainerID: fmt.Sprintf("containerd://%064x", i*7+len(c.Name)),
			Ready:       true, Started: &[]bool{true}[0],
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
		})
	}
	ip := fmt.Sprintf("10.%d.%d.%d", 100+(i%(1<<16))/(1<<14), (i/250)%256, 2+i%250)
	return corev1.PodStatus{
		Phase: corev1.PodRunning,
		Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
		},
		HostIP: "192.168.0.10", HostIPs: []corev1.HostIP{{IP: "192.168.0.10"}},
		PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}},
		StartTime: &now, QOSClass: corev1.PodQOSBurstable, ContainerStatuses: cs,
	}
}
