package registry

import (
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/diff"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
)

// makePod is a valid, defaulted pod with one container, as upstream's
// podtest.MakePod, changed by opts.
func makePod(name string, opts ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", ResourceVersion: "1"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "ctr", Image: "image"}}},
	}
	for _, o := range opts {
		o(p)
	}
	defaultPod(p)
	return p
}

// errorsContain reports whether errs, printed as upstream's tests print
// them, contain want; want "" means no error.
func errorsContain(t *testing.T, errs field.ErrorList, want string) {
	t.Helper()
	switch {
	case want == "" && len(errs) > 0:
		t.Errorf("unexpected errors: %v", errs.ToAggregate())
	case want != "" && len(errs) == 0:
		t.Errorf("no error, want one containing %q", want)
	case want != "" && !strings.Contains(errs.ToAggregate().Error(), want):
		t.Errorf("errors %q do not contain %q", errs.ToAggregate(), want)
	}
}

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

// Cases of TestValidatePodUpdate in k8s.io/kubernetes
// pkg/apis/core/validation/validation_test.go, through the pod strategy's
// ValidateUpdate (metadata, spec and update rules together), with upstream's
// expected error text.
func TestPodValidateUpdate(t *testing.T) {
	now := metav1.Now()
	containers := func(images ...string) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			p.Spec.Containers = nil
			for i, image := range images {
				p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: string(rune('a' + i)), Image: image})
			}
		}
	}
	initContainers := func(images ...string) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			p.Spec.InitContainers = nil
			for i, image := range images {
				p.Spec.InitContainers = append(p.Spec.InitContainers, corev1.Container{Name: "init" + string(rune('a'+i)), Image: image})
			}
		}
	}
	deadline := func(s int64) func(*corev1.Pod) { return func(p *corev1.Pod) { p.Spec.ActiveDeadlineSeconds = &s } }
	meta := func(m func(*metav1.ObjectMeta)) func(*corev1.Pod) { return func(p *corev1.Pod) { m(&p.ObjectMeta) } }
	nodeName := func(n string) func(*corev1.Pod) { return func(p *corev1.Pod) { p.Spec.NodeName = n } }
	limits := func(cpu, memory string) func(*corev1.Pod) {
		return func(p *corev1.Pod) { p.Spec.Containers[0].Resources.Limits = resources(cpu, memory) }
	}
	tolerations := func(ts ...corev1.Toleration) func(*corev1.Pod) {
		return func(p *corev1.Pod) { p.Spec.Tolerations = ts }
	}
	seconds := func(s int64) *int64 { return &s }
	grace := func(s int64) func(*corev1.Pod) {
		return func(p *corev1.Pod) { p.Spec.TerminationGracePeriodSeconds = &s }
	}
	gates := func(names ...string) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			for _, n := range names {
				p.Spec.SchedulingGates = append(p.Spec.SchedulingGates, corev1.PodSchedulingGate{Name: n})
			}
		}
	}
	nodeSelector := func(m map[string]string) func(*corev1.Pod) { return func(p *corev1.Pod) { p.Spec.NodeSelector = m } }

	tests := []struct {
		name     string
		old, new *corev1.Pod
		err      string
	}{
		{name: "nothing", old: makePod("foo"), new: makePod("foo")},
		{name: "ids", old: makePod("bar"), new: makePod("foo"), err: "metadata.name"},
		{name: "labels", old: makePod("foo", meta(func(m *metav1.ObjectMeta) { m.Labels = map[string]string{"bar": "foo"} })),
			new: makePod("foo", meta(func(m *metav1.ObjectMeta) { m.Labels = map[string]string{"foo": "bar"} }))},
		{name: "annotations", old: makePod("foo", meta(func(m *metav1.ObjectMeta) { m.Annotations = map[string]string{"bar": "foo"} })),
			new: makePod("foo", meta(func(m *metav1.ObjectMeta) { m.Annotations = map[string]string{"foo": "bar"} }))},
		{name: "less containers", old: makePod("foo", containers("foo:V1", "bar:V1")), new: makePod("foo", containers("foo:V2")),
			err: "may not add or remove containers"},
		{name: "more containers", old: makePod("foo", containers("foo:V1")), new: makePod("foo", containers("foo:V2", "bar:V2")),
			err: "may not add or remove containers"},
		{name: "more init containers", old: makePod("foo", initContainers("foo:V1", "bar:V1")), new: makePod("foo", initContainers("foo:V2")),
			err: "may not add or remove containers"},
		{name: "deletion timestamp removed", old: makePod("foo", meta(func(m *metav1.ObjectMeta) { m.DeletionTimestamp = &now })),
			new: makePod("foo"), err: "metadata.deletionTimestamp"},
		{name: "deletion timestamp added", old: makePod("foo"),
			new: makePod("foo", meta(func(m *metav1.ObjectMeta) { m.DeletionTimestamp = &now })), err: "metadata.deletionTimestamp"},
		{name: "deletion grace period seconds changed",
			old: makePod("foo", meta(func(m *metav1.ObjectMeta) { m.DeletionTimestamp, m.DeletionGracePeriodSeconds = &now, seconds(31) })),
			new: makePod("foo", meta(func(m *metav1.ObjectMeta) { m.DeletionTimestamp, m.DeletionGracePeriodSeconds = &now, seconds(30) })),
			err: "metadata.deletionGracePeriodSeconds"},
		{name: "image change", old: makePod("foo", containers("foo:V2")), new: makePod("foo", containers("foo:V1"))},
		{name: "init container image change", old: makePod("foo", initContainers("foo:V2")), new: makePod("foo", initContainers("foo:V1"))},
		{name: "image change to empty", old: makePod("foo", containers("foo:V2")), new: makePod("foo", containers("")),
			err: "spec.containers[0].image"},
		{name: "init container image change to empty", old: makePod("foo", initContainers("foo:V2")), new: makePod("foo", initContainers("")),
			err: "spec.initContainers[0].image"},
		{name: "activeDeadlineSeconds no change, nil", old: makePod("foo"), new: makePod("foo")},
		{name: "activeDeadlineSeconds no change, set", old: makePod("foo", deadline(30)), new: makePod("foo", deadline(30))},
		{name: "activeDeadlineSeconds change to positive from nil", old: makePod("foo"), new: makePod("foo", deadline(30))},
		{name: "activeDeadlineSeconds change to smaller positive", old: makePod("foo", deadline(31)), new: makePod("foo", deadline(30))},
		{name: "activeDeadlineSeconds change to larger positive", old: makePod("foo", deadline(30)), new: makePod("foo", deadline(31)),
			err: "spec.activeDeadlineSeconds"},
		{name: "activeDeadlineSeconds change to negative from nil", old: makePod("foo"), new: makePod("foo", deadline(-30)),
			err: "spec.activeDeadlineSeconds"},
		{name: "activeDeadlineSeconds change to negative from positive", old: makePod("foo", deadline(30)), new: makePod("foo", deadline(-30)),
			err: "spec.activeDeadlineSeconds"},
		{name: "activeDeadlineSeconds change to zero from positive", old: makePod("foo", deadline(30)), new: makePod("foo", deadline(0)),
			err: "spec.activeDeadlineSeconds"},
		{name: "activeDeadlineSeconds change to zero from nil", old: makePod("foo"), new: makePod("foo", deadline(0)),
			err: "spec.activeDeadlineSeconds"},
		{name: "activeDeadlineSeconds change to nil from positive", old: makePod("foo", deadline(30)), new: makePod("foo"),
			err: "spec.activeDeadlineSeconds"},
		{name: "cpu limit change", old: makePod("pod", limits("100m", "")), new: makePod("pod", limits("200m", "")),
			err: "spec: Forbidden: pod updates may not change fields"},
		{name: "memory limit change", old: makePod("pod", limits("100m", "200Mi")), new: makePod("pod", limits("100m", "100Mi")),
			err: "spec: Forbidden: pod updates may not change fields"},
		{name: "port change",
			old: makePod("pod", func(p *corev1.Pod) {
				p.Spec.Containers[0].Ports = []corev1.ContainerPort{{HostPort: 8000, ContainerPort: 80}}
			}),
			new: makePod("pod", func(p *corev1.Pod) {
				p.Spec.Containers[0].Ports = []corev1.ContainerPort{{HostPort: 8080, ContainerPort: 80}}
			}),
			err: "spec: Forbidden: pod updates may not change fields"},
		{name: "existing toleration value modified in pod spec updates",
			old: makePod("foo", nodeName("node1"), tolerations(corev1.Toleration{Key: "key1", Value: "value1"})),
			new: makePod("foo", nodeName("node1"), tolerations(corev1.Toleration{Key: "key1", Value: "value2"})),
			err: "spec.tolerations: Forbidden"},
		{name: "existing toleration value modified in pod spec updates with modified tolerationSeconds",
			old: makePod("foo", nodeName("node1"), tolerations(corev1.Toleration{Key: "key1", Value: "value1", Operator: "Equal", Effect: "NoExecute", TolerationSeconds: seconds(10)})),
			new: makePod("foo", nodeName("node1"), tolerations(corev1.Toleration{Key: "key1", Value: "value2", Operator: "Equal", Effect: "NoExecute"})),
			err: "spec.tolerations: Forbidden"},
		{name: "modified tolerationSeconds in existing toleration value in pod spec updates",
			old: makePod("foo", nodeName("node1"), tolerations(corev1.Toleration{Key: "key1", Value: "value1", Operator: "Equal", Effect: "NoExecute", TolerationSeconds: seconds(20)})),
			new: makePod("foo", nodeName("node1"), tolerations(corev1.Toleration{Key: "key1", Value: "value1", Operator: "Equal", Effect: "NoExecute", TolerationSeconds: seconds(10)}))},
		{name: "toleration modified in updates to an unscheduled pod",
			old: makePod("foo", tolerations(corev1.Toleration{Key: "key1", Value: "value1"})),
			new: makePod("foo", tolerations(corev1.Toleration{Key: "key1", Value: "value2"})),
			err: "spec.tolerations: Forbidden"},
		{name: "tolerations unmodified in updates to a scheduled pod",
			old: makePod("foo", nodeName("node1"), tolerations(corev1.Toleration{Key: "key1", Value: "value1"})),
			new: makePod("foo", nodeName("node1"), tolerations(corev1.Toleration{Key: "key1", Value: "value1"}))},
		{name: "added valid new toleration to existing tolerations in pod spec updates",
			old: makePod("foo", nodeName("node1"), tolerations(corev1.Toleration{Key: "key1", Value: "value1", Operator: "Equal", Effect: "NoExecute", TolerationSeconds: seconds(10)})),
			new: makePod("foo", nodeName("node1"), tolerations(
				corev1.Toleration{Key: "key1", Value: "value1", Operator: "Equal", Effect: "NoExecute", TolerationSeconds: seconds(20)},
				corev1.Toleration{Key: "key2", Value: "value2", Operator: "Equal", Effect: "NoExecute", TolerationSeconds: seconds(30)}))},
		{name: "removed nodeName from pod spec", old: makePod("foo"), new: makePod("foo", nodeName("foo")),
			err: "spec: Forbidden: pod updates may not change fields"},
		{name: "changed priority class name",
			old: makePod("foo", nodeName("node1"), func(p *corev1.Pod) { p.Spec.PriorityClassName = "foo-priority" }),
			new: makePod("foo", nodeName("node1"), func(p *corev1.Pod) { p.Spec.PriorityClassName = "bar-priority" }),
			err: "spec: Forbidden: pod updates"},
		{name: "update termination grace period seconds", old: makePod("foo", grace(-1)), new: makePod("foo", grace(1))},
		{name: "update termination grace period seconds not 1", old: makePod("foo", grace(-1)), new: makePod("foo", grace(0)),
			err: "spec: Forbidden: pod updates"},
		{name: "update pod spec schedulingGates: add new scheduling gate", old: makePod("foo"), new: makePod("foo", gates("foo")),
			err: "Forbidden: only deletion is allowed, but found new scheduling gate 'foo'"},
		{name: "update pod spec schedulingGates: mutating an existing scheduling gate", old: makePod("foo", gates("foo")), new: makePod("foo", gates("bar")),
			err: "Forbidden: only deletion is allowed, but found new scheduling gate 'bar'"},
		{name: "update pod spec schedulingGates: mutating an existing scheduling gate along with deletion",
			old: makePod("foo", gates("foo", "bar")), new: makePod("foo", gates("baz")),
			err: "Forbidden: only deletion is allowed, but found new scheduling gate 'baz'"},
		{name: "update pod spec schedulingGates: legal deletion", old: makePod("foo", gates("foo")), new: makePod("foo")},
		{name: "adding node selector is allowed for gated pods", old: makePod("foo", gates("baz")),
			new: makePod("foo", gates("baz"), nodeSelector(map[string]string{"foo": "bar"}))},
		{name: "adding node selector is not allowed for non-gated pods",
			old: makePod("foo", nodeSelector(map[string]string{"foo": "bar"})),
			new: makePod("foo", nodeSelector(map[string]string{"foo": "bar", "foo2": "bar2"})),
			err: "Forbidden: pod updates may not change fields other than `spec.containers[*].image"},
		{name: "removing node selector is not allowed for gated pods",
			old: makePod("foo", gates("baz"), nodeSelector(map[string]string{"foo": "bar"})), new: makePod("foo", gates("baz")),
			err: "spec.nodeSelector: Invalid value:"},
		{name: "old pod spec has scheduling gate, new pod spec does not, and node selector is added",
			old: makePod("foo", gates("baz"), nodeSelector(map[string]string{"foo": "bar"})),
			new: makePod("foo", nodeSelector(map[string]string{"foo": "bar", "foo2": "bar2"}))},
		{name: "modifying value of existing node selector is not allowed",
			old: makePod("foo", gates("baz"), nodeSelector(map[string]string{"foo": "bar"})),
			new: makePod("foo", gates("baz"), nodeSelector(map[string]string{"foo": "new value"})),
			err: "spec.nodeSelector: Invalid value:"},
		// kubestore differs here on purpose: upstream lets a gated pod gain
		// node affinity terms ("addition to nodeAffinity is allowed for gated
		// pods"); kubestore runs no scheduler and refuses the change.
		{name: "addition to nodeAffinity of a gated pod is refused", old: makePod("foo", gates("baz")),
			new: makePod("foo", gates("baz"), func(p *corev1.Pod) {
				p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
					PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{Weight: 1}},
				}}
			}),
			err: "spec: Forbidden: pod updates may not change fields"},
	}
	st := newStrategy(nil, podDef())
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errorsContain(t, st.ValidateUpdate(t.Context(), tt.new, tt.old), tt.err)
		})
	}
}

