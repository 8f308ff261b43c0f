package registry

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
)

// SetDefaults_NodeStatus in k8s.io/kubernetes pkg/apis/core/v1/defaults.go
// (TestSetDefaultNodeStatusAllocatable): allocatable defaults to capacity.
func TestDefaultNode(t *testing.T) {
	capacity := resources("1", "1Gi")
	tests := []struct {
		name                string
		capacity, allocated corev1.ResourceList
		want                corev1.ResourceList
	}{
		{name: "nothing reported"},
		{name: "capacity only", capacity: capacity, want: capacity},
		{name: "allocatable kept", capacity: capacity, allocated: resources("500m", ""), want: resources("500m", "")},
		{name: "empty allocatable kept", capacity: capacity, allocated: corev1.ResourceList{}, want: corev1.ResourceList{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := &corev1.Node{Status: corev1.NodeStatus{Capacity: tt.capacity, Allocatable: tt.allocated}}
			defaultNode(n)
			if !apiequality.Semantic.DeepEqual(n.Status.Allocatable, tt.want) {
				t.Errorf("allocatable = %v, want %v", n.Status.Allocatable, tt.want)
			}
		})
	}
}

// Cases of TestValidateNode in k8s.io/kubernetes
// pkg/apis/core/validation/validation_test.go for the rules kubestore
// applies: names, pod CIDRs and taints.
func TestNodeValidate(t *testing.T) {
	node := func(name string, spec corev1.NodeSpec) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}
	}
	taint := func(key, value string, effect corev1.TaintEffect) corev1.Taint {
		return corev1.Taint{Key: key, Value: value, Effect: effect}
	}
	tests := []struct {
		name string
		node *corev1.Node
		err  string // "" when valid
	}{
		{name: "valid", node: node("abc", corev1.NodeSpec{PodCIDRs: []string{"192.168.0.0/16"},
			Taints: []corev1.Taint{taint("GPU", "true", corev1.TaintEffectNoSchedule)}})},
		{name: "dual-stack pod CIDRs", node: node("abc", corev1.NodeSpec{PodCIDR: "192.168.0.0/16", PodCIDRs: []string{"192.168.0.0/16", "2000::/10"}})},
		{name: "namespaced", node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "abc", Namespace: "ns"}}, err: "metadata.namespace"},
		{name: "invalid name", node: node("-abc", corev1.NodeSpec{}), err: "metadata.name"},
		{name: "invalid pod CIDR", node: node("abc", corev1.NodeSpec{PodCIDR: "192.168.0.0"}), err: "spec.podCIDR: Invalid value"},
		{name: "invalid pod CIDRs", node: node("abc", corev1.NodeSpec{PodCIDRs: []string{"192.168.0.0"}}), err: "spec.podCIDRs[0]: Invalid value"},
		{name: "two pod CIDRs of one family", node: node("abc", corev1.NodeSpec{PodCIDRs: []string{"192.168.0.0/16", "10.0.0.0/8"}}),
			err: "may specify no more than one CIDR for each IP family"},
		{name: "three pod CIDRs", node: node("abc", corev1.NodeSpec{PodCIDRs: []string{"192.168.0.0/16", "2000::/10", "10.0.0.0/8"}}),
			err: "may specify no more than one CIDR for each IP family"},
		{name: "missing-taint-key", node: node("abc", corev1.NodeSpec{Taints: []corev1.Taint{taint("", "", corev1.TaintEffectNoSchedule)}}), err: "spec.taints[0].key"},
		{name: "bad-taint-key", node: node("abc", corev1.NodeSpec{Taints: []corev1.Taint{taint("NoUppercaseOrSpecialCharsLike=Equals", "", corev1.TaintEffectNoSchedule)}}),
			err: "spec.taints[0].key"},
		{name: "bad-taint-value", node: node("abc", corev1.NodeSpec{Taints: []corev1.Taint{taint("dedicated", "some\\bad\\value", corev1.TaintEffectNoSchedule)}}),
			err: "spec.taints[0].value"},
		{name: "missing-taint-effect", node: node("abc", corev1.NodeSpec{Taints: []corev1.Taint{taint("dedicated", "foo", "")}}), err: "spec.taints[0].effect"},
		{name: "duplicated-taints-with-same-key-effect", node: node("abc", corev1.NodeSpec{Taints: []corev1.Taint{
			taint("dedicated", "special-user-1", corev1.TaintEffectNoSchedule), taint("dedicated", "special-user-2", corev1.TaintEffectNoSchedule)}}),
			err: "taints must be unique by key and effect pair"},
		{name: "same key, different effects", node: node("abc", corev1.NodeSpec{Taints: []corev1.Taint{
			taint("dedicated", "a", corev1.TaintEffectNoSchedule), taint("dedicated", "a", corev1.TaintEffectNoExecute)}})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errorsContain(t, validateCreate(t, nodeDef(), tt.node), tt.err)
		})
	}
}

