package registry

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func runtimeClass(name, handler string) *nodev1.RuntimeClass {
	return &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: "1"}, Handler: handler}
}

func withScheduling(rc *nodev1.RuntimeClass, s *nodev1.Scheduling) *nodev1.RuntimeClass {
	rc.Scheduling = s
	return rc
}

// The cases of TestValidateRuntimeClass, TestValidateOverhead and
// TestValidateScheduling in k8s.io/kubernetes
// pkg/apis/node/validation/validation_test.go, with the errors each
// invalid one gets (TestValidateScheduling counts them).
func TestRuntimeClassValidate(t *testing.T) {
	exists := func(key string, effect corev1.TaintEffect) corev1.Toleration {
		return corev1.Toleration{Key: key, Operator: corev1.TolerationOpExists, Effect: effect}
	}
	overhead := func(l corev1.ResourceList) *nodev1.RuntimeClass {
		rc := runtimeClass("foo", "bar")
		rc.Overhead = &nodev1.Overhead{PodFixed: l}
		return rc
	}
	tests := []struct {
		name string
		rc   *nodev1.RuntimeClass
		errs []string // the errors, in order; none when valid
	}{
		{name: "valid Handler", rc: runtimeClass("foo", "bar-baz")},
		{name: "invalid name", rc: runtimeClass("&!@#", "foo"), errs: []string{"metadata.name: Invalid value"}},
		{name: "invalid Handler name", rc: runtimeClass("foo", "&@#$"), errs: []string{"handler: Invalid value: \"&@#$\""}},
		{name: "invalid empty RuntimeClass", rc: runtimeClass("empty", ""), errs: []string{"handler: Required value"}},
		{name: "Overhead with valid cpu and memory resources", rc: overhead(corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("10"), corev1.ResourceMemory: resource.MustParse("10G")})},
		{name: "Invalid Resources", rc: overhead(corev1.ResourceList{"my.org": resource.MustParse("10m")}),
			errs: []string{"overhead.limits[my.org]: Invalid value: \"my.org\": must be a standard resource type or fully qualified",
				"overhead.limits[my.org]: Invalid value: \"my.org\": must be a standard resource for containers"}},
		{name: "negative overhead", rc: overhead(corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("-1")}),
			errs: []string{"overhead.limits[cpu]: Invalid value: \"-1\": must be greater than or equal to 0"}},
		{name: "valid scheduling", rc: withScheduling(runtimeClass("foo", "bar"), &nodev1.Scheduling{
			NodeSelector: map[string]string{"valid": "yes"}, Tolerations: []corev1.Toleration{exists("valid", corev1.TaintEffectNoSchedule)}})},
		{name: "empty scheduling", rc: withScheduling(runtimeClass("foo", "bar"), &nodev1.Scheduling{})},
		{name: "invalid nodeSelector", rc: withScheduling(runtimeClass("foo", "bar"), &nodev1.Scheduling{NodeSelector: map[string]string{"not a valid key!!!": "nope"}}),
			errs: []string{"scheduling.nodeSelector: Invalid value: \"not a valid key!!!\""}},
		{name: "invalid toleration", rc: withScheduling(runtimeClass("foo", "bar"), &nodev1.Scheduling{Tolerations: []corev1.Toleration{
			exists("valid", corev1.TaintEffectNoSchedule), exists("not a valid key!!!", corev1.TaintEffectNoSchedule)}}),
			errs: []string{"scheduling.tolerations[1].key: Invalid value: \"not a valid key!!!\""}},
		{name: "duplicate tolerations", rc: withScheduling(runtimeClass("foo", "bar"), &nodev1.Scheduling{Tolerations: []corev1.Toleration{
			{Key: "valid", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptrTo(int64(5))},
			{Key: "valid", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptrTo(int64(10))}}}),
			errs: []string{"scheduling.tolerations[1]: Duplicate value"}},
		{name: "invalid scheduling", rc: withScheduling(runtimeClass("foo", "bar"), &nodev1.Scheduling{
			NodeSelector: map[string]string{"not a valid key!!!": "nope"},
			Tolerations:  []corev1.Toleration{exists("valid", corev1.TaintEffectNoSchedule), exists("not a valid toleration key!!!", corev1.TaintEffectNoSchedule)}}),
			errs: []string{"scheduling.nodeSelector: Invalid value", "scheduling.tolerations[1].key: Invalid value"}},
		// ValidateTolerations' other rules.
		{name: "empty key needs Exists", rc: withScheduling(runtimeClass("foo", "bar"), &nodev1.Scheduling{Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpEqual}}}),
			errs: []string{"scheduling.tolerations[0].operator: Invalid value: \"Equal\": operator must be Exists when `key` is empty, which means \"match all values and all keys\""}},
		{name: "tolerationSeconds needs NoExecute", rc: withScheduling(runtimeClass("foo", "bar"), &nodev1.Scheduling{Tolerations: []corev1.Toleration{
			{Key: "k", Effect: corev1.TaintEffectNoSchedule, TolerationSeconds: ptrTo(int64(1))}}}),
			errs: []string{"scheduling.tolerations[0].effect: Invalid value: \"NoSchedule\": effect must be 'NoExecute' when `tolerationSeconds` is set"}},
		{name: "Exists with a value", rc: withScheduling(runtimeClass("foo", "bar"), &nodev1.Scheduling{Tolerations: []corev1.Toleration{
			{Key: "k", Operator: corev1.TolerationOpExists, Value: "v"}}}),
			errs: []string{"scheduling.tolerations[0].operator: Invalid value: \"v\": value must be empty when `operator` is 'Exists'"}},
		{name: "Lt is not allowed", rc: withScheduling(runtimeClass("foo", "bar"), &nodev1.Scheduling{Tolerations: []corev1.Toleration{
			{Key: "k", Operator: corev1.TolerationOpLt, Value: "5"}}}),
			errs: []string{"scheduling.tolerations[0].operator: Unsupported value: \"Lt\": supported values: \"Equal\", \"Exists\", \"Lt\", \"Gt\""}},
		{name: "unknown operator and effect", rc: withScheduling(runtimeClass("foo", "bar"), &nodev1.Scheduling{Tolerations: []corev1.Toleration{
			{Key: "k", Operator: "Near", Effect: "Sometimes"}}}),
			errs: []string{"scheduling.tolerations[0].operator: Unsupported value: \"Near\": supported values: \"Equal\", \"Exists\"",
				"scheduling.tolerations[0].effect: Unsupported value: \"Sometimes\": supported values: \"NoSchedule\", \"PreferNoSchedule\", \"NoExecute\""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errs := validateCreate(t, runtimeClassDef(), tt.rc)
			if len(errs) != len(tt.errs) {
				t.Fatalf("%d errors, want %d: %v", len(errs), len(tt.errs), errs.ToAggregate())
			}
			for i, want := range tt.errs {
				errorsContain(t, errs[i:i+1], want)
			}
		})
	}
}

