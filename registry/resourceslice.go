package registry

import (
	"context"

	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"
	"time"

	"gopkg.in/inf.v0"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apiresource "k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/api/validate/content"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The selectable fields of a ResourceSlice, upstream's.
const (
	resourceSliceNodeName = "spec.nodeName"
	resourceSliceDriver   = "spec.driver"
	resourceSlicePoolName = "spec.pool.name"
)

// resourceSliceDef is resource.k8s.io/v1 ResourceSlice, as
// pkg/registry/resource/resourceslice serves it: the kubelet's DRA
// manager lists and deletes its node's slices by spec.nodeName, which
// the watch cache indexes as upstream's does.
//
// The DRA feature gates are kube-apiserver 1.37's defaults: device
// taints, partitionable devices, binding conditions and consumable
// capacity are on; compatibility groups, node allocatable resources, list
// attributes, the partition type attribute and skipped node operations
// are alpha and off, so their fields are dropped unless the stored slice
// already uses them (upstream's dropDisabledFields).
func resourceSliceDef() *resourceDef {
	nodeName := func(obj runtime.Object) string {
		if n := obj.(*resourcev1.ResourceSlice).Spec.NodeName; n != nil {
			return *n
		}
		return ""
	}
	return &resourceDef{
		gvr:         resourcev1.SchemeGroupVersion.WithResource("resourceslices"),
		kind:        "ResourceSlice",
		singular:    "resourceslice",
		keyPrefix:   "resourceslices",
		newFunc:     func() runtime.Object { return &resourcev1.ResourceSlice{} },
		newListFunc: func() runtime.Object { return &resourcev1.ResourceSliceList{} },
		defaults:    func(obj any) { defaultResourceSlice(obj.(*resourcev1.ResourceSlice)) },
		fields: func(obj runtime.Object) fields.Set {
			s := obj.(*resourcev1.ResourceSlice)
			return fields.Set{resourceSliceNodeName: nodeName(obj), resourceSliceDriver: s.Spec.Driver, resourceSlicePoolName: s.Spec.Pool.Name}
		},
		fieldLabels: []string{resourceSliceNodeName, resourceSliceDriver, resourceSlicePoolName},
		index:       &fieldIndex{field: resourceSliceNodeName, value: nodeName},
		prepareForCreate: func(_ context.Context, obj runtime.Object) {
			s := obj.(*resourcev1.ResourceSlice)
			s.Generation = 1
			dropDisabledResourceSliceFields(s, nil)
		},
		prepareForUpdate: func(obj, old runtime.Object) {
			s, o := obj.(*resourcev1.ResourceSlice), old.(*resourcev1.ResourceSlice)
			if !apiequality.Semantic.DeepEqual(o.Spec, s.Spec) {
				s.Generation = o.Generation + 1
			}
			dropDisabledResourceSliceFields(s, o)
		},
		validate: func(obj runtime.Object) field.ErrorList {
			return validateResourceSliceSpec(&obj.(*resourcev1.ResourceSlice).Spec, nil, field.NewPath("spec"))
		},
		validateUpdate: func(obj, old runtime.Object) field.ErrorList {
			return validateResourceSliceSpec(&obj.(*resourcev1.ResourceSlice).Spec, &old.(*resourcev1.ResourceSlice).Spec, field.NewPath("spec"))
		},
		ownUpdateValidation: true,
		columns: []metav1.TableColumnDefinition{
			nameCol,
			col("Node", "string", resourcev1.ResourceSliceSpec{}.SwaggerDoc()["nodeName"]),
			col("Driver", "string", resourcev1.ResourceSliceSpec{}.SwaggerDoc()["driver"]),
			col("Pool", "string", resourcev1.ResourcePool{}.SwaggerDoc()["name"]),
			ageCol,
		},
		row: func(obj runtime.Object) []any {
			s := obj.(*resourcev1.ResourceSlice)
			return []any{s.Name, nodeName(obj), s.Spec.Driver, s.Spec.Pool.Name, age(s.CreationTimestamp)}
		},
	}
}

// defaultResourceSlice is upstream's SetObjectDefaults_ResourceSlice: a
// device taint without timeAdded was added now.
func defaultResourceSlice(s *resourcev1.ResourceSlice) {
	for i := range s.Spec.Devices {
		for j := range s.Spec.Devices[i].Taints {
			if t := &s.Spec.Devices[i].Taints[j]; t.TimeAdded == nil {
				t.TimeAdded = &metav1.Time{Time: time.Now().Truncate(time.Second)}
			}
		}
	}
}

// dropDisabledResourceSliceFields is upstream's dropDisabledFields with
// the alpha gates off: their fields go unless old already uses them.
func dropDisabledResourceSliceFields(s, old *resourcev1.ResourceSlice) {
	inUse := func(used func(*resourcev1.ResourceSliceSpec) bool) bool { return old != nil && used(&old.Spec) }
	if !inUse(func(s *resourcev1.ResourceSliceSpec) bool { return s.PartitionTypeAttribute != nil }) {
		s.Spec.PartitionTypeAttribute = nil // DRAPartitionableDevicesType
	}
	if !inUse(func(s *resourcev1.ResourceSliceSpec) bool { return len(s.SkipNodeOperations) > 0 }) {
		s.Spec.SkipNodeOperations = nil // DRAOptionalNodeOperations
	}
	anyDevice := func(f func(d *resourcev1.Device) bool) func(*resourcev1.ResourceSliceSpec) bool {
		return func(s *resourcev1.ResourceSliceSpec) bool {
			return slices.ContainsFunc(s.Devices, func(d resourcev1.Device) bool { return f(&d) })
		}
	}
	dropGroups := !inUse(anyDevice(func(d *resourcev1.Device) bool {
		return slices.ContainsFunc(d.ConsumesCounters, func(c resourcev1.DeviceCounterConsumption) bool { return len(c.CompatibilityGroups) > 0 })
	}))
	dropAllocatable := !inUse(anyDevice(func(d *resourcev1.Device) bool { return len(d.NodeAllocatableResources) > 0 }))
	dropLists := !inUse(func(s *resourcev1.ResourceSliceSpec) bool { return haveListAttributes(s) })
	for i := range s.Spec.Devices {
		d := &s.Spec.Devices[i]
		if dropGroups { // DRADeviceCompatibilityGroups
			for j := range d.ConsumesCounters {
				d.ConsumesCounters[j].CompatibilityGroups = nil
			}
		}
		if dropAllocatable { // DRANodeAllocatableResources
			d.NodeAllocatableResources = nil
		}
		if dropLists { // DRAListTypeAttributes
			for k, a := range d.Attributes {
				if a.BoolValues != nil || a.IntValues != nil || a.StringValues != nil || a.VersionValues != nil {
					a.BoolValues, a.IntValues, a.StringValues, a.VersionValues = nil, nil, nil, nil
					d.Attributes[k] = a
				}
			}
		}
	}
}

// The validation below is upstream's ValidateResourceSlice and
// ValidateResourceSliceUpdate (pkg/apis/resource/validation), with its
// messages and field paths, for the fields a slice has.

// capacityRequestPolicyDiscreteMaxOptions limits the valid values of a
// request policy, upstream's (pkg/apis/resource; k8s.io/api lacks it).
const capacityRequestPolicyDiscreteMaxOptions = 10

// attributeAndCapacityMaxKeyLength is the longest domain/ID key.
const attributeAndCapacityMaxKeyLength = resourcev1.DeviceMaxDomainLength + 1 + resourcev1.DeviceMaxIDLength

var validDeviceTaintEffects = sets.New(resourcev1.DeviceTaintEffectNoSchedule, resourcev1.DeviceTaintEffectNoExecute, resourcev1.DeviceTaintEffectNone)

func validateResourceSliceSpec(spec, oldSpec *resourcev1.ResourceSliceSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, validateCSIDriverName(spec.Driver, path.Child("driver"))...)
	errs = append(errs, validatePoolName(spec.Pool.Name, path.Child("pool", "name"))...)
	if spec.Pool.ResourceSliceCount <= 0 {
		errs = append(errs, field.Invalid(path.Child("pool", "resourceSliceCount"), spec.Pool.ResourceSliceCount, "must be greater than zero"))
	}
	if spec.Pool.Generation < 0 {
		errs = append(errs, field.Invalid(path.Child("pool", "generation"), spec.Pool.Generation, "must be greater than or equal to zero"))
	}
	if oldSpec != nil {
		errs = append(errs, apimachineryvalidation.ValidateImmutableField(spec.Pool.Name, oldSpec.Pool.Name, path.Child("pool", "name"))...)
		errs = append(errs, apimachineryvalidation.ValidateImmutableField(spec.Driver, oldSpec.Driver, path.Child("driver"))...)
		errs = append(errs, apimachineryvalidation.ValidateImmutableField(spec.NodeName, oldSpec.NodeName, path.Child("nodeName"))...)
	}

	var set []string
	if spec.NodeName != nil {
		if *spec.NodeName != "" {
			set = append(set, "`nodeName`")
			errs = append(errs, validateSliceNodeName(*spec.NodeName, path.Child("nodeName"))...)
		} else {
			errs = append(errs, field.Invalid(path.Child("nodeName"), *spec.NodeName, "must be either unset or set to a non-empty string"))
		}
	}
	if spec.NodeSelector != nil {
		set = append(set, "`nodeSelector`")
		errs = append(errs, validateNodeSelector(spec.NodeSelector, path.Child("nodeSelector"))...)
		if len(spec.NodeSelector.NodeSelectorTerms) != 1 {
			// One term makes merging the selectors of devices from
			// different slices simple.
			errs = append(errs, field.Invalid(path.Child("nodeSelector", "nodeSelectorTerms"), spec.NodeSelector.NodeSelectorTerms, "must have exactly one node selector term"))
		}
	}
	errs = append(errs, trueOrUnset(spec.AllNodes, "`allNodes`", path.Child("allNodes"), &set)...)
	errs = append(errs, trueOrUnset(spec.PerDeviceNodeSelection, "`perDeviceNodeSelection`", path.Child("perDeviceNodeSelection"), &set)...)
	switch len(set) {
	case 0:
		errs = append(errs, field.Required(path, "exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` is required"))
	case 1:
	default:
		errs = append(errs, field.Invalid(path, fmt.Sprintf("{%s}", strings.Join(set, ", ")),
			"exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` is required, but multiple fields are set"))
	}

	if spec.SharedCounters != nil && spec.Devices != nil {
		errs = append(errs, field.Invalid(path, "", "only one of `sharedCounters` or `devices` is allowed"))
	}
	maxDevices := resourcev1.ResourceSliceMaxDevices
	if haveDeviceTaints(spec) || haveConsumesCounters(spec) || haveListAttributes(spec) {
		maxDevices = resourcev1.ResourceSliceMaxDevicesWithAdvancedFeatures
	}
	errs = append(errs, validateSet(spec.Devices, maxDevices, func(d resourcev1.Device, p *field.Path) field.ErrorList {
		return validateDevice(d, lookupDevice(oldSpec, d.Name), p, spec.PerDeviceNodeSelection)
	}, func(d resourcev1.Device) string { return d.Name }, path.Child("devices"))...)
	errs = append(errs, validateSet(spec.SharedCounters, resourcev1.ResourceSliceMaxCounterSets, validateCounterSet,
		func(c resourcev1.CounterSet) string { return c.Name }, path.Child("sharedCounters"))...)
	if spec.PartitionTypeAttribute != nil {
		errs = append(errs, validatePartitionTypeAttribute(spec, path)...)
	}
	return append(errs, validateSkipNodeOperations(spec.SkipNodeOperations, path.Child("skipNodeOperations"))...)
}

