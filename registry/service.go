package registry

import (
	"fmt"
	"net"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/sets"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Services are stored and served as on a cluster. Their cluster IPs are
// allocated from --service-cluster-ip-range (ClusterIPs) while the
// service-cluster-ip-allocator runs; node ports are not allocated (a
// client may set them). Names are DNS labels, as ValidateServiceCreate
// (pkg/apis/core/validation/validation.go) checks them under
// RelaxedServiceNameValidation, GA and locked on in 1.37.
func serviceDef() *resourceDef {
	return &resourceDef{
		gvr:                 corev1.SchemeGroupVersion.WithResource("services"),
		kind:                "Service",
		singular:            "service",
		namespaced:          true,
		shortNames:          []string{"svc"},
		categories:          []string{"all"},
		keyPrefix:           "services/specs",
		newFunc:             func() runtime.Object { return &corev1.Service{} },
		newListFunc:         func() runtime.Object { return &corev1.ServiceList{} },
		nameFunc:            apivalidation.NameIsDNSLabel,
		defaults:            func(obj any) { defaultService(obj.(*corev1.Service)) },
		fields:              serviceFields,
		fieldLabels:         []string{"spec.clusterIP", "spec.type"},
		validate:            func(obj runtime.Object) field.ErrorList { return validateServiceSpec(&obj.(*corev1.Service).Spec) },
		validateUpdate:      validateServiceUpdate,
		prepareForUpdate:    prepareServiceUpdate,
		allowCreateOnUpdate: true,
		returnDeletedObject: true,
		status: &statusDef{
			keepStatus:    func(obj, old runtime.Object) { obj.(*corev1.Service).Status = old.(*corev1.Service).Status },
			keepSpec:      func(obj, old runtime.Object) { obj.(*corev1.Service).Spec = old.(*corev1.Service).Spec },
			resetOnCreate: func(obj runtime.Object) { obj.(*corev1.Service).Status = corev1.ServiceStatus{} },
		},
		columns: []metav1.TableColumnDefinition{
			nameCol,
			col("Type", "string", "The type of the service."),
			col("Cluster-IP", "string", "The IP address of the service."),
			col("External-IP", "string", "The external IP address of the service."),
			col("Port(s)", "string", "The ports on which the service is exposed."),
			ageCol,
			wideCol("Selector", "string", corev1.ServiceSpec{}.SwaggerDoc()["selector"]),
		},
		row: func(obj runtime.Object) []any { return serviceRow(obj.(*corev1.Service)) },
	}
}

func serviceFields(obj runtime.Object) fields.Set {
	s := obj.(*corev1.Service)
	return fields.Set{"spec.clusterIP": s.Spec.ClusterIP, "spec.type": string(s.Spec.Type)}
}

func defaultService(s *corev1.Service) {
	sp := &s.Spec
	if sp.Type == "" {
		sp.Type = corev1.ServiceTypeClusterIP
	}
	if sp.SessionAffinity == "" {
		sp.SessionAffinity = corev1.ServiceAffinityNone
	}
	if sp.SessionAffinity == corev1.ServiceAffinityClientIP &&
		(sp.SessionAffinityConfig == nil || sp.SessionAffinityConfig.ClientIP == nil || sp.SessionAffinityConfig.ClientIP.TimeoutSeconds == nil) {
		sp.SessionAffinityConfig = &corev1.SessionAffinityConfig{
			ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptrTo(int32(corev1.DefaultClientIPServiceAffinitySeconds))},
		}
	}
	for i := range sp.Ports {
		p := &sp.Ports[i]
		if p.Protocol == "" {
			p.Protocol = corev1.ProtocolTCP
		}
		if p.TargetPort == intstr.FromInt32(0) || p.TargetPort == intstr.FromString("") {
			p.TargetPort = intstr.FromInt32(p.Port)
		}
	}
	if sp.Type != corev1.ServiceTypeExternalName && sp.InternalTrafficPolicy == nil {
		sp.InternalTrafficPolicy = ptrTo(corev1.ServiceInternalTrafficPolicyCluster)
	}
	if (sp.Type == corev1.ServiceTypeNodePort || sp.Type == corev1.ServiceTypeLoadBalancer) && sp.ExternalTrafficPolicy == "" {
		sp.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyCluster
	}
	if sp.Type == corev1.ServiceTypeLoadBalancer && sp.AllocateLoadBalancerNodePorts == nil {
		sp.AllocateLoadBalancerNodePorts = ptrTo(true)
	}
	if sp.Type == corev1.ServiceTypeLoadBalancer {
		for i := range s.Status.LoadBalancer.Ingress {
			if in := &s.Status.LoadBalancer.Ingress[i]; in.IP != "" && in.IPMode == nil {
				in.IPMode = ptrTo(corev1.LoadBalancerIPModeVIP)
			}
		}
	}
}

