package registry

import (
	"fmt"
	"net"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
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

func endpointsDef() *resourceDef {
	return &resourceDef{
		gvr:         corev1.SchemeGroupVersion.WithResource("endpoints"),
		kind:        "Endpoints",
		singular:    "endpoints",
		namespaced:  true,
		shortNames:  []string{"ep"},
		keyPrefix:   "services/endpoints",
		newFunc:     func() runtime.Object { return &corev1.Endpoints{} },
		newListFunc: func() runtime.Object { return &corev1.EndpointsList{} },
		defaults: func(obj any) {
			for i := range obj.(*corev1.Endpoints).Subsets {
				s := &obj.(*corev1.Endpoints).Subsets[i]
				for j := range s.Ports {
					if s.Ports[j].Protocol == "" {
						s.Ports[j].Protocol = corev1.ProtocolTCP
					}
				}
			}
		},
		validate:            validateEndpoints,
		allowCreateOnUpdate: true,
		columns: []metav1.TableColumnDefinition{
			nameCol,
			col("Endpoints", "string", "Endpoints of the service"),
			ageCol,
		},
		row: func(obj runtime.Object) []any {
			e := obj.(*corev1.Endpoints)
			var list []string
			for _, s := range e.Subsets {
				for _, a := range s.Addresses {
					if len(s.Ports) == 0 {
						list = append(list, a.IP)
					}
					for _, p := range s.Ports {
						list = append(list, net.JoinHostPort(a.IP, strconv.Itoa(int(p.Port))))
					}
				}
			}
			return []any{e.Name, listMore(list, 3), age(e.CreationTimestamp)}
		},
	}
}

func validateEndpoints(obj runtime.Object) field.ErrorList {
	var errs field.ErrorList
	for i, s := range obj.(*corev1.Endpoints).Subsets {
		path := field.NewPath("subsets").Index(i)
		for kind, addrs := range map[string][]corev1.EndpointAddress{"addresses": s.Addresses, "notReadyAddresses": s.NotReadyAddresses} {
			for j, a := range addrs {
				if net.ParseIP(a.IP) == nil {
					errs = append(errs, field.Invalid(path.Child(kind).Index(j).Child("ip"), a.IP, "must be a valid IP address"))
				}
			}
		}
		for j, p := range s.Ports {
			errs = append(errs, portNumber(path.Child("ports").Index(j).Child("port"), p.Port)...)
			if !protocols.Has(p.Protocol) {
				errs = append(errs, field.NotSupported(path.Child("ports").Index(j).Child("protocol"), p.Protocol, sets.List(protocols)))
			}
		}
	}
	return errs
}

const maxEndpointsPerSlice = 1000

var addressTypes = sets.New(discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6, discoveryv1.AddressTypeFQDN)

func endpointSliceDef() *resourceDef {
	return &resourceDef{
		gvr:         discoveryv1.SchemeGroupVersion.WithResource("endpointslices"),
		kind:        "EndpointSlice",
		singular:    "endpointslice",
		namespaced:  true,
		keyPrefix:   "endpointslices",
		newFunc:     func() runtime.Object { return &discoveryv1.EndpointSlice{} },
		newListFunc: func() runtime.Object { return &discoveryv1.EndpointSliceList{} },
		defaults: func(obj any) {
			for i := range obj.(*discoveryv1.EndpointSlice).Ports {
				p := &obj.(*discoveryv1.EndpointSlice).Ports[i]
				if p.Protocol == nil {
					p.Protocol = ptrTo(corev1.ProtocolTCP)
				}
				if p.Name == nil {
					p.Name = ptrTo("")
				}
			}
		},
		validate: validateEndpointSlice,
		columns: []metav1.TableColumnDefinition{
			nameCol,
			col("AddressType", "string", discoveryv1.EndpointSlice{}.SwaggerDoc()["addressType"]),
			col("Ports", "string", discoveryv1.EndpointSlice{}.SwaggerDoc()["ports"]),
			col("Endpoints", "string", discoveryv1.EndpointSlice{}.SwaggerDoc()["endpoints"]),
			ageCol,
		},
		row: func(obj runtime.Object) []any {
			s := obj.(*discoveryv1.EndpointSlice)
			var ports, addrs []string
			for _, p := range s.Ports {
				if p.Port != nil {
					ports = append(ports, strconv.Itoa(int(*p.Port)))
				}
			}
			for _, e := range s.Endpoints {
				addrs = append(addrs, e.Addresses...)
			}
			portsCell := "<unset>"
			if len(ports) > 0 {
				portsCell = listMore(ports, 3)
			}
			return []any{s.Name, string(s.AddressType), portsCell, listMore(addrs, 3), age(s.CreationTimestamp)}
		},
	}
}

func validateEndpointSlice(obj runtime.Object) field.ErrorList {
	s := obj.(*discoveryv1.EndpointSlice)
	var errs field.ErrorList
	if !addressTypes.Has(s.AddressType) {
		errs = append(errs, field.NotSupported(field.NewPath("addressType"), s.AddressType, sets.List(addressTypes)))
	}
	if len(s.Endpoints) > maxEndpointsPerSlice {
		errs = append(errs, field.TooMany(field.NewPath("endpoints"), len(s.Endpoints), maxEndpointsPerSlice))
	}
	for i, e := range s.Endpoints {
		path := field.NewPath("endpoints").Index(i).Child("addresses")
		if len(e.Addresses) < 1 || len(e.Addresses) > 100 {
			errs = append(errs, field.Invalid(path, len(e.Addresses), "must contain between 1 and 100 addresses"))
		}
		for j, a := range e.Addresses {
			if msg := endpointAddressError(s.AddressType, a); msg != "" {
				errs = append(errs, field.Invalid(path.Index(j), a, msg))
			}
		}
	}
	for i, p := range s.Ports {
		path := field.NewPath("ports").Index(i)
		if p.Port != nil {
			errs = append(errs, portNumber(path.Child("port"), *p.Port)...)
		}
		if p.Protocol != nil && !protocols.Has(*p.Protocol) {
			errs = append(errs, field.NotSupported(path.Child("protocol"), *p.Protocol, sets.List(protocols)))
		}
	}
	return errs
}

func endpointAddressError(t discoveryv1.AddressType, a string) string {
	ip := net.ParseIP(a)
	switch t {
	case discoveryv1.AddressTypeIPv4:
		if ip == nil || ip.To4() == nil {
			return "must be a valid IPv4 address"
		}
	case discoveryv1.AddressTypeIPv6:
		if ip == nil || ip.To4() != nil {
			return "must be a valid IPv6 address"
		}
	case discoveryv1.AddressTypeFQDN:
		if msgs := utilvalidation.IsFullyQualifiedDomainName(field.NewPath(""), a); len(msgs) > 0 {
			return msgs.ToAggregate().Error()
		}
	}
	return ""
}