// A pod stored with a spec this release refuses (by an older release, or
// written below the API) keeps its errors on update, as upstream lets it
// (GetValidationOptionsFromPodSpecAndMeta): its labels and finalizers can
// change, and its delete complete; an error the update brings is refused.
func TestPodUpdateRatchetsTheOldSpecsErrors(t *testing.T) {
	st := newStrategy(nil, podDef())
	old := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "old", Namespace: "default", ResourceVersion: "1", Finalizers: []string{"example.com/keep"}},
		Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyAlways, DNSPolicy: corev1.DNSClusterFirst,
			TerminationGracePeriodSeconds: ptr.To[int64](30), SchedulerName: "default-scheduler",
			Containers: []corev1.Container{{Name: "c", Image: "pause", ImagePullPolicy: corev1.PullIfNotPresent,
				TerminationMessagePolicy: corev1.TerminationMessageReadFile,
				Env:                      []corev1.EnvVar{{Name: "A", Value: "1"}, {Name: "A", Value: "2"}, {Name: "", Value: "x"}}}}},
	}
	if errs := st.Validate(t.Context(), old); len(errs) == 0 {
		t.Fatal("the old pod's spec is valid: the test needs one this release refuses")
	}
	relabelled := old.DeepCopy()
	relabelled.Labels = map[string]string{"app": "x"}
	relabelled.Finalizers = nil
	errorsContain(t, st.ValidateUpdate(t.Context(), relabelled, old), "")

	unimaged := relabelled.DeepCopy()
	unimaged.Spec.Containers[0].Image = ""
	errorsContain(t, st.ValidateUpdate(t.Context(), unimaged, old), "spec.containers[0].image: Required value")
}

