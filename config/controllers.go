package config

import (
	"fmt"
	"net/netip"
	"net/url"
	"slices"
	"strings"
)

// The controllers and allocators kubestore runs beside the API, by
// kube-controller-manager's name where it has one. --controllers switches
// them as kube-controller-manager's flag does: "*" is every one, "name"
// enables one, "-name" disables one.
const (
	ControllerNamespace         = "namespace-controller"
	ControllerServiceAccount    = "serviceaccount-controller"
	ControllerRootCAPublisher   = "root-ca-certificate-publisher-controller"
	ControllerGarbageCollector  = "garbage-collector-controller"
	ControllerPodGC             = "pod-garbage-collector-controller"
	ControllerClusterIPAllocate = "service-cluster-ip-allocator"
	ControllerCSRSigning        = "certificatesigningrequest-signing-controller"
	ControllerCSRApproving      = "certificatesigningrequest-approving-controller"
)

// Controllers lists every controller --controllers may name.
var Controllers = []string{
	ControllerNamespace,
	ControllerServiceAccount,
	ControllerRootCAPublisher,
	ControllerGarbageCollector,
	ControllerPodGC,
	ControllerClusterIPAllocate,
	ControllerCSRSigning,
	ControllerCSRApproving,
}

// DefaultServiceClusterIPRange is kube-apiserver's default of
// --service-cluster-ip-range.
const DefaultServiceClusterIPRange = "10.0.0.0/24"

// DefaultServiceAccountIssuer names the issuer of ServiceAccount tokens,
// the in-cluster address of the API as most distributions set it.
const DefaultServiceAccountIssuer = "https://kubernetes.default.svc.cluster.local"

// parseControllers resolves --controllers into the enabled set.
func parseControllers(entries []string) (map[string]bool, error) {
	on := map[string]bool{}
	seen := map[string]bool{}
	for _, e := range entries {
		e = strings.TrimSpace(e)
		name, off := strings.CutPrefix(e, "-")
		switch {
		case name == "*" && !off:
			for _, c := range Controllers {
				if !seen[c] {
					on[c] = true
				}
			}
			continue
		case !slices.Contains(Controllers, name):
			return nil, invalid(FlagControllers, e, "must be *, a controller or -controller; the controllers are "+strings.Join(Controllers, ", "))
		case seen[name]:
			return nil, invalid(FlagControllers, e, "names "+name+" more than once")
		}
		seen[name] = true
		on[name] = !off
	}
	return on, nil
}

// KubernetesServiceIP is the cluster IP of the Service default/kubernetes
// in the primary service range cidr: its first address, as
// kube-apiserver's.
func KubernetesServiceIP(cidr netip.Prefix) netip.Addr { return cidr.Masked().Addr().Next() }

// ParseServiceClusterIPRange parses --service-cluster-ip-range: one CIDR,
// or an IPv4 and an IPv6 CIDR separated by a comma (dual stack, the first
// one primary), as kube-apiserver accepts it.
func ParseServiceClusterIPRange(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for part := range strings.SplitSeq(s, ",") {
		p, err := netip.ParsePrefix(strings.TrimSpace(part))
		if err != nil {
			return nil, invalid(FlagServiceClusterIPRange, s, "must be a CIDR such as 10.0.0.0/24, or an IPv4 and an IPv6 CIDR separated by a comma")
		}
		if p != p.Masked() {
			return nil, invalid(FlagServiceClusterIPRange, s, fmt.Sprintf("%s has host bits set; the network is %s", p, p.Masked()))
		}
		// kube-apiserver's limits: at least 8 addresses (network,
		// broadcast, the kubernetes Service), and a mask of at least /108
		// for IPv6 (20 bits of host part), /12 for IPv4.
		host := p.Addr().BitLen() - p.Bits()
		if host < 3 {
			return nil, invalid(FlagServiceClusterIPRange, s, p.String()+" is too small: it needs at least 8 addresses")
		}
		if p.Addr().Is4() && host > 20 || p.Addr().Is6() && host > 20 {
			return nil, invalid(FlagServiceClusterIPRange, s, p.String()+" is too large: at most 2^20 addresses (/12 for IPv4, /108 for IPv6)")
		}
		out = append(out, p)
	}
	if len(out) > 2 || len(out) == 2 && out[0].Addr().Is4() == out[1].Addr().Is4() {
		return nil, invalid(FlagServiceClusterIPRange, s, "dual stack takes one IPv4 and one IPv6 CIDR")
	}
	return out, nil
}

func validateIssuer(s string) error {
	if strings.Contains(s, ":") {
		u, err := url.Parse(s)
		if err != nil || u.Scheme != "https" || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
			return invalid(FlagServiceAccountIssuer, s, "must be an https URL without query or fragment, or a name without a colon")
		}
	}
	if s == "" {
		return invalid(FlagServiceAccountIssuer, s, "must not be empty")
	}
	return nil
}
