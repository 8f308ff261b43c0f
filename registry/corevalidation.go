package registry

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/sets"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The validation of core/v1 types that other kinds embed (taints and
// tolerations, resource lists, topology selectors, CSI driver names),
// transcribed once from k8s.io/kubernetes pkg/apis/core/validation and
// pkg/apis/core/helper, which are not importable.

// taintEffects in upstream's order, the order of its "supported values".
var taintEffects = []corev1.TaintEffect{corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute}

// validateTaintEffect is upstream's validateTaintEffect, for node taints
// (effect required) and tolerations (empty matches every effect).
func validateTaintEffect(effect corev1.TaintEffect, allowEmpty bool, path *field.Path) field.ErrorList {
	if !allowEmpty && effect == "" {
		return field.ErrorList{field.Required(path, "")}
	}
	switch effect {
	case corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
		return nil
	}
	return field.ErrorList{field.NotSupported(path, effect, taintEffects)}
}

// validateTolerations is upstream's ValidateTolerations with the default
// PodValidationOptions: the numeric operators Lt and Gt are not allowed
// (TaintTolerationComparisonOperators, alpha).
func validateTolerations(tolerations []corev1.Toleration, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, t := range tolerations {
		p := path.Index(i)
		if len(t.Key) > 0 {
			errs = append(errs, metav1validation.ValidateLabelName(t.Key, p.Child("key"))...)
		}
		// An empty key with Exists and no value matches every taint.
		if len(t.Key) == 0 && t.Operator != corev1.TolerationOpExists {
			errs = append(errs, field.Invalid(p.Child("operator"), t.Operator,
				"operator must be Exists when `key` is empty, which means \"match all values and all keys\""))
		}
		if t.TolerationSeconds != nil && t.Effect != corev1.TaintEffectNoExecute {
			errs = append(errs, field.Invalid(p.Child("effect"), t.Effect, "effect must be 'NoExecute' when `tolerationSeconds` is set"))
		}
		switch t.Operator {
		case corev1.TolerationOpEqual, "":
			if msgs := utilvalidation.IsValidLabelValue(t.Value); len(msgs) != 0 {
				errs = append(errs, field.Invalid(p.Child("operator"), t.Value, strings.Join(msgs, ";")))
			}
		case corev1.TolerationOpExists:
			if len(t.Value) > 0 {
				errs = append(errs, field.Invalid(p.Child("operator"), t.Value, "value must be empty when `operator` is 'Exists'"))
			}
		case corev1.TolerationOpLt, corev1.TolerationOpGt:
			errs = append(errs, field.NotSupported(p.Child("operator"), t.Operator,
				[]corev1.TolerationOperator{corev1.TolerationOpEqual, corev1.TolerationOpExists, corev1.TolerationOpLt, corev1.TolerationOpGt}))
		default:
			errs = append(errs, field.NotSupported(p.Child("operator"), t.Operator, []corev1.TolerationOperator{corev1.TolerationOpEqual, corev1.TolerationOpExists}))
		}
		if len(t.Effect) > 0 {
			errs = append(errs, validateTaintEffect(t.Effect, true, p.Child("effect"))...)
		}
	}
	return errs
}

// validateContainerResourceRequirements is upstream's
// ValidateContainerResourceRequirements with the default
// PodValidationOptions, for containers and a RuntimeClass's overhead:
// resource names a container may ask for, quantities not negative (whole
// for integer resources, a multiple of the page size for hugepages),
// requests not above limits (equal to them for resources that cannot be
// overcommitted), and hugepages only with cpu or memory. The names in
// claims are not checked against the pod's resourceClaims.
func validateContainerResourceRequirements(r *corev1.ResourceRequirements, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	limPath, reqPath := path.Child("limits"), path.Child("requests")
	limCPUOrMemory, reqCPUOrMemory := false, false
	limHugePages, reqHugePages := false, false
	for name, q := range r.Limits {
		p := limPath.Key(string(name))
		errs = append(errs, validateContainerResourceName(name, p)...)
		errs = append(errs, validateResourceQuantityValue(name, q, p)...)
		if isHugePageResourceName(name) {
			limHugePages = true
			errs = append(errs, validateHugePageValue(name, q, p)...)
		}
		if name == corev1.ResourceCPU || name == corev1.ResourceMemory {
			limCPUOrMemory = true
		}
	}
	for name, q := range r.Requests {
		p := reqPath.Key(string(name))
		errs = append(errs, validateContainerResourceName(name, p)...)
		errs = append(errs, validateResourceQuantityValue(name, q, p)...)
		if limit, ok := r.Limits[name]; ok {
			// Resources that cannot be overcommitted ask for exactly their limit.
			if q.Cmp(limit) != 0 && !isOvercommitAllowed(name) {
				errs = append(errs, field.Invalid(reqPath, q.String(), fmt.Sprintf("must be equal to %s limit of %s", name, limit.String())))
			} else if q.Cmp(limit) > 0 {
				errs = append(errs, field.Invalid(reqPath, q.String(), fmt.Sprintf("must be less than or equal to %s limit of %s", name, limit.String())))
			}
		} else if !isOvercommitAllowed(name) {
			errs = append(errs, field.Required(limPath, "Limit must be set for non overcommitable resources"))
		}
		if isHugePageResourceName(name) {
			reqHugePages = true
			errs = append(errs, validateHugePageValue(name, q, p)...)
		}
		if name == corev1.ResourceCPU || name == corev1.ResourceMemory {
			reqCPUOrMemory = true
		}
	}
	if !limCPUOrMemory && !reqCPUOrMemory && (reqHugePages || limHugePages) {
		errs = append(errs, field.Forbidden(path, "HugePages require cpu or memory"))
	}
	return errs
}

