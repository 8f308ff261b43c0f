package registry

import (
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The cases of TestValidateEndpointsCreate in k8s.io/kubernetes
// pkg/apis/core/validation/validation_test.go.
func TestEndpointsValidate(t *testing.T) {
	endpoints := func(subsets ...corev1.EndpointSubset) *corev1.Endpoints {
		return &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: "mysvc", Namespace: "namespace"}, Subsets: subsets}
	}
	addrs := func(ips ...string) []corev1.EndpointAddress {
		var a []corev1.EndpointAddress
		for _, ip := range ips {
			a = append(a, corev1.EndpointAddress{IP: ip})
		}
		return a
	}
	port := func(name string, n int32) corev1.EndpointPort {
		return corev1.EndpointPort{Name: name, Port: n, Protocol: corev1.ProtocolTCP}
	}
	tests := []struct {
		name      string
		endpoints *corev1.Endpoints
		err       string // "" when valid
	}{
		{name: "simple endpoint", endpoints: endpoints(
			corev1.EndpointSubset{Addresses: addrs("10.10.1.1", "10.10.2.2"), Ports: []corev1.EndpointPort{port("a", 8675), port("b", 309)}},
			corev1.EndpointSubset{Addresses: addrs("10.10.3.3"), Ports: []corev1.EndpointPort{port("a", 93), port("b", 76)}})},
		{name: "empty subsets", endpoints: endpoints()},
		{name: "no name required for singleton port", endpoints: endpoints(corev1.EndpointSubset{Addresses: addrs("10.10.1.1"), Ports: []corev1.EndpointPort{port("", 8675)}})},
		{name: "valid appProtocol", endpoints: endpoints(corev1.EndpointSubset{Addresses: addrs("10.10.1.1"),
			Ports: []corev1.EndpointPort{{Port: 8675, Protocol: corev1.ProtocolTCP, AppProtocol: ptrTo("HTTP")}}})},
		{name: "empty ports", endpoints: endpoints(corev1.EndpointSubset{Addresses: addrs("10.10.3.3")})},
		{name: "not ready addresses only", endpoints: endpoints(corev1.EndpointSubset{NotReadyAddresses: addrs("10.10.3.3")})},

		{name: "missing namespace", endpoints: &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: "mysvc"}}, err: "metadata.namespace"},
		{name: "missing name", endpoints: &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Namespace: "namespace"}}, err: "metadata.name"},
		{name: "invalid namespace", endpoints: &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: "mysvc", Namespace: "no@#invalid.;chars\"allowed"}}, err: "metadata.namespace"},
		{name: "invalid name", endpoints: &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: "-_Invliad^&Characters", Namespace: "namespace"}}, err: "metadata.name"},
		{name: "empty addresses", endpoints: endpoints(corev1.EndpointSubset{Ports: []corev1.EndpointPort{port("a", 93)}}), err: "subsets[0]: Required value"},
		{name: "invalid IP", endpoints: endpoints(corev1.EndpointSubset{Addresses: addrs("[2001:0db8:85a3:0042:1000:8a2e:0370:7334]"), Ports: []corev1.EndpointPort{port("a", 93)}}),
			err: "subsets[0].addresses[0].ip: Invalid value"},
		{name: "multiple ports, one without name", endpoints: endpoints(corev1.EndpointSubset{Addresses: addrs("10.10.1.1"), Ports: []corev1.EndpointPort{port("", 8675), port("b", 309)}}),
			err: "subsets[0].ports[0].name: Required value"},
		{name: "invalid port number", endpoints: endpoints(corev1.EndpointSubset{Addresses: addrs("10.10.1.1"), Ports: []corev1.EndpointPort{port("a", 66000)}}),
			err: "subsets[0].ports[0].port: Invalid value"},
		{name: "invalid protocol", endpoints: endpoints(corev1.EndpointSubset{Addresses: addrs("10.10.1.1"), Ports: []corev1.EndpointPort{{Name: "a", Port: 93, Protocol: "Protocol"}}}),
			err: "subsets[0].ports[0].protocol: Unsupported value"},
		{name: "address missing IP", endpoints: endpoints(corev1.EndpointSubset{Addresses: []corev1.EndpointAddress{{}}, Ports: []corev1.EndpointPort{port("a", 93)}}),
			err: "subsets[0].addresses[0].ip: Invalid value"},
		{name: "port missing number", endpoints: endpoints(corev1.EndpointSubset{Addresses: addrs("10.10.1.1"), Ports: []corev1.EndpointPort{port("a", 0)}}),
			err: "subsets[0].ports[0].port: Invalid value"},
		{name: "port missing protocol", endpoints: endpoints(corev1.EndpointSubset{Addresses: addrs("10.10.1.1"), Ports: []corev1.EndpointPort{{Name: "a", Port: 93}}}),
			err: "subsets[0].ports[0].protocol: Required value"},
		{name: "address is loopback", endpoints: endpoints(corev1.EndpointSubset{Addresses: addrs("127.0.0.1"), Ports: []corev1.EndpointPort{port("p", 93)}}),
			err: "subsets[0].addresses[0].ip: Invalid value"},
		{name: "address is link-local", endpoints: endpoints(corev1.EndpointSubset{Addresses: addrs("169.254.169.254"), Ports: []corev1.EndpointPort{port("p", 93)}}),
			err: "subsets[0].addresses[0].ip: Invalid value"},
		{name: "address is link-local multicast", endpoints: endpoints(corev1.EndpointSubset{Addresses: addrs("224.0.0.1"), Ports: []corev1.EndpointPort{port("p", 93)}}),
			err: "subsets[0].addresses[0].ip: Invalid value"},
		{name: "invalid appProtocol", endpoints: endpoints(corev1.EndpointSubset{Addresses: addrs("10.10.1.1"),
			Ports: []corev1.EndpointPort{{Name: "p", Port: 93, Protocol: corev1.ProtocolTCP, AppProtocol: ptrTo("lots-of[invalid]-{chars}")}}}),
			err: "subsets[0].ports[0].appProtocol: Invalid value"},
		{name: "invalid hostname", endpoints: endpoints(corev1.EndpointSubset{Addresses: []corev1.EndpointAddress{{IP: "10.10.1.1", Hostname: "Bad_Host"}}}),
			err: "subsets[0].addresses[0].hostname: Invalid value"},
		{name: "invalid node name", endpoints: endpoints(corev1.EndpointSubset{NotReadyAddresses: []corev1.EndpointAddress{{IP: "10.10.1.1", NodeName: ptrTo("Node_1")}}}),
			err: "subsets[0].notReadyAddresses[0].nodeName: Invalid value"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errorsContain(t, validateCreate(t, endpointsDef(), tt.endpoints), tt.err)
		})
	}
}

