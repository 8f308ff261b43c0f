package registry

import (
	"net"
	"slices"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func nodeDef() *resourceDef {
	return &resourceDef{
		gvr:         corev1.SchemeGroupVersion.WithResource("nodes"),
		kind:        "Node",
		singular:    "node",
		shortNames:  []string{"no"},
		keyPrefix:   "minions",
		newFunc:     func() runtime.Object { return &corev1.Node{} },
		newListFunc: func() runtime.Object { return &corev1.NodeList{} },
		defaults:    func(obj any) { defaultNode(obj.(*corev1.Node)) },
		fields: func(obj runtime.Object) fields.Set {
			return fields.Set{"spec.unschedulable": strconv.FormatBool(obj.(*corev1.Node).Spec.Unschedulable)}
		},
		fieldLabels:    []string{"spec.unschedulable"},
		validate:       func(obj runtime.Object) field.ErrorList { return validateNodeSpec(&obj.(*corev1.Node).Spec) },
		validateUpdate: validateNodeUpdate,
		// A node agent registers its node with status, so create keeps it.
		status: &statusDef{
			keepStatus: func(obj, old runtime.Object) { obj.(*corev1.Node).Status = old.(*corev1.Node).Status },
			keepSpec:   func(obj, old runtime.Object) { obj.(*corev1.Node).Spec = old.(*corev1.Node).Spec },
			validate:   validateNodeUpdate,
		},
		columns: []metav1.TableColumnDefinition{
			nameCol,
			col("Status", "string", "The status of the node"),
			col("Roles", "string", "The roles of the node"),
			ageCol,
			col("Version", "string", corev1.NodeSystemInfo{}.SwaggerDoc()["kubeletVersion"]),
			wideCol("Internal-IP", "string", corev1.NodeStatus{}.SwaggerDoc()["addresses"]),
			wideCol("External-IP", "string", corev1.NodeStatus{}.SwaggerDoc()["addresses"]),
			wideCol("OS-Image", "string", corev1.NodeSystemInfo{}.SwaggerDoc()["osImage"]),
			wideCol("Kernel-Version", "string", corev1.NodeSystemInfo{}.SwaggerDoc()["kernelVersion"]),
			wideCol("Container-Runtime", "string", corev1.NodeSystemInfo{}.SwaggerDoc()["containerRuntimeVersion"]),
		},
		row: func(obj runtime.Object) []any { return nodeRow(obj.(*corev1.Node)) },
	}
}

// defaultNode: a node that reports no allocatable resources can allocate
// its whole capacity.
func defaultNode(n *corev1.Node) {
	if n.Status.Allocatable == nil && n.Status.Capacity != nil {
		n.Status.Allocatable = n.Status.Capacity.DeepCopy()
	}
}

// validateNodeSpec is the spec part of upstream's ValidateNode: valid pod
// CIDRs, at most one per IP family, and taints unique by key and effect.
func validateNodeSpec(s *corev1.NodeSpec) field.ErrorList {
	var errs field.ErrorList
	path := field.NewPath("spec")
	if s.PodCIDR != "" {
		if _, _, err := net.ParseCIDR(s.PodCIDR); err != nil {
			errs = append(errs, field.Invalid(path.Child("podCIDR"), s.PodCIDR, "must be a valid CIDR"))
		}
	}
	families := map[bool]int{}
	for i, cidr := range s.PodCIDRs {
		ip, _, err := net.ParseCIDR(cidr)
		if err != nil {
			errs = append(errs, field.Invalid(path.Child("podCIDRs").Index(i), cidr, "must be a valid CIDR"))
			continue
		}
		families[ip.To4() != nil]++
	}
	if len(s.PodCIDRs) > 2 || families[true] > 1 || families[false] > 1 {
		errs = append(errs, field.Invalid(path.Child("podCIDRs"), s.PodCIDRs, "may specify no more than one CIDR for each IP family"))
	}
	seen := map[corev1.TaintEffect]sets.Set[string]{}
	for i, t := range s.Taints {
		p := path.Child("taints").Index(i)
		errs = append(errs, invalidEach(p.Child("key"), t.Key, utilvalidation.IsQualifiedName(t.Key))...)
		if msgs := utilvalidation.IsValidLabelValue(t.Value); len(msgs) > 0 {
			errs = append(errs, field.Invalid(p.Child("value"), t.Value, strings.Join(msgs, ";")))
		}
		errs = append(errs, validateTaintEffect(t.Effect, false, p.Child("effect"))...)
		if seen[t.Effect].Has(t.Key) {
			dup := field.Duplicate(p, t)
			dup.Detail = "taints must be unique by key and effect pair"
			errs = append(errs, dup)
			continue
		}
		if seen[t.Effect] == nil {
			seen[t.Effect] = sets.New[string]()
		}
		seen[t.Effect].Insert(t.Key)
	}
	return errs
}

// validateNodeUpdate is upstream's ValidateNodeUpdate, for the main
// resource and status alike: pod CIDRs and the provider ID are set once,
// and the status lists an address once.
func validateNodeUpdate(obj, old runtime.Object) field.ErrorList {
	n, o := obj.(*corev1.Node), old.(*corev1.Node)
	var errs field.ErrorList
	if len(o.Spec.PodCIDRs) > 0 && (len(n.Spec.PodCIDRs) < len(o.Spec.PodCIDRs) || !slices.Equal(n.Spec.PodCIDRs[:len(o.Spec.PodCIDRs)], o.Spec.PodCIDRs)) {
		errs = append(errs, field.Forbidden(field.NewPath("spec", "podCIDRs"), `node updates may not change podCIDR except from "" to valid`))
	}
	if o.Spec.ProviderID != "" && n.Spec.ProviderID != o.Spec.ProviderID {
		errs = append(errs, field.Forbidden(field.NewPath("spec", "providerID"), `node updates may not change providerID except from "" to valid`))
	}
	addresses := sets.New[corev1.NodeAddress]()
	for i, a := range n.Status.Addresses {
		if addresses.Has(a) {
			errs = append(errs, field.Duplicate(field.NewPath("status", "addresses").Index(i), a))
		}
		addresses.Insert(a)
	}
	return errs
}

const (
	labelNodeRolePrefix = "node-role.kubernetes.io/"
	labelNodeRole       = "kubernetes.io/role"
)

func nodeRow(n *corev1.Node) []any {
	status := "Unknown"
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			status = "NotReady"
			if c.Status == corev1.ConditionTrue {
				status = "Ready"
			}
		}
	}
	if n.Spec.Unschedulable {
		status += ",SchedulingDisabled"
	}
	roles := sets.New[string]()
	for k, v := range n.Labels {
		switch {
		case strings.HasPrefix(k, labelNodeRolePrefix):
			if role := strings.TrimPrefix(k, labelNodeRolePrefix); role != "" {
				roles.Insert(role)
			}
		case k == labelNodeRole && v != "":
			roles.Insert(v)
		}
	}
	rolesCell := "<none>"
	if roles.Len() > 0 {
		r := sets.List(roles)
		sort.Strings(r)
		rolesCell = strings.Join(r, ",")
	}
	address := func(t corev1.NodeAddressType) string {
		for _, a := range n.Status.Addresses {
			if a.Type == t {
				return a.Address
			}
		}
		return "<none>"
	}
	info := n.Status.NodeInfo
	return []any{n.Name, status, rolesCell, age(n.CreationTimestamp), info.KubeletVersion,
		address(corev1.NodeInternalIP), address(corev1.NodeExternalIP),
		orUnknown(info.OSImage), orUnknown(info.KernelVersion), orUnknown(info.ContainerRuntimeVersion)}
}

func orUnknown(s string) string {
	if s == "" {
		return "<unknown>"
	}
	return s
}