// Cases of TestValidateNodeUpdate in validation_test.go: pod CIDRs and
// the provider ID are set once; an address is listed once. They hold for
// status updates too.
func TestNodeValidateUpdate(t *testing.T) {
	node := func(spec corev1.NodeSpec, addresses ...corev1.NodeAddress) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "foo", ResourceVersion: "1"}, Spec: spec, Status: corev1.NodeStatus{Addresses: addresses}}
	}
	internal := corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "10.1.1.1"}
	tests := []struct {
		name     string
		old, new *corev1.Node
		err      string
	}{
		{name: "labels", old: node(corev1.NodeSpec{}), new: func() *corev1.Node { n := node(corev1.NodeSpec{}); n.Labels = map[string]string{"a": "b"}; return n }()},
		{name: "set pod CIDR", old: node(corev1.NodeSpec{}), new: node(corev1.NodeSpec{PodCIDRs: []string{"192.168.0.0/16"}})},
		{name: "add a second family", old: node(corev1.NodeSpec{PodCIDRs: []string{"192.168.0.0/16"}}), new: node(corev1.NodeSpec{PodCIDRs: []string{"192.168.0.0/16", "2000::/10"}})},
		{name: "change pod CIDR", old: node(corev1.NodeSpec{PodCIDRs: []string{"192.123.0.0/16"}}), new: node(corev1.NodeSpec{PodCIDRs: []string{"192.168.0.0/16"}}),
			err: "spec.podCIDRs: Forbidden"},
		{name: "remove pod CIDR", old: node(corev1.NodeSpec{PodCIDRs: []string{"192.123.0.0/16"}}), new: node(corev1.NodeSpec{}), err: "spec.podCIDRs: Forbidden"},
		{name: "set provider ID", old: node(corev1.NodeSpec{}), new: node(corev1.NodeSpec{ProviderID: "provider:///new"})},
		{name: "change provider ID", old: node(corev1.NodeSpec{ProviderID: "provider:///old"}), new: node(corev1.NodeSpec{ProviderID: "provider:///new"}),
			err: "spec.providerID: Forbidden"},
		{name: "duplicate addresses", old: node(corev1.NodeSpec{}), new: node(corev1.NodeSpec{}, internal, internal), err: "status.addresses[1]: Duplicate value"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errorsContain(t, validateUpdate(t, nodeDef(), tt.new, tt.old), tt.err)
		})
	}
	t.Run("status update", func(t *testing.T) {
		st := statusStrategy{strategy: newStrategy(nil, nodeDef())}
		errorsContain(t, st.ValidateUpdate(t.Context(), node(corev1.NodeSpec{}, internal, internal), node(corev1.NodeSpec{})), "status.addresses[1]: Duplicate value")
	})
}