// trueOrUnset records name in set when b is true; false is invalid.
func trueOrUnset(b *bool, name string, path *field.Path, set *[]string) field.ErrorList {
	switch {
	case b == nil:
		return nil
	case *b:
		*set = append(*set, name)
		return nil
	}
	return field.ErrorList{field.Invalid(path, *b, "must be either unset or set to true")}
}

func validatePoolName(name string, path *field.Path) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(path, "")}
	}
	var errs field.ErrorList
	if len(name) > resourcev1.PoolNameMaxLength {
		errs = append(errs, field.TooLong(path, "", resourcev1.PoolNameMaxLength))
	}
	for _, part := range strings.Split(name, "/") {
		errs = append(errs, dnsSubdomain(path, part)...)
	}
	return errs
}

func dnsSubdomain(path *field.Path, value string) field.ErrorList {
	return invalidEach(path, value, utilvalidation.IsDNS1123Subdomain(value))
}

func validateSliceNodeName(name string, path *field.Path) field.ErrorList {
	return invalidEach(path, name, apimachineryvalidation.NameIsDNSSubdomain(name, false))
}

// validateNodeSelector is upstream's ValidateNodeSelector
// (pkg/apis/core/validation) with invalid label values refused.
func validateNodeSelector(s *corev1.NodeSelector, path *field.Path) field.ErrorList {
	terms := path.Child("nodeSelectorTerms")
	if len(s.NodeSelectorTerms) == 0 {
		return field.ErrorList{field.Required(terms, "must have at least one node selector term")}
	}
	var errs field.ErrorList
	for i, term := range s.NodeSelectorTerms {
		p := terms.Index(i)
		for j, req := range term.MatchExpressions {
			errs = append(errs, validateNodeSelectorRequirement(req, p.Child("matchExpressions").Index(j))...)
		}
		for j, req := range term.MatchFields {
			errs = append(errs, validateNodeFieldSelectorRequirement(req, p.Child("matchFields").Index(j))...)
		}
	}
	return errs
}

