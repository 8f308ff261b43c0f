package registry

import (
	"fmt"
	"net"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

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
			return []any{e.Name, formatEndpoints(e), age(e.CreationTimestamp)}
		},
	}
}

// formatEndpoints is upstream's: the first three address:port pairs,
// port by port, or bare addresses of subsets without ports, and how many
// more there are.
func formatEndpoints(e *corev1.Endpoints) string {
	if len(e.Subsets) == 0 {
		return "<none>"
	}
	var list []string
	count := 0
	for _, s := range e.Subsets {
		if len(s.Ports) == 0 {
			count += len(s.Addresses)
			for _, a := range s.Addresses {
				list = append(list, a.IP)
			}
			continue
		}
		for _, p := range s.Ports {
			count += len(s.Addresses)
			for _, a := range s.Addresses {
				list = append(list, net.JoinHostPort(a.IP, strconv.Itoa(int(p.Port))))
			}
		}
	}
	return listMore(list, count, 3, "")
}

// validateEndpoints is upstream's ValidateEndpoints
// (pkg/apis/core/validation): every subset has addresses, each a usable IP;
// ports are named when there are several.
func validateEndpoints(obj runtime.Object) field.ErrorList {
	var errs field.ErrorList
	for i, s := range obj.(*corev1.Endpoints).Subsets {
		path := field.NewPath("subsets").Index(i)
		if len(s.Addresses) == 0 && len(s.NotReadyAddresses) == 0 {
			errs = append(errs, field.Required(path, "must specify `addresses` or `notReadyAddresses`"))
		}
		for j, a := range s.Addresses {
			errs = append(errs, validateEndpointAddress(a, path.Child("addresses").Index(j))...)
		}
		for j, a := range s.NotReadyAddresses {
			errs = append(errs, validateEndpointAddress(a, path.Child("notReadyAddresses").Index(j))...)
		}
		for j, p := range s.Ports {
			pp := path.Child("ports").Index(j)
			if len(s.Ports) > 1 && p.Name == "" {
				errs = append(errs, field.Required(pp.Child("name"), ""))
			} else if p.Name != "" {
				errs = append(errs, dnsLabel(pp.Child("name"), p.Name)...)
			}
			errs = append(errs, portNumber(pp.Child("port"), p.Port)...)
			switch {
			case p.Protocol == "":
				errs = append(errs, field.Required(pp.Child("protocol"), ""))
			case !protocols.Has(p.Protocol):
				errs = append(errs, field.NotSupported(pp.Child("protocol"), p.Protocol, sets.List(protocols)))
			}
			if p.AppProtocol != nil {
				errs = append(errs, qualifiedName(pp.Child("appProtocol"), *p.AppProtocol)...)
			}
		}
	}
	return errs
}

func validateEndpointAddress(a corev1.EndpointAddress, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if net.ParseIP(a.IP) == nil {
		errs = append(errs, field.Invalid(path.Child("ip"), a.IP, "must be a valid IP address"))
	} else {
		errs = append(errs, endpointIP(path.Child("ip"), a.IP)...)
	}
	if a.Hostname != "" {
		errs = append(errs, dnsLabel(path.Child("hostname"), a.Hostname)...)
	}
	if a.NodeName != nil {
		errs = append(errs, invalidEach(path.Child("nodeName"), *a.NodeName, validation.NameIsDNSSubdomain(*a.NodeName, false))...)
	}
	return errs
}

// endpointIP refuses the addresses an endpoint may not have, upstream's
// ValidateEndpointIP: a proxy must not be sent to them.
func endpointIP(path *field.Path, s string) field.ErrorList {
	ip := net.ParseIP(s)
	var errs field.ErrorList
	if ip.IsUnspecified() {
		errs = append(errs, field.Invalid(path, s, fmt.Sprintf("may not be unspecified (%v)", s)))
	}
	if ip.IsLoopback() {
		errs = append(errs, field.Invalid(path, s, "may not be in the loopback range (127.0.0.0/8, ::1/128)"))
	}
	if ip.IsLinkLocalUnicast() {
		errs = append(errs, field.Invalid(path, s, "may not be in the link-local range (169.254.0.0/16, fe80::/10)"))
	}
	if ip.IsLinkLocalMulticast() {
		errs = append(errs, field.Invalid(path, s, "may not be in the link-local multicast range (224.0.0.0/24, ff02::/10)"))
	}
	return errs
}
