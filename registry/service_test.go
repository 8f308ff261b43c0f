package registry

import (
	"context"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/diff"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// makeService is a valid, defaulted service as upstream's
// makeValidService, changed by opts before defaulting.
func makeService(opts ...func(*corev1.Service)) *corev1.Service {
	s := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "valid", Namespace: "default", ResourceVersion: "1"},
		Spec: corev1.ServiceSpec{
			Selector:  map[string]string{"key": "val"},
			ClusterIP: "1.2.3.4",
			Ports:     []corev1.ServicePort{{Name: "p", Protocol: corev1.ProtocolTCP, Port: 8675, TargetPort: intstr.FromInt32(8675)}},
		},
	}
	for _, o := range opts {
		o(s)
	}
	defaultService(s)
	return s
}

// Service defaulting, the cases of the SetDefaults_Service tests in
// k8s.io/kubernetes pkg/apis/core/v1/defaults_test.go (type, session
// affinity and its config, ports and target ports, traffic policies,
// load balancer node ports and ingress IP mode).
func TestDefaultService(t *testing.T) {
	cluster := ptrTo(corev1.ServiceInternalTrafficPolicyCluster)
	tests := []struct {
		name string
		in   corev1.Service
		want corev1.Service
	}{
		{name: "empty",
			want: corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, SessionAffinity: corev1.ServiceAffinityNone, InternalTrafficPolicy: cluster}}},
		{name: "client IP affinity gets its timeout",
			in: corev1.Service{Spec: corev1.ServiceSpec{SessionAffinity: corev1.ServiceAffinityClientIP}},
			want: corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, SessionAffinity: corev1.ServiceAffinityClientIP, InternalTrafficPolicy: cluster,
				SessionAffinityConfig: &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptrTo(int32(10800))}}}}},
		{name: "client IP affinity timeout is kept",
			in: corev1.Service{Spec: corev1.ServiceSpec{SessionAffinity: corev1.ServiceAffinityClientIP,
				SessionAffinityConfig: &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptrTo(int32(60))}}}},
			want: corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, SessionAffinity: corev1.ServiceAffinityClientIP, InternalTrafficPolicy: cluster,
				SessionAffinityConfig: &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptrTo(int32(60))}}}}},
		{name: "ports: protocol and target port",
			in: corev1.Service{Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{
				{Port: 1234}, {Port: 1234, TargetPort: intstr.FromInt32(5678)}, {Port: 1234, TargetPort: intstr.FromString("p"), Protocol: corev1.ProtocolUDP},
			}}},
			want: corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, SessionAffinity: corev1.ServiceAffinityNone, InternalTrafficPolicy: cluster,
				Ports: []corev1.ServicePort{
					{Port: 1234, TargetPort: intstr.FromInt32(1234), Protocol: corev1.ProtocolTCP},
					{Port: 1234, TargetPort: intstr.FromInt32(5678), Protocol: corev1.ProtocolTCP},
					{Port: 1234, TargetPort: intstr.FromString("p"), Protocol: corev1.ProtocolUDP},
				}}}},
		{name: "node port",
			in: corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort}},
			want: corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, SessionAffinity: corev1.ServiceAffinityNone, InternalTrafficPolicy: cluster,
				ExternalTrafficPolicy: corev1.ServiceExternalTrafficPolicyCluster}}},
		{name: "load balancer: node ports, traffic policy and ingress IP mode",
			in: corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer},
				Status: corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{
					{IP: "1.2.3.4"}, {Hostname: "lb.example"}, {IP: "1.2.3.5", IPMode: ptrTo(corev1.LoadBalancerIPModeProxy)},
				}}}},
			want: corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, SessionAffinity: corev1.ServiceAffinityNone, InternalTrafficPolicy: cluster,
				ExternalTrafficPolicy: corev1.ServiceExternalTrafficPolicyCluster, AllocateLoadBalancerNodePorts: ptrTo(true)},
				Status: corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{
					{IP: "1.2.3.4", IPMode: ptrTo(corev1.LoadBalancerIPModeVIP)}, {Hostname: "lb.example"}, {IP: "1.2.3.5", IPMode: ptrTo(corev1.LoadBalancerIPModeProxy)},
				}}}}},
		{name: "external name has no internal traffic policy",
			in:   corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "example.com"}},
			want: corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "example.com", SessionAffinity: corev1.ServiceAffinityNone}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := tt.in.DeepCopy()
			defaultService(s)
			if !apiequality.Semantic.DeepEqual(*s, tt.want) {
				t.Errorf("defaulted service differs (-want +got):\n%s", diff.Diff(tt.want, *s))
			}
		})
	}
}