// Ports default to TCP (SetDefaults_EndpointPort).
func TestEndpointsDefault(t *testing.T) {
	e := &corev1.Endpoints{Subsets: []corev1.EndpointSubset{{Ports: []corev1.EndpointPort{{Port: 1}, {Port: 2, Protocol: corev1.ProtocolUDP}}}}}
	endpointsDef().defaults(e)
	if got := []corev1.Protocol{e.Subsets[0].Ports[0].Protocol, e.Subsets[0].Ports[1].Protocol}; !reflect.DeepEqual(got, []corev1.Protocol{"TCP", "UDP"}) {
		t.Errorf("protocols = %v, want [TCP UDP]", got)
	}
}

// The cases of TestPrintEndpoint in k8s.io/kubernetes
// pkg/printers/internalversion/printers_test.go, and of formatEndpoints'
// order: port by port.
func TestEndpointsTable(t *testing.T) {
	created := metav1.NewTime(time.Now().Add(-2 * 365 * 24 * time.Hour))
	addrs := func(ips ...string) []corev1.EndpointAddress {
		var a []corev1.EndpointAddress
		for _, ip := range ips {
			a = append(a, corev1.EndpointAddress{IP: ip})
		}
		return a
	}
	ports := func(ns ...int32) []corev1.EndpointPort {
		var p []corev1.EndpointPort
		for _, n := range ns {
			p = append(p, corev1.EndpointPort{Port: n, Protocol: corev1.ProtocolTCP})
		}
		return p
	}
	tests := []struct {
		name    string
		subsets []corev1.EndpointSubset
		want    string
	}{
		{"no IPs", nil, "<none>"},
		{"no ports", []corev1.EndpointSubset{{Addresses: addrs("1.2.3.4", "5.6.7.8")}}, "1.2.3.4,5.6.7.8"},
		{"two IPs and a port", []corev1.EndpointSubset{{Addresses: addrs("1.2.3.4", "5.6.7.8"), Ports: ports(8001)}}, "1.2.3.4:8001,5.6.7.8:8001"},
		{"more than three", []corev1.EndpointSubset{{Addresses: addrs("1.2.3.4", "5.6.7.8", "9.8.7.6", "6.6.6.6"), Ports: ports(8001)}},
			"1.2.3.4:8001,5.6.7.8:8001,9.8.7.6:8001 + 1 more..."},
		{"port by port", []corev1.EndpointSubset{{Addresses: addrs("1.2.3.4", "5.6.7.8"), Ports: ports(80, 443)}},
			"1.2.3.4:80,5.6.7.8:80,1.2.3.4:443 + 1 more..."},
		{"subset without addresses", []corev1.EndpointSubset{{Ports: ports(80)}}, ""},
		{"IPv6", []corev1.EndpointSubset{{Addresses: addrs("2001:db8::1"), Ports: ports(80)}}, "[2001:db8::1]:80"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: "endpoint1", CreationTimestamp: created}, Subsets: tt.subsets}
			if got, want := tableRow(t, endpointsDef(), e), []any{"endpoint1", tt.want, "2y"}; !reflect.DeepEqual(got, want) {
				t.Errorf("row = %#v, want %#v", got, want)
			}
		})
	}
}