// The cases of TestValidateRuntimeUpdate in validation_test.go: the
// handler is fixed.
func TestRuntimeClassValidateUpdate(t *testing.T) {
	old := runtimeClass("foo", "bar")
	labelled := runtimeClass("foo", "bar")
	labelled.Labels = map[string]string{"foo": "bar"}
	namespaced := runtimeClass("empty", "bar")
	namespaced.Namespace = "somethingelse"
	tests := []struct {
		name string
		new  *nodev1.RuntimeClass
		err  string
	}{
		{name: "valid metadata update", new: labelled},
		{name: "invalid metadata update", new: namespaced, err: "metadata.name: Invalid value: \"empty\": field is immutable"},
		{name: "invalid Handler update", new: runtimeClass("foo", "somethingelse"), err: "handler: Invalid value: \"somethingelse\": field is immutable"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errorsContain(t, validateUpdate(t, runtimeClassDef(), tt.new, old), tt.err)
		})
	}
	st := newStrategy(nil, runtimeClassDef())
	if !st.AllowCreateOnUpdate(t.Context()) || st.AllowUnconditionalUpdate(t.Context()) {
		t.Error("runtime classes are created by an update and updated only conditionally, as upstream")
	}
}

// GetWarningsForRuntimeClass (pkg/api/node): deprecated node labels in
// the node selector.
func TestRuntimeClassWarnings(t *testing.T) {
	rc := withScheduling(runtimeClass("foo", "bar"), &nodev1.Scheduling{NodeSelector: map[string]string{"beta.kubernetes.io/os": "linux", "kubernetes.io/os": "linux"}})
	want := []string{`scheduling.nodeSelector: deprecated since v1.14; use "kubernetes.io/os" instead`}
	st := newStrategy(nil, runtimeClassDef())
	if got := st.WarningsOnCreate(t.Context(), rc); !reflect.DeepEqual(got, want) {
		t.Errorf("warnings = %q, want %q", got, want)
	}
	if got := st.WarningsOnUpdate(t.Context(), runtimeClass("foo", "bar"), rc); got != nil {
		t.Errorf("warnings without scheduling = %q", got)
	}
}

// TestPrintRuntimeClass in k8s.io/kubernetes
// pkg/printers/internalversion/printers_test.go.
func TestRuntimeClassTable(t *testing.T) {
	created := metav1.NewTime(metav1.Now().Add(-3e11))
	rc := runtimeClass("rc2", "h2")
	rc.CreationTimestamp = created
	if got, want := tableRow(t, runtimeClassDef(), rc), []any{"rc2", "h2", "5m"}; !reflect.DeepEqual(got, want) {
		t.Errorf("row = %#v, want %#v", got, want)
	}
}