// The cases of TestValidateServiceCreate in k8s.io/kubernetes
// pkg/apis/core/validation/validation_test.go that kubestore's rules
// cover, on defaulted services as the API sees them. kubestore allocates
// no cluster IPs or node ports and does not check IP families, traffic
// policies or load balancer fields.
func TestServiceValidate(t *testing.T) {
	ports := func(ps ...corev1.ServicePort) func(*corev1.Service) {
		return func(s *corev1.Service) { s.Spec.Ports = ps }
	}
	port := func(name string, n int32) corev1.ServicePort {
		return corev1.ServicePort{Name: name, Protocol: corev1.ProtocolTCP, Port: n, TargetPort: intstr.FromInt32(n)}
	}
	nodePort := func(p corev1.ServicePort, n int32) corev1.ServicePort { p.NodePort = n; return p }
	typ := func(t corev1.ServiceType) func(*corev1.Service) { return func(s *corev1.Service) { s.Spec.Type = t } }
	clientIP := func(timeout *int32) func(*corev1.Service) {
		return func(s *corev1.Service) {
			s.Spec.SessionAffinity = corev1.ServiceAffinityClientIP
			s.Spec.SessionAffinityConfig = &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: timeout}}
		}
	}
	tests := []struct {
		name    string
		opts    []func(*corev1.Service)
		changed func(*corev1.Service) // applied after defaulting
		err     string                // "" when valid
	}{
		{name: "valid"},
		{name: "missing namespace", opts: []func(*corev1.Service){func(s *corev1.Service) { s.Namespace = "" }}, err: "metadata.namespace"},
		{name: "invalid namespace", opts: []func(*corev1.Service){func(s *corev1.Service) { s.Namespace = "-123" }}, err: "metadata.namespace"},
		{name: "missing name", opts: []func(*corev1.Service){func(s *corev1.Service) { s.Name = "" }}, err: "metadata.name"},
		{name: "invalid name", opts: []func(*corev1.Service){func(s *corev1.Service) { s.Name = "-123" }}, err: "metadata.name"},
		{name: "too long name", opts: []func(*corev1.Service){func(s *corev1.Service) { s.Name = strings.Repeat("a", 64) }}, err: "metadata.name"},
		{name: "name is a DNS label, not a subdomain", opts: []func(*corev1.Service){func(s *corev1.Service) { s.Name = "a.b" }}, err: "metadata.name"},
		{name: "name starting with a digit (RelaxedServiceNameValidation)", opts: []func(*corev1.Service){func(s *corev1.Service) { s.Name = "1svc" }}},
		{name: "nil selector", opts: []func(*corev1.Service){func(s *corev1.Service) { s.Spec.Selector = nil }}},
		{name: "invalid selector", opts: []func(*corev1.Service){func(s *corev1.Service) { s.Spec.Selector["NoSpecialCharsLike=Equals"] = "bar" }}, err: "spec.selector"},
		{name: "missing session affinity", changed: func(s *corev1.Service) { s.Spec.SessionAffinity = "" }, err: "spec.sessionAffinity: Required value"},
		{name: "invalid session affinity", changed: func(s *corev1.Service) { s.Spec.SessionAffinity = "Sticky" }, err: "spec.sessionAffinity: Unsupported value"},
		{name: "missing type", changed: func(s *corev1.Service) { s.Spec.Type = "" }, err: "spec.type"},
		{name: "missing ports", opts: []func(*corev1.Service){ports()}, err: "spec.ports: Required value"},
		{name: "missing ports but headless", opts: []func(*corev1.Service){ports(), func(s *corev1.Service) { s.Spec.ClusterIP = corev1.ClusterIPNone }}},
		{name: "empty port[0] name", opts: []func(*corev1.Service){ports(port("", 8675))}},
		{name: "empty port[1] name", opts: []func(*corev1.Service){ports(port("p", 8675), port("", 12345))}, err: "spec.ports[1].name: Required value"},
		{name: "empty multi-port port[0] name", opts: []func(*corev1.Service){ports(port("", 8675), port("p", 12345))}, err: "spec.ports[0].name: Required value"},
		{name: "invalid port name", opts: []func(*corev1.Service){ports(port("INVALID", 8675))}, err: "spec.ports[0].name: Invalid value"},
		{name: "invalid protocol", opts: []func(*corev1.Service){func(s *corev1.Service) { s.Spec.Ports[0].Protocol = "INVALID" }}, err: "spec.ports[0].protocol: Unsupported value"},
		{name: "invalid cluster ip", opts: []func(*corev1.Service){func(s *corev1.Service) { s.Spec.ClusterIP = "invalid" }}, err: "spec.clusterIP: Invalid value"},
		{name: "missing port", opts: []func(*corev1.Service){func(s *corev1.Service) { s.Spec.Ports[0].Port = 0 }}, err: "spec.ports[0].port: Invalid value"},
		{name: "invalid port", opts: []func(*corev1.Service){func(s *corev1.Service) { s.Spec.Ports[0].Port = 65536 }}, err: "spec.ports[0].port: Invalid value"},
		{name: "invalid target port number", opts: []func(*corev1.Service){func(s *corev1.Service) { s.Spec.Ports[0].TargetPort = intstr.FromInt32(65536) }},
			err: "spec.ports[0].targetPort: Invalid value"},
		{name: "invalid target port name", opts: []func(*corev1.Service){func(s *corev1.Service) { s.Spec.Ports[0].TargetPort = intstr.FromString("@!#$%^&*()") }},
			err: "spec.ports[0].targetPort: Invalid value"},
		{name: "valid port headless", opts: []func(*corev1.Service){func(s *corev1.Service) { s.Spec.ClusterIP = corev1.ClusterIPNone }}},
		{name: "dup port name", opts: []func(*corev1.Service){ports(port("p", 1), port("p", 2))}, err: "spec.ports[1].name: Duplicate value"},
		{name: "dup port", opts: []func(*corev1.Service){ports(port("p", 1), port("q", 1))}, err: "spec.ports[1]: Duplicate value"},
		{name: "same port, different protocols", opts: []func(*corev1.Service){ports(port("p", 53), func() corev1.ServicePort {
			p := port("q", 53)
			p.Protocol = corev1.ProtocolUDP
			return p
		}())}},
		{name: "nodePort on a ClusterIP service", opts: []func(*corev1.Service){ports(nodePort(port("p", 1), 30000))},
			err: "spec.ports[0].nodePort: Forbidden: may not be used when `type` is 'ClusterIP'"},
		{name: "valid NodePort", opts: []func(*corev1.Service){typ(corev1.ServiceTypeNodePort), ports(nodePort(port("p", 1), 30000))}},
		{name: "invalid NodePort", opts: []func(*corev1.Service){typ(corev1.ServiceTypeNodePort), ports(nodePort(port("p", 1), 65536))},
			err: "spec.ports[0].nodePort: Invalid value"},
		{name: "dup nodeports", opts: []func(*corev1.Service){typ(corev1.ServiceTypeNodePort), ports(nodePort(port("p", 1), 30000), nodePort(port("q", 2), 30000))},
			err: "spec.ports[1].nodePort: Duplicate value"},
		{name: "valid load balancer", opts: []func(*corev1.Service){typ(corev1.ServiceTypeLoadBalancer), ports(nodePort(port("p", 1), 30000))}},
		{name: "valid ExternalName", opts: []func(*corev1.Service){typ(corev1.ServiceTypeExternalName), ports(),
			func(s *corev1.Service) { s.Spec.ClusterIP, s.Spec.ExternalName = "", "foo.bar.example.com" }}},
		{name: "ExternalName with a trailing dot", opts: []func(*corev1.Service){typ(corev1.ServiceTypeExternalName),
			func(s *corev1.Service) { s.Spec.ClusterIP, s.Spec.ExternalName = "", "foo.bar.example.com." }}},
		{name: "missing ExternalName", opts: []func(*corev1.Service){typ(corev1.ServiceTypeExternalName), func(s *corev1.Service) { s.Spec.ClusterIP = "" }},
			err: "spec.externalName: Required value"},
		{name: "invalid ExternalName", opts: []func(*corev1.Service){typ(corev1.ServiceTypeExternalName),
			func(s *corev1.Service) { s.Spec.ClusterIP, s.Spec.ExternalName = "", "-123.invalid_name" }}, err: "spec.externalName: Invalid value"},
		{name: "ClientIP affinity", opts: []func(*corev1.Service){clientIP(ptrTo(int32(86400)))}},
		{name: "ClientIP affinity timeout 0", opts: []func(*corev1.Service){clientIP(ptrTo(int32(0)))},
			err: "spec.sessionAffinityConfig.clientIP.timeoutSeconds: Invalid value"},
		{name: "ClientIP affinity timeout over a day", opts: []func(*corev1.Service){clientIP(ptrTo(int32(86401)))},
			err: "spec.sessionAffinityConfig.clientIP.timeoutSeconds: Invalid value"},
		{name: "externalTrafficPolicy on a ClusterIP service", changed: func(s *corev1.Service) { s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal },
			err: "spec.externalTrafficPolicy: Invalid value: \"Local\": may only be set for externally-accessible services"},
		{name: "externalTrafficPolicy with externalIPs", changed: func(s *corev1.Service) {
			s.Spec.ExternalIPs, s.Spec.ExternalTrafficPolicy = []string{"1.2.3.4"}, corev1.ServiceExternalTrafficPolicyLocal
		}},
		{name: "invalid externalTrafficPolicy", opts: []func(*corev1.Service){typ(corev1.ServiceTypeNodePort)},
			changed: func(s *corev1.Service) { s.Spec.ExternalTrafficPolicy = "Nearby" }, err: "spec.externalTrafficPolicy: Unsupported value"},
		{name: "invalid internalTrafficPolicy", changed: func(s *corev1.Service) {
			s.Spec.InternalTrafficPolicy = ptrTo(corev1.ServiceInternalTrafficPolicy("Nearby"))
		},
			err: "spec.internalTrafficPolicy: Unsupported value"},
		{name: "invalid ipFamilyPolicy", changed: func(s *corev1.Service) { s.Spec.IPFamilyPolicy = ptrTo(corev1.IPFamilyPolicy("Maybe")) },
			err: "spec.ipFamilyPolicy: Unsupported value"},
		{name: "invalid externalIP", changed: func(s *corev1.Service) { s.Spec.ExternalIPs = []string{"not-an-ip"} }, err: "spec.externalIPs[0]: Invalid value"},
		{name: "loopback externalIP", changed: func(s *corev1.Service) { s.Spec.ExternalIPs = []string{"127.0.0.1"} },
			err: "spec.externalIPs[0]: Invalid value: \"127.0.0.1\": may not be in the loopback range"},
		{name: "loadBalancerSourceRanges", opts: []func(*corev1.Service){typ(corev1.ServiceTypeLoadBalancer)},
			changed: func(s *corev1.Service) { s.Spec.LoadBalancerSourceRanges = []string{" 10.0.0.0/8 ", "fd00::/64"} }},
		{name: "invalid loadBalancerSourceRanges", opts: []func(*corev1.Service){typ(corev1.ServiceTypeLoadBalancer)},
			changed: func(s *corev1.Service) { s.Spec.LoadBalancerSourceRanges = []string{"10.0.0.0/33"} }, err: "spec.LoadBalancerSourceRanges[0]: Invalid value"},
		{name: "loadBalancerSourceRanges on a ClusterIP service", changed: func(s *corev1.Service) { s.Spec.LoadBalancerSourceRanges = []string{"10.0.0.0/8"} },
			err: "spec.LoadBalancerSourceRanges: Forbidden: may only be used when `type` is 'LoadBalancer'"},
		{name: "affinity config without ClientIP affinity", changed: func(s *corev1.Service) {
			s.Spec.SessionAffinityConfig = &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptrTo(int32(10))}}
		}, err: "spec.sessionAffinityConfig: Forbidden"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := makeService(tt.opts...)
			if tt.changed != nil {
				tt.changed(s)
			}
			errorsContain(t, validateCreate(t, serviceDef(), s), tt.err)
		})
	}
}