// The cases of TestPrintPod, TestPrintPodWithRestartableInitContainer,
// TestPrintPodwide and TestPrintPodConditions in k8s.io/kubernetes
// pkg/printers/internalversion/printers_test.go: the row kubectl get pods
// shows (-o wide adds the last four cells) and its conditions.
func TestPodTable(t *testing.T) {
	ago := func(d time.Duration) metav1.Time { return metav1.NewTime(time.Now().Add(-d)) }
	deleted := ago(10 * time.Second)
	restarted := func(count int32, d time.Duration, state corev1.ContainerState) corev1.ContainerStatus {
		return corev1.ContainerStatus{RestartCount: count, State: state,
			LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{FinishedAt: ago(d)}}}
	}
	running := corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
	waiting := corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{}}
	terminated := func(reason string, code int32) corev1.ContainerState {
		return corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: reason, ExitCode: code}}
	}
	ready := func(cs corev1.ContainerStatus) corev1.ContainerStatus { cs.Ready = true; return cs }
	named := func(name string, started bool, cs corev1.ContainerStatus) corev1.ContainerStatus {
		cs.Name, cs.Started = name, &started
		return cs
	}
	always := corev1.ContainerRestartPolicyAlways
	sidecars := []corev1.Container{{Name: "restartable-init-1", RestartPolicy: &always}, {Name: "restartable-init-2", RestartPolicy: &always}}
	initialized := func(s corev1.ConditionStatus) []corev1.PodCondition {
		return []corev1.PodCondition{{Type: corev1.PodInitialized, Status: s}}
	}
	succeeded := []metav1.TableRowCondition{{Type: metav1.RowCompleted, Status: metav1.ConditionTrue, Reason: "Succeeded", Message: "The pod has completed successfully."}}
	failed := []metav1.TableRowCondition{{Type: metav1.RowCompleted, Status: metav1.ConditionTrue, Reason: "Failed", Message: "The pod failed."}}

	tests := []struct {
		name       string
		pod        corev1.Pod
		cells      []any // the first five cells, or all nine
		conditions []metav1.TableRowCondition
	}{
		{name: "name, num of containers, restarts, container ready status", pod: corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "test1"}, Spec: corev1.PodSpec{Containers: make([]corev1.Container, 2)},
			Status: corev1.PodStatus{Phase: "podPhase", ContainerStatuses: []corev1.ContainerStatus{
				{Ready: true, RestartCount: 3, State: running}, {RestartCount: 3}}},
		}, cells: []any{"test1", "1/2", "podPhase", "6", "<unknown>"}},
		{name: "container error overwrites pod phase", pod: corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "test2"}, Spec: corev1.PodSpec{Containers: make([]corev1.Container, 2)},
			Status: corev1.PodStatus{Phase: "podPhase", ContainerStatuses: []corev1.ContainerStatus{
				{Ready: true, RestartCount: 3, State: running},
				{State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerWaitingReason"}}, RestartCount: 3}}},
		}, cells: []any{"test2", "1/2", "ContainerWaitingReason", "6", "<unknown>"}},
		{name: "the first container overwrites the rest", pod: corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "test3"}, Spec: corev1.PodSpec{Containers: make([]corev1.Container, 2)},
			Status: corev1.PodStatus{Phase: "podPhase", ContainerStatuses: []corev1.ContainerStatus{
				{State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerWaitingReason"}}, RestartCount: 3},
				{State: terminated("ContainerTerminatedReason", 0), RestartCount: 3}}},
		}, cells: []any{"test3", "0/2", "ContainerWaitingReason", "6", "<unknown>"}},
		{name: "ready is not enough for reporting running", pod: corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "test4"}, Spec: corev1.PodSpec{Containers: make([]corev1.Container, 2)},
			Status: corev1.PodStatus{Phase: "podPhase", ContainerStatuses: []corev1.ContainerStatus{
				{Ready: true, RestartCount: 3, State: running}, {Ready: true, RestartCount: 3}}},
		}, cells: []any{"test4", "1/2", "podPhase", "6", "<unknown>"}},
		{name: "pod reason overwrites phase", pod: corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "test5"}, Spec: corev1.PodSpec{Containers: make([]corev1.Container, 2)},
			Status: corev1.PodStatus{Reason: "podReason", Phase: "podPhase", ContainerStatuses: []corev1.ContainerStatus{
				{Ready: true, RestartCount: 3, State: running}, {Ready: true, RestartCount: 3}}},
		}, cells: []any{"test5", "1/2", "podReason", "6", "<unknown>"}},
		{name: "one running and one completed, without ready condition", pod: corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "test6"}, Spec: corev1.PodSpec{Containers: make([]corev1.Container, 2)},
			Status: corev1.PodStatus{Phase: "Running", ContainerStatuses: []corev1.ContainerStatus{
				{Ready: true, RestartCount: 3, State: terminated("Completed", 0)}, {Ready: true, RestartCount: 3, State: running}}},
		}, cells: []any{"test6", "1/2", "NotReady", "6", "<unknown>"}},
		{name: "one running and one completed, with ready condition", pod: corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "test6"}, Spec: corev1.PodSpec{Containers: make([]corev1.Container, 2)},
			Status: corev1.PodStatus{Phase: "Running", ContainerStatuses: []corev1.ContainerStatus{
				{Ready: true, RestartCount: 3, State: terminated("Completed", 0)}, {Ready: true, RestartCount: 3, State: running}},
				Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
		}, cells: []any{"test6", "1/2", "Running", "6", "<unknown>"}},
		{name: "init container restarting and container not running", pod: corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "test7"},
			Spec:       corev1.PodSpec{InitContainers: make([]corev1.Container, 1), Containers: make([]corev1.Container, 1)},
			Status: corev1.PodStatus{Phase: "podPhase",
				InitContainerStatuses: []corev1.ContainerStatus{restarted(3, 10*time.Second, running)},
				ContainerStatuses:     []corev1.ContainerStatus{{State: waiting}}},
		}, cells: []any{"test7", "0/1", "Init:0/1", "3 (10s ago)", "<unknown>"}},
		{name: "two init containers, one restarting, one not running", pod: corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "test8"},
			Spec:       corev1.PodSpec{InitContainers: make([]corev1.Container, 2), Containers: make([]corev1.Container, 1)},
			Status: corev1.PodStatus{Phase: "podPhase",
				InitContainerStatuses: []corev1.ContainerStatus{restarted(3, 10*time.Second, running), {State: waiting}},
				ContainerStatuses:     []corev1.ContainerStatus{{State: waiting}}},
		}, cells: []any{"test8", "0/1", "Init:0/2", "3 (10s ago)", "<unknown>"}},
		{name: "two init containers, one completed without restarts, one restarting", pod: corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "test9"},
			Spec:       corev1.PodSpec{InitContainers: make([]corev1.Container, 2), Containers: make([]corev1.Container, 1)},
			Status: corev1.PodStatus{Phase: "podPhase",
				InitContainerStatuses: []corev1.ContainerStatus{{State: terminated("", 0)}, restarted(3, 10*time.Second, running)},
				ContainerStatuses:     []corev1.ContainerStatus{{State: waiting}}},
		}, cells: []any{"test9", "0/1", "Init:1/2", "3 (10s ago)", "<unknown>"}},
		{name: "two init containers, one completed with restarts, one restarting", pod: corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "test10"},
			Spec:       corev1.PodSpec{InitContainers: make([]corev1.Container, 2), Containers: make([]corev1.Container, 1)},
			Status: corev1.PodStatus{Phase: "podPhase",
				InitContainerStatuses: []corev1.ContainerStatus{restarted(2, 2*time.Minute, terminated("", 0)), restarted(3, 10*time.Second, running)},
				ContainerStatuses:     []corev1.ContainerStatus{{State: waiting}}},
		}, cells: []any{"test10", "0/1", "Init:1/2", "5 (10s ago)", "<unknown>"}},
		{name: "init container completed with restarts, container restarting", pod: corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "test11"},
			Spec:       corev1.PodSpec{InitContainers: make([]corev1.Container, 1), Containers: make([]corev1.Container, 1)},
			Status: corev1.PodStatus{Phase: "Running",
				InitContainerStatuses: []corev1.ContainerStatus{restarted(2, 2*time.Minute, terminated("", 0))},
				ContainerStatuses:     []corev1.ContainerStatus{restarted(4, 20*time.Second, running)}},
		}, cells: []any{"test11", "0/1", "Running", "4 (20s ago)", "<unknown>"}},
		{name: "container restarted 5d ago", pod: corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "test12"}, Spec: corev1.PodSpec{Containers: make([]corev1.Container, 1)},
			Status: corev1.PodStatus{Phase: "Running", ContainerStatuses: []corev1.ContainerStatus{ready(restarted(3, 5*24*time.Hour, running))}},
		}, cells: []any{"test12", "1/1", "Running", "3 (5d ago)", "<unknown>"}},
		{name: "one container never restarted, the other 10d ago", pod: corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "test13"}, Spec: corev1.PodSpec{Containers: make([]corev1.Container, 2)},
			Status: corev1.PodStatus{Phase: "Running", ContainerStatuses: []corev1.ContainerStatus{
				{Ready: true, State: running}, ready(restarted(3, 10*24*time.Hour, running))}},
		}, cells: []any{"test13", "2/2", "Running", "3 (10d ago)", "<unknown>"}},
		{name: "one container restarted 5d ago, the other 20d ago", pod: corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "test14"}, Spec: corev1.PodSpec{Containers: make([]corev1.Container, 2)},
			Status: corev1.PodStatus{Phase: "Running", ContainerStatuses: []corev1.ContainerStatus{
				ready(restarted(6, 5*24*time.Hour, running)), ready(restarted(3, 20*24*time.Hour, running))}},
		}, cells: []any{"test14", "2/2", "Running", "9 (5d ago)", "<unknown>"}},
		{name: "PodScheduled condition with reason SchedulingGated", pod: corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "test15"}, Spec: corev1.PodSpec{Containers: make([]corev1.Container, 2)},
			Status: corev1.PodStatus{Phase: "podPhase", Conditions: []corev1.PodCondition{
				{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonSchedulingGated}}},
		}, cells: []any{"test15", "0/2", corev1.PodReasonSchedulingGated, "0", "<unknown>"}},
		{name: "succeeded", pod: corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "test16"}, Spec: corev1.PodSpec{Containers: make([]corev1.Container, 1)},
			Status: corev1.PodStatus{Phase: corev1.PodSucceeded, ContainerStatuses: []corev1.ContainerStatus{{State: terminated("Completed", 0)}}},
		}, cells: []any{"test16", "0/1", "Completed", "0", "<unknown>"}, conditions: succeeded},
		{name: "failed", pod: corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "test17"}, Spec: corev1.PodSpec{Containers: make([]corev1.Container, 1)},
			Status: corev1.PodStatus{Phase: corev1.PodFailed, ContainerStatuses: []corev1.ContainerStatus{{State: terminated("Error", 1)}}},
		}, cells: []any{"test17", "0/1", "Error", "0", "<unknown>"}, conditions: failed},
		{name: "succeeded with deletion", pod: corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "test18", DeletionTimestamp: &deleted}, Spec: corev1.PodSpec{Containers: make([]corev1.Container, 1)},
			Status: corev1.PodStatus{Phase: corev1.PodSucceeded, ContainerStatuses: []corev1.ContainerStatus{{State: terminated("Completed", 0)}}},
		}, cells: []any{"test18", "0/1", "Completed", "0", "<unknown>"}, conditions: succeeded},
		{name: "running with deletion", pod: corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "test19", DeletionTimestamp: &deleted}, Spec: corev1.PodSpec{Containers: make([]corev1.Container, 1)},
			Status: corev1.PodStatus{Phase: "Running", ContainerStatuses: []corev1.ContainerStatus{{State: running}}},
		}, cells: []any{"test19", "0/1", "Terminating", "0", "<unknown>"}},
		{name: "pending with deletion", pod: corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "test20", DeletionTimestamp: &deleted}, Spec: corev1.PodSpec{Containers: make([]corev1.Container, 1)},
			Status: corev1.PodStatus{Phase: "Pending"},
		}, cells: []any{"test20", "0/1", "Terminating", "0", "<unknown>"}},
		{name: "succeeded pod with running containers", pod: corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "test1"}, Spec: corev1.PodSpec{Containers: make([]corev1.Container, 2)},
			Status: corev1.PodStatus{Phase: "Succeeded", ContainerStatuses: []corev1.ContainerStatus{
				{Ready: true, RestartCount: 3, State: running}, {RestartCount: 3}}},
		}, cells: []any{"test1", "1/2", "Succeeded", "6", "<unknown>"}, conditions: succeeded},
		{name: "failed pod with running containers", pod: corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "test2"}, Spec: corev1.PodSpec{Containers: make([]corev1.Container, 2)},
			Status: corev1.PodStatus{Phase: "Failed", ContainerStatuses: []corev1.ContainerStatus{
				{Ready: true, RestartCount: 3, State: running}, {RestartCount: 3}}},
		}, cells: []any{"test2", "1/2", "Failed", "6", "<unknown>"}, conditions: failed},

		// TestPrintPodWithRestartableInitContainer
		{name: "two sidecars, the first running but not started", pod: corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "test1"}, Spec: corev1.PodSpec{InitContainers: sidecars, Containers: make([]corev1.Container, 1)},
			Status: corev1.PodStatus{Phase: "Pending",
				InitContainerStatuses: []corev1.ContainerStatus{
					named("restartable-init-1", false, restarted(3, 10*time.Second, running)),
					named("restartable-init-2", false, corev1.ContainerStatus{State: waiting})},
				ContainerStatuses: []corev1.ContainerStatus{{State: waiting}},
				Conditions:        initialized(corev1.ConditionFalse)},
		}, cells: []any{"test1", "0/3", "Init:0/2", "3 (10s ago)", "<unknown>"}},
		{name: "two sidecars, the first started, the second running but not started", pod: corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "test1"}, Spec: corev1.PodSpec{InitContainers: sidecars, Containers: make([]corev1.Container, 1)},
			Status: corev1.PodStatus{Phase: "Pending",
				InitContainerStatuses: []corev1.ContainerStatus{
					named("restartable-init-1", true, restarted(3, 10*time.Second, running)),
					named("restartable-init-2", false, corev1.ContainerStatus{State: running})},
				ContainerStatuses: []corev1.ContainerStatus{{State: waiting}},
				Conditions:        initialized(corev1.ConditionFalse)},
		}, cells: []any{"test1", "0/3", "Init:1/2", "3 (10s ago)", "<unknown>"}},
		{name: "two sidecars started and a container running", pod: corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "test2"}, Spec: corev1.PodSpec{InitContainers: sidecars, Containers: make([]corev1.Container, 1)},
			Status: corev1.PodStatus{Phase: "Running",
				InitContainerStatuses: []corev1.ContainerStatus{
					named("restartable-init-1", true, restarted(3, 10*time.Second, running)),
					named("restartable-init-2", true, corev1.ContainerStatus{State: running})},
				ContainerStatuses: []corev1.ContainerStatus{ready(restarted(4, 20*time.Second, running))},
				Conditions:        initialized(corev1.ConditionTrue)},
		}, cells: []any{"test2", "1/3", "Running", "7 (10s ago)", "<unknown>"}},
		{name: "two sidecars failed and a container completed", pod: corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "test3"}, Spec: corev1.PodSpec{InitContainers: sidecars, Containers: make([]corev1.Container, 1)},
			Status: corev1.PodStatus{Phase: "Succeeded",
				InitContainerStatuses: []corev1.ContainerStatus{
					named("restartable-init-1", false, restarted(3, 10*time.Second, terminated("Error", 137))),
					named("restartable-init-2", false, corev1.ContainerStatus{State: terminated("Error", 137)})},
				ContainerStatuses: []corev1.ContainerStatus{restarted(4, 20*time.Second, terminated("Completed", 0))},
				Conditions:        initialized(corev1.ConditionTrue)},
		}, cells: []any{"test3", "0/3", "Completed", "7 (10s ago)", "<unknown>"}, conditions: succeeded},
		{name: "statuses of containers the spec does not have", pod: corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "test4"},
			Spec: corev1.PodSpec{
				InitContainers: []corev1.Container{{Name: "init1", Image: "initimage"}, {Name: "sidecar1", Image: "sidecarimage", RestartPolicy: &always}},
				Containers:     []corev1.Container{{Name: "container1", Image: "containerimage"}}},
			Status: corev1.PodStatus{Phase: "Running",
				InitContainerStatuses: []corev1.ContainerStatus{{Name: "initinvalid"}, {Name: "init1"}, {Name: "sidecar1"}},
				ContainerStatuses:     []corev1.ContainerStatus{{Name: "containerinvalid"}, {Name: "container1"}}},
		}, cells: []any{"test4", "0/2", "Init:0/2", "0", "<unknown>"}},

		// TestPrintPodwide
		{name: "wide, node name and pod IP set", pod: corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "test1"},
			Spec: corev1.PodSpec{Containers: make([]corev1.Container, 2), NodeName: "test1",
				ReadinessGates: []corev1.PodReadinessGate{{ConditionType: "condition1"}, {ConditionType: "condition2"}, {ConditionType: "condition3"}}},
			Status: corev1.PodStatus{
				Conditions: []corev1.PodCondition{{Type: "condition1", Status: corev1.ConditionFalse}, {Type: "condition2", Status: corev1.ConditionTrue}},
				Phase:      "podPhase", PodIPs: []corev1.PodIP{{IP: "1.1.1.1"}, {IP: "2001:db8::"}},
				ContainerStatuses: []corev1.ContainerStatus{{Ready: true, RestartCount: 3, State: running}, {RestartCount: 3}},
				NominatedNodeName: "node1"},
		}, cells: []any{"test1", "1/2", "podPhase", "6", "<unknown>", "1.1.1.1", "test1", "node1", "1/3"}},
		{name: "wide, node name and pod IP not set", pod: corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "test2"}, Spec: corev1.PodSpec{Containers: make([]corev1.Container, 2)},
			Status: corev1.PodStatus{Phase: "podPhase", ContainerStatuses: []corev1.ContainerStatus{
				{Ready: true, RestartCount: 3, State: running},
				{State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerWaitingReason"}}, RestartCount: 3}}},
		}, cells: []any{"test2", "1/2", "ContainerWaitingReason", "6", "<unknown>", "<none>", "<none>", "<none>", "<none>"}},
		// printPod's termination reasons without a reason: the signal or
		// the exit code, for init containers and containers.
		{name: "init container killed by a signal", pod: corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "sig"},
			Spec:       corev1.PodSpec{InitContainers: make([]corev1.Container, 1), Containers: make([]corev1.Container, 1)},
			Status: corev1.PodStatus{Phase: "Pending",
				InitContainerStatuses: []corev1.ContainerStatus{{State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Signal: 9, ExitCode: 137}}}}},
		}, cells: []any{"sig", "0/1", "Init:Signal:9", "0", "<unknown>"}},
		{name: "container exited without a reason", pod: corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "exit"}, Spec: corev1.PodSpec{Containers: make([]corev1.Container, 1)},
			Status: corev1.PodStatus{Phase: "Running", ContainerStatuses: []corev1.ContainerStatus{{State: terminated("", 2)}}},
		}, cells: []any{"exit", "0/1", "ExitCode:2", "0", "<unknown>"}},
		// Not upstream's: a v1 client may set podIP alone.
		{name: "wide, podIP without podIPs", pod: corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "test3"}, Spec: corev1.PodSpec{Containers: make([]corev1.Container, 1)},
			Status: corev1.PodStatus{Phase: "Running", PodIP: "10.0.0.1"},
		}, cells: []any{"test3", "0/1", "Running", "0", "<unknown>", "10.0.0.1", "<none>", "<none>", "<none>"}},
	}
	convertor := podDef().tableConvertor()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			table, err := convertor.ConvertToTable(t.Context(), &tt.pod, nil)
			if err != nil {
				t.Fatal(err)
			}
			row := table.Rows[0]
			if len(row.Cells) != len(table.ColumnDefinitions) {
				t.Fatalf("%d cells for %d columns", len(row.Cells), len(table.ColumnDefinitions))
			}
			if got := row.Cells[:len(tt.cells)]; !reflect.DeepEqual(got, tt.cells) {
				t.Errorf("cells = %#v, want %#v", got, tt.cells)
			}
			if !reflect.DeepEqual(row.Conditions, tt.conditions) {
				t.Errorf("conditions = %#v, want %#v", row.Conditions, tt.conditions)
			}
		})
	}
}