// The cases of TestPrintNodeStatus, TestPrintNodeRole, TestPrintNodeOSImage,
// TestPrintNodeKernelVersion, TestPrintNodeContainerRuntimeVersion,
// TestPrintNodeInternalIP and TestPrintNodeExternalIP in k8s.io/kubernetes
// pkg/printers/internalversion/printers_test.go, in the wide row the
// server sends.
func TestNodeTable(t *testing.T) {
	ready := func(s corev1.ConditionStatus) corev1.NodeCondition {
		return corev1.NodeCondition{Type: corev1.NodeReady, Status: s}
	}
	invalid := corev1.NodeCondition{Type: "InvalidValue", Status: corev1.ConditionTrue}
	node := func(unschedulable bool, conditions ...corev1.NodeCondition) corev1.Node {
		return corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "foo"}, Spec: corev1.NodeSpec{Unschedulable: unschedulable},
			Status: corev1.NodeStatus{Conditions: conditions}}
	}
	labelled := func(labels map[string]string) corev1.Node {
		n := node(false)
		n.Labels = labels
		return n
	}
	withStatus := func(f func(*corev1.NodeStatus)) corev1.Node {
		n := node(false)
		f(&n.Status)
		return n
	}
	// row is the expected wide row: status, roles, then the wide columns.
	row := func(status, roles, version, internalIP, externalIP, osImage, kernel, runtime string) []any {
		return []any{"foo", status, roles, "<unknown>", version, internalIP, externalIP, osImage, kernel, runtime}
	}
	unknown := "<unknown>"
	tests := []struct {
		name string
		node corev1.Node
		want []any
	}{
		{"ready", node(false, ready(corev1.ConditionTrue)), row("Ready", "<none>", "", "<none>", "<none>", unknown, unknown, unknown)},
		{"ready, unschedulable", node(true, ready(corev1.ConditionTrue)), row("Ready,SchedulingDisabled", "<none>", "", "<none>", "<none>", unknown, unknown, unknown)},
		{"ready twice", node(false, ready(corev1.ConditionTrue), ready(corev1.ConditionTrue)), row("Ready", "<none>", "", "<none>", "<none>", unknown, unknown, unknown)},
		{"not ready", node(false, ready(corev1.ConditionFalse)), row("NotReady", "<none>", "", "<none>", "<none>", unknown, unknown, unknown)},
		{"not ready, unschedulable", node(true, ready(corev1.ConditionFalse)), row("NotReady,SchedulingDisabled", "<none>", "", "<none>", "<none>", unknown, unknown, unknown)},
		{"invalid condition", node(false, invalid), row("Unknown", "<none>", "", "<none>", "<none>", unknown, unknown, unknown)},
		{"empty condition", node(false, corev1.NodeCondition{}), row("Unknown", "<none>", "", "<none>", "<none>", unknown, unknown, unknown)},
		{"invalid condition, unschedulable", node(true, invalid), row("Unknown,SchedulingDisabled", "<none>", "", "<none>", "<none>", unknown, unknown, unknown)},
		{"empty condition, unschedulable", node(true, corev1.NodeCondition{}), row("Unknown,SchedulingDisabled", "<none>", "", "<none>", "<none>", unknown, unknown, unknown)},
		{"roles", labelled(map[string]string{"node-role.kubernetes.io/master": "", "node-role.kubernetes.io/proxy": "", "kubernetes.io/role": "node"}),
			row("Unknown", "master,node,proxy", "", "<none>", "<none>", unknown, unknown, unknown)},
		{"role label", labelled(map[string]string{"kubernetes.io/role": "node"}), row("Unknown", "node", "", "<none>", "<none>", unknown, unknown, unknown)},
		{"empty roles", labelled(map[string]string{"node-role.kubernetes.io/": "", "kubernetes.io/role": ""}), row("Unknown", "<none>", "", "<none>", "<none>", unknown, unknown, unknown)},
		{"node info", withStatus(func(s *corev1.NodeStatus) {
			s.NodeInfo = corev1.NodeSystemInfo{KubeletVersion: "v1.37.2", OSImage: "fake-os-image", KernelVersion: "fake-kernel-version", ContainerRuntimeVersion: "foo://1.2.3"}
		}), row("Unknown", "<none>", "v1.37.2", "<none>", "<none>", "fake-os-image", "fake-kernel-version", "foo://1.2.3")},
		{"addresses", withStatus(func(s *corev1.NodeStatus) {
			s.Addresses = []corev1.NodeAddress{{Type: corev1.NodeExternalIP, Address: "1.1.1.1"}, {Type: corev1.NodeInternalIP, Address: "2.2.2.2"},
				{Type: corev1.NodeInternalIP, Address: "3.3.3.3"}, {Type: corev1.NodeExternalIP, Address: "4.4.4.4"}}
		}), row("Unknown", "<none>", "", "2.2.2.2", "1.1.1.1", unknown, unknown, unknown)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tableRow(t, nodeDef(), &tt.node); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("row = %#v, want %#v", got, tt.want)
			}
		})
	}
}

// Nodes are selectable by spec.unschedulable (upstream's NodeToSelectableFields).
func TestNodeFields(t *testing.T) {
	_, got, err := nodeDef().getAttrs(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}, Spec: corev1.NodeSpec{Unschedulable: true}})
	if err != nil {
		t.Fatal(err)
	}
	if want := (fields.Set{"metadata.name": "n", "spec.unschedulable": "true"}); !reflect.DeepEqual(got, want) {
		t.Errorf("fields = %v, want %v", got, want)
	}
}
