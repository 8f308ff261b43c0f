package registry

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// newResourceSlice is upstream's testResourceSlice: numDevices devices
// with four attributes and a capacity each.
func newResourceSlice(name, nodeName, driver string, numDevices int) *resourcev1.ResourceSlice {
	s := &resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: "1"},
		Spec: resourcev1.ResourceSliceSpec{NodeName: &nodeName, Driver: driver,
			Pool: resourcev1.ResourcePool{Name: nodeName, ResourceSliceCount: 1}},
	}
	for d := range numDevices {
		s.Spec.Devices = append(s.Spec.Devices, resourcev1.Device{
			Name: fmt.Sprintf("device-%d", d),
			Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{
				"int": {IntValue: ptrTo(int64(42))}, "string": {StringValue: ptrTo("hello world")},
				"version": {VersionValue: ptrTo("1.2.3")}, "bool": {BoolValue: ptrTo(true)},
			},
			Capacity: map[resourcev1.QualifiedName]resourcev1.DeviceCapacity{"memory": {Value: resource.MustParse("1Gi")}},
		})
	}
	return s
}

// sameErrors compares error lists by type, field and detail, in order
// (upstream's assertFailures also compares the values).
func sameErrorList(t *testing.T, got, want field.ErrorList) {
	t.Helper()
	key := func(errs field.ErrorList) []string {
		var out []string
		for _, e := range errs {
			out = append(out, fmt.Sprintf("%s %s: %s", e.Type, e.Field, e.Detail))
		}
		return out
	}
	if g, w := key(got), key(want); !reflect.DeepEqual(g, w) {
		t.Errorf("errors:\n%s\nwant:\n%s", strings.Join(g, "\n"), strings.Join(w, "\n"))
	}
}

const (
	badName         = "!@#$%^"
	subdomainErr    = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
	labelErr        = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
	cIdentifierErr  = "a valid C identifier must start with alphabetic character or '_', followed by a string of alphanumeric characters or '_' (e.g. 'my_name',  or 'MY_NAME',  or 'MyName', regex used for validation is '[A-Za-z_][A-Za-z0-9_]*')"
	labelValueErr   = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
	namePartErr     = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
	oneOfNodeFields = "exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` is required, but multiple fields are set"
)

