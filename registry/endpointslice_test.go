package registry

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func newSlice(t discoveryv1.AddressType, endpoints []discoveryv1.Endpoint, ports ...discoveryv1.EndpointPort) *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: "hello", Namespace: "world", ResourceVersion: "1"},
		AddressType: t, Endpoints: endpoints, Ports: ports}
}

func slicePort(name string, port int32, protocol corev1.Protocol) discoveryv1.EndpointPort {
	return discoveryv1.EndpointPort{Name: &name, Port: &port, Protocol: &protocol}
}

func sliceEndpoints(n int, addresses ...string) []discoveryv1.Endpoint {
	e := make([]discoveryv1.Endpoint, n)
	for i := range e {
		e[i].Addresses = addresses
	}
	return e
}

// The cases of TestValidateEndpointSlice in k8s.io/kubernetes
// pkg/apis/discovery/validation/validation_test.go.
func TestEndpointSliceValidate(t *testing.T) {
	ipv4, ipv6, fqdn := discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6, discoveryv1.AddressTypeFQDN
	tcp := corev1.ProtocolTCP
	many := func(n int) []string {
		a := make([]string, n)
		for i := range a {
			a[i] = fmt.Sprintf("10.1.%d.%d", i/250, i%250+1)
		}
		return a
	}
	manyPorts := func(n int) []discoveryv1.EndpointPort {
		p := make([]discoveryv1.EndpointPort, n)
		for i := range p {
			p[i] = slicePort(fmt.Sprintf("http-%d", i), 80, tcp)
		}
		return p
	}
	topology := func(n int) map[string]string {
		m := map[string]string{}
		for i := range n {
			m[fmt.Sprintf("key%d", i)] = "value"
		}
		return m
	}
	with := func(e []discoveryv1.Endpoint, f func(*discoveryv1.Endpoint)) []discoveryv1.Endpoint {
		f(&e[0])
		return e
	}
	tests := []struct {
		name  string
		slice *discoveryv1.EndpointSlice
		err   string // "" when valid
	}{
		{name: "good-slice", slice: newSlice(ipv4, with(sliceEndpoints(1, "10.1.2.3"), func(e *discoveryv1.Endpoint) { e.Hostname = ptrTo("valid-123") }), slicePort("http", 80, tcp))},
		{name: "good-ipv6", slice: newSlice(ipv6, sliceEndpoints(1, "a00:100::4"), slicePort("http", 80, tcp))},
		{name: "good-fqdns", slice: newSlice(fqdn, sliceEndpoints(1, "foo.example.com", "example.com", "example.com.", "hello-world.example.com"), slicePort("http", 80, tcp))},
		{name: "all-protocols", slice: newSlice(ipv4, sliceEndpoints(1, "10.1.2.3"),
			slicePort("tcp", 80, corev1.ProtocolTCP), slicePort("udp", 80, corev1.ProtocolUDP), slicePort("sctp", 80, corev1.ProtocolSCTP))},
		{name: "app-protocols", slice: newSlice(ipv4, sliceEndpoints(1, "10.1.2.3"), func() discoveryv1.EndpointPort {
			p := slicePort("one", 80, tcp)
			p.AppProtocol = ptrTo("HTTP")
			return p
		}())},
		{name: "empty-port", slice: newSlice(ipv4, sliceEndpoints(1, "10.1.2.3"), discoveryv1.EndpointPort{Name: ptrTo(""), Protocol: &tcp})},
		{name: "long-port-name", slice: newSlice(ipv4, sliceEndpoints(1, "10.1.2.3"), slicePort(strings.Repeat("a", 63), 80, tcp))},
		{name: "empty-ports-and-endpoints", slice: newSlice(ipv4, nil)},
		{name: "max-endpoints", slice: newSlice(ipv4, sliceEndpoints(1000, "10.1.2.3"))},
		{name: "max-addresses", slice: newSlice(ipv4, sliceEndpoints(1, many(100)...))},
		{name: "max-topology-keys", slice: newSlice(ipv4, with(sliceEndpoints(1, "10.1.2.3"), func(e *discoveryv1.Endpoint) { e.DeprecatedTopology = topology(16) }))},
		{name: "valid-hints", slice: newSlice(ipv4, with(sliceEndpoints(1, "10.1.2.3"), func(e *discoveryv1.Endpoint) {
			e.Hints = &discoveryv1.EndpointHints{ForZones: []discoveryv1.ForZone{{Name: "zone-a"}}}
		}))},
		// Like upstream, port numbers are not range-checked.
		{name: "port out of range", slice: newSlice(ipv4, sliceEndpoints(1, "10.1.2.3"), slicePort("http", 70000, tcp))},

		{name: "duplicate-port-name", slice: newSlice(ipv4, sliceEndpoints(1, "10.1.2.3"), slicePort("", 80, tcp), slicePort("", 81, tcp)),
			err: "ports[1].name: Duplicate value"},
		{name: "bad-port-name-caps", slice: newSlice(ipv4, sliceEndpoints(1, "10.1.2.3"), slicePort("aCapital", 80, tcp)), err: "ports[0].name: Invalid value"},
		{name: "bad-port-name-chars", slice: newSlice(ipv4, sliceEndpoints(1, "10.1.2.3"), slicePort("almost_valid", 80, tcp)), err: "ports[0].name: Invalid value"},
		{name: "bad-port-name-length", slice: newSlice(ipv4, sliceEndpoints(1, "10.1.2.3"), slicePort(strings.Repeat("a", 64), 80, tcp)), err: "ports[0].name: Invalid value"},
		{name: "invalid-port-protocol", slice: newSlice(ipv4, sliceEndpoints(1, "10.1.2.3"), slicePort("http", 80, "foo")), err: "ports[0].protocol: Unsupported value"},
		{name: "too-many-ports", slice: newSlice(ipv4, sliceEndpoints(1, "10.1.2.3"), manyPorts(20001)...), err: "ports: Too many"},
		{name: "too-many-endpoints", slice: newSlice(ipv4, sliceEndpoints(1001, "10.1.2.3")), err: "endpoints: Too many"},
		{name: "no-endpoint-addresses", slice: newSlice(ipv4, sliceEndpoints(1)), err: "endpoints[0].addresses: Required value"},
		{name: "too-many-addresses", slice: newSlice(ipv4, sliceEndpoints(1, many(101)...)), err: "endpoints[0].addresses: Too many"},
		{name: "bad-topology-key", slice: newSlice(ipv4, with(sliceEndpoints(1, "10.1.2.3"), func(e *discoveryv1.Endpoint) {
			e.DeprecatedTopology = map[string]string{"--INVALID": "example"}
		})), err: "endpoints[0].deprecatedTopology: Invalid value"},
		{name: "too-many-topology-keys", slice: newSlice(ipv4, with(sliceEndpoints(1, "10.1.2.3"), func(e *discoveryv1.Endpoint) { e.DeprecatedTopology = topology(17) })),
			err: "endpoints[0].deprecatedTopology: Too many"},
		{name: "bad-hostname", slice: newSlice(ipv4, with(sliceEndpoints(1, "10.1.2.3"), func(e *discoveryv1.Endpoint) { e.Hostname = ptrTo("--INVALID") })),
			err: "endpoints[0].hostname: Invalid value"},
		{name: "bad-node-name", slice: newSlice(ipv4, with(sliceEndpoints(1, "10.1.2.3"), func(e *discoveryv1.Endpoint) { e.NodeName = ptrTo("Node_1") })),
			err: "endpoints[0].nodeName: Invalid value"},
		{name: "bad-meta", slice: func() *discoveryv1.EndpointSlice {
			s := newSlice(ipv4, sliceEndpoints(1, "10.1.2.3"))
			s.Name = "*&^"
			return s
		}(), err: "metadata.name: Invalid value"},
		{name: "bad-ip", slice: newSlice(ipv4, sliceEndpoints(1, "123.456.789.012")), err: "endpoints[0].addresses[0]: Invalid value"},
		{name: "bad-ipv4", slice: newSlice(ipv4, sliceEndpoints(1, "123.456.789.012", "2001:4860:4860::8888")), err: "endpoints[0].addresses[1]: Invalid value"},
		{name: "bad-ipv6", slice: newSlice(ipv6, sliceEndpoints(1, "123.456.789.012", "2001:4860:4860:defg")), err: "endpoints[0].addresses[1]: Invalid value"},
		{name: "bad-fqdns", slice: newSlice(fqdn, sliceEndpoints(1, "foo.*", "FOO.example.com", "underscores_are_bad.example.com", "*.example.com")),
			err: "endpoints[0].addresses[0]: Invalid value"},
		{name: "bad-app-protocol", slice: newSlice(ipv4, sliceEndpoints(1, "10.1.2.3"), func() discoveryv1.EndpointPort {
			p := slicePort("http", 80, tcp)
			p.AppProtocol = ptrTo("--")
			return p
		}()), err: "ports[0].appProtocol: Invalid value"},
		{name: "empty-everything", slice: newSlice("", nil), err: "addressType: Required value"},
		{name: "bad-address-type", slice: newSlice("IP", nil), err: "addressType: Unsupported value"},
		{name: "special-ipv4", slice: newSlice(ipv4, sliceEndpoints(1, "127.0.0.1")), err: "endpoints[0].addresses[0]: Invalid value"},
		{name: "special-ipv6", slice: newSlice(ipv6, sliceEndpoints(1, "fe80::9656:d028:8652:66b6")), err: "endpoints[0].addresses[0]: Invalid value"},
		{name: "duplicate zone hints", slice: newSlice(ipv4, with(sliceEndpoints(1, "10.1.2.3"), func(e *discoveryv1.Endpoint) {
			e.Hints = &discoveryv1.EndpointHints{ForZones: []discoveryv1.ForZone{{Name: "zone-a"}, {Name: "zone-a"}}}
		})), err: "endpoints[0].hints.forZones[1].name: Duplicate value"},
		{name: "too many zone hints", slice: newSlice(ipv4, with(sliceEndpoints(1, "10.1.2.3"), func(e *discoveryv1.Endpoint) {
			e.Hints = &discoveryv1.EndpointHints{}
			for i := range 9 {
				e.Hints.ForZones = append(e.Hints.ForZones, discoveryv1.ForZone{Name: fmt.Sprintf("zone-%d", i)})
			}
		})), err: "endpoints[0].hints.forZones: Too many"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errorsContain(t, validateCreate(t, endpointSliceDef(), tt.slice), tt.err)
		})
	}
}