// ValidateServiceUpdate: a set cluster IP does not change, except for or
// to an ExternalName service.
func TestServiceValidateUpdate(t *testing.T) {
	clusterIP := func(ip string) func(*corev1.Service) { return func(s *corev1.Service) { s.Spec.ClusterIP = ip } }
	tests := []struct {
		name     string
		old, new *corev1.Service
		err      string
	}{
		{name: "no change", old: makeService(), new: makeService()},
		{name: "change selector", old: makeService(), new: makeService(func(s *corev1.Service) { s.Spec.Selector = map[string]string{"a": "b"} })},
		{name: "change cluster IP", old: makeService(), new: makeService(clusterIP("1.2.3.5")), err: "spec.clusterIP: Invalid value"},
		{name: "remove cluster IP", old: makeService(), new: makeService(clusterIP("")), err: "spec.clusterIP: Invalid value"},
		{name: "set cluster IP", old: makeService(clusterIP("")), new: makeService()},
		{name: "to ExternalName", old: makeService(), new: makeService(clusterIP(""), func(s *corev1.Service) {
			s.Spec.Type, s.Spec.ExternalName = corev1.ServiceTypeExternalName, "example.com"
		})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errorsContain(t, validateUpdate(t, serviceDef(), tt.new, tt.old), tt.err)
		})
	}
}