var (
	serviceTypes      = sets.New(corev1.ServiceTypeClusterIP, corev1.ServiceTypeNodePort, corev1.ServiceTypeLoadBalancer, corev1.ServiceTypeExternalName)
	sessionAffinities = sets.New(corev1.ServiceAffinityNone, corev1.ServiceAffinityClientIP)
)

func validateServiceSpec(s *corev1.ServiceSpec) field.ErrorList {
	var errs field.ErrorList
	path := field.NewPath("spec")
	if !serviceTypes.Has(s.Type) {
		errs = append(errs, field.NotSupported(path.Child("type"), s.Type, sets.List(serviceTypes)))
	}
	headless := s.ClusterIP == corev1.ClusterIPNone
	switch {
	case s.Type == corev1.ServiceTypeExternalName:
		if s.ExternalName == "" {
			errs = append(errs, field.Required(path.Child("externalName"), "for type ExternalName"))
		} else {
			errs = append(errs, invalidEach(path.Child("externalName"), s.ExternalName, utilvalidation.IsDNS1123Subdomain(strings.TrimSuffix(s.ExternalName, ".")))...)
		}
	case len(s.Ports) == 0 && !headless:
		errs = append(errs, field.Required(path.Child("ports"), ""))
	}
	for i, ip := range append([]string{s.ClusterIP}, s.ClusterIPs...) {
		if ip == "" || ip == corev1.ClusterIPNone {
			continue
		}
		if net.ParseIP(ip) == nil {
			p := path.Child("clusterIP")
			if i > 0 {
				p = path.Child("clusterIPs").Index(i - 1)
			}
			errs = append(errs, field.Invalid(p, ip, `must be empty, "None", or a valid IP address`))
		}
	}
	names := sets.New[string]()
	for i, p := range s.Ports {
		pp := path.Child("ports").Index(i)
		if len(s.Ports) > 1 && p.Name == "" {
			errs = append(errs, field.Required(pp.Child("name"), "when more than one port is specified"))
		}
		if p.Name != "" {
			errs = append(errs, dnsLabel(pp.Child("name"), p.Name)...)
			if names.Has(p.Name) {
				errs = append(errs, field.Duplicate(pp.Child("name"), p.Name))
			}
			names.Insert(p.Name)
		}
		errs = append(errs, portNumber(pp.Child("port"), p.Port)...)
		if !protocols.Has(p.Protocol) {
			errs = append(errs, field.NotSupported(pp.Child("protocol"), p.Protocol, sets.List(protocols)))
		}
		switch p.TargetPort.Type {
		case intstr.Int:
			errs = append(errs, portNumber(pp.Child("targetPort"), p.TargetPort.IntVal)...)
		case intstr.String:
			errs = append(errs, invalidEach(pp.Child("targetPort"), p.TargetPort.StrVal, utilvalidation.IsValidPortName(p.TargetPort.StrVal))...)
		}
		if p.NodePort != 0 {
			errs = append(errs, portNumber(pp.Child("nodePort"), p.NodePort)...)
		}
	}
	ports := sets.New[corev1.ServicePort]()
	nodePorts := sets.New[corev1.ServicePort]()
	for i, p := range s.Ports {
		pp := path.Child("ports").Index(i)
		if key := (corev1.ServicePort{Protocol: p.Protocol, Port: p.Port}); ports.Has(key) {
			errs = append(errs, field.Duplicate(pp, key))
		} else {
			ports.Insert(key)
		}
		if p.NodePort == 0 {
			continue
		}
		if s.Type == corev1.ServiceTypeClusterIP {
			errs = append(errs, field.Forbidden(pp.Child("nodePort"), "may not be used when `type` is 'ClusterIP'"))
		}
		if key := (corev1.ServicePort{Protocol: p.Protocol, NodePort: p.NodePort}); nodePorts.Has(key) {
			errs = append(errs, field.Duplicate(pp.Child("nodePort"), p.NodePort))
		} else {
			nodePorts.Insert(key)
		}
	}
	errs = append(errs, validateSessionAffinity(s, path)...)
	errs = append(errs, validateServiceExternalIPs(s, path)...)
	errs = append(errs, validateLoadBalancerSourceRanges(s, path)...)
	errs = append(errs, validateServiceExternalTrafficPolicy(s, path)...)
	if s.InternalTrafficPolicy != nil && !supportedServiceInternalTrafficPolicy.Has(*s.InternalTrafficPolicy) {
		errs = append(errs, field.NotSupported(path.Child("internalTrafficPolicy"), *s.InternalTrafficPolicy, sets.List(supportedServiceInternalTrafficPolicy)))
	}
	if s.IPFamilyPolicy != nil && !supportedServiceIPFamilyPolicy.Has(*s.IPFamilyPolicy) {
		errs = append(errs, field.NotSupported(path.Child("ipFamilyPolicy"), s.IPFamilyPolicy, sets.List(supportedServiceIPFamilyPolicy)))
	}
	for k, v := range s.Selector {
		errs = append(errs, invalidEach(path.Child("selector"), k, utilvalidation.IsQualifiedName(k))...)
		errs = append(errs, invalidEach(path.Child("selector").Key(k), v, utilvalidation.IsValidLabelValue(v))...)
	}
	return errs
}