// Pod defaulting, from k8s.io/kubernetes pkg/apis/core/v1/defaults_test.go:
// the PodSpec fields TestPodDefaults lists (the ones of volume types and
// ephemeral containers kubestore does not serve aside), and the cases of
// the SetDefaults tests for image pull policy, requests, host network
// ports, probes, lifecycle handlers and volumes.
func TestDefaultPod(t *testing.T) {
	httpGet := func() *corev1.HTTPGetAction { return &corev1.HTTPGetAction{} }
	defaultedHTTPGet := &corev1.HTTPGetAction{Path: "/", Scheme: corev1.URISchemeHTTP}
	probe := func() *corev1.Probe { return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: httpGet()}} }
	defaultedProbe := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: defaultedHTTPGet},
		TimeoutSeconds: 1, PeriodSeconds: 10, SuccessThreshold: 1, FailureThreshold: 3}
	fieldRef := func() *corev1.ObjectFieldSelector { return &corev1.ObjectFieldSelector{FieldPath: "metadata.name"} }
	defaultedFieldRef := &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.name"}
	mode := ptrTo(int32(0644))
	limits := resources("100m", "1Gi")
	// Everything TestPodDefaults sees defaulted in a container.
	fullContainer := func() corev1.Container {
		return corev1.Container{
			Name: "c", Image: "image:v1",
			Ports:          []corev1.ContainerPort{{ContainerPort: 80}},
			Env:            []corev1.EnvVar{{Name: "N", ValueFrom: &corev1.EnvVarSource{FieldRef: fieldRef()}}},
			Resources:      corev1.ResourceRequirements{Limits: limits},
			LivenessProbe:  probe(),
			ReadinessProbe: probe(),
			StartupProbe:   probe(),
			Lifecycle: &corev1.Lifecycle{
				PostStart: &corev1.LifecycleHandler{HTTPGet: httpGet()},
				PreStop:   &corev1.LifecycleHandler{HTTPGet: httpGet()},
			},
		}
	}
	defaultedContainer := corev1.Container{
		Name: "c", Image: "image:v1",
		Ports:                    []corev1.ContainerPort{{ContainerPort: 80, Protocol: corev1.ProtocolTCP}},
		Env:                      []corev1.EnvVar{{Name: "N", ValueFrom: &corev1.EnvVarSource{FieldRef: defaultedFieldRef}}},
		Resources:                corev1.ResourceRequirements{Limits: limits, Requests: limits},
		LivenessProbe:            defaultedProbe,
		ReadinessProbe:           defaultedProbe,
		StartupProbe:             defaultedProbe,
		Lifecycle:                &corev1.Lifecycle{PostStart: &corev1.LifecycleHandler{HTTPGet: defaultedHTTPGet}, PreStop: &corev1.LifecycleHandler{HTTPGet: defaultedHTTPGet}},
		TerminationMessagePath:   corev1.TerminationMessagePathDefault,
		TerminationMessagePolicy: corev1.TerminationMessageReadFile,
		ImagePullPolicy:          corev1.PullIfNotPresent,
	}
	defaultedSpec := func(s corev1.PodSpec) corev1.PodSpec {
		s.RestartPolicy = corev1.RestartPolicyAlways
		s.DNSPolicy = corev1.DNSClusterFirst
		s.TerminationGracePeriodSeconds = ptrTo(int64(30))
		s.SecurityContext = &corev1.PodSecurityContext{}
		s.SchedulerName = corev1.DefaultSchedulerName
		s.EnableServiceLinks = ptrTo(true)
		return s
	}

	tests := []struct {
		name string
		spec corev1.PodSpec
		want corev1.PodSpec
	}{
		{name: "empty spec", want: defaultedSpec(corev1.PodSpec{})},
		{name: "containers and init containers",
			spec: corev1.PodSpec{InitContainers: []corev1.Container{fullContainer()}, Containers: []corev1.Container{fullContainer()}},
			want: defaultedSpec(corev1.PodSpec{InitContainers: []corev1.Container{defaultedContainer}, Containers: []corev1.Container{defaultedContainer}})},
		{name: "set values are kept",
			spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, DNSPolicy: corev1.DNSDefault, SchedulerName: "mine",
				TerminationGracePeriodSeconds: ptrTo(int64(5)), EnableServiceLinks: ptrTo(false)},
			want: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, DNSPolicy: corev1.DNSDefault, SchedulerName: "mine",
				TerminationGracePeriodSeconds: ptrTo(int64(5)), EnableServiceLinks: ptrTo(false), SecurityContext: &corev1.PodSecurityContext{}}},
		{name: "host network: host ports default to container ports",
			spec: corev1.PodSpec{HostNetwork: true,
				InitContainers: []corev1.Container{{Ports: []corev1.ContainerPort{{ContainerPort: 12345}}}},
				Containers:     []corev1.Container{{Ports: []corev1.ContainerPort{{ContainerPort: 12345}, {ContainerPort: 80, HostPort: 8080}}}}},
			want: defaultedSpec(corev1.PodSpec{HostNetwork: true,
				InitContainers: []corev1.Container{{Ports: []corev1.ContainerPort{{ContainerPort: 12345, HostPort: 12345, Protocol: corev1.ProtocolTCP}},
					TerminationMessagePath: corev1.TerminationMessagePathDefault, TerminationMessagePolicy: corev1.TerminationMessageReadFile, ImagePullPolicy: corev1.PullAlways}},
				Containers: []corev1.Container{{Ports: []corev1.ContainerPort{{ContainerPort: 12345, HostPort: 12345, Protocol: corev1.ProtocolTCP}, {ContainerPort: 80, HostPort: 8080, Protocol: corev1.ProtocolTCP}},
					TerminationMessagePath: corev1.TerminationMessagePathDefault, TerminationMessagePolicy: corev1.TerminationMessageReadFile, ImagePullPolicy: corev1.PullAlways}}})},
		{name: "volumes",
			spec: corev1.PodSpec{Volumes: []corev1.Volume{
				{Name: "empty"},
				{Name: "secret", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{}}},
				{Name: "configmap", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{}}},
				{Name: "hostpath", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}},
				{Name: "downward", VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{
					Items: []corev1.DownwardAPIVolumeFile{{Path: "name", FieldRef: fieldRef()}}}}},
				{Name: "projected", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
					{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{Path: "name", FieldRef: fieldRef()}}}},
					{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token"}},
				}}}},
				{Name: "kept", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{DefaultMode: ptrTo(int32(0400))}}},
			}},
			want: defaultedSpec(corev1.PodSpec{Volumes: []corev1.Volume{
				{Name: "empty", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
				{Name: "secret", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{DefaultMode: mode}}},
				{Name: "configmap", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{DefaultMode: mode}}},
				{Name: "hostpath", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/", Type: ptrTo(corev1.HostPathUnset)}}},
				{Name: "downward", VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{DefaultMode: mode,
					Items: []corev1.DownwardAPIVolumeFile{{Path: "name", FieldRef: defaultedFieldRef}}}}},
				{Name: "projected", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{DefaultMode: mode, Sources: []corev1.VolumeProjection{
					{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{Path: "name", FieldRef: defaultedFieldRef}}}},
					{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: ptrTo(int64(3600))}},
				}}}},
				{Name: "kept", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{DefaultMode: ptrTo(int32(0400))}}},
			}})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &corev1.Pod{Spec: tt.spec}
			defaultPod(p)
			if !apiequality.Semantic.DeepEqual(p.Spec, tt.want) {
				t.Errorf("defaulted spec differs (-want +got):\n%s", diff.Diff(tt.want, p.Spec))
			}
		})
	}
}