func validateNodeSelectorRequirement(rq corev1.NodeSelectorRequirement, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch rq.Operator {
	case corev1.NodeSelectorOpIn, corev1.NodeSelectorOpNotIn:
		if len(rq.Values) == 0 {
			errs = append(errs, field.Required(path.Child("values"), "must be specified when `operator` is 'In' or 'NotIn'"))
		}
	case corev1.NodeSelectorOpExists, corev1.NodeSelectorOpDoesNotExist:
		if len(rq.Values) > 0 {
			errs = append(errs, field.Forbidden(path.Child("values"), "may not be specified when `operator` is 'Exists' or 'DoesNotExist'"))
		}
	case corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt:
		if len(rq.Values) != 1 {
			errs = append(errs, field.Required(path.Child("values"), "must be specified single value when `operator` is 'Lt' or 'Gt'"))
		}
	default:
		errs = append(errs, field.Invalid(path.Child("operator"), rq.Operator, "not a valid selector operator"))
	}
	errs = append(errs, metav1validation.ValidateLabelName(rq.Key, path.Child("key"))...)
	for i, v := range rq.Values {
		errs = append(errs, labelValue(path.Child("values").Index(i), v)...)
	}
	return errs
}

func validateNodeFieldSelectorRequirement(rq corev1.NodeSelectorRequirement, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch rq.Operator {
	case corev1.NodeSelectorOpIn, corev1.NodeSelectorOpNotIn:
		if len(rq.Values) != 1 {
			errs = append(errs, field.Required(path.Child("values"), "must be only one value when `operator` is 'In' or 'NotIn' for node field selector"))
		}
	default:
		errs = append(errs, field.Invalid(path.Child("operator"), rq.Operator, "not a valid selector operator"))
	}
	if rq.Key != metav1.ObjectNameField {
		return append(errs, field.Invalid(path.Child("key"), rq.Key, "not a valid field selector key"))
	}
	for i, v := range rq.Values {
		errs = append(errs, validateSliceNodeName(v, path.Child("values").Index(i))...)
	}
	return errs
}

func labelValue(path *field.Path, value string) field.ErrorList {
	return invalidEach(path, value, utilvalidation.IsValidLabelValue(value))
}

func haveListAttributes(spec *resourcev1.ResourceSliceSpec) bool {
	return slices.ContainsFunc(spec.Devices, func(d resourcev1.Device) bool {
		for _, a := range d.Attributes {
			if a.BoolValues != nil || a.IntValues != nil || a.StringValues != nil || a.VersionValues != nil {
				return true
			}
		}
		return false
	})
}

