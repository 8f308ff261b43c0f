package registry

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
)

// SetDefaults_NodeStatus in k8s.io/kubernetes pkg/apis/core/v1/defaults.go
// (TestSetDefaultNodeStatusAllocatable): allocatable defaults to capacity.
func TestDefaultNode(t *testing.T) {
	capacity := resources("1", "1Gi")
	tests := []struct {
		name                string
		capacity, allocated corev1.ResourceList
		want                corev1.ResourceList
	}{
		{name: "nothing reported"},
		{name: "capacity only", capacity: capacity, want: capacity},
		{name: "allocatable kept", capacity: capacity, allocated: resources("500m", ""), want: resources("500m", "")},
		{name: "empty allocatable kept", capacity: capacity, allocated: corev1.ResourceList{}, want: corev1.ResourceList{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := &corev1.Node{Status: corev1.NodeStatus{Capacity: tt.capacity, Allocatable: tt.allocated}}
			defaultNode(n)
			if !apiequality.Semantic.DeepEqual(n.Status.Allocatable, tt.want) {
				t.Errorf("allocatable = %v, want %v", n.Status.Allocatable, tt.want)
			}
		})
	}
}