// ValidateEndpointSliceUpdate: the address type never changes.
func TestEndpointSliceValidateUpdate(t *testing.T) {
	old := newSlice(discoveryv1.AddressTypeIPv4, sliceEndpoints(1, "10.1.2.3"))
	tests := []struct {
		name  string
		slice *discoveryv1.EndpointSlice
		err   string
	}{
		{name: "valid", slice: newSlice(discoveryv1.AddressTypeIPv4, sliceEndpoints(1, "10.1.2.4"))},
		{name: "changing address type", slice: newSlice(discoveryv1.AddressTypeIPv6, sliceEndpoints(1, "a00:100::4")), err: "addressType: Invalid value"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errorsContain(t, validateUpdate(t, endpointSliceDef(), tt.slice, old), tt.err)
		})
	}
}

// SetDefaults_EndpointPort in k8s.io/kubernetes pkg/apis/discovery/v1/defaults.go.
func TestEndpointSliceDefault(t *testing.T) {
	s := newSlice(discoveryv1.AddressTypeIPv4, nil, discoveryv1.EndpointPort{}, slicePort("p", 1, corev1.ProtocolUDP))
	endpointSliceDef().defaults(s)
	want := []discoveryv1.EndpointPort{{Name: ptrTo(""), Protocol: ptrTo(corev1.ProtocolTCP)}, slicePort("p", 1, corev1.ProtocolUDP)}
	if !reflect.DeepEqual(s.Ports, want) {
		t.Errorf("ports = %v, want %v", s.Ports, want)
	}
}