func haveDeviceTaints(spec *resourcev1.ResourceSliceSpec) bool {
	return slices.ContainsFunc(spec.Devices, func(d resourcev1.Device) bool { return len(d.Taints) > 0 })
}

func haveConsumesCounters(spec *resourcev1.ResourceSliceSpec) bool {
	return slices.ContainsFunc(spec.Devices, func(d resourcev1.Device) bool { return len(d.ConsumesCounters) > 0 })
}

func lookupDevice(spec *resourcev1.ResourceSliceSpec, name string) *resourcev1.Device {
	if spec == nil {
		return nil
	}
	for i := range spec.Devices {
		if spec.Devices[i].Name == name {
			return &spec.Devices[i]
		}
	}
	return nil
}

// validatePartitionTypeAttribute: a slice naming a partition type
// attribute declares devices that consume counters, each of which carries
// the attribute as a string (bare names are in the driver's domain).
func validatePartitionTypeAttribute(spec *resourcev1.ResourceSliceSpec, path *field.Path) field.ErrorList {
	name := string(*spec.PartitionTypeAttribute)
	if !haveConsumesCounters(spec) {
		return field.ErrorList{field.Invalid(path.Child("partitionTypeAttribute"), name, "may only be set on a slice which declares devices that consume counters")}
	}
	if len(validateQualifiedName(resourcev1.QualifiedName(name), nil)) > 0 || !strings.Contains(name, "/") {
		return nil // a malformed name is reported declaratively upstream
	}
	bare, _ := strings.CutPrefix(name, spec.Driver+"/")
	var errs field.ErrorList
	for i, d := range spec.Devices {
		if len(d.ConsumesCounters) == 0 {
			continue
		}
		p := path.Child("devices").Index(i).Child("attributes").Key(name)
		a, ok := d.Attributes[resourcev1.QualifiedName(name)]
		if !ok && bare != "" {
			a, ok = d.Attributes[resourcev1.QualifiedName(bare)]
		}
		switch {
		case !ok:
			errs = append(errs, field.Required(p, "device consumes counters and `partitionTypeAttribute` names this attribute, so it must be set"))
		case a.StringValue == nil:
			errs = append(errs, field.Invalid(p, a, "must be a string value because `partitionTypeAttribute` names this attribute"))
		}
	}
	return errs
}

var skipNodeOperations = sets.New(resourcev1.SkipNodeOperationAll, resourcev1.SkipNodeOperationNodePrepareResources, resourcev1.SkipNodeOperationNodeUnprepareResources)

// validateSkipNodeOperations: preparing may be skipped only with
// unpreparing; and, declaratively upstream, known values once each.
func validateSkipNodeOperations(ops []resourcev1.SkipNodeOperation, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	set := sets.New(ops...)
	if set.Has(resourcev1.SkipNodeOperationNodePrepareResources) && !set.Has(resourcev1.SkipNodeOperationNodeUnprepareResources) && !set.Has(resourcev1.SkipNodeOperationAll) {
		errs = append(errs, field.Invalid(path, ops, "NodePrepareResources cannot be skipped unless NodeUnprepareResources is also skipped"))
	}
	seen := sets.New[resourcev1.SkipNodeOperation]()
	for i, op := range ops {
		if seen.Has(op) {
			errs = append(errs, field.Duplicate(path.Index(i), op))
		}
		seen.Insert(op)
		if !skipNodeOperations.Has(op) {
			errs = append(errs, field.NotSupported(path.Index(i), op, sets.List(skipNodeOperations)))
		}
	}
	return errs
}

func validateCounterSet(c resourcev1.CounterSet, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if c.Name == "" {
		errs = append(errs, field.Required(path.Child("name"), ""))
	} else {
		errs = append(errs, dnsLabel(path.Child("name"), c.Name)...)
	}
	if len(c.Counters) == 0 {
		return append(errs, field.Required(path.Child("counters"), ""))
	}
	return append(errs, validateCounters(c.Counters, resourcev1.ResourceSliceMaxCountersPerCounterSet, path.Child("counters"))...)
}

// validateCounters checks a counter map's size and names; any parsed
// quantity is a valid counter.
func validateCounters(counters map[string]resourcev1.Counter, maxSize int, path *field.Path) field.ErrorList {
	return validateMap(counters, maxSize, utilvalidation.DNS1123LabelMaxLength, func(name string, p *field.Path) field.ErrorList { return dnsLabel(p, name) },
		func(resourcev1.Counter, *field.Path) field.ErrorList { return nil }, path)
}