// imagePullPolicy defaults to Always for the latest tag or none, as
// upstream's SetDefaults_Container reads the tag with ParseImageName.
func TestImagePullPolicyDefault(t *testing.T) {
	tests := []struct {
		image string
		want  corev1.PullPolicy
	}{
		{"busybox", corev1.PullAlways},
		{"busybox:latest", corev1.PullAlways},
		{"busybox:1.36", corev1.PullIfNotPresent},
		{"registry.local:5000/busybox", corev1.PullAlways},
		{"registry.local:5000/busybox:latest", corev1.PullAlways},
		{"registry.local:5000/busybox:1.36", corev1.PullIfNotPresent},
		{"busybox@sha256:" + strings.Repeat("a", 64), corev1.PullIfNotPresent},
		{"busybox:latest@sha256:" + strings.Repeat("a", 64), corev1.PullIfNotPresent},
	}
	for _, tt := range tests {
		t.Run(tt.image, func(t *testing.T) {
			c := corev1.Container{Image: tt.image}
			defaultContainer(&c)
			if c.ImagePullPolicy != tt.want {
				t.Errorf("imagePullPolicy = %s, want %s", c.ImagePullPolicy, tt.want)
			}
		})
	}
	t.Run("set policy is kept", func(t *testing.T) {
		c := corev1.Container{Image: "busybox", ImagePullPolicy: corev1.PullNever}
		defaultContainer(&c)
		if c.ImagePullPolicy != corev1.PullNever {
			t.Errorf("imagePullPolicy = %s, want Never", c.ImagePullPolicy)
		}
	})
}

