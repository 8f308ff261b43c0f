package registry

import (
	"net"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metavalidation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Limits of an EndpointSlice, upstream's.
const (
	maxSliceEndpoints    = 1000
	maxEndpointAddresses = 100
	maxSlicePorts        = 20000
	maxEndpointTopology  = 16
	maxEndpointZoneHints = 8
)

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
		validateUpdate: func(obj, old runtime.Object) field.ErrorList {
			if t, o := obj.(*discoveryv1.EndpointSlice).AddressType, old.(*discoveryv1.EndpointSlice).AddressType; t != o {
				return field.ErrorList{field.Invalid(field.NewPath("addressType"), t, "field is immutable")}
			}
			return nil
		},
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
				switch {
				case p.Port != nil:
					ports = append(ports, strconv.Itoa(int(*p.Port)))
				case p.Name != nil:
					ports = append(ports, *p.Name)
				default:
					ports = append(ports, "*")
				}
			}
			for _, e := range s.Endpoints {
				addrs = append(addrs, e.Addresses...)
			}
			return []any{s.Name, string(s.AddressType), listMore(ports, len(ports), 3, "<unset>"),
				listMore(addrs, len(addrs), 3, "<unset>"), age(s.CreationTimestamp)}
		},
	}
}

// validateEndpointSlice is upstream's ValidateEndpointSlice
// (pkg/apis/discovery/validation). Like upstream, it does not range-check
// port numbers.
func validateEndpointSlice(obj runtime.Object) field.ErrorList {
	s := obj.(*discoveryv1.EndpointSlice)
	var errs field.ErrorList
	switch {
	case s.AddressType == "":
		errs = append(errs, field.Required(field.NewPath("addressType"), ""))
	case !addressTypes.Has(s.AddressType):
		errs = append(errs, field.NotSupported(field.NewPath("addressType"), s.AddressType, sets.List(addressTypes)))
	}
	errs = append(errs, validateSliceEndpoints(s.Endpoints, s.AddressType, field.NewPath("endpoints"))...)
	return append(errs, validateSlicePorts(s.Ports, field.NewPath("ports"))...)
}

func validateSliceEndpoints(endpoints []discoveryv1.Endpoint, t discoveryv1.AddressType, path *field.Path) field.ErrorList {
	if len(endpoints) > maxSliceEndpoints {
		return field.ErrorList{field.TooMany(path, len(endpoints), maxSliceEndpoints)}
	}
	var errs field.ErrorList
	for i, e := range endpoints {
		p := path.Index(i)
		addrs := p.Child("addresses")
		switch {
		case len(e.Addresses) == 0:
			errs = append(errs, field.Required(addrs, "must contain at least 1 address"))
		case len(e.Addresses) > maxEndpointAddresses:
			errs = append(errs, field.TooMany(addrs, len(e.Addresses), maxEndpointAddresses))
		}
		for j, a := range e.Addresses {
			ip := net.ParseIP(a)
			switch t {
			case discoveryv1.AddressTypeIPv4:
				if ip == nil || ip.To4() == nil {
					errs = append(errs, field.Invalid(addrs.Index(j), a, "must be a valid IPv4 address"))
				} else {
					errs = append(errs, endpointIP(addrs.Index(j), a)...)
				}
			case discoveryv1.AddressTypeIPv6:
				if ip == nil || ip.To4() != nil {
					errs = append(errs, field.Invalid(addrs.Index(j), a, "must be a valid IPv6 address"))
				} else {
					errs = append(errs, endpointIP(addrs.Index(j), a)...)
				}
			case discoveryv1.AddressTypeFQDN:
				errs = append(errs, utilvalidation.IsFullyQualifiedDomainName(addrs.Index(j), a)...)
			}
		}
		if e.NodeName != nil {
			errs = append(errs, invalidEach(p.Child("nodeName"), *e.NodeName, validation.NameIsDNSSubdomain(*e.NodeName, false))...)
		}
		topology := p.Child("deprecatedTopology")
		if len(e.DeprecatedTopology) > maxEndpointTopology {
			errs = append(errs, field.TooMany(topology, len(e.DeprecatedTopology), maxEndpointTopology))
		}
		errs = append(errs, metavalidation.ValidateLabels(e.DeprecatedTopology, topology)...)
		if e.Hostname != nil {
			errs = append(errs, dnsLabel(p.Child("hostname"), *e.Hostname)...)
		}
		if e.Hints != nil {
			errs = append(errs, validateZoneHints(e.Hints.ForZones, p.Child("hints", "forZones"))...)
		}
	}
	return errs
}

func validateZoneHints(zones []discoveryv1.ForZone, path *field.Path) field.ErrorList {
	if len(zones) > maxEndpointZoneHints {
		return field.ErrorList{field.TooMany(path, len(zones), maxEndpointZoneHints)}
	}
	var errs field.ErrorList
	seen := sets.New[string]()
	for i, z := range zones {
		p := path.Index(i).Child("name")
		if seen.Has(z.Name) {
			errs = append(errs, field.Duplicate(p, z.Name))
		}
		seen.Insert(z.Name)
		errs = append(errs, invalidEach(p, z.Name, utilvalidation.IsValidLabelValue(z.Name))...)
	}
	return errs
}

func validateSlicePorts(ports []discoveryv1.EndpointPort, path *field.Path) field.ErrorList {
	if len(ports) > maxSlicePorts {
		return field.ErrorList{field.TooMany(path, len(ports), maxSlicePorts)}
	}
	var errs field.ErrorList
	names := sets.New[string]()
	for i, port := range ports {
		p := path.Index(i)
		name := ""
		if port.Name != nil {
			name = *port.Name
		}
		if name != "" {
			errs = append(errs, dnsLabel(p.Child("name"), name)...)
		}
		if names.Has(name) {
			errs = append(errs, field.Duplicate(p.Child("name"), name))
		}
		names.Insert(name)
		switch {
		case port.Protocol == nil:
			errs = append(errs, field.Required(p.Child("protocol"), ""))
		case !protocols.Has(*port.Protocol):
			errs = append(errs, field.NotSupported(p.Child("protocol"), *port.Protocol, sets.List(protocols)))
		}
		if port.AppProtocol != nil {
			errs = append(errs, qualifiedName(p.Child("appProtocol"), *port.AppProtocol)...)
		}
	}
	return errs
}