func validateDevice(d resourcev1.Device, old *resourcev1.Device, path *field.Path, perDeviceNodeSelection *bool) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, dnsLabel(path.Child("name"), d.Name)...)
	// The combination is reported once: any single field too large makes
	// it too large.
	if n := len(d.Attributes) + len(d.Capacity); n > resourcev1.ResourceSliceMaxAttributesAndCapacitiesPerDevice {
		errs = append(errs, field.Invalid(path, n, fmt.Sprintf("the total number of attributes and capacities must not exceed %d", resourcev1.ResourceSliceMaxAttributesAndCapacitiesPerDevice)))
	}
	if n := attributeValueCount(d); n > resourcev1.ResourceSliceMaxAttributeValuesPerDevice {
		errs = append(errs, field.Invalid(path, n, fmt.Sprintf("the total number of attribute values must not exceed %d", resourcev1.ResourceSliceMaxAttributeValuesPerDevice)))
	}
	errs = append(errs, validateMap(d.Attributes, -1, attributeAndCapacityMaxKeyLength, validateQualifiedName, validateDeviceAttribute, path.Child("attributes"))...)
	// Unchanged capacities and taints are not validated again.
	if old == nil || !apiequality.Semantic.DeepEqual(old.Capacity, d.Capacity) {
		capacity := validateSingleAllocatableCapacity
		if d.AllowMultipleAllocations != nil && *d.AllowMultipleAllocations {
			capacity = validateMultiAllocatableCapacity
		}
		errs = append(errs, validateMap(d.Capacity, -1, attributeAndCapacityMaxKeyLength, validateQualifiedName, capacity, path.Child("capacity"))...)
	}
	if old == nil || !apiequality.Semantic.DeepEqual(old.Taints, d.Taints) {
		errs = append(errs, validateSlice(d.Taints, resourcev1.DeviceTaintsMaxLength, validateDeviceTaint, path.Child("taints"))...)
	}
	errs = append(errs, validateSet(d.ConsumesCounters, resourcev1.ResourceSliceMaxDeviceCounterConsumptionsPerDevice, validateDeviceCounterConsumption,
		func(c resourcev1.DeviceCounterConsumption) string { return c.CounterSet }, path.Child("consumesCounters"))...)

	if perDeviceNodeSelection != nil && *perDeviceNodeSelection {
		var set []string
		if d.NodeName != nil {
			if *d.NodeName != "" {
				set = append(set, "`nodeName`")
				errs = append(errs, validateSliceNodeName(*d.NodeName, path.Child("nodeName"))...)
			} else {
				errs = append(errs, field.Invalid(path.Child("nodeName"), *d.NodeName, "must not be empty"))
			}
		}
		if d.NodeSelector != nil {
			set = append(set, "`nodeSelector`")
			errs = append(errs, validateNodeSelector(d.NodeSelector, path.Child("nodeSelector"))...)
		}
		errs = append(errs, trueOrUnset(d.AllNodes, "`allNodes`", path.Child("allNodes"), &set)...)
		const msg = "exactly one of `nodeName`, `nodeSelector`, or `allNodes` is required when `perDeviceNodeSelection` is set to true in the ResourceSlice spec"
		switch len(set) {
		case 0:
			errs = append(errs, field.Required(path, msg))
		case 1:
		default:
			errs = append(errs, field.Invalid(path, fmt.Sprintf("{%s}", strings.Join(set, ", ")), msg))
		}
	} else if d.NodeName != nil || d.NodeSelector != nil || d.AllNodes != nil {
		errs = append(errs, field.Invalid(path, nil, "`nodeName`, `nodeSelector` and `allNodes` can only be set if `perDeviceNodeSelection` is set to true in the ResourceSlice spec"))
	}

	errs = append(errs, validateBindingConditions(d.BindingConditions, d.BindingFailureConditions, path)...)
	return append(errs, validateNodeAllocatableResources(d.NodeAllocatableResources, d.Capacity, path.Child("nodeAllocatableResources"))...)
}

// attributeValueCount counts a device's attribute values, each item of a
// list value on its own.
func attributeValueCount(d resourcev1.Device) int {
	n := 0
	for _, a := range d.Attributes {
		if l := len(a.BoolValues) + len(a.IntValues) + len(a.StringValues) + len(a.VersionValues); l > 0 {
			n += l
		} else {
			n++
		}
	}
	return n
}

func validateNodeAllocatableResources(m map[corev1.ResourceName]resourcev1.NodeAllocatableResource, capacities map[resourcev1.QualifiedName]resourcev1.DeviceCapacity, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for name, r := range m {
		p := path.Key(string(name))
		if name != corev1.ResourceCPU && name != corev1.ResourceMemory && !strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix) {
			errs = append(errs, field.Invalid(p, name, "must be a node allocatable resource name"))
		}
		if r.Mapping == nil && r.Overhead == nil {
			errs = append(errs, field.Required(p, "at least one of mapping or overhead must be set"))
		}
		if mp := r.Mapping; mp != nil {
			mpath := p.Child("mapping")
			if mp.CapacityKey != nil {
				if *mp.CapacityKey == "" {
					errs = append(errs, field.Invalid(mpath.Child("capacityKey"), "", "capacityKey must not be an empty string"))
				} else if _, ok := capacities[*mp.CapacityKey]; !ok {
					errs = append(errs, field.NotFound(mpath.Child("capacityKey"), *mp.CapacityKey))
				}
				if mp.CapacityMultiplier == nil {
					errs = append(errs, field.Required(mpath.Child("capacityMultiplier"), "capacityMultiplier is required when capacityKey is set"))
				} else if mp.CapacityMultiplier.Sign() <= 0 {
					errs = append(errs, field.Invalid(mpath.Child("capacityMultiplier"), mp.CapacityMultiplier.String(), "must be positive"))
				}
			}
			if mp.DeviceMultiplier != nil && mp.DeviceMultiplier.Sign() <= 0 {
				errs = append(errs, field.Invalid(mpath.Child("deviceMultiplier"), mp.DeviceMultiplier.String(), "must be positive"))
			}
			if mp.CapacityMultiplier != nil && mp.CapacityKey == nil {
				errs = append(errs, field.Required(mpath.Child("capacityKey"), "capacityKey is required when capacityMultiplier is set"))
			}
		}
		if o := r.Overhead; o != nil {
			opath := p.Child("overhead")
			if o.PerPod == nil && o.PerContainer == nil {
				errs = append(errs, field.Invalid(opath, "", "at least one of perPod or perContainer must be set"))
				continue
			}
			if o.PerPod != nil && o.PerPod.Sign() < 0 {
				errs = append(errs, field.Invalid(opath.Child("perPod"), o.PerPod.String(), "must be non-negative"))
			}
			if o.PerContainer != nil && o.PerContainer.Sign() < 0 {
				errs = append(errs, field.Invalid(opath.Child("perContainer"), o.PerContainer.String(), "must be non-negative"))
			}
		}
	}
	return errs
}