// Pod create validation, the cases of TestValidatePodSpec and
// TestValidatePodCreate in k8s.io/kubernetes
// pkg/apis/core/validation/validation_test.go for the rules kubestore
// applies (containers, images, policies, node name, deadlines, volumes and
// mounts, ports, env names, resources). Upstream checks much more
// (security contexts, probes, affinity, topology spread, ...); kubestore
// stores those fields unchecked.
func TestPodValidate(t *testing.T) {
	spec := func(f func(*corev1.PodSpec)) func(*corev1.Pod) { return func(p *corev1.Pod) { f(&p.Spec) } }
	ctr := func(f func(*corev1.Container)) func(*corev1.Pod) {
		return func(p *corev1.Pod) { f(&p.Spec.Containers[0]) }
	}
	tests := []struct {
		name string
		opts []func(*corev1.Pod)
		err  string // "" when valid
	}{
		{name: "valid"},
		{name: "valid with everything", opts: []func(*corev1.Pod){spec(func(s *corev1.PodSpec) {
			s.InitContainers = []corev1.Container{{Name: "init", Image: "image", VolumeMounts: []corev1.VolumeMount{{Name: "vol", MountPath: "/v"}}}}
			s.Volumes = []corev1.Volume{{Name: "vol"}}
			s.NodeName = "node.example.com"
			s.ActiveDeadlineSeconds = ptrTo(int64(1))
			s.Containers[0].Ports = []corev1.ContainerPort{{Name: "http", ContainerPort: 80, HostPort: 8080}}
			s.Containers[0].Env = []corev1.EnvVar{{Name: "RELAXED.name-1", Value: "v"}}
			s.Containers[0].Resources = corev1.ResourceRequirements{Requests: resources("100m", "1Gi"), Limits: resources("200m", "1Gi")}
		})}},
		{name: "missing containers", opts: []func(*corev1.Pod){spec(func(s *corev1.PodSpec) { s.Containers = nil })}, err: "spec.containers: Required value"},
		{name: "missing container name", opts: []func(*corev1.Pod){ctr(func(c *corev1.Container) { c.Name = "" })}, err: "spec.containers[0].name: Required value"},
		{name: "invalid container name", opts: []func(*corev1.Pod){ctr(func(c *corev1.Container) { c.Name = "Bad_Name" })}, err: "spec.containers[0].name: Invalid value"},
		{name: "duplicate container names", opts: []func(*corev1.Pod){spec(func(s *corev1.PodSpec) {
			s.Containers = append(s.Containers, corev1.Container{Name: "ctr", Image: "image"})
		})}, err: "spec.containers[1].name: Duplicate value"},
		{name: "init container named as a container", opts: []func(*corev1.Pod){spec(func(s *corev1.PodSpec) {
			s.InitContainers = []corev1.Container{{Name: "ctr", Image: "image"}}
		})}, err: "spec.containers[0].name: Duplicate value"},
		{name: "missing image", opts: []func(*corev1.Pod){ctr(func(c *corev1.Container) { c.Image = "" })}, err: "spec.containers[0].image: Required value"},
		{name: "image with whitespace", opts: []func(*corev1.Pod){ctr(func(c *corev1.Container) { c.Image = " image" })},
			err: "spec.containers[0].image: Invalid value: \" image\": must not have leading or trailing whitespace"},
		{name: "invalid pull policy", opts: []func(*corev1.Pod){ctr(func(c *corev1.Container) { c.ImagePullPolicy = "Sometimes" })},
			err: "spec.containers[0].imagePullPolicy: Unsupported value"},
		{name: "invalid restart policy", opts: []func(*corev1.Pod){spec(func(s *corev1.PodSpec) { s.RestartPolicy = "UnlessStopped" })},
			err: "spec.restartPolicy: Unsupported value"},
		{name: "invalid DNS policy", opts: []func(*corev1.Pod){spec(func(s *corev1.PodSpec) { s.DNSPolicy = "Google" })}, err: "spec.dnsPolicy: Unsupported value"},
		{name: "invalid node name", opts: []func(*corev1.Pod){spec(func(s *corev1.PodSpec) { s.NodeName = "Node_1" })}, err: "spec.nodeName: Invalid value"},
		{name: "zero activeDeadlineSeconds", opts: []func(*corev1.Pod){spec(func(s *corev1.PodSpec) { s.ActiveDeadlineSeconds = ptrTo(int64(0)) })},
			err: "spec.activeDeadlineSeconds: Invalid value"},
		{name: "invalid volume name", opts: []func(*corev1.Pod){spec(func(s *corev1.PodSpec) { s.Volumes = []corev1.Volume{{Name: "Bad_Name"}} })},
			err: "spec.volumes[0].name: Invalid value"},
		{name: "duplicate volume names", opts: []func(*corev1.Pod){spec(func(s *corev1.PodSpec) { s.Volumes = []corev1.Volume{{Name: "v"}, {Name: "v"}} })},
			err: "spec.volumes[1].name: Duplicate value"},
		{name: "mount of a missing volume", opts: []func(*corev1.Pod){ctr(func(c *corev1.Container) { c.VolumeMounts = []corev1.VolumeMount{{Name: "nope", MountPath: "/x"}} })},
			err: "spec.containers[0].volumeMounts[0].name: Not found"},
		{name: "init container mount of a missing volume", opts: []func(*corev1.Pod){spec(func(s *corev1.PodSpec) {
			s.InitContainers = []corev1.Container{{Name: "init", Image: "image", VolumeMounts: []corev1.VolumeMount{{Name: "nope", MountPath: "/x"}}}}
		})}, err: "spec.initContainers[0].volumeMounts[0].name: Not found"},
		{name: "invalid port name", opts: []func(*corev1.Pod){ctr(func(c *corev1.Container) { c.Ports = []corev1.ContainerPort{{Name: "-http", ContainerPort: 80}} })},
			err: "spec.containers[0].ports[0].name: Invalid value"},
		{name: "duplicate port names", opts: []func(*corev1.Pod){ctr(func(c *corev1.Container) {
			c.Ports = []corev1.ContainerPort{{Name: "p", ContainerPort: 80}, {Name: "p", ContainerPort: 81}}
		})}, err: "spec.containers[0].ports[1].name: Duplicate value"},
		{name: "missing container port", opts: []func(*corev1.Pod){ctr(func(c *corev1.Container) { c.Ports = []corev1.ContainerPort{{Name: "p"}} })},
			err: "spec.containers[0].ports[0].containerPort: Invalid value"},
		{name: "invalid host port", opts: []func(*corev1.Pod){ctr(func(c *corev1.Container) { c.Ports = []corev1.ContainerPort{{ContainerPort: 80, HostPort: 65536}} })},
			err: "spec.containers[0].ports[0].hostPort: Invalid value"},
		{name: "invalid protocol", opts: []func(*corev1.Pod){ctr(func(c *corev1.Container) { c.Ports = []corev1.ContainerPort{{ContainerPort: 80, Protocol: "ICMP"}} })},
			err: "spec.containers[0].ports[0].protocol: Unsupported value"},
		{name: "env name with =", opts: []func(*corev1.Pod){ctr(func(c *corev1.Container) { c.Env = []corev1.EnvVar{{Name: "A=B"}} })},
			err: "spec.containers[0].env[0].name: Invalid value"},
		{name: "empty env name", opts: []func(*corev1.Pod){ctr(func(c *corev1.Container) { c.Env = []corev1.EnvVar{{Name: ""}} })},
			err: "spec.containers[0].env[0].name: Invalid value"},
		{name: "negative request", opts: []func(*corev1.Pod){ctr(func(c *corev1.Container) { c.Resources.Requests = resources("-1", "") })},
			err: "spec.containers[0].resources.requests[cpu]: Invalid value"},
		{name: "request over limit", opts: []func(*corev1.Pod){ctr(func(c *corev1.Container) {
			c.Resources = corev1.ResourceRequirements{Requests: resources("", "2Gi"), Limits: resources("", "1Gi")}
		})}, err: "spec.containers[0].resources.requests: Invalid value: \"2Gi\": must be less than or equal to memory limit of 1Gi"},
		{name: "invalid extended resource name in container request", opts: []func(*corev1.Pod){ctr(func(c *corev1.Container) {
			c.Resources = corev1.ResourceRequirements{Requests: corev1.ResourceList{"invalid-name": resource.MustParse("2")}, Limits: corev1.ResourceList{"invalid-name": resource.MustParse("2")}}
		})}, err: "must be a standard resource for containers"},
		{name: "invalid extended resource requirement: request must be == limit", opts: []func(*corev1.Pod){ctr(func(c *corev1.Container) {
			c.Resources = corev1.ResourceRequirements{Requests: corev1.ResourceList{"example.com/a": resource.MustParse("2")}, Limits: corev1.ResourceList{"example.com/a": resource.MustParse("1")}}
		})}, err: "must be equal to example.com/a"},
		{name: "invalid fractional extended resource in container request", opts: []func(*corev1.Pod){ctr(func(c *corev1.Container) {
			c.Resources = corev1.ResourceRequirements{Requests: corev1.ResourceList{"example.com/a": resource.MustParse("500m")}}
		})}, err: "must be an integer"},
		{name: "dnsPolicy None without dnsConfig", opts: []func(*corev1.Pod){spec(func(s *corev1.PodSpec) { s.DNSPolicy = corev1.DNSNone })},
			err: "spec.dnsConfig: Required value: must provide `dnsConfig` when `dnsPolicy` is None"},
		{name: "dnsPolicy None without nameservers", opts: []func(*corev1.Pod){spec(func(s *corev1.PodSpec) {
			s.DNSPolicy, s.DNSConfig = corev1.DNSNone, &corev1.PodDNSConfig{Searches: []string{"example.com"}}
		})}, err: "spec.dnsConfig.nameservers: Required value"},
		{name: "dnsPolicy None with dnsConfig", opts: []func(*corev1.Pod){spec(func(s *corev1.PodSpec) {
			s.DNSPolicy, s.DNSConfig = corev1.DNSNone, &corev1.PodDNSConfig{Nameservers: []string{"1.2.3.4"}, Searches: []string{"example.com."}, Options: []corev1.PodDNSConfigOption{{Name: "ndots"}}}
		})}},
		{name: "dnsConfig invalid nameserver", opts: []func(*corev1.Pod){spec(func(s *corev1.PodSpec) {
			s.DNSConfig = &corev1.PodDNSConfig{Nameservers: []string{"invalid"}}
		})}, err: "spec.dnsConfig.nameservers[0]: Invalid value"},
		{name: "dnsConfig empty option name", opts: []func(*corev1.Pod){spec(func(s *corev1.PodSpec) {
			s.DNSConfig = &corev1.PodDNSConfig{Options: []corev1.PodDNSConfigOption{{}}}
		})}, err: "spec.dnsConfig.options[0]: Required value"},
		{name: "subPath with ..", opts: []func(*corev1.Pod){spec(func(s *corev1.PodSpec) {
			s.Volumes = []corev1.Volume{{Name: "v"}}
			s.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "v", MountPath: "/v", SubPath: "../x"}}
		})}, err: "spec.containers[0].volumeMounts.subPath: Invalid value: \"../x\": must not contain '..'"},
		{name: "absolute subPath", opts: []func(*corev1.Pod){spec(func(s *corev1.PodSpec) {
			s.Volumes = []corev1.Volume{{Name: "v"}}
			s.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "v", MountPath: "/v", SubPath: "/x"}}
		})}, err: "spec.containers[0].volumeMounts.subPath: Invalid value: \"/x\": must be a relative path"},
		{name: "subPath with dots in a name", opts: []func(*corev1.Pod){spec(func(s *corev1.PodSpec) {
			s.Volumes = []corev1.Volume{{Name: "v"}}
			s.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "v", MountPath: "/v", SubPath: "a..b/c"}}
		})}},
		{name: "hostPath type", opts: []func(*corev1.Pod){spec(func(s *corev1.PodSpec) {
			s.Volumes = []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/tmp", Type: ptrTo(corev1.HostPathSocket)}}}}
		})}},
		{name: "invalid hostPath type", opts: []func(*corev1.Pod){spec(func(s *corev1.PodSpec) {
			s.Volumes = []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/tmp", Type: ptrTo(corev1.HostPathType("Folder"))}}}}
		})}, err: "spec.volumes[0].hostPath.type: Unsupported value"},
		{name: "hostPath with ..", opts: []func(*corev1.Pod){spec(func(s *corev1.PodSpec) {
			s.Volumes = []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/a/../b"}}}}
		})}, err: "spec.volumes[0].hostPath.path: Invalid value"},
		{name: "invalid nodeSelector key", opts: []func(*corev1.Pod){spec(func(s *corev1.PodSpec) { s.NodeSelector = map[string]string{"bad key": "v"} })},
			err: "spec.nodeSelector: Invalid value"},
		{name: "invalid nodeSelector value", opts: []func(*corev1.Pod){spec(func(s *corev1.PodSpec) { s.NodeSelector = map[string]string{"k": "bad value"} })},
			err: "spec.nodeSelector: Invalid value"},
		{name: "toleration with unknown operator", opts: []func(*corev1.Pod){spec(func(s *corev1.PodSpec) {
			s.Tolerations = []corev1.Toleration{{Key: "k", Operator: "Maybe", Value: "v"}}
		})}, err: "spec.tolerations[0].operator: Unsupported value"},
		{name: "toleration Exists with a value", opts: []func(*corev1.Pod){spec(func(s *corev1.PodSpec) {
			s.Tolerations = []corev1.Toleration{{Key: "k", Operator: corev1.TolerationOpExists, Value: "v"}}
		})}, err: "spec.tolerations[0].operator: Invalid value"},
		{name: "toleration with unknown effect", opts: []func(*corev1.Pod){spec(func(s *corev1.PodSpec) {
			s.Tolerations = []corev1.Toleration{{Key: "k", Operator: corev1.TolerationOpExists, Effect: "Sometimes"}}
		})}, err: "spec.tolerations[0].effect: Unsupported value"},
		{name: "invalid hostname", opts: []func(*corev1.Pod){spec(func(s *corev1.PodSpec) { s.Hostname = "Bad_Host" })}, err: "spec.hostname: Invalid value"},
		{name: "subdomain not a label", opts: []func(*corev1.Pod){spec(func(s *corev1.PodSpec) { s.Subdomain = "a.b" })}, err: "spec.subdomain: Invalid value"},
		{name: "env valueFrom with two sources", opts: []func(*corev1.Pod){ctr(func(c *corev1.Container) {
			c.Env = []corev1.EnvVar{{Name: "e", ValueFrom: &corev1.EnvVarSource{
				FieldRef:        &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.name"},
				ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "cm"}, Key: "k"},
			}}}
		})}, err: "spec.containers[0].env[0].valueFrom: Invalid value: \"\": may not have more than one field specified at a time"},
		{name: "env valueFrom with a value", opts: []func(*corev1.Pod){ctr(func(c *corev1.Container) {
			c.Env = []corev1.EnvVar{{Name: "e", Value: "v", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.name"}}}}
		})}, err: "spec.containers[0].env[0].valueFrom: Invalid value: \"\": may not be specified when `value` is not empty"},
		{name: "env valueFrom without a source", opts: []func(*corev1.Pod){ctr(func(c *corev1.Container) {
			c.Env = []corev1.EnvVar{{Name: "e", ValueFrom: &corev1.EnvVarSource{}}}
		})}, err: "spec.containers[0].env[0].valueFrom: Invalid value"},
		{name: "env fieldRef of a label", opts: []func(*corev1.Pod){ctr(func(c *corev1.Container) {
			c.Env = []corev1.EnvVar{{Name: "e", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.labels['app']"}}}}
		})}},
		{name: "env fieldRef of all labels", opts: []func(*corev1.Pod){ctr(func(c *corev1.Container) {
			c.Env = []corev1.EnvVar{{Name: "e", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.labels"}}}}
		})}, err: "spec.containers[0].env[0].valueFrom.fieldRef.fieldPath: Unsupported value: \"metadata.labels\""},
		{name: "env fieldRef of spec.host", opts: []func(*corev1.Pod){ctr(func(c *corev1.Container) {
			c.Env = []corev1.EnvVar{{Name: "e", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "spec.host"}}}}
		})}},
		{name: "env fieldRef of an unknown field", opts: []func(*corev1.Pod){ctr(func(c *corev1.Container) {
			c.Env = []corev1.EnvVar{{Name: "e", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "spec.nope"}}}}
		})}, err: "spec.containers[0].env[0].valueFrom.fieldRef.fieldPath: Invalid value: \"spec.nope\": error converting fieldPath: field label not supported: spec.nope"},
		{name: "liveness probe without a handler", opts: []func(*corev1.Pod){ctr(func(c *corev1.Container) {
			c.LivenessProbe = &corev1.Probe{PeriodSeconds: 10, SuccessThreshold: 1}
		})}, err: "spec.containers[0].livenessProbe: Required value: must specify a handler type"},
		{name: "probe with two handlers", opts: []func(*corev1.Pod){ctr(func(c *corev1.Container) {
			c.ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}, TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(80)}}}
		})}, err: "spec.containers[0].readinessProbe.tcpSocket: Forbidden: may not specify more than 1 handler type"},
		{name: "liveness probe success threshold 2", opts: []func(*corev1.Pod){ctr(func(c *corev1.Container) {
			c.LivenessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}}, SuccessThreshold: 2}
		})}, err: "spec.containers[0].livenessProbe.successThreshold: Invalid value: 2: must be 1"},
		{name: "negative runAsUser", opts: []func(*corev1.Pod){spec(func(s *corev1.PodSpec) {
			s.SecurityContext = &corev1.PodSecurityContext{RunAsUser: ptrTo(int64(-1))}
		})}, err: "spec.securityContext.runAsUser: Invalid value: -1"},
		{name: "negative supplemental group", opts: []func(*corev1.Pod){spec(func(s *corev1.PodSpec) {
			s.SecurityContext = &corev1.PodSecurityContext{SupplementalGroups: []int64{1, -1}}
		})}, err: "spec.securityContext.supplementalGroups[1]: Invalid value: -1"},
		{name: "hostNetwork with hostPort not containerPort", opts: []func(*corev1.Pod){spec(func(s *corev1.PodSpec) {
			s.HostNetwork = true
			s.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 80, HostPort: 8080}}
		})}, err: "spec.containers[0].ports[0].hostPort: Invalid value: 8080: must match `containerPort` when `hostNetwork` is true"},
		{name: "hostNetwork with hostPort defaulted", opts: []func(*corev1.Pod){spec(func(s *corev1.PodSpec) {
			s.HostNetwork = true
			s.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 80}}
		})}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errorsContain(t, validateCreate(t, podDef(), makePod("foo", tt.opts...)), tt.err)
		})
	}
}