// Upstream's supported values (pkg/apis/core/validation/validation.go).
var (
	supportedServiceInternalTrafficPolicy = sets.New(corev1.ServiceInternalTrafficPolicyCluster, corev1.ServiceInternalTrafficPolicyLocal)
	supportedServiceIPFamilyPolicy        = sets.New(corev1.IPFamilyPolicySingleStack, corev1.IPFamilyPolicyPreferDualStack, corev1.IPFamilyPolicyRequireDualStack)
	validExternalTrafficPolicies          = sets.New(corev1.ServiceExternalTrafficPolicyCluster, corev1.ServiceExternalTrafficPolicyLocal)
)

// validateServiceExternalIPs is ValidateService's check of
// spec.externalIPs (validation.go), with StrictIPCIDRValidation on (its
// default in 1.37) and, on create as on update, no old addresses let
// through.
func validateServiceExternalIPs(s *corev1.ServiceSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, ip := range s.ExternalIPs {
		idxPath := path.Child("externalIPs").Index(i)
		if ipErrs := utilvalidation.IsValidIPForLegacyField(idxPath, ip, true, nil); len(ipErrs) != 0 {
			errs = append(errs, ipErrs...)
		} else {
			// For historical reasons, this uses ValidateEndpointIP even
			// though that is not exactly the appropriate set of checks.
			errs = append(errs, endpointIP(idxPath, ip)...)
		}
	}
	return errs
}

// validateLoadBalancerSourceRanges is ValidateService's check of
// spec.loadBalancerSourceRanges (validation.go), under upstream's field
// name "LoadBalancerSourceRanges"; the annotation is not checked.
func validateLoadBalancerSourceRanges(s *corev1.ServiceSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(s.LoadBalancerSourceRanges) == 0 {
		return nil
	}
	fieldPath := path.Child("LoadBalancerSourceRanges")
	if s.Type != corev1.ServiceTypeLoadBalancer {
		errs = append(errs, field.Forbidden(fieldPath, "may only be used when `type` is 'LoadBalancer'"))
	}
	for idx, value := range s.LoadBalancerSourceRanges {
		// Note: due to a historical accident around transition from the
		// annotation value, these values are allowed to be space-padded.
		value = strings.TrimSpace(value)
		errs = append(errs, utilvalidation.IsValidCIDRForLegacyField(fieldPath.Index(idx), value, true, nil)...)
	}
	return errs
}

// serviceExternallyAccessible is upstream's ExternallyAccessible
// (pkg/api/service/util.go).
func serviceExternallyAccessible(s *corev1.ServiceSpec) bool {
	return s.Type == corev1.ServiceTypeLoadBalancer || s.Type == corev1.ServiceTypeNodePort ||
		(s.Type == corev1.ServiceTypeClusterIP && len(s.ExternalIPs) > 0)
}

// prepareServiceUpdate is the externalTrafficPolicy part of
// upstream's dropTypeDependentFields (pkg/registry/core/service/strategy.go):
// a user switching to a type that doesn't need it, and not changing it,
// loses it.
func prepareServiceUpdate(obj, oldObj runtime.Object) {
	s, old := &obj.(*corev1.Service).Spec, &oldObj.(*corev1.Service).Spec
	if serviceExternallyAccessible(old) && !serviceExternallyAccessible(s) && s.ExternalTrafficPolicy == old.ExternalTrafficPolicy {
		s.ExternalTrafficPolicy = ""
	}
}

// validateServiceExternalTrafficPolicy is upstream's
// validateServiceExternalTrafficPolicy (validation.go) without its
// healthCheckNodePort checks (kubestore allocates no health check node
// port) and without requiring the policy where it is missing.
func validateServiceExternalTrafficPolicy(s *corev1.ServiceSpec, path *field.Path) field.ErrorList {
	externallyAccessible := serviceExternallyAccessible(s)
	switch {
	case !externallyAccessible && s.ExternalTrafficPolicy != "":
		return field.ErrorList{field.Invalid(path.Child("externalTrafficPolicy"), s.ExternalTrafficPolicy, "may only be set for externally-accessible services")}
	case externallyAccessible && s.ExternalTrafficPolicy != "" && !validExternalTrafficPolicies.Has(s.ExternalTrafficPolicy):
		return field.ErrorList{field.NotSupported(path.Child("externalTrafficPolicy"), s.ExternalTrafficPolicy, sets.List(validExternalTrafficPolicies))}
	}
	return nil
}