func validateDeviceCounterConsumption(c resourcev1.DeviceCounterConsumption, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if c.CounterSet == "" {
		errs = append(errs, field.Required(path.Child("counterSet"), ""))
	} else {
		errs = append(errs, dnsLabel(path.Child("counterSet"), c.CounterSet)...)
	}
	if len(c.Counters) == 0 {
		return append(errs, field.Required(path.Child("counters"), ""))
	}
	return append(errs, validateCounters(c.Counters, resourcev1.ResourceSliceMaxCountersPerDeviceCounterConsumption, path.Child("counters"))...)
}

// semverRe is semver.org 2.0.0, upstream's.
var semverRe = regexp.MustCompile(`^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)` +
	`(-(0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(\.(0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*)?` +
	`(\+[0-9a-zA-Z-]+(\.[0-9a-zA-Z-]+)*)?$`)

func validateDeviceAttribute(a resourcev1.DeviceAttribute, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	n := 0
	if a.BoolValue != nil {
		n++
	}
	if a.IntValue != nil {
		n++
	}
	if a.StringValue != nil {
		n++
		errs = append(errs, attributeStringTooLong(*a.StringValue, path.Child("string"))...)
	}
	if a.VersionValue != nil {
		n++
		errs = append(errs, validateAttributeVersion(*a.VersionValue, path.Child("version"))...)
	}
	list := func(name string, isSet bool, length int, value any) {
		if !isSet {
			return
		}
		n++
		if length == 0 {
			errs = append(errs, field.Invalid(path.Child(name), value, "must not be empty if specified"))
		}
	}
	list("bools", a.BoolValues != nil, len(a.BoolValues), a.BoolValues)
	list("ints", a.IntValues != nil, len(a.IntValues), a.IntValues)
	list("strings", a.StringValues != nil, len(a.StringValues), a.StringValues)
	for i, s := range a.StringValues {
		errs = append(errs, attributeStringTooLong(s, path.Child("strings").Index(i))...)
	}
	list("versions", a.VersionValues != nil, len(a.VersionValues), a.VersionValues)
	for i, v := range a.VersionValues {
		errs = append(errs, validateAttributeVersion(v, path.Child("versions").Index(i))...)
	}
	switch n {
	case 0:
		errs = append(errs, field.Invalid(path, "", "exactly one value must be specified"))
	case 1:
	default:
		errs = append(errs, field.Invalid(path, a, "exactly one value must be specified"))
	}
	return errs
}

func attributeStringTooLong(s string, path *field.Path) field.ErrorList {
	if len(s) > resourcev1.DeviceAttributeMaxValueLength {
		return field.ErrorList{field.TooLong(path, "", resourcev1.DeviceAttributeMaxValueLength)}
	}
	return nil
}

func validateAttributeVersion(v string, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if !semverRe.MatchString(v) {
		errs = append(errs, field.Invalid(path, v, "must be a string compatible with semver.org spec 2.0.0"))
	}
	return append(errs, attributeStringTooLong(v, path)...)
}

// validateMultiAllocatableCapacity checks the request policy of a
// capacity shared by several allocations.
func validateMultiAllocatableCapacity(c resourcev1.DeviceCapacity, path *field.Path) field.ErrorList {
	if c.RequestPolicy == nil {
		return nil
	}
	p := path.Child("requestPolicy")
	policy := c.RequestPolicy
	switch {
	case len(policy.ValidValues) > 0 && policy.ValidRange != nil:
		return field.ErrorList{field.Forbidden(p, `exactly one policy can be specified, cannot specify "validValues" and "validRange" at the same time`)}
	case len(policy.ValidValues) > 0:
		if policy.Default == nil {
			return field.ErrorList{field.Required(p.Child("default"), "required when validValues is defined")}
		}
		return validateRequestPolicyValidValues(*policy.Default, c.Value, policy.ValidValues, p.Child("validValues"))
	case policy.ValidRange != nil:
		if policy.Default == nil {
			return field.ErrorList{field.Required(p.Child("default"), "required when validRange is defined")}
		}
		return validateRequestPolicyRange(*policy.Default, c.Value, *policy.ValidRange, p.Child("validRange"))
	}
	return nil
}

// validateSingleAllocatableCapacity: only a device allocated several
// times has a request policy.
func validateSingleAllocatableCapacity(c resourcev1.DeviceCapacity, path *field.Path) field.ErrorList {
	if c.RequestPolicy != nil {
		return field.ErrorList{field.Forbidden(path.Child("requestPolicy"), "allowMultipleAllocations must be true")}
	}
	return nil
}

