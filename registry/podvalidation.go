package registry

import (
	"fmt"
	gopath "path"
	"path/filepath"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/validation"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/sets"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

var (
	restartPolicies = sets.New(corev1.RestartPolicyAlways, corev1.RestartPolicyOnFailure, corev1.RestartPolicyNever)
	dnsPolicies     = sets.New(corev1.DNSClusterFirstWithHostNet, corev1.DNSClusterFirst, corev1.DNSDefault, corev1.DNSNone)
	pullPolicies    = sets.New(corev1.PullAlways, corev1.PullNever, corev1.PullIfNotPresent)
	podPhases       = sets.New(corev1.PodPending, corev1.PodRunning, corev1.PodSucceeded, corev1.PodFailed, corev1.PodUnknown)
)

func validatePodSpec(s *corev1.PodSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(s.Containers) == 0 {
		errs = append(errs, field.Required(path.Child("containers"), "must have at least one container"))
	}
	names := sets.New[string]()
	errs = append(errs, validateContainers(s.InitContainers, path.Child("initContainers"), names)...)
	errs = append(errs, validateContainers(s.Containers, path.Child("containers"), names)...)
	if !restartPolicies.Has(s.RestartPolicy) {
		errs = append(errs, field.NotSupported(path.Child("restartPolicy"), s.RestartPolicy, sets.List(restartPolicies)))
	}
	if !dnsPolicies.Has(s.DNSPolicy) {
		errs = append(errs, field.NotSupported(path.Child("dnsPolicy"), s.DNSPolicy, sets.List(dnsPolicies)))
	}
	if s.NodeName != "" {
		errs = append(errs, invalidEach(path.Child("nodeName"), s.NodeName, validation.NameIsDNSSubdomain(s.NodeName, false))...)
	}
	errs = append(errs, validatePodHostNetworkDeps(s, path)...)
	errs = append(errs, metav1validation.ValidateLabels(s.NodeSelector, path.Child("nodeSelector"))...)
	errs = append(errs, validatePodSpecSecurityContext(s.SecurityContext, path.Child("securityContext"))...)
	errs = append(errs, validatePodDNSConfig(s.DNSConfig, &s.DNSPolicy, path.Child("dnsConfig"))...)
	if len(s.Hostname) > 0 {
		errs = append(errs, dnsLabel(path.Child("hostname"), s.Hostname)...)
	}
	if len(s.Subdomain) > 0 {
		errs = append(errs, dnsLabel(path.Child("subdomain"), s.Subdomain)...)
	}
	if len(s.Tolerations) > 0 {
		errs = append(errs, validateTolerations(s.Tolerations, path.Child("tolerations"))...)
	}
	for i := range s.Containers {
		p := path.Child("containers").Index(i)
		c := &s.Containers[i]
		errs = append(errs, validateLivenessProbe(c.LivenessProbe, p.Child("livenessProbe"))...)
		errs = append(errs, validateReadinessProbe(c.ReadinessProbe, p.Child("readinessProbe"))...)
		errs = append(errs, validateStartupProbe(c.StartupProbe, p.Child("startupProbe"))...)
	}
	if s.ActiveDeadlineSeconds != nil && *s.ActiveDeadlineSeconds <= 0 {
		errs = append(errs, field.Invalid(path.Child("activeDeadlineSeconds"), *s.ActiveDeadlineSeconds, "must be greater than 0"))
	}
	if s.TerminationGracePeriodSeconds != nil && *s.TerminationGracePeriodSeconds < 0 {
		errs = append(errs, field.Invalid(path.Child("terminationGracePeriodSeconds"), *s.TerminationGracePeriodSeconds, "must be >= 0"))
	}
	volumes := sets.New[string]()
	for i, v := range s.Volumes {
		p := path.Child("volumes").Index(i).Child("name")
		errs = append(errs, dnsLabel(p, v.Name)...)
		if volumes.Has(v.Name) {
			errs = append(errs, field.Duplicate(p, v.Name))
		}
		volumes.Insert(v.Name)
		if v.HostPath != nil {
			errs = append(errs, validateHostPathVolumeSource(v.HostPath, path.Child("volumes").Index(i).Child("hostPath"))...)
		}
	}
	for ci, c := range append(append([]corev1.Container{}, s.InitContainers...), s.Containers...) {
		p := path.Child("containers")
		if ci < len(s.InitContainers) {
			p = path.Child("initContainers").Index(ci)
		} else {
			p = p.Index(ci - len(s.InitContainers))
		}
		for i, m := range c.VolumeMounts {
			if !volumes.Has(m.Name) {
				errs = append(errs, field.NotFound(p.Child("volumeMounts").Index(i).Child("name"), m.Name))
			}
			// Upstream's ValidateVolumeMounts names the list, not the
			// mount, for subPath and subPathExpr.
			if len(m.SubPath) > 0 {
				errs = append(errs, validateLocalDescendingPath(m.SubPath, p.Child("volumeMounts").Child("subPath"))...)
			}
			if len(m.SubPathExpr) > 0 {
				if len(m.SubPath) > 0 {
					errs = append(errs, field.Invalid(p.Child("volumeMounts").Index(i).Child("subPathExpr"), m.SubPathExpr, "subPathExpr and subPath are mutually exclusive"))
				}
				errs = append(errs, validateLocalDescendingPath(m.SubPathExpr, p.Child("volumeMounts").Child("subPathExpr"))...)
			}
		}
	}
	return errs
}

func validateContainers(cs []corev1.Container, path *field.Path, names sets.Set[string]) field.ErrorList {
	var errs field.ErrorList
	for i, c := range cs {
		p := path.Index(i)
		if c.Name == "" {
			errs = append(errs, field.Required(p.Child("name"), ""))
		} else {
			errs = append(errs, dnsLabel(p.Child("name"), c.Name)...)
			if names.Has(c.Name) {
				errs = append(errs, field.Duplicate(p.Child("name"), c.Name))
			}
			names.Insert(c.Name)
		}
		switch {
		case strings.TrimSpace(c.Image) == "":
			errs = append(errs, field.Required(p.Child("image"), ""))
		case strings.TrimSpace(c.Image) != c.Image:
			errs = append(errs, field.Invalid(p.Child("image"), c.Image, "must not have leading or trailing whitespace"))
		}
		if !pullPolicies.Has(c.ImagePullPolicy) {
			errs = append(errs, field.NotSupported(p.Child("imagePullPolicy"), c.ImagePullPolicy, sets.List(pullPolicies)))
		}
		portNames := sets.New[string]()
		for j, port := range c.Ports {
			pp := p.Child("ports").Index(j)
			if port.Name != "" {
				errs = append(errs, invalidEach(pp.Child("name"), port.Name, utilvalidation.IsValidPortName(port.Name))...)
				if portNames.Has(port.Name) {
					errs = append(errs, field.Duplicate(pp.Child("name"), port.Name))
				}
				portNames.Insert(port.Name)
			}
			errs = append(errs, portNumber(pp.Child("containerPort"), port.ContainerPort)...)
			if port.HostPort != 0 {
				errs = append(errs, portNumber(pp.Child("hostPort"), port.HostPort)...)
			}
			if !protocols.Has(port.Protocol) {
				errs = append(errs, field.NotSupported(pp.Child("protocol"), port.Protocol, sets.List(protocols)))
			}
		}
		for j, e := range c.Env {
			if e.Name == "" || strings.Contains(e.Name, "=") {
				errs = append(errs, field.Invalid(p.Child("env").Index(j).Child("name"), e.Name, "must be a non-empty name without '='"))
			}
			errs = append(errs, validateEnvVarValueFrom(e, p.Child("env").Index(j).Child("valueFrom"))...)
		}
		errs = append(errs, validateContainerResourceRequirements(&c.Resources, p.Child("resources"))...)
	}
	return errs
}

// validatePodUpdate enforces that a pod's spec is immutable except for the
// fields kube-apiserver lets change, with its rules for each
// (ValidatePodUpdate in pkg/apis/core/validation): images, a lower
// activeDeadlineSeconds, added tolerations (an existing one may change only
// its tolerationSeconds), removed scheduling gates, and
// terminationGracePeriodSeconds from negative to 1, and, while the pod was
// gated, added node selector labels. Upstream also lets a gated pod gain
// node affinity terms; kubestore refuses that, as it does any other change.
func validatePodUpdate(p, old *corev1.Pod) field.ErrorList {
	var errs field.ErrorList
	spec := field.NewPath("spec")
	for _, cs := range []struct {
		path     *field.Path
		new, old []corev1.Container
	}{
		{spec.Child("containers"), p.Spec.Containers, old.Spec.Containers},
		{spec.Child("initContainers"), p.Spec.InitContainers, old.Spec.InitContainers},
	} {
		if len(cs.new) != len(cs.old) {
			return append(errs, field.Forbidden(cs.path, "pod updates may not add or remove containers"))
		}
	}

	if n, o := p.Spec.ActiveDeadlineSeconds, old.Spec.ActiveDeadlineSeconds; n == nil && o != nil {
		errs = append(errs, field.Invalid(spec.Child("activeDeadlineSeconds"), n, "must not update from a positive integer to nil value"))
	} else if n != nil && o != nil && *n > *o {
		errs = append(errs, field.Invalid(spec.Child("activeDeadlineSeconds"), *n, "must be less than or equal to previous value"))
	}
	errs = append(errs, validateAddedTolerations(p.Spec.Tolerations, old.Spec.Tolerations, spec.Child("tolerations"))...)
	errs = append(errs, validateRemovedSchedulingGates(p.Spec.SchedulingGates, old.Spec.SchedulingGates, spec.Child("schedulingGates"))...)

	// The fields checked above, and images, are compared no further.
	munged := p.Spec.DeepCopy()
	for i := range munged.Containers {
		munged.Containers[i].Image = old.Spec.Containers[i].Image
	}
	for i := range munged.InitContainers {
		munged.InitContainers[i].Image = old.Spec.InitContainers[i].Image
	}
	munged.ActiveDeadlineSeconds = old.Spec.ActiveDeadlineSeconds
	munged.Tolerations = old.Spec.Tolerations
	munged.SchedulingGates = old.Spec.SchedulingGates
	if o, n := old.Spec.TerminationGracePeriodSeconds, munged.TerminationGracePeriodSeconds; o != nil && *o < 0 && n != nil && *n == 1 {
		munged.TerminationGracePeriodSeconds = o
	}
	if len(old.Spec.SchedulingGates) > 0 && !apiequality.Semantic.DeepEqual(munged.NodeSelector, old.Spec.NodeSelector) {
		for k, v := range old.Spec.NodeSelector {
			if nv, ok := munged.NodeSelector[k]; !ok || nv != v {
				errs = append(errs, field.Invalid(spec.Child("nodeSelector"), munged.NodeSelector, "only additions to spec.nodeSelector are allowed (no mutations or deletions)"))
				break
			}
		}
		munged.NodeSelector = old.Spec.NodeSelector
	}
	if !apiequality.Semantic.DeepEqual(*munged, old.Spec) {
		errs = append(errs, field.Forbidden(spec,
			"pod updates may not change fields other than `spec.containers[*].image`, `spec.initContainers[*].image`, "+
				"`spec.activeDeadlineSeconds`, `spec.tolerations` (only additions to existing tolerations), "+
				"`spec.schedulingGates` (only removals) and `spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)"))
	}
	return errs
}

// ratchet drops from errs, the new spec's errors, those the old spec
// already had (same type, field and detail): a pod stored before a check
// existed, or by a release that allowed what this one refuses, can still
// have its labels, finalizers or images changed, and be deleted by the
// controllers that remove its finalizers. Upstream's ValidatePodUpdate does
// the same by its options: it validates the new spec with those the old
// pod needs (GetValidationOptionsFromPodSpecAndMeta in
// pkg/api/pod/util.go: what the old pod used that newer rules refuse stays
// allowed). A new error, in a field the update changed, is kept.
func ratchet(errs, old field.ErrorList) field.ErrorList {
	if len(errs) == 0 || len(old) == 0 {
		return errs
	}
	had := map[string]bool{}
	key := func(e *field.Error) string { return string(e.Type) + "\x00" + e.Field + "\x00" + e.Detail }
	for _, e := range old {
		had[key(e)] = true
	}
	var out field.ErrorList
	for _, e := range errs {
		if !had[key(e)] {
			out = append(out, e)
		}
	}
	return out
}

// validateAddedTolerations: every old toleration is still there, its
// tolerationSeconds aside.
func validateAddedTolerations(tolerations, old []corev1.Toleration, path *field.Path) field.ErrorList {
	for _, o := range old {
		if !slices.ContainsFunc(tolerations, func(t corev1.Toleration) bool {
			o.TolerationSeconds = t.TolerationSeconds
			return apiequality.Semantic.DeepEqual(o, t)
		}) {
			return field.ErrorList{field.Forbidden(path, "existing toleration can not be modified except its tolerationSeconds")}
		}
	}
	return nil
}

// validateRemovedSchedulingGates: no gate that was not there before.
func validateRemovedSchedulingGates(gates, old []corev1.PodSchedulingGate, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, g := range gates {
		if !slices.ContainsFunc(old, func(o corev1.PodSchedulingGate) bool { return o.Name == g.Name }) {
			errs = append(errs, field.Forbidden(path.Index(i).Child("name"), fmt.Sprintf("only deletion is allowed, but found new scheduling gate '%s'", g.Name)))
		}
	}
	return errs
}

func validatePodStatus(s *corev1.PodStatus) field.ErrorList {
	if s.Phase != "" && !podPhases.Has(s.Phase) {
		return field.ErrorList{field.NotSupported(field.NewPath("status", "phase"), s.Phase, sets.List(podPhases))}
	}
	return nil
}

// validatePodHostNetworkDeps is upstream's validatePodHostNetworkDeps
// (pkg/apis/core/validation/validation.go) for a pod
// (opts.ResourceIsPod): on the host's network a container's hostPort is
// its containerPort.
func validatePodHostNetworkDeps(s *corev1.PodSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if !s.HostNetwork {
		return nil
	}
	containers := path.Child("containers")
	for i, c := range s.Containers {
		for j, port := range c.Ports {
			if port.HostPort != port.ContainerPort {
				errs = append(errs, field.Invalid(containers.Index(i).Child("ports").Index(j).Child("hostPort"), port.HostPort, "must match `containerPort` when `hostNetwork` is true"))
			}
		}
	}
	return errs
}

// validatePodSpecSecurityContext is the ID checks of upstream's
// validatePodSpecSecurityContext (validation.go): fsGroup, runAsUser,
// runAsGroup and supplementalGroups are valid user and group IDs. Its
// checks of sysctls, seccomp, AppArmor and the policies are not
// transcribed.
func validatePodSpecSecurityContext(sc *corev1.PodSecurityContext, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if sc == nil {
		return nil
	}
	if sc.FSGroup != nil {
		errs = append(errs, invalidEach(path.Child("fsGroup"), *sc.FSGroup, utilvalidation.IsValidGroupID(*sc.FSGroup))...)
	}
	if sc.RunAsUser != nil {
		errs = append(errs, invalidEach(path.Child("runAsUser"), *sc.RunAsUser, utilvalidation.IsValidUserID(*sc.RunAsUser))...)
	}
	if sc.RunAsGroup != nil {
		errs = append(errs, invalidEach(path.Child("runAsGroup"), *sc.RunAsGroup, utilvalidation.IsValidGroupID(*sc.RunAsGroup))...)
	}
	for g, gid := range sc.SupplementalGroups {
		errs = append(errs, invalidEach(path.Child("supplementalGroups").Index(g), gid, utilvalidation.IsValidGroupID(gid))...)
	}
	return errs
}

// Upstream's MaxDNSNameservers, MaxDNSSearchPaths and MaxDNSSearchListChars
// (validation.go).
const (
	maxDNSNameservers     = 3
	maxDNSSearchPaths     = 32
	maxDNSSearchListChars = 2048
)

// validatePodDNSConfig is upstream's validatePodDNSConfig (validation.go),
// with StrictIPCIDRValidation on (its default in 1.37).
func validatePodDNSConfig(c *corev1.PodDNSConfig, policy *corev1.DNSPolicy, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if policy != nil && *policy == corev1.DNSNone {
		if c == nil {
			return append(errs, field.Required(path, fmt.Sprintf("must provide `dnsConfig` when `dnsPolicy` is %s", corev1.DNSNone)))
		}
		if len(c.Nameservers) == 0 {
			return append(errs, field.Required(path.Child("nameservers"), fmt.Sprintf("must provide at least one DNS nameserver when `dnsPolicy` is %s", corev1.DNSNone)))
		}
	}
	if c == nil {
		return errs
	}
	if len(c.Nameservers) > maxDNSNameservers {
		errs = append(errs, field.Invalid(path.Child("nameservers"), c.Nameservers, fmt.Sprintf("must not have more than %v nameservers", maxDNSNameservers)))
	}
	for i, ns := range c.Nameservers {
		errs = append(errs, utilvalidation.IsValidIPForLegacyField(path.Child("nameservers").Index(i), ns, true, nil)...)
	}
	if len(c.Searches) > maxDNSSearchPaths {
		errs = append(errs, field.Invalid(path.Child("searches"), c.Searches, fmt.Sprintf("must not have more than %v search paths", maxDNSSearchPaths)))
	}
	if len(strings.Join(c.Searches, " ")) > maxDNSSearchListChars {
		errs = append(errs, field.Invalid(path.Child("searches"), c.Searches, fmt.Sprintf("must not have more than %v characters (including spaces) in the search list", maxDNSSearchListChars)))
	}
	for i, search := range c.Searches {
		if search != "." {
			search = strings.TrimSuffix(search, ".")
			errs = append(errs, invalidEach(path.Child("searches").Index(i), search, utilvalidation.IsDNS1123SubdomainWithUnderscore(search))...)
		}
	}
	for i, o := range c.Options {
		if len(o.Name) == 0 {
			errs = append(errs, field.Required(path.Child("options").Index(i), "must not be empty"))
		}
	}
	return errs
}

// supportedHostPathTypes is upstream's (validation.go).
var supportedHostPathTypes = sets.New(
	corev1.HostPathUnset,
	corev1.HostPathDirectoryOrCreate,
	corev1.HostPathDirectory,
	corev1.HostPathFileOrCreate,
	corev1.HostPathFile,
	corev1.HostPathSocket,
	corev1.HostPathCharDev,
	corev1.HostPathBlockDev)

// validateHostPathVolumeSource is upstream's validateHostPathVolumeSource
// with validateHostPathType (validation.go).
func validateHostPathVolumeSource(h *corev1.HostPathVolumeSource, path *field.Path) field.ErrorList {
	if len(h.Path) == 0 {
		return field.ErrorList{field.Required(path.Child("path"), "")}
	}
	errs := validatePathNoBacksteps(h.Path, path.Child("path"))
	if h.Type != nil && !supportedHostPathTypes.Has(*h.Type) {
		errs = append(errs, field.NotSupported(path.Child("type"), h.Type, sets.List(supportedHostPathTypes)))
	}
	return errs
}

// validateLocalDescendingPath is upstream's validateLocalDescendingPath
// (validation.go): a relative path with no '..' element.
func validateLocalDescendingPath(target string, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if gopath.IsAbs(target) {
		errs = append(errs, field.Invalid(path, target, "must be a relative path"))
	}
	return append(errs, validatePathNoBacksteps(target, path)...)
}

// validatePathNoBacksteps is upstream's validatePathNoBacksteps
// (validation.go).
func validatePathNoBacksteps(target string, path *field.Path) field.ErrorList {
	for _, item := range strings.Split(filepath.ToSlash(target), "/") {
		if item == ".." {
			// even for `../../..`, one error is sufficient to make the point
			return field.ErrorList{field.Invalid(path, target, "must not contain '..'")}
		}
	}
	return nil
}

// validEnvDownwardAPIFieldPathExpressions is upstream's (validation.go).
var validEnvDownwardAPIFieldPathExpressions = sets.New(
	"metadata.name",
	"metadata.namespace",
	"metadata.uid",
	"spec.nodeName",
	"spec.serviceAccountName",
	"status.hostIP",
	"status.hostIPs",
	"status.podIP",
	"status.podIPs",
)

// validateEnvVarValueFrom is upstream's validateEnvVarValueFrom
// (validation.go) with the default PodValidationOptions: one source, and
// none with a value. Of the sources only fieldRef is checked further
// (validateObjectFieldSelector); the key selectors and resourceFieldRef
// are not.
func validateEnvVarValueFrom(ev corev1.EnvVar, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if ev.ValueFrom == nil {
		return nil
	}
	numSources := 0
	if ev.ValueFrom.FieldRef != nil {
		numSources++
		errs = append(errs, validateObjectFieldSelector(ev.ValueFrom.FieldRef, validEnvDownwardAPIFieldPathExpressions, path.Child("fieldRef"))...)
	}
	if ev.ValueFrom.ResourceFieldRef != nil {
		numSources++
	}
	if ev.ValueFrom.ConfigMapKeyRef != nil {
		numSources++
	}
	if ev.ValueFrom.SecretKeyRef != nil {
		numSources++
	}
	if ev.ValueFrom.FileKeyRef != nil {
		numSources++
	}
	switch {
	case numSources == 0:
		errs = append(errs, field.Invalid(path, "", "must specify one of: `fieldRef`, `resourceFieldRef`, `configMapKeyRef` or `secretKeyRef`"))
	case len(ev.Value) != 0:
		errs = append(errs, field.Invalid(path, "", "may not be specified when `value` is not empty"))
	case numSources > 1:
		errs = append(errs, field.Invalid(path, "", "may not have more than one field specified at a time"))
	}
	return errs
}

// validateObjectFieldSelector is upstream's validateObjectFieldSelector
// (validation.go), with ConvertDownwardAPIFieldLabel
// (pkg/apis/core/pods/helpers.go) and SplitMaybeSubscriptedPath
// (pkg/fieldpath).
func validateObjectFieldSelector(fs *corev1.ObjectFieldSelector, expressions sets.Set[string], path *field.Path) field.ErrorList {
	if len(fs.APIVersion) == 0 {
		return field.ErrorList{field.Required(path.Child("apiVersion"), "")}
	}
	if len(fs.FieldPath) == 0 {
		return field.ErrorList{field.Required(path.Child("fieldPath"), "")}
	}
	internal, err := convertDownwardAPIFieldLabel(fs.APIVersion, fs.FieldPath)
	if err != nil {
		return field.ErrorList{field.Invalid(path.Child("fieldPath"), fs.FieldPath, fmt.Sprintf("error converting fieldPath: %v", err))}
	}
	if p, subscript, ok := splitMaybeSubscriptedPath(internal); ok {
		switch p {
		case "metadata.annotations":
			return qualifiedName(path, strings.ToLower(subscript))
		case "metadata.labels":
			return qualifiedName(path, subscript)
		default:
			return field.ErrorList{field.Invalid(path, p, "does not support subscript")}
		}
	} else if !expressions.Has(p) {
		return field.ErrorList{field.NotSupported(path.Child("fieldPath"), p, sets.List(expressions))}
	}
	return nil
}

// convertDownwardAPIFieldLabel is upstream's ConvertDownwardAPIFieldLabel
// (pkg/apis/core/pods/helpers.go), without the value.
func convertDownwardAPIFieldLabel(version, label string) (string, error) {
	if version != "v1" {
		return "", fmt.Errorf("unsupported pod version: %s", version)
	}
	if p, _, ok := splitMaybeSubscriptedPath(label); ok {
		switch p {
		case "metadata.annotations", "metadata.labels":
			return label, nil
		default:
			return "", fmt.Errorf("field label does not support subscript: %s", label)
		}
	}
	switch label {
	case "metadata.annotations",
		"metadata.labels",
		"metadata.name",
		"metadata.namespace",
		"metadata.uid",
		"spec.nodeName",
		"spec.restartPolicy",
		"spec.serviceAccountName",
		"spec.schedulerName",
		"status.phase",
		"status.hostIP",
		"status.hostIPs",
		"status.podIP",
		"status.podIPs":
		return label, nil
	// This is for backwards compatibility with old v1 clients which send spec.host
	case "spec.host":
		return "spec.nodeName", nil
	default:
		return "", fmt.Errorf("field label not supported: %s", label)
	}
}

// splitMaybeSubscriptedPath is upstream's SplitMaybeSubscriptedPath
// (pkg/fieldpath/fieldpath.go): "metadata.labels['a']" is
// ("metadata.labels", "a", true).
func splitMaybeSubscriptedPath(fieldPath string) (string, string, bool) {
	if !strings.HasSuffix(fieldPath, "']") {
		return fieldPath, "", false
	}
	parts := strings.SplitN(strings.TrimSuffix(fieldPath, "']"), "['", 2)
	if len(parts) < 2 || len(parts[0]) == 0 {
		return fieldPath, "", false
	}
	return parts[0], parts[1], true
}

// validateLivenessProbe is upstream's validateLivenessProbe (validation.go).
func validateLivenessProbe(probe *corev1.Probe, path *field.Path) field.ErrorList {
	if probe == nil {
		return nil
	}
	errs := validateProbe(probe, path)
	if probe.SuccessThreshold != 1 {
		errs = append(errs, field.Invalid(path.Child("successThreshold"), probe.SuccessThreshold, "must be 1"))
	}
	return errs
}

// validateReadinessProbe is upstream's validateReadinessProbe
// (validation.go).
func validateReadinessProbe(probe *corev1.Probe, path *field.Path) field.ErrorList {
	if probe == nil {
		return nil
	}
	errs := validateProbe(probe, path)
	if probe.TerminationGracePeriodSeconds != nil {
		errs = append(errs, field.Invalid(path.Child("terminationGracePeriodSeconds"), probe.TerminationGracePeriodSeconds, "must not be set for readinessProbes"))
	}
	return errs
}

// validateStartupProbe is upstream's validateStartupProbe (validation.go):
// the checks of a liveness probe.
func validateStartupProbe(probe *corev1.Probe, path *field.Path) field.ErrorList {
	return validateLivenessProbe(probe, path)
}

// validateProbe is upstream's validateProbe (validation.go), with the
// handler count of its validateHandler; the actions themselves are not
// checked further.
func validateProbe(probe *corev1.Probe, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	numHandlers := 0
	for _, h := range []struct {
		name string
		set  bool
	}{
		{"exec", probe.Exec != nil},
		{"httpGet", probe.HTTPGet != nil},
		{"tcpSocket", probe.TCPSocket != nil},
		{"grpc", probe.GRPC != nil},
	} {
		if !h.set {
			continue
		}
		if numHandlers > 0 {
			errs = append(errs, field.Forbidden(path.Child(h.name), "may not specify more than 1 handler type"))
		} else {
			numHandlers++
		}
	}
	if numHandlers == 0 {
		errs = append(errs, field.Required(path, "must specify a handler type"))
	}
	errs = append(errs, validation.ValidateNonnegativeField(int64(probe.InitialDelaySeconds), path.Child("initialDelaySeconds"))...)
	errs = append(errs, validation.ValidateNonnegativeField(int64(probe.TimeoutSeconds), path.Child("timeoutSeconds"))...)
	errs = append(errs, validation.ValidateNonnegativeField(int64(probe.PeriodSeconds), path.Child("periodSeconds"))...)
	errs = append(errs, validation.ValidateNonnegativeField(int64(probe.SuccessThreshold), path.Child("successThreshold"))...)
	errs = append(errs, validation.ValidateNonnegativeField(int64(probe.FailureThreshold), path.Child("failureThreshold"))...)
	if probe.TerminationGracePeriodSeconds != nil && *probe.TerminationGracePeriodSeconds <= 0 {
		errs = append(errs, field.Invalid(path.Child("terminationGracePeriodSeconds"), *probe.TerminationGracePeriodSeconds, "must be greater than 0"))
	}
	return errs
}