// The cases of TestPrintService in k8s.io/kubernetes
// pkg/printers/internalversion/printers_test.go, with the wide selector
// column the server always sends.
func TestServiceTable(t *testing.T) {
	service := func(name string, typ corev1.ServiceType, ports []corev1.ServicePort, opts ...func(*corev1.Service)) *corev1.Service {
		s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.ServiceSpec{Type: typ, Ports: ports, ClusterIPs: []string{"10.9.8.7"}}}
		for _, o := range opts {
			o(s)
		}
		return s
	}
	tcp := func(port, nodePort int32) []corev1.ServicePort {
		return []corev1.ServicePort{{Protocol: "tcp", Port: port, NodePort: nodePort}}
	}
	externalIPs := func(ips ...string) func(*corev1.Service) { return func(s *corev1.Service) { s.Spec.ExternalIPs = ips } }
	ingress := func(in ...corev1.LoadBalancerIngress) func(*corev1.Service) {
		return func(s *corev1.Service) { s.Status.LoadBalancer.Ingress = in }
	}
	tests := []struct {
		name    string
		service *corev1.Service
		want    []any
	}{
		{"cluster IP with selector", service("test1", corev1.ServiceTypeClusterIP, tcp(2233, 0), func(s *corev1.Service) { s.Spec.Selector = map[string]string{"foo": "bar"} }),
			[]any{"test1", "ClusterIP", "10.9.8.7", "<none>", "2233/tcp", "<unknown>", "foo=bar"}},
		{"node port", service("test2", corev1.ServiceTypeNodePort, tcp(8888, 9999)),
			[]any{"test2", "NodePort", "10.9.8.7", "<none>", "8888:9999/tcp", "<unknown>", "<none>"}},
		{"load balancer pending", service("test3", corev1.ServiceTypeLoadBalancer, tcp(8888, 0)),
			[]any{"test3", "LoadBalancer", "10.9.8.7", "<pending>", "8888/tcp", "<unknown>", "<none>"}},
		{"load balancer with an external IP only", service("test4", corev1.ServiceTypeLoadBalancer, tcp(8888, 0), externalIPs("80.11.12.10")),
			[]any{"test4", "LoadBalancer", "10.9.8.7", "80.11.12.10", "8888/tcp", "<unknown>", "<none>"}},
		{"load balancer with ingress and an external IP", service("test5", corev1.ServiceTypeLoadBalancer, tcp(8888, 0), externalIPs("80.11.12.10"),
			ingress(corev1.LoadBalancerIngress{IP: "3.4.5.6", Hostname: "test.cluster.com"})),
			[]any{"test5", "LoadBalancer", "10.9.8.7", "3.4.5.6,80.11.12.10", "8888/tcp", "<unknown>", "<none>"}},
		{"load balancer with several", service("test6", corev1.ServiceTypeLoadBalancer, tcp(8888, 0), externalIPs("80.11.12.10", "80.11.12.11"),
			ingress(corev1.LoadBalancerIngress{IP: "5.6.7.8", Hostname: "test2.cluster.com"}, corev1.LoadBalancerIngress{IP: "3.4.5.6", Hostname: "test.cluster.com"},
				corev1.LoadBalancerIngress{IP: "3.4.5.6"})),
			[]any{"test6", "LoadBalancer", "10.9.8.7", "3.4.5.6,5.6.7.8,80.11.12.10,80.11.12.11", "8888/tcp", "<unknown>", "<none>"}},
		{"external name", service("test7", corev1.ServiceTypeExternalName, nil, func(s *corev1.Service) {
			s.Spec.ClusterIPs, s.Spec.ExternalName = nil, "my.database.example.com"
		}), []any{"test7", "ExternalName", "<none>", "my.database.example.com", "<none>", "<unknown>", "<none>"}},
		// Not upstream's: a v1 client that sets only clusterIP.
		{"clusterIP without clusterIPs", service("test8", corev1.ServiceTypeClusterIP, tcp(80, 0), func(s *corev1.Service) {
			s.Spec.ClusterIPs, s.Spec.ClusterIP = nil, corev1.ClusterIPNone
		}), []any{"test8", "ClusterIP", "None", "<none>", "80/tcp", "<unknown>", "<none>"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tableRow(t, serviceDef(), tt.service); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("row = %#v, want %#v", got, tt.want)
			}
		})
	}
}

// Services are selectable by spec.clusterIP and spec.type, as upstream's
// service strategy allows.
func TestServiceFields(t *testing.T) {
	_, got, err := serviceDef().getAttrs(makeService())
	if err != nil {
		t.Fatal(err)
	}
	want := fields.Set{"metadata.name": "valid", "metadata.namespace": "default", "spec.clusterIP": "1.2.3.4", "spec.type": "ClusterIP"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("fields = %v, want %v", got, want)
	}
}

// dropTypeDependentFields: a NodePort service turned ClusterIP loses the
// externalTrafficPolicy it did not change, and then validates.
func TestServiceDropExternalTrafficPolicy(t *testing.T) {
	old := makeService(func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeNodePort })
	s := old.DeepCopy()
	s.Spec.Type = corev1.ServiceTypeClusterIP
	newStrategy(nil, serviceDef()).PrepareForUpdate(context.Background(), s, old)
	if s.Spec.ExternalTrafficPolicy != "" {
		t.Errorf("externalTrafficPolicy = %q, want it dropped", s.Spec.ExternalTrafficPolicy)
	}
	errorsContain(t, validateUpdate(t, serviceDef(), s, old), "")
}