// Cases of TestValidateResourceSlice in k8s.io/kubernetes
// pkg/apis/resource/validation/validation_resourceslice_test.go, with
// upstream's errors, for the fields 1.37's default gates leave a slice.
func TestResourceSliceValidate(t *testing.T) {
	const good, driver = "foo", "test.example.com"
	devices := field.NewPath("spec", "devices")
	taint := resourcev1.DeviceTaint{Key: "example.com/taint", Effect: resourcev1.DeviceTaintEffectNoExecute}
	withTaints := func(n int) *resourcev1.ResourceSlice {
		return with(newResourceSlice(good, good, good, n), func(s *resourcev1.ResourceSlice) {
			for i := range s.Spec.Devices {
				s.Spec.Devices[i].Taints = []resourcev1.DeviceTaint{taint}
			}
		})
	}
	withConditions := func(conditions, failures []string) *resourcev1.ResourceSlice {
		return with(newResourceSlice(good, good, driver, 1), func(s *resourcev1.ResourceSlice) {
			s.Spec.Devices[0].BindingConditions, s.Spec.Devices[0].BindingFailureConditions = conditions, failures
		})
	}
	counters := map[string]resourcev1.Counter{"memory": {Value: resource.MustParse("1Gi")}}
	withCounterSets := func(names ...string) *resourcev1.ResourceSlice {
		return with(newResourceSlice(good, good, driver, 0), func(s *resourcev1.ResourceSlice) {
			for _, n := range names {
				s.Spec.SharedCounters = append(s.Spec.SharedCounters, resourcev1.CounterSet{Name: n, Counters: counters})
			}
		})
	}
	rangePolicy := func(step string) resourcev1.DeviceCapacity {
		return resourcev1.DeviceCapacity{Value: resource.MustParse("1Gi"), RequestPolicy: &resourcev1.CapacityRequestPolicy{
			Default:    ptrTo(resource.MustParse("10Mi")),
			ValidRange: &resourcev1.CapacityRequestPolicyRange{Min: ptrTo(resource.MustParse("1Mi")), Max: ptrTo(resource.MustParse("100Mi")), Step: ptrTo(resource.MustParse(step))},
		}}
	}
	tests := map[string]struct {
		slice *resourcev1.ResourceSlice
		want  field.ErrorList
	}{
		"good":        {newResourceSlice(good, good, driver, resourcev1.ResourceSliceMaxDevices), nil},
		"too-large":   {newResourceSlice(good, good, good, resourcev1.ResourceSliceMaxDevices+1), field.ErrorList{field.TooMany(devices, 129, 128)}},
		"good-taints": {withTaints(resourcev1.ResourceSliceMaxDevicesWithAdvancedFeatures), nil},
		"too-large-taints": {withTaints(resourcev1.ResourceSliceMaxDevicesWithAdvancedFeatures + 1),
			field.ErrorList{field.TooMany(devices, 65, 64)}},
		"missing-name": {newResourceSlice("", good, driver, 1), field.ErrorList{field.Required(field.NewPath("metadata", "name"), "name or generateName is required")}},
		"bad-name":     {newResourceSlice(badName, good, driver, 1), field.ErrorList{field.Invalid(field.NewPath("metadata", "name"), badName, subdomainErr)}},
		"bad-nodename": {newResourceSlice(good, badName, driver, 1), field.ErrorList{
			field.Invalid(field.NewPath("spec", "pool", "name"), badName, subdomainErr),
			field.Invalid(field.NewPath("spec", "nodeName"), badName, subdomainErr)}},
		"bad-multi-pool-name": {newResourceSlice(good, badName+"/"+badName, driver, 1), field.ErrorList{
			field.Invalid(field.NewPath("spec", "pool", "name"), badName, subdomainErr),
			field.Invalid(field.NewPath("spec", "pool", "name"), badName, subdomainErr),
			field.Invalid(field.NewPath("spec", "nodeName"), badName+"/"+badName, subdomainErr)}},
		"good-pool-name": {with(newResourceSlice(good, good, driver, 1), func(s *resourcev1.ResourceSlice) {
			s.Spec.Pool.Name = strings.Repeat("x", resourcev1.PoolNameMaxLength)
		}), nil},
		"bad-pool": {with(newResourceSlice(good, good, driver, 1), func(s *resourcev1.ResourceSlice) {
			s.Spec.Pool = resourcev1.ResourcePool{Name: strings.Repeat("x/", resourcev1.PoolNameMaxLength/2) + "xy", ResourceSliceCount: 0, Generation: -1}
		}), field.ErrorList{
			field.TooLong(field.NewPath("spec", "pool", "name"), "", resourcev1.PoolNameMaxLength),
			field.Invalid(field.NewPath("spec", "pool", "resourceSliceCount"), int64(0), "must be greater than zero"),
			field.Invalid(field.NewPath("spec", "pool", "generation"), int64(-1), "must be greater than or equal to zero")}},
		"missing-pool-name": {with(newResourceSlice(good, good, driver, 1), func(s *resourcev1.ResourceSlice) { s.Spec.Pool.Name = "" }),
			field.ErrorList{field.Required(field.NewPath("spec", "pool", "name"), "")}},
		"bad-empty-node-selector": {with(newResourceSlice(good, good, driver, 1), func(s *resourcev1.ResourceSlice) {
			s.Spec.NodeName, s.Spec.NodeSelector = nil, &corev1.NodeSelector{}
		}), field.ErrorList{
			field.Required(field.NewPath("spec", "nodeSelector", "nodeSelectorTerms"), "must have at least one node selector term"),
			field.Invalid(field.NewPath("spec", "nodeSelector", "nodeSelectorTerms"), nil, "must have exactly one node selector term")}},
		"bad-node-selection": {with(newResourceSlice(good, good, driver, 1), func(s *resourcev1.ResourceSlice) {
			s.Spec.NodeName = ptrTo("worker")
			s.Spec.NodeSelector = &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"worker"}}}}}}
		}), field.ErrorList{field.Invalid(field.NewPath("spec"), "{`nodeName`, `nodeSelector`}", oneOfNodeFields)}},
		"bad-node-selection-all-nodes": {with(newResourceSlice(good, good, driver, 1), func(s *resourcev1.ResourceSlice) {
			s.Spec.NodeName, s.Spec.AllNodes = ptrTo("worker"), ptrTo(true)
		}), field.ErrorList{field.Invalid(field.NewPath("spec"), "{`nodeName`, `allNodes`}", oneOfNodeFields)}},
		"empty-node-selection": {with(newResourceSlice(good, good, driver, 1), func(s *resourcev1.ResourceSlice) { s.Spec.NodeName = nil }),
			field.ErrorList{field.Required(field.NewPath("spec"), "exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` is required")}},
		"bad-drivername": {newResourceSlice(good, good, badName, 1), field.ErrorList{field.Invalid(field.NewPath("spec", "driver"), badName, subdomainErr)}},
		"both-shared-counters-and-devices": {with(newResourceSlice(good, good, driver, 1), func(s *resourcev1.ResourceSlice) {
			s.Spec.SharedCounters = []resourcev1.CounterSet{{Name: "counterset", Counters: counters}}
		}), field.ErrorList{field.Invalid(field.NewPath("spec"), "", "only one of `sharedCounters` or `devices` is allowed")}},
		"bad-devices": {with(newResourceSlice(good, good, good, 3), func(s *resourcev1.ResourceSlice) { s.Spec.Devices[1].Name = badName }),
			field.ErrorList{field.Invalid(devices.Index(1).Child("name"), badName, labelErr)}},
		"bad-attribute": {with(newResourceSlice(good, good, good, 5), func(s *resourcev1.ResourceSlice) {
			long := strings.Repeat("x", resourcev1.DeviceAttributeMaxValueLength+1)
			s.Spec.Devices[1].Attributes = map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{badName: {}}
			s.Spec.Devices[2].Attributes = map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{good: {StringValue: ptrTo("x"), VersionValue: ptrTo("1.2.3")}}
			s.Spec.Devices[3].Attributes = map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{good: {VersionValue: &long}}
			s.Spec.Devices[4].Attributes = map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{good: {StringValue: &long}}
		}), field.ErrorList{
			field.Invalid(devices.Index(1).Child("attributes"), badName, cIdentifierErr),
			field.Invalid(devices.Index(1).Child("attributes").Key(badName), "", "exactly one value must be specified"),
			field.Invalid(devices.Index(2).Child("attributes").Key(good), nil, "exactly one value must be specified"),
			field.Invalid(devices.Index(3).Child("attributes").Key(good).Child("version"), nil, "must be a string compatible with semver.org spec 2.0.0"),
			field.TooLong(devices.Index(3).Child("attributes").Key(good).Child("version"), "", resourcev1.DeviceAttributeMaxValueLength),
			field.TooLong(devices.Index(4).Child("attributes").Key(good).Child("string"), "", resourcev1.DeviceAttributeMaxValueLength)}},
		"good-attribute-names": {with(newResourceSlice(good, good, good, 2), func(s *resourcev1.ResourceSlice) {
			s.Spec.Devices[1].Attributes = map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{
				resourcev1.QualifiedName(strings.Repeat("x", resourcev1.DeviceMaxIDLength)):                                                               {StringValue: ptrTo("y")},
				resourcev1.QualifiedName(strings.Repeat("x", resourcev1.DeviceMaxDomainLength) + "/" + strings.Repeat("y", resourcev1.DeviceMaxIDLength)): {StringValue: ptrTo("z")},
			}
		}), nil},
		"bad-attribute-c-identifier": {with(newResourceSlice(good, good, good, 2), func(s *resourcev1.ResourceSlice) {
			s.Spec.Devices[1].Attributes = map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{resourcev1.QualifiedName(strings.Repeat(".", resourcev1.DeviceMaxIDLength+1)): {StringValue: ptrTo("y")}}
		}), field.ErrorList{
			field.TooLong(devices.Index(1).Child("attributes"), "", resourcev1.DeviceMaxIDLength),
			field.Invalid(devices.Index(1).Child("attributes"), nil, cIdentifierErr)}},
		"bad-attribute-domain": {with(newResourceSlice(good, good, good, 2), func(s *resourcev1.ResourceSlice) {
			s.Spec.Devices[1].Attributes = map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{resourcev1.QualifiedName(strings.Repeat("_", resourcev1.DeviceMaxDomainLength+1) + "/y"): {StringValue: ptrTo("z")}}
		}), field.ErrorList{
			field.TooLong(devices.Index(1).Child("attributes"), "", resourcev1.DeviceMaxDomainLength),
			field.Invalid(devices.Index(1).Child("attributes"), nil, subdomainErr)}},
		"bad-key-too-long": {with(newResourceSlice(good, good, good, 2), func(s *resourcev1.ResourceSlice) {
			s.Spec.Devices[1].Attributes = map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{
				resourcev1.QualifiedName(strings.Repeat("x", resourcev1.DeviceMaxDomainLength+1) + "/" + strings.Repeat("y", resourcev1.DeviceMaxIDLength+1)): {StringValue: ptrTo("z")}}
		}), field.ErrorList{
			field.TooLong(devices.Index(1).Child("attributes"), "", resourcev1.DeviceMaxDomainLength),
			field.TooLong(devices.Index(1).Child("attributes"), "", resourcev1.DeviceMaxIDLength)}},
		"bad-attribute-empty-domain-and-c-identifier": {with(newResourceSlice(good, good, good, 2), func(s *resourcev1.ResourceSlice) {
			s.Spec.Devices[1].Attributes = map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{"/": {StringValue: ptrTo("z")}}
		}), field.ErrorList{
			field.Invalid(devices.Index(1).Child("attributes"), "", "the domain must not be empty"),
			field.Invalid(devices.Index(1).Child("attributes"), "", "the name must not be empty")}},
		"forbidden-request-policy-on-single-allocatable-capacity": {with(newResourceSlice(good, good, good, 2), func(s *resourcev1.ResourceSlice) {
			s.Spec.Devices[1].Capacity = map[resourcev1.QualifiedName]resourcev1.DeviceCapacity{"cap": rangePolicy("1Mi")}
		}), field.ErrorList{field.Forbidden(devices.Index(1).Child("capacity").Key("cap").Child("requestPolicy"), "allowMultipleAllocations must be true")}},
		"invalid-request-policy-zero-step": {with(newResourceSlice(good, good, good, 2), func(s *resourcev1.ResourceSlice) {
			s.Spec.Devices[1].AllowMultipleAllocations = ptrTo(true)
			s.Spec.Devices[1].Capacity = map[resourcev1.QualifiedName]resourcev1.DeviceCapacity{"cap": rangePolicy("0")}
		}), field.ErrorList{field.Invalid(devices.Index(1).Child("capacity").Key("cap").Child("requestPolicy", "validRange", "step"), "0", "must be greater than zero")}},
		"invalid-request-policy-negative-step": {with(newResourceSlice(good, good, good, 2), func(s *resourcev1.ResourceSlice) {
			s.Spec.Devices[1].AllowMultipleAllocations = ptrTo(true)
			s.Spec.Devices[1].Capacity = map[resourcev1.QualifiedName]resourcev1.DeviceCapacity{"cap": rangePolicy("-1Mi")}
		}), field.ErrorList{field.Invalid(devices.Index(1).Child("capacity").Key("cap").Child("requestPolicy", "validRange", "step"), "-1Mi", "must be greater than zero")}},
		"taints": {with(newResourceSlice(good, good, good, 3), func(s *resourcev1.ResourceSlice) {
			s.Spec.Devices[0].Taints = []resourcev1.DeviceTaint{taint,
				{Key: "taint", Value: "tainted", Effect: resourcev1.DeviceTaintEffectNoSchedule, TimeAdded: ptrTo(metav1.Now())},
				{},
				{Key: badName, Value: badName, Effect: "some-other-effect"}}
		}), func() field.ErrorList {
			p := devices.Index(0).Child("taints")
			return field.ErrorList{
				field.Invalid(p.Index(2).Child("key"), "", "name part must be non-empty"),
				field.Invalid(p.Index(2).Child("key"), "", namePartErr),
				field.Required(p.Index(2).Child("effect"), ""),
				field.Invalid(p.Index(3).Child("key"), badName, namePartErr),
				field.Invalid(p.Index(3).Child("value"), badName, labelValueErr),
				field.NotSupported(p.Index(3).Child("effect"), resourcev1.DeviceTaintEffect("some-other-effect"), []resourcev1.DeviceTaintEffect{resourcev1.DeviceTaintEffectNoExecute, resourcev1.DeviceTaintEffectNoSchedule, resourcev1.DeviceTaintEffectNone}),
			}
		}()},
		"too-many-taints": {with(newResourceSlice(good, good, driver, 1), func(s *resourcev1.ResourceSlice) {
			for range resourcev1.DeviceTaintsMaxLength + 1 {
				s.Spec.Devices[0].Taints = append(s.Spec.Devices[0].Taints, taint)
			}
		}), field.ErrorList{field.TooMany(devices.Index(0).Child("taints"), 17, 16)}},
		"bad-PerDeviceNodeSelection": {with(newResourceSlice(good, good, driver, 1), func(s *resourcev1.ResourceSlice) {
			s.Spec.NodeName, s.Spec.PerDeviceNodeSelection = ptrTo("worker"), ptrTo(true)
		}), field.ErrorList{
			field.Invalid(field.NewPath("spec"), "{`nodeName`, `perDeviceNodeSelection`}", oneOfNodeFields),
			field.Required(devices.Index(0), "exactly one of `nodeName`, `nodeSelector`, or `allNodes` is required when `perDeviceNodeSelection` is set to true in the ResourceSlice spec")}},
		"invalid-false-PerDeviceNodeSelection": {with(newResourceSlice(good, good, driver, 1), func(s *resourcev1.ResourceSlice) {
			s.Spec.NodeName, s.Spec.PerDeviceNodeSelection = ptrTo("worker"), ptrTo(false)
		}), field.ErrorList{field.Invalid(field.NewPath("spec", "perDeviceNodeSelection"), false, "must be either unset or set to true")}},
		"invalid-false-AllNodes": {with(newResourceSlice(good, good, driver, 1), func(s *resourcev1.ResourceSlice) {
			s.Spec.NodeName, s.Spec.AllNodes = ptrTo("worker"), ptrTo(false)
		}), field.ErrorList{field.Invalid(field.NewPath("spec", "allNodes"), false, "must be either unset or set to true")}},
		"invalid-empty-NodeName": {with(newResourceSlice(good, good, driver, 1), func(s *resourcev1.ResourceSlice) {
			s.Spec.NodeName, s.Spec.AllNodes = ptrTo(""), ptrTo(true)
		}), field.ErrorList{field.Invalid(field.NewPath("spec", "nodeName"), "", "must be either unset or set to a non-empty string")}},
		"missing-name-shared-counters": {withCounterSets(""), field.ErrorList{field.Required(field.NewPath("spec", "sharedCounters").Index(0).Child("name"), "")}},
		"bad-name-shared-counters":     {withCounterSets(badName), field.ErrorList{field.Invalid(field.NewPath("spec", "sharedCounters").Index(0).Child("name"), badName, labelErr)}},
		"duplicate-shared-counters":    {withCounterSets("a", "a"), field.ErrorList{field.Duplicate(field.NewPath("spec", "sharedCounters").Index(1), "a")}},
		"max-shared-counters":          {withCounterSets("a", "b", "c", "d", "e", "f", "g", "h"), nil},
		"too-many-shared-counters":     {withCounterSets("a", "b", "c", "d", "e", "f", "g", "h", "i"), field.ErrorList{field.TooMany(field.NewPath("spec", "sharedCounters"), 9, 8)}},
		"good-binding-conditions":      {withConditions([]string{"example.com/condition1", "condition2"}, []string{"example.com/condition3", "condition4"}), nil},
		"too-many-binding-conditions": {withConditions([]string{"condition1", "condition2", "condition3", "condition4", "condition5"}, []string{"condition6", "condition7"}),
			field.ErrorList{field.TooMany(devices.Index(0).Child("bindingConditions"), 5, 4)}},
		"invalid-binding-failure-conditions": {withConditions([]string{"condition1", "condition2"}, []string{"condition3!", "condition4"}),
			field.ErrorList{field.Invalid(devices.Index(0).Child("bindingFailureConditions").Index(0), "condition3!", namePartErr)}},
		"invalid-slice-has-binding-failure-but-no-binding-conditions": {withConditions(nil, []string{"condition1", "condition2"}),
			field.ErrorList{field.Invalid(devices.Index(0).Child("bindingConditions"), nil, "bindingConditions are required to use bindingFailureConditions")}},
		"invalid-slice-has-binding-conditions-but-no-binding-failure-conditions": {withConditions([]string{"condition1", "condition2"}, nil),
			field.ErrorList{field.Invalid(devices.Index(0).Child("bindingFailureConditions"), nil, "bindingFailureConditions are required to use bindingConditions")}},
		"duplicate-binding-conditions": {withConditions([]string{"condition1", "condition1"}, []string{"condition2", "condition3"}),
			field.ErrorList{field.Duplicate(devices.Index(0).Child("bindingConditions").Index(1), "condition1")}},
		"overlapping-binding-conditions": {withConditions([]string{"condition1", "condition2"}, []string{"condition1", "condition3"}),
			field.ErrorList{field.Invalid(devices.Index(0).Child("bindingFailureConditions").Index(0), "condition1", "bindingFailureConditions must not overlap with bindingConditions")}},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			sameErrorList(t, validateCreate(t, resourceSliceDef(), tt.slice), tt.want)
		})
	}
}