func validateRequestPolicyValidValues(def, maxCapacity apiresource.Quantity, values []apiresource.Quantity, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i := range len(values) - 1 {
		if values[i].Cmp(values[i+1]) > 0 {
			errs = append(errs, field.Invalid(path.Index(i+1), values[i+1].String(), "values must be sorted in ascending order"))
		}
	}
	foundDefault := false
	// DRAFractionalCapacityRange is on: options compare as decimals.
	errs = append(errs, validateSet(values, capacityRequestPolicyDiscreteMaxOptions, func(option apiresource.Quantity, p *field.Path) field.ErrorList {
		var errs field.ErrorList
		if option.Cmp(maxCapacity) > 0 {
			errs = append(errs, field.Invalid(p, option.String(), fmt.Sprintf("option is larger than capacity value: %s", maxCapacity.String())))
		}
		if option.Cmp(def) == 0 {
			foundDefault = true
		}
		return errs
	}, func(q apiresource.Quantity) string { return q.AsDec().String() }, path)...)
	if !foundDefault {
		errs = append(errs, field.Invalid(path, def.String(), "default value is not valid according to the requestPolicy"))
	}
	return errs
}

// validateRequestPolicyRange is upstream's, with DRAFractionalCapacityRange
// on (upstream's 1.37 default).
func validateRequestPolicyRange(def, maxCapacity apiresource.Quantity, r resourcev1.CapacityRequestPolicyRange, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if r.Min == nil {
		return field.ErrorList{field.Required(path.Child("min"), "required when validRange is defined")}
	}
	if r.Min.Cmp(maxCapacity) > 0 {
		errs = append(errs, field.Invalid(path.Child("min"), r.Min.String(), fmt.Sprintf("min is larger than capacity value: %s", maxCapacity.String())))
	}
	if def.Cmp(*r.Min) < 0 {
		errs = append(errs, field.Invalid(path.Child("default"), def.String(), fmt.Sprintf("default is less than min: %s", r.Min.String())))
	}
	if r.Max != nil {
		if r.Min.Cmp(*r.Max) > 0 {
			errs = append(errs, field.Invalid(path.Child("max"), r.Min.String(), fmt.Sprintf("min is larger than max: %s", r.Max.String())))
		}
		if r.Max.Cmp(maxCapacity) > 0 {
			errs = append(errs, field.Invalid(path.Child("max"), r.Max.String(), fmt.Sprintf("max is larger than capacity value: %s", maxCapacity.String())))
		}
		if def.Cmp(*r.Max) > 0 {
			errs = append(errs, field.Invalid(path.Child("default"), def.String(), fmt.Sprintf("default is more than max: %s", r.Max.String())))
		}
	}
	bounds := []struct {
		q    *apiresource.Quantity
		name string
	}{{&def, "default"}, {r.Min, "min"}, {r.Max, "max"}, {r.Step, "step"}}
	// A fractional default with an integer range takes the milli path
	// too, or the integer path would round it.
	useMilli := isFractional(def) || r.Min != nil && isFractional(*r.Min) || r.Max != nil && isFractional(*r.Max) || r.Step != nil && isFractional(*r.Step)
	if useMilli {
		unsafe := false
		for _, b := range bounds {
			if b.q != nil && b.q.Cmp(*apiresource.NewMilliQuantity(b.q.MilliValue(), b.q.Format)) != 0 {
				errs = append(errs, field.Invalid(path.Child(b.name), b.q.String(), "value cannot be represented as a milli value"))
				unsafe = true
			}
		}
		if unsafe {
			return errs
		}
	}
	if r.Step == nil {
		return errs
	}
	if r.Step.Sign() <= 0 {
		return append(errs, field.Invalid(path.Child("step"), r.Step.String(), "must be greater than zero"))
	}
	added := r.Min.DeepCopy()
	added.Add(*r.Step)
	if added.Cmp(maxCapacity) > 0 {
		errs = append(errs, field.Invalid(path.Child("step"), r.Step.String(), fmt.Sprintf("one step %s is larger than capacity value: %s", added.String(), maxCapacity.String())))
	}
	// The integer path reads the bounds with Value(), which holds only in
	// [0, MaxInt64].
	if !useMilli {
		unsafe := false
		for _, b := range bounds {
			if b.q == nil {
				continue
			}
			switch {
			case b.q.Sign() < 0:
				errs = append(errs, field.Invalid(path.Child(b.name), b.q.String(), apimachineryvalidation.IsNegativeErrorMsg))
				unsafe = true
			case b.q.CmpInt64(math.MaxInt64) > 0:
				errs = append(errs, field.Invalid(path.Child(b.name), b.q.String(), "must not be larger than 9223372036854775807"))
				unsafe = true
			}
		}
		if unsafe {
			return errs
		}
	}
	errs = append(errs, validateRangeStep(def, *r.Min, *r.Step, useMilli, path.Child("step"))...)
	if r.Max != nil {
		errs = append(errs, validateRangeStep(*r.Max, *r.Min, *r.Step, useMilli, path.Child("step"))...)
	}
	return errs
}

// validateRangeStep: value is min plus a multiple of step.
func validateRangeStep(value, min, step apiresource.Quantity, useMilli bool, path *field.Path) field.ErrorList {
	v, m, s := value.Value(), min.Value(), step.Value()
	if useMilli {
		v, m, s = value.MilliValue(), min.MilliValue(), step.MilliValue()
	}
	if (v-m)%s != 0 {
		return field.ErrorList{field.Invalid(path, value.String(), fmt.Sprintf("value is not a multiple of a given step (%s) from (%s)", step.String(), min.String()))}
	}
	return nil
}

func isFractional(q apiresource.Quantity) bool {
	d := q.AsDec()
	return d.Cmp(new(inf.Dec).Round(d, 0, inf.RoundDown)) != 0
}