// maxClientIPAffinitySeconds is upstream's MaxClientIPServiceAffinitySeconds
// (a day), kept in k8s.io/kubernetes.
const maxClientIPAffinitySeconds = 24 * 60 * 60

func validateSessionAffinity(s *corev1.ServiceSpec, path *field.Path) field.ErrorList {
	config := path.Child("sessionAffinityConfig")
	switch {
	case s.SessionAffinity == "":
		return field.ErrorList{field.Required(path.Child("sessionAffinity"), "")}
	case !sessionAffinities.Has(s.SessionAffinity):
		return field.ErrorList{field.NotSupported(path.Child("sessionAffinity"), s.SessionAffinity, sets.List(sessionAffinities))}
	case s.SessionAffinity == corev1.ServiceAffinityNone:
		if s.SessionAffinityConfig != nil {
			return field.ErrorList{field.Forbidden(config, "must not be set when session affinity is None")}
		}
		return nil
	}
	switch c := s.SessionAffinityConfig; {
	case c == nil:
		return field.ErrorList{field.Required(config, "when session affinity type is ClientIP")}
	case c.ClientIP == nil:
		return field.ErrorList{field.Required(config.Child("clientIP"), "when session affinity type is ClientIP")}
	case c.ClientIP.TimeoutSeconds == nil:
		return field.ErrorList{field.Required(config.Child("clientIP", "timeoutSeconds"), "when session affinity type is ClientIP")}
	case *c.ClientIP.TimeoutSeconds <= 0 || *c.ClientIP.TimeoutSeconds > maxClientIPAffinitySeconds:
		return field.ErrorList{field.Invalid(config.Child("clientIP", "timeoutSeconds"), *c.ClientIP.TimeoutSeconds,
			fmt.Sprintf("must be greater than 0 and less than %d", maxClientIPAffinitySeconds))}
	}
	return nil
}

func validateServiceUpdate(obj, old runtime.Object) field.ErrorList {
	s, o := obj.(*corev1.Service), old.(*corev1.Service)
	if o.Spec.ClusterIP != "" && s.Spec.ClusterIP != o.Spec.ClusterIP && s.Spec.Type != corev1.ServiceTypeExternalName {
		return field.ErrorList{field.Invalid(field.NewPath("spec", "clusterIP"), s.Spec.ClusterIP, "field is immutable")}
	}
	return nil
}

// serviceRow is upstream's printService: the first cluster IP, the
// external IPs by type (a load balancer's ingress, sorted, then
// spec.externalIPs), ports with their node ports.
func serviceRow(s *corev1.Service) []any {
	clusterIP := s.Spec.ClusterIP
	if len(s.Spec.ClusterIPs) > 0 {
		clusterIP = s.Spec.ClusterIPs[0]
	}
	ports := make([]string, 0, len(s.Spec.Ports))
	for _, p := range s.Spec.Ports {
		port := strconv.Itoa(int(p.Port))
		if p.NodePort > 0 {
			port = fmt.Sprintf("%d:%d", p.Port, p.NodePort)
		}
		ports = append(ports, port+"/"+string(p.Protocol))
	}
	return []any{s.Name, string(s.Spec.Type), orNone(clusterIP), serviceExternalIP(s), orNone(strings.Join(ports, ",")),
		age(s.CreationTimestamp), formatLabels(s.Spec.Selector)}
}

func serviceExternalIP(s *corev1.Service) string {
	switch s.Spec.Type {
	case corev1.ServiceTypeClusterIP, corev1.ServiceTypeNodePort:
		return orNone(strings.Join(s.Spec.ExternalIPs, ","))
	case corev1.ServiceTypeLoadBalancer:
		ingress := sets.New[string]()
		for _, in := range s.Status.LoadBalancer.Ingress {
			if in.IP != "" {
				ingress.Insert(in.IP)
			} else if in.Hostname != "" {
				ingress.Insert(in.Hostname)
			}
		}
		ips := append(sets.List(ingress), s.Spec.ExternalIPs...)
		if len(ips) == 0 {
			return "<pending>"
		}
		return strings.Join(ips, ",")
	case corev1.ServiceTypeExternalName:
		return s.Spec.ExternalName
	}
	return "<unknown>"
}