// Cases of TestValidateResourceSliceUpdate in k8s.io/kubernetes
// pkg/apis/resource/validation/validation_resourceslice_test.go: driver,
// pool and node are immutable; taints and capacities that did not change
// are not validated again.
func TestResourceSliceValidateUpdate(t *testing.T) {
	const name = "valid"
	valid := newResourceSlice(name, name, name, 1)
	badTaints := valid.DeepCopy()
	badTaints.Spec.Devices[0].Taints = []resourcev1.DeviceTaint{
		{Key: "unhealthy-power", Effect: resourcev1.DeviceTaintEffectNoExecute},
		{Key: "unhealthy-mem", Effect: "some-other-effect"},
	}
	effects := []resourcev1.DeviceTaintEffect{resourcev1.DeviceTaintEffectNoExecute, resourcev1.DeviceTaintEffectNoSchedule, resourcev1.DeviceTaintEffectNone}
	tests := map[string]struct {
		old    *resourcev1.ResourceSlice
		update func(s *resourcev1.ResourceSlice)
		want   field.ErrorList
	}{
		"valid-no-op-update":  {valid, func(*resourcev1.ResourceSlice) {}, nil},
		"invalid-name-update": {valid, func(s *resourcev1.ResourceSlice) { s.Name += "-update" }, field.ErrorList{field.Invalid(field.NewPath("metadata", "name"), name+"-update", "field is immutable")}},
		"invalid-update-nodename": {valid, func(s *resourcev1.ResourceSlice) { s.Spec.NodeName = ptrTo(*s.Spec.NodeName + "-updated") },
			field.ErrorList{field.Invalid(field.NewPath("spec", "nodeName"), nil, "field is immutable")}},
		"invalid-update-drivername": {valid, func(s *resourcev1.ResourceSlice) { s.Spec.Driver += "-updated" },
			field.ErrorList{field.Invalid(field.NewPath("spec", "driver"), nil, "field is immutable")}},
		"invalid-update-pool": {valid, func(s *resourcev1.ResourceSlice) { s.Spec.Pool.Name += "-updated" },
			field.ErrorList{field.Invalid(field.NewPath("spec", "pool", "name"), nil, "field is immutable")}},
		"invalid-update-to-invalid-nodeselector-label-value": {
			with(valid.DeepCopy(), func(s *resourcev1.ResourceSlice) {
				s.Spec.NodeName = nil
				s.Spec.NodeSelector = &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "foo", Operator: corev1.NodeSelectorOpIn, Values: []string{"bar"}}}}}}
			}),
			func(s *resourcev1.ResourceSlice) {
				s.Spec.NodeSelector = &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "foo", Operator: corev1.NodeSelectorOpIn, Values: []string{"-1"}}}}}}
			},
			field.ErrorList{field.Invalid(field.NewPath("spec", "nodeSelector", "nodeSelectorTerms").Index(0).Child("matchExpressions").Index(0).Child("values").Index(0), "-1", labelValueErr)}},
		"invalid-new-effect-in-old-device": {valid, func(s *resourcev1.ResourceSlice) { s.Spec.Devices[0].Taints = badTaints.Spec.Devices[0].Taints },
			field.ErrorList{field.NotSupported(field.NewPath("spec", "devices").Index(0).Child("taints").Index(1).Child("effect"), resourcev1.DeviceTaintEffect("some-other-effect"), effects)}},
		"valid-old-effect": {badTaints, func(s *resourcev1.ResourceSlice) {
			s.Spec.Devices[0].Attributes["foo"] = resourcev1.DeviceAttribute{StringValue: ptrTo("bar")}
		}, nil},
		"invalid-new-effect-in-new-device": {badTaints, func(s *resourcev1.ResourceSlice) {
			d := s.Spec.Devices[0].DeepCopy()
			d.Name += "-other"
			s.Spec.Devices = append(s.Spec.Devices, *d)
		}, field.ErrorList{field.NotSupported(field.NewPath("spec", "devices").Index(1).Child("taints").Index(1).Child("effect"), resourcev1.DeviceTaintEffect("some-other-effect"), effects)}},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			s := tt.old.DeepCopy()
			tt.update(s)
			sameErrorList(t, validateUpdate(t, resourceSliceDef(), s, tt.old), tt.want)
		})
	}
}