// The cases of TestPrintEndpointSlice in k8s.io/kubernetes
// pkg/printers/internalversion/printers_test.go, and ports without a
// number, which formatDiscoveryPorts prints by name or as "*".
func TestEndpointSliceTable(t *testing.T) {
	tcp := corev1.ProtocolTCP
	tests := []struct {
		name  string
		slice discoveryv1.EndpointSlice
		want  []any
	}{
		{name: "one port, two addresses", slice: discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Name: "abcslice.123", CreationTimestamp: metav1.NewTime(time.Now().Add(-2 * 365 * 24 * time.Hour))},
			AddressType: discoveryv1.AddressTypeIPv4, Ports: []discoveryv1.EndpointPort{slicePort("http", 80, tcp)},
			Endpoints: sliceEndpoints(1, "10.1.2.3", "2001:db8::1234:5678"),
		}, want: []any{"abcslice.123", "IPv4", "80", "10.1.2.3,2001:db8::1234:5678", "2y"}},
		{name: "more addresses", slice: discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Name: "longerslicename.123", CreationTimestamp: metav1.NewTime(time.Now().Add(-5 * time.Minute))},
			AddressType: discoveryv1.AddressTypeIPv6, Ports: []discoveryv1.EndpointPort{slicePort("http", 80, tcp), slicePort("https", 443, tcp)},
			Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.1.2.3", "2001:db8::1234:5678"}}, {Addresses: []string{"10.2.3.4", "2001:db8::2345:6789"}}},
		}, want: []any{"longerslicename.123", "IPv6", "80,443", "10.1.2.3,2001:db8::1234:5678,10.2.3.4 + 1 more...", "5m"}},
		{name: "more ports", slice: discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Name: "multiportslice.123", CreationTimestamp: metav1.NewTime(time.Now().Add(-5 * time.Minute))},
			AddressType: discoveryv1.AddressTypeIPv4,
			Ports:       []discoveryv1.EndpointPort{slicePort("http", 80, tcp), slicePort("https", 443, tcp), slicePort("extra1", 3000, tcp), slicePort("extra2", 3001, tcp)},
			Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.1.2.3", "2001:db8::1234:5678"}}, {Addresses: []string{"10.2.3.4", "2001:db8::2345:6789"}}},
		}, want: []any{"multiportslice.123", "IPv4", "80,443,3000 + 1 more...", "10.1.2.3,2001:db8::1234:5678,10.2.3.4 + 1 more...", "5m"}},
		{name: "ports without numbers, no endpoints", slice: discoveryv1.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{Name: "s"}, AddressType: discoveryv1.AddressTypeIPv4,
			Ports: []discoveryv1.EndpointPort{{Name: ptrTo("named")}, {}},
		}, want: []any{"s", "IPv4", "named,*", "<unset>", "<unknown>"}},
		{name: "nothing", slice: discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: "s"}, AddressType: discoveryv1.AddressTypeFQDN},
			want: []any{"s", "FQDN", "<unset>", "<unset>", "<unknown>"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tableRow(t, endpointSliceDef(), &tt.slice); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("row = %#v, want %#v", got, tt.want)
			}
		})
	}
}
