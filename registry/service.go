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

// Services are stored and served as on a cluster, but kubestore allocates
// no cluster IPs or node ports: a device has no service network. Clients
// set spec.clusterIP themselves ("None" for headless services).
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
		nameFunc:            apivalidation.NameIsDNS1035Label,
		defaults:            func(obj any) { defaultService(obj.(*corev1.Service)) },
		fields:              serviceFields,
		fieldLabels:         []string{"spec.clusterIP", "spec.type"},
		validate:            func(obj runtime.Object) field.ErrorList { return validateServiceSpec(&obj.(*corev1.Service).Spec) },
		validateUpdate:      validateServiceUpdate,
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

var serviceTypes = sets.New(corev1.ServiceTypeClusterIP, corev1.ServiceTypeNodePort, corev1.ServiceTypeLoadBalancer, corev1.ServiceTypeExternalName)

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
			for _, msg := range utilvalidation.IsDNS1123Subdomain(strings.TrimSuffix(s.ExternalName, ".")) {
				errs = append(errs, field.Invalid(path.Child("externalName"), s.ExternalName, msg))
			}
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
			for _, msg := range utilvalidation.IsValidPortName(p.TargetPort.StrVal) {
				errs = append(errs, field.Invalid(pp.Child("targetPort"), p.TargetPort.StrVal, msg))
			}
		}
		if p.NodePort != 0 {
			errs = append(errs, portNumber(pp.Child("nodePort"), p.NodePort)...)
		}
	}
	for k, v := range s.Selector {
		for _, msg := range utilvalidation.IsQualifiedName(k) {
			errs = append(errs, field.Invalid(path.Child("selector"), k, msg))
		}
		for _, msg := range utilvalidation.IsValidLabelValue(v) {
			errs = append(errs, field.Invalid(path.Child("selector").Key(k), v, msg))
		}
	}
	return errs
}

func validateServiceUpdate(obj, old runtime.Object) field.ErrorList {
	s, o := obj.(*corev1.Service), old.(*corev1.Service)
	if o.Spec.ClusterIP != "" && s.Spec.ClusterIP != o.Spec.ClusterIP && s.Spec.Type != corev1.ServiceTypeExternalName {
		return field.ErrorList{field.Invalid(field.NewPath("spec", "clusterIP"), s.Spec.ClusterIP, "field is immutable")}
	}
	return nil
}

func serviceRow(s *corev1.Service) []any {
	external := "<none>"
	switch s.Spec.Type {
	case corev1.ServiceTypeLoadBalancer:
		var ips []string
		for _, in := range s.Status.LoadBalancer.Ingress {
			if in.IP != "" {
				ips = append(ips, in.IP)
			} else if in.Hostname != "" {
				ips = append(ips, in.Hostname)
			}
		}
		ips = append(ips, s.Spec.ExternalIPs...)
		external = "<pending>"
		if len(ips) > 0 {
			external = strings.Join(ips, ",")
		}
	case corev1.ServiceTypeExternalName:
		external = s.Spec.ExternalName
	default:
		if len(s.Spec.ExternalIPs) > 0 {
			external = strings.Join(s.Spec.ExternalIPs, ",")
		}
	}
	ports := make([]string, 0, len(s.Spec.Ports))
	for _, p := range s.Spec.Ports {
		port := strconv.Itoa(int(p.Port))
		if p.NodePort > 0 {
			port = fmt.Sprintf("%d:%d", p.Port, p.NodePort)
		}
		ports = append(ports, port+"/"+string(p.Protocol))
	}
	return []any{s.Name, string(s.Spec.Type), orNone(s.Spec.ClusterIP), external, orNone(strings.Join(ports, ",")),
		age(s.CreationTimestamp), formatLabels(s.Spec.Selector)}
}