func with(s *resourcev1.ResourceSlice, f func(s *resourcev1.ResourceSlice)) *resourcev1.ResourceSlice {
	f(s)
	return s
}

// TestResourceSliceStrategyCreate/Update and TestMatch in k8s.io/kubernetes
// pkg/registry/resource/resourceslice/strategy_test.go: the generation
// starts at 1 and counts spec changes; alpha fields are dropped unless
// already in use; spec.nodeName, spec.driver and spec.pool.name select.
func TestResourceSliceStrategy(t *testing.T) {
	ctx := context.Background()
	st := newStrategy(nil, resourceSliceDef())
	s := newResourceSlice("s", "worker", "dra.example.com", 1)
	s.Spec.SkipNodeOperations = []resourcev1.SkipNodeOperation{resourcev1.SkipNodeOperationAll}
	s.Spec.Devices[0].NodeAllocatableResources = map[corev1.ResourceName]resourcev1.NodeAllocatableResource{corev1.ResourceCPU: {}}
	s.Spec.Devices[0].Attributes["list"] = resourcev1.DeviceAttribute{IntValues: []int64{1}}
	st.PrepareForCreate(ctx, s)
	if s.Generation != 1 || s.Spec.SkipNodeOperations != nil || s.Spec.Devices[0].NodeAllocatableResources != nil || s.Spec.Devices[0].Attributes["list"].IntValues != nil {
		t.Errorf("create: generation %d, alpha fields kept: %+v", s.Generation, s.Spec)
	}

	labelsOnly := s.DeepCopy()
	labelsOnly.Labels = map[string]string{"a": "b"}
	st.PrepareForUpdate(ctx, labelsOnly, s)
	if labelsOnly.Generation != 1 {
		t.Errorf("a metadata update changed the generation to %d", labelsOnly.Generation)
	}
	specChange := s.DeepCopy()
	specChange.Spec.Pool.Generation++
	st.PrepareForUpdate(ctx, specChange, s)
	if specChange.Generation != 2 {
		t.Errorf("a spec update: generation %d, want 2", specChange.Generation)
	}

	// A slice written with a gate on keeps the field.
	stored := s.DeepCopy()
	stored.Spec.SkipNodeOperations = []resourcev1.SkipNodeOperation{resourcev1.SkipNodeOperationAll}
	upd := stored.DeepCopy()
	st.PrepareForUpdate(ctx, upd, stored)
	if len(upd.Spec.SkipNodeOperations) != 1 {
		t.Errorf("an update dropped a field in use")
	}

	d := resourceSliceDef()
	for _, tc := range []struct {
		selector string
		match    bool
	}{
		{"spec.nodeName=worker", true},
		{"spec.nodeName=other", false},
		{"spec.driver=dra.example.com", true},
		{"spec.pool.name=worker", true},
		{"spec.pool.name=other", false},
	} {
		sel, err := fields.ParseSelector(tc.selector)
		if err != nil {
			t.Fatal(err)
		}
		p := d.predicate(labels.Everything(), sel)
		if got, err := p.Matches(s); err != nil || got != tc.match {
			t.Errorf("%s: %v %v, want %v", tc.selector, got, err, tc.match)
		}
	}
	if _, _, err := d.fieldLabelConversion("spec.devices", "x"); err == nil {
		t.Error("spec.devices is selectable")
	}
	noNode := newResourceSlice("n", "", "dra.example.com", 0)
	noNode.Spec.NodeName = nil
	if fs := d.fields(noNode)["spec.nodeName"]; fs != "" {
		t.Errorf("a slice without a node selects spec.nodeName=%q", fs)
	}
}