// validateQualifiedName: a C identifier, optionally behind a driver-name
// domain and a slash.
func validateQualifiedName(name resourcev1.QualifiedName, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	parts := strings.Split(string(name), "/")
	switch len(parts) {
	case 1:
		errs = append(errs, validateCIdentifier(parts[0], path)...)
	case 2:
		if parts[0] == "" {
			errs = append(errs, field.Invalid(path, "", "the domain must not be empty"))
		} else {
			errs = append(errs, validateCSIDriverName(parts[0], path)...)
		}
		if parts[1] == "" {
			errs = append(errs, field.Invalid(path, "", "the name must not be empty"))
		} else {
			errs = append(errs, validateCIdentifier(parts[1], path)...)
		}
	}
	return errs
}

func validateCIdentifier(id string, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(id) > resourcev1.DeviceMaxIDLength {
		errs = append(errs, field.TooLong(path, "", resourcev1.DeviceMaxIDLength))
	}
	errs = append(errs, invalidEach(path, id, content.IsCIdentifier(id))...)
	return errs
}

func validateDeviceTaint(t resourcev1.DeviceTaint, path *field.Path) field.ErrorList {
	errs := metav1validation.ValidateLabelName(t.Key, path.Child("key"))
	if t.Value != "" {
		errs = append(errs, labelValue(path.Child("value"), t.Value)...)
	}
	switch {
	case t.Effect == "":
		errs = append(errs, field.Required(path.Child("effect"), ""))
	case !validDeviceTaintEffects.Has(t.Effect):
		errs = append(errs, field.NotSupported(path.Child("effect"), t.Effect, sets.List(validDeviceTaintEffects)))
	}
	return errs
}

func validateBindingConditions(conditions, failureConditions []string, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	labelName := func(name string, p *field.Path) field.ErrorList { return metav1validation.ValidateLabelName(name, p) }
	errs = append(errs, validateSlice(conditions, resourcev1.BindingConditionsMaxSize, labelName, path.Child("bindingConditions"))...)
	errs = append(errs, validateSlice(failureConditions, resourcev1.BindingFailureConditionsMaxSize, labelName, path.Child("bindingFailureConditions"))...)
	seen := sets.New[string]()
	for i, c := range conditions {
		if seen.Has(c) {
			errs = append(errs, field.Duplicate(path.Child("bindingConditions").Index(i), c))
		}
		seen.Insert(c)
	}
	seenFailure := sets.New[string]()
	for i, c := range failureConditions {
		if seenFailure.Has(c) {
			errs = append(errs, field.Duplicate(path.Child("bindingFailureConditions").Index(i), c))
		}
		seenFailure.Insert(c)
		if seen.Has(c) {
			errs = append(errs, field.Invalid(path.Child("bindingFailureConditions").Index(i), c, "bindingFailureConditions must not overlap with bindingConditions"))
		}
	}
	if len(conditions) == 0 && len(failureConditions) > 0 {
		errs = append(errs, field.Invalid(path.Child("bindingConditions"), conditions, "bindingConditions are required to use bindingFailureConditions"))
	}
	if len(failureConditions) == 0 && len(conditions) > 0 {
		errs = append(errs, field.Invalid(path.Child("bindingFailureConditions"), failureConditions, "bindingFailureConditions are required to use bindingConditions"))
	}
	return errs
}

// validateSlice checks a list's size, which short-circuits, then each
// item.
func validateSlice[T any](items []T, maxSize int, item func(T, *field.Path) field.ErrorList, path *field.Path) field.ErrorList {
	if maxSize >= 0 && len(items) > maxSize {
		// The count, not the too long list.
		return field.ErrorList{field.TooMany(path, len(items), maxSize)}
	}
	var errs field.ErrorList
	for i, it := range items {
		errs = append(errs, item(it, path.Index(i))...)
	}
	return errs
}

// validateSet is validateSlice with items unique by key.
func validateSet[T any, K comparable](items []T, maxSize int, item func(T, *field.Path) field.ErrorList, key func(T) K, path *field.Path) field.ErrorList {
	errs := validateSlice(items, maxSize, item, path)
	if maxSize >= 0 && len(items) > maxSize {
		return errs
	}
	seen := sets.New[K]()
	for i, it := range items {
		k := key(it)
		if seen.Has(k) {
			errs = append(errs, field.Duplicate(path.Index(i), k))
		}
		seen.Insert(k)
	}
	return errs
}

// validateMap checks a map's size, which short-circuits, then each key
// and item; an item's path names its key shortened to truncateKeyLen.
func validateMap[K ~string, T any](m map[K]T, maxSize, truncateKeyLen int, validateKey func(K, *field.Path) field.ErrorList, item func(T, *field.Path) field.ErrorList, path *field.Path) field.ErrorList {
	if maxSize >= 0 && len(m) > maxSize {
		return field.ErrorList{field.TooMany(path, len(m), maxSize)}
	}
	var errs field.ErrorList
	for k, v := range m {
		errs = append(errs, validateKey(k, path)...)
		errs = append(errs, item(v, path.Key(truncateIfTooLong(string(k), truncateKeyLen)))...)
	}
	return errs
}

func truncateIfTooLong(s string, maxLen int) string {
	maxLen = max(maxLen, 16)
	if len(s) <= maxLen {
		return s
	}
	const ellipsis = "..."
	remaining := maxLen - len(ellipsis)
	return s[:(remaining+1)/2] + ellipsis + s[len(s)-remaining/2:]
}
