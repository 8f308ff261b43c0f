package registry

import (
	"net"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

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