// SetDefaults_Pod: a negative terminationGracePeriodSeconds becomes 1,
// which validates.
func TestDefaultPodNegativeTerminationGracePeriod(t *testing.T) {
	p := makePod("foo", func(p *corev1.Pod) { p.Spec.TerminationGracePeriodSeconds = ptrTo(int64(-2)) })
	if got := p.Spec.TerminationGracePeriodSeconds; got == nil || *got != 1 {
		t.Errorf("terminationGracePeriodSeconds = %v, want 1", got)
	}
	errorsContain(t, validateCreate(t, podDef(), p), "")
}

// The selectable fields of upstream's PodToSelectableFields
// (pkg/registry/core/pod/strategy.go): status.podIP is the first of
// podIPs.
func TestPodFields(t *testing.T) {
	p := makePod("foo", func(p *corev1.Pod) {
		p.Spec.NodeName, p.Spec.ServiceAccountName, p.Spec.HostNetwork = "node1", "sa", true
		p.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.1", PodIPs: []corev1.PodIP{{IP: "10.0.0.2"}, {IP: "fd00::2"}}, NominatedNodeName: "node2"}
	})
	_, got, err := podDef().getAttrs(p)
	if err != nil {
		t.Fatal(err)
	}
	want := fields.Set{
		"metadata.name": "foo", "metadata.namespace": "ns",
		"spec.nodeName": "node1", "spec.restartPolicy": "Always", "spec.schedulerName": "default-scheduler",
		"spec.serviceAccountName": "sa", "spec.hostNetwork": "true",
		"status.phase": "Running", "status.podIP": "10.0.0.2", "status.nominatedNodeName": "node2",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("fields = %v, want %v", got, want)
	}
	for label := range want {
		if _, _, err := podDef().fieldLabelConversion(label, "x"); err != nil {
			t.Errorf("field selector %s refused: %v", label, err)
		}
	}
	p.Status.PodIPs = nil
	if _, got, _ := podDef().getAttrs(p); got["status.podIP"] != "10.0.0.1" {
		t.Errorf("status.podIP without podIPs = %q, want 10.0.0.1", got["status.podIP"])
	}
}