// TestSetDefaultDeviceTaint in k8s.io/kubernetes pkg/apis/resource/v1:
// a taint without timeAdded was added now.
func TestResourceSliceDefaults(t *testing.T) {
	s := newResourceSlice("s", "n", "d", 1)
	given := metav1.Unix(1000, 0)
	s.Spec.Devices[0].Taints = []resourcev1.DeviceTaint{{Key: "a", Effect: "NoSchedule"}, {Key: "b", Effect: "NoSchedule", TimeAdded: &given}}
	resourceSliceDef().defaults(s)
	if tt := s.Spec.Devices[0].Taints; tt[0].TimeAdded == nil || tt[0].TimeAdded.IsZero() || !tt[1].TimeAdded.Equal(&given) {
		t.Errorf("timeAdded %v %v", tt[0].TimeAdded, tt[1].TimeAdded)
	}
}

// printResourceSlice in k8s.io/kubernetes pkg/printers/internalversion.
func TestResourceSliceTable(t *testing.T) {
	s := newResourceSlice("s", "worker", "dra.example.com", 0)
	if got, want := tableRow(t, resourceSliceDef(), s), []any{"s", "worker", "dra.example.com", "worker", "<unknown>"}; !reflect.DeepEqual(got, want) {
		t.Errorf("row = %#v, want %#v", got, want)
	}
	s.Spec.NodeName = nil
	if got := tableRow(t, resourceSliceDef(), s); got[1] != "" {
		t.Errorf("node cell %#v, want empty", got[1])
	}
}
