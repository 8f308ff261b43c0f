package registry

import (
	"net"
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
		fieldLabels: []string{"spec.unschedulable"},
		validate:    func(obj runtime.Object) field.ErrorList { return validateNodeSpec(&obj.(*corev1.Node).Spec) },
		// A node agent registers its node with status, so create keeps it.
		status: &statusDef{
			keepStatus: func(obj, old runtime.Object) { obj.(*corev1.Node).Status = old.(*corev1.Node).Status },
			keepSpec:   func(obj, old runtime.Object) { obj.(*corev1.Node).Spec = old.(*corev1.Node).Spec },
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

var taintEffects = sets.New(corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute)

func validateNodeSpec(s *corev1.NodeSpec) field.ErrorList {
	var errs field.ErrorList
	path := field.NewPath("spec")
	for i, cidr := range append([]string{s.PodCIDR}, s.PodCIDRs...) {
		if cidr == "" {
			continue
		}
		if _, _, err := net.ParseCIDR(cidr); err != nil {
			p := path.Child("podCIDR")
			if i > 0 {
				p = path.Child("podCIDRs").Index(i - 1)
			}
			errs = append(errs, field.Invalid(p, cidr, "must be a valid CIDR"))
		}
	}
	for i, t := range s.Taints {
		p := path.Child("taints").Index(i)
		for _, msg := range utilvalidation.IsQualifiedName(t.Key) {
			errs = append(errs, field.Invalid(p.Child("key"), t.Key, msg))
		}
		if !taintEffects.Has(t.Effect) {
			errs = append(errs, field.NotSupported(p.Child("effect"), t.Effect, sets.List(taintEffects)))
		}
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
