package registry

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The ValidateContainerResourceRequirements cases of
// TestValidateResourceRequirements in k8s.io/kubernetes
// pkg/apis/core/validation/validation_test.go, with the error each
// invalid one gets.
func TestValidateContainerResourceRequirements(t *testing.T) {
	q := resource.MustParse
	hugepages := corev1.ResourceName(corev1.ResourceHugePagesPrefix + "2Mi")
	tests := []struct {
		name string
		r    corev1.ResourceRequirements
		err  string // "" when valid
	}{
		{name: "limits and requests of hugepage resource are equal", r: corev1.ResourceRequirements{
			Limits:   corev1.ResourceList{corev1.ResourceCPU: q("10"), hugepages: q("2Mi")},
			Requests: corev1.ResourceList{corev1.ResourceCPU: q("10"), hugepages: q("2Mi")}}},
		{name: "container resource hugepage with cpu or memory", r: corev1.ResourceRequirements{
			Limits:   corev1.ResourceList{hugepages: q("2Mi"), corev1.ResourceCPU: q("10")},
			Requests: corev1.ResourceList{hugepages: q("2Mi")}}},
		{name: "container resource hugepage limit without request", r: corev1.ResourceRequirements{
			Limits: corev1.ResourceList{corev1.ResourceMemory: q("2Mi"), hugepages: q("2Mi")}}},
		{name: "limits and requests of memory resource are equal", r: corev1.ResourceRequirements{
			Limits: corev1.ResourceList{corev1.ResourceMemory: q("2Mi")}, Requests: corev1.ResourceList{corev1.ResourceMemory: q("2Mi")}}},
		{name: "limits and requests of cpu resource are equal", r: corev1.ResourceRequirements{
			Limits: corev1.ResourceList{corev1.ResourceCPU: q("10")}, Requests: corev1.ResourceList{corev1.ResourceCPU: q("10")}}},
		{name: "extended resource", r: corev1.ResourceRequirements{
			Limits: corev1.ResourceList{"example.com/a": q("2")}, Requests: corev1.ResourceList{"example.com/a": q("2")}}},

		{name: "container resource hugepage without cpu or memory", r: corev1.ResourceRequirements{
			Limits:   corev1.ResourceList{hugepages: q("2Mi")},
			Requests: corev1.ResourceList{hugepages: q("2Mi")}},
			err: "resources: Forbidden: HugePages require cpu or memory"},
		{name: "container resource hugepage without limit", r: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceMemory: q("2Mi"), hugepages: q("2Mi")}},
			err: "resources.limits: Required value: Limit must be set for non overcommitable resources"},
		{name: "hugepages not a multiple of the page size", r: corev1.ResourceRequirements{
			Limits: corev1.ResourceList{corev1.ResourceCPU: q("1"), hugepages: q("3Mi")}},
			err: "resources.limits[hugepages-2Mi]: Invalid value: \"3Mi\": 3Mi is not positive integer multiple of hugepages-2Mi"},
		{name: "unknown resource without a domain", r: corev1.ResourceRequirements{Limits: corev1.ResourceList{"invalid-name": q("2")}},
			err: "resources.limits[invalid-name]: Invalid value: \"invalid-name\": must be a standard resource for containers"},
		{name: "quota resource", r: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourcePods: q("2")}},
			err: "resources.limits[pods]: Invalid value: \"pods\": must be a standard resource for containers"},
		{name: "negative", r: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: q("-1")}},
			err: "resources.limits[cpu]: Invalid value: \"-1\": must be greater than or equal to 0"},
		{name: "fractional extended resource", r: corev1.ResourceRequirements{Limits: corev1.ResourceList{"example.com/a": q("2.5")}},
			err: "resources.limits[example.com/a]: Invalid value: \"2500m\": must be an integer"},
		{name: "request over limit", r: corev1.ResourceRequirements{
			Limits: corev1.ResourceList{corev1.ResourceCPU: q("1")}, Requests: corev1.ResourceList{corev1.ResourceCPU: q("2")}},
			err: "resources.requests: Invalid value: \"2\": must be less than or equal to cpu limit of 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errorsContain(t, validateContainerResourceRequirements(&tt.r, field.NewPath("resources")), tt.err)
		})
	}
}
