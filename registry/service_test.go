package registry

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/diff"
	"k8s.io/apimachinery/pkg/util/intstr"
)

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