// standardResources are the resource names without a domain that upstream
// knows (helper.IsStandardResourceName).
var standardResources = sets.New(
	corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage,
	corev1.ResourceRequestsCPU, corev1.ResourceRequestsMemory, corev1.ResourceRequestsEphemeralStorage,
	corev1.ResourceLimitsCPU, corev1.ResourceLimitsMemory, corev1.ResourceLimitsEphemeralStorage,
	corev1.ResourcePods, corev1.ResourceQuotas, corev1.ResourceServices, corev1.ResourceReplicationControllers,
	corev1.ResourceSecrets, corev1.ResourceConfigMaps, corev1.ResourcePersistentVolumeClaims,
	corev1.ResourceStorage, corev1.ResourceRequestsStorage, corev1.ResourceServicesNodePorts, corev1.ResourceServicesLoadBalancers,
)

// standardContainerResources are those a container may ask for besides
// hugepages.
var standardContainerResources = sets.New(corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage)

// integerResources are counted in whole units.
var integerResources = sets.New(
	corev1.ResourcePods, corev1.ResourceQuotas, corev1.ResourceServices, corev1.ResourceReplicationControllers,
	corev1.ResourceSecrets, corev1.ResourceConfigMaps, corev1.ResourcePersistentVolumeClaims,
	corev1.ResourceServicesNodePorts, corev1.ResourceServicesLoadBalancers,
)

// validateContainerResourceName is upstream's ValidateContainerResourceName.
func validateContainerResourceName(name corev1.ResourceName, path *field.Path) field.ErrorList {
	errs := validateResourceName(name, path)
	if !strings.Contains(string(name), "/") {
		if !standardContainerResources.Has(name) && !isHugePageResourceName(name) {
			return append(errs, field.Invalid(path, name, "must be a standard resource for containers"))
		}
	} else if !isNativeResource(name) && !isExtendedResourceName(name) {
		return append(errs, field.Invalid(path, name, "doesn't follow extended resource name standard"))
	}
	return errs
}

// validateResourceName is upstream's validateResourceName: a qualified
// name, and a standard one when it has no domain.
func validateResourceName(name corev1.ResourceName, path *field.Path) field.ErrorList {
	errs := invalidEach(path, name, utilvalidation.IsQualifiedName(string(name)))
	if len(errs) != 0 {
		return errs
	}
	if !strings.Contains(string(name), "/") && !standardResources.Has(name) && !isQuotaHugePageResourceName(name) {
		return append(errs, field.Invalid(path, name, "must be a standard resource type or fully qualified"))
	}
	return errs
}

// validateResourceQuantityValue is upstream's ValidateResourceQuantityValue.
func validateResourceQuantityValue(name corev1.ResourceName, q resource.Quantity, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if q.Cmp(resource.Quantity{}) < 0 {
		errs = append(errs, field.Invalid(path, q.String(), apimachineryvalidation.IsNegativeErrorMsg))
	}
	if (integerResources.Has(name) || isExtendedResourceName(name)) && q.MilliValue()%1000 != 0 {
		errs = append(errs, field.Invalid(path, q, "must be an integer"))
	}
	return errs
}

