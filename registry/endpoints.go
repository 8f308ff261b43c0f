package registry

import (
	"net"
	"strconv"

	corev1 "k8s.io/api/core/v1"
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