// The pod strategy's CheckGracefulDelete (pkg/registry/core/pod/strategy.go,
// TestCheckGracefulDelete): the requested grace period or the pod's, none
// for a pod that is not on a node or has finished, 1 for a negative one.
func TestPodGracefulDelete(t *testing.T) {
	pod := func(node string, phase corev1.PodPhase, grace *int64) *corev1.Pod {
		return &corev1.Pod{Spec: corev1.PodSpec{NodeName: node, TerminationGracePeriodSeconds: grace}, Status: corev1.PodStatus{Phase: phase}}
	}
	tests := []struct {
		name      string
		pod       *corev1.Pod
		requested *int64
		want      int64
	}{
		{"in pending phase with node name", pod("something", corev1.PodPending, ptrTo(int64(30))), nil, 30},
		{"requested grace period wins", pod("something", corev1.PodRunning, ptrTo(int64(30))), ptrTo(int64(5)), 5},
		{"no grace period anywhere", pod("something", corev1.PodRunning, nil), nil, 0},
		{"in failed phase with node name", pod("something", corev1.PodFailed, ptrTo(int64(30))), nil, 0},
		{"in succeeded phase", pod("something", corev1.PodSucceeded, ptrTo(int64(30))), nil, 0},
		{"not on a node", pod("", corev1.PodPending, ptrTo(int64(30))), ptrTo(int64(30)), 0},
		{"negative grace period", pod("something", corev1.PodRunning, ptrTo(int64(-1))), nil, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			options := &metav1.DeleteOptions{GracePeriodSeconds: tt.requested}
			if !podGracefulDelete(t.Context(), tt.pod, options) {
				t.Fatal("not graceful")
			}
			if *options.GracePeriodSeconds != tt.want {
				t.Errorf("grace period = %d, want %d", *options.GracePeriodSeconds, tt.want)
			}
		})
	}
	if podGracefulDelete(t.Context(), pod("something", corev1.PodRunning, nil), nil) {
		t.Error("graceful without options")
	}
}

// The pod strategy resets the status a client sends on create to Pending
// with the computed QoS class; a status update checks the phase and
// changes no spec.
func TestPodStatus(t *testing.T) {
	st := newStrategy(nil, podDef())
	p := makePod("foo", func(p *corev1.Pod) {
		p.Spec.Containers[0].Resources.Limits = resources("100m", "100Mi")
		p.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.1"}
	})
	st.PrepareForCreate(t.Context(), p)
	if want := (corev1.PodStatus{Phase: corev1.PodPending, QOSClass: corev1.PodQOSGuaranteed}); !reflect.DeepEqual(p.Status, want) {
		t.Errorf("status on create = %+v, want %+v", p.Status, want)
	}

	status := statusStrategy{strategy: st}
	old := makePod("foo")
	updated := makePod("foo", func(p *corev1.Pod) {
		p.Spec.NodeName = "elsewhere"
		p.Status.Phase = corev1.PodRunning
	})
	status.PrepareForUpdate(t.Context(), updated, old)
	if updated.Spec.NodeName != "" || updated.Status.Phase != corev1.PodRunning {
		t.Errorf("status update changed spec or lost status: node %q, phase %q", updated.Spec.NodeName, updated.Status.Phase)
	}
	errorsContain(t, status.ValidateUpdate(t.Context(), updated, old), "")
	updated.Status.Phase = "Sleeping"
	errorsContain(t, status.ValidateUpdate(t.Context(), updated, old), "status.phase: Unsupported value")
}

// Pods are indexed by spec.nodeName in the watch cache, so that a node
// agent's watch of its own pods does not scan every pod.
func TestPodNodeNameIndex(t *testing.T) {
	opts := podDef().storeOptions(nil)
	if opts.TriggerFunc == nil || opts.Indexers == nil {
		t.Fatal("pods have no spec.nodeName index")
	}
	p := makePod("foo", func(p *corev1.Pod) { p.Spec.NodeName = "node1" })
	if got := opts.TriggerFunc["spec.nodeName"](p); got != "node1" {
		t.Errorf("trigger value = %q, want node1", got)
	}
	for name, index := range *opts.Indexers {
		values, err := index(p)
		if err != nil || !reflect.DeepEqual(values, []string{"node1"}) {
			t.Errorf("index %s = %v, %v", name, values, err)
		}
		if _, err := index("not an object"); err == nil {
			t.Errorf("index %s accepted a string", name)
		}
	}
	if pred := podDef().predicate(nil, nil); !reflect.DeepEqual(pred.IndexFields, []string{"spec.nodeName"}) {
		t.Errorf("predicate index fields = %v", pred.IndexFields)
	}
	if opts := configMapDef().storeOptions(nil); opts.TriggerFunc != nil || opts.Indexers != nil {
		t.Error("config maps have an index")
	}
}