// validateHugePageValue: a hugepages quantity is a whole number of pages
// (upstream's validateResourceQuantityHugePageValue).
func validateHugePageValue(name corev1.ResourceName, q resource.Quantity, path *field.Path) field.ErrorList {
	pageSize, err := resource.ParseQuantity(strings.TrimPrefix(string(name), corev1.ResourceHugePagesPrefix))
	if err == nil && pageSize.Sign() > 0 && pageSize.MilliValue()%1000 == 0 && q.Value()%pageSize.Value() == 0 {
		return nil
	}
	return field.ErrorList{field.Invalid(path, q.String(), fmt.Sprintf("%s is not positive integer multiple of %s", q.String(), name))}
}

func isHugePageResourceName(name corev1.ResourceName) bool {
	return strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix)
}

func isQuotaHugePageResourceName(name corev1.ResourceName) bool {
	return isHugePageResourceName(name) || strings.HasPrefix(string(name), corev1.ResourceRequestsHugePagesPrefix)
}

// isNativeResource: no domain, or kubernetes.io's.
func isNativeResource(name corev1.ResourceName) bool {
	return !strings.Contains(string(name), "/") || strings.Contains(string(name), corev1.ResourceDefaultNamespacePrefix)
}

// isExtendedResourceName: another domain's resource, also a valid name
// with quota's "requests." prefix.
func isExtendedResourceName(name corev1.ResourceName) bool {
	if isNativeResource(name) || strings.HasPrefix(string(name), corev1.DefaultResourceRequestsPrefix) {
		return false
	}
	return len(utilvalidation.IsQualifiedName(corev1.DefaultResourceRequestsPrefix+string(name))) == 0
}

func isOvercommitAllowed(name corev1.ResourceName) bool {
	return isNativeResource(name) && !isHugePageResourceName(name)
}

// validateCSIDriverName is upstream's ValidateCSIDriverName: at most 63
// characters of a DNS subdomain, case aside. A DRA driver's name is one too.
func validateCSIDriverName(name string, path *field.Path) field.ErrorList {
	if len(name) == 0 {
		return field.ErrorList{field.Required(path, "")}
	}
	var errs field.ErrorList
	if len(name) > 63 {
		errs = append(errs, field.TooLong(path, "", 63))
	}
	errs = append(errs, invalidEach(path, name, utilvalidation.IsDNS1123Subdomain(strings.ToLower(name)))...)
	return errs
}

// validateTopologySelectorTerm is upstream's ValidateTopologySelectorTerm:
// each requirement has a valid key, not repeated in the term, and at least
// one value, none repeated. It also returns the term as a map from key to
// values, for comparing terms.
func validateTopologySelectorTerm(term corev1.TopologySelectorTerm, path *field.Path) (map[string]sets.Set[string], field.ErrorList) {
	var errs field.ErrorList
	exprs := map[string]sets.Set[string]{}
	exprPath := path.Child("matchLabelExpressions")
	for i, req := range term.MatchLabelExpressions {
		p := exprPath.Index(i)
		values := sets.New[string]()
		valuesPath := p.Child("values")
		if len(req.Values) == 0 {
			errs = append(errs, field.Required(valuesPath, ""))
		}
		for j, v := range req.Values {
			if values.Has(v) {
				errs = append(errs, field.Duplicate(valuesPath.Index(j), v))
			}
			values.Insert(v)
		}
		errs = append(errs, metav1validation.ValidateLabelName(req.Key, p.Child("key"))...)
		if _, dup := exprs[req.Key]; dup {
			errs = append(errs, field.Duplicate(p.Child("key"), req.Key))
		}
		exprs[req.Key] = values
	}
	return exprs, errs
}

// deprecatedNodeLabels are the node labels upstream warns about in
// selectors (pkg/api/node GetNodeLabelDeprecatedMessage).
var deprecatedNodeLabels = map[string]string{
	`beta.kubernetes.io/arch`:                       `deprecated since v1.14; use "kubernetes.io/arch" instead`,
	`beta.kubernetes.io/os`:                         `deprecated since v1.14; use "kubernetes.io/os" instead`,
	`failure-domain.beta.kubernetes.io/region`:      `deprecated since v1.17; use "topology.kubernetes.io/region" instead`,
	`failure-domain.beta.kubernetes.io/zone`:        `deprecated since v1.17; use "topology.kubernetes.io/zone" instead`,
	`beta.kubernetes.io/instance-type`:              `deprecated since v1.17; use "node.kubernetes.io/instance-type" instead`,
	`app.kubernetes.io/created-by`:                  `deprecated since v1.9`,
	`scheduler.alpha.kubernetes.io/preferAvoidPods`: `deprecated since v1.22; use Taints and Tolerations instead`,
	`node-role.kubernetes.io/master`:                `use "node-role.kubernetes.io/control-plane" instead`,
}
