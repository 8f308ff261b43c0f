/*
Copyright 2024 The Kubernetes Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

// Ported from k8s.io/dynamic-resource-allocation resourceclaim/pod_test.go@v0.37.2.
// Changed: calls podStatusEqual, podExtendedStatusEqual and podClaims;
// testify's assertions are replaced by plain comparisons.

package node

import (
	"fmt"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

func TestPodStatusEqual(t *testing.T) {
	a := corev1.PodResourceClaimStatus{
		Name:              "a",
		ResourceClaimName: ptr.To("x"),
	}
	ay := corev1.PodResourceClaimStatus{
		Name:              "a",
		ResourceClaimName: ptr.To("y"),
	}
	b := corev1.PodResourceClaimStatus{
		Name:              "b",
		ResourceClaimName: ptr.To("y"),
	}
	empty := corev1.PodResourceClaimStatus{}

	testcases := map[string]struct {
		sliceA, sliceB []corev1.PodResourceClaimStatus
		expectEqual    bool
	}{
		"identical": {
			sliceA:      []corev1.PodResourceClaimStatus{a, b, empty},
			sliceB:      []corev1.PodResourceClaimStatus{a, b, empty},
			expectEqual: true,
		},
		"different-order": {
			sliceA:      []corev1.PodResourceClaimStatus{a, b, empty},
			sliceB:      []corev1.PodResourceClaimStatus{empty, a, b},
			expectEqual: false,
		},
		"different-length": {
			sliceA:      []corev1.PodResourceClaimStatus{a, b, empty},
			sliceB:      []corev1.PodResourceClaimStatus{a, b},
			expectEqual: false,
		},
		"different-resource-claim-name": {
			sliceA:      []corev1.PodResourceClaimStatus{a},
			sliceB:      []corev1.PodResourceClaimStatus{ay},
			expectEqual: false,
		},
		"semantically-equal-empty": {
			sliceA:      []corev1.PodResourceClaimStatus{},
			sliceB:      nil,
			expectEqual: true,
		},
		"semantically-equivalent": {
			sliceA:      []corev1.PodResourceClaimStatus{{Name: "a", ResourceClaimName: ptr.To("x")}},
			sliceB:      []corev1.PodResourceClaimStatus{{Name: "a", ResourceClaimName: ptr.To("x")}},
			expectEqual: true,
		},
	}

	for name, tc := range testcases {
		t.Run(name, func(t *testing.T) {
			if !podStatusEqual(tc.sliceA, tc.sliceA) {
				t.Error(fmt.Sprintf("%v", tc.sliceA))
			}
			if !podStatusEqual(tc.sliceB, tc.sliceB) {
				t.Error(fmt.Sprintf("%v", tc.sliceB))
			}
			if got := podStatusEqual(tc.sliceA, tc.sliceB); got != tc.expectEqual {
				t.Errorf("%v and %v: expected %v, got %v", tc.sliceA, tc.sliceB, tc.expectEqual, got)
			}
		})

	}
}

func TestPodExtendedStatusEqual(t *testing.T) {
	ra := corev1.ContainerExtendedResourceRequest{
		ContainerName: "a",
		ResourceName:  "example.com/a",
		RequestName:   "ra",
	}
	rb := corev1.ContainerExtendedResourceRequest{
		ContainerName: "b",
		ResourceName:  "example.com/b",
		RequestName:   "rb",
	}

	testcases := map[string]struct {
		statusA, statusB *corev1.PodExtendedResourceClaimStatus
		expectEqual      bool
	}{
		"identical": {
			statusA: &corev1.PodExtendedResourceClaimStatus{
				RequestMappings:   []corev1.ContainerExtendedResourceRequest{ra, rb},
				ResourceClaimName: "x",
			},
			statusB: &corev1.PodExtendedResourceClaimStatus{
				RequestMappings:   []corev1.ContainerExtendedResourceRequest{ra, rb},
				ResourceClaimName: "x",
			},
			expectEqual: true,
		},
		"different-order": {
			statusA: &corev1.PodExtendedResourceClaimStatus{
				RequestMappings:   []corev1.ContainerExtendedResourceRequest{ra, rb},
				ResourceClaimName: "x",
			},
			statusB: &corev1.PodExtendedResourceClaimStatus{
				RequestMappings:   []corev1.ContainerExtendedResourceRequest{rb, ra},
				ResourceClaimName: "x",
			},
			expectEqual: false,
		},
		"different-length": {
			statusA: &corev1.PodExtendedResourceClaimStatus{
				RequestMappings:   []corev1.ContainerExtendedResourceRequest{ra, rb},
				ResourceClaimName: "x",
			},
			statusB: &corev1.PodExtendedResourceClaimStatus{
				RequestMappings:   []corev1.ContainerExtendedResourceRequest{ra},
				ResourceClaimName: "x",
			},
			expectEqual: false,
		},

		"semantically-equal-empty": {
			statusA: &corev1.PodExtendedResourceClaimStatus{
				RequestMappings:   []corev1.ContainerExtendedResourceRequest{},
				ResourceClaimName: "x",
			},
			statusB: &corev1.PodExtendedResourceClaimStatus{
				RequestMappings:   nil,
				ResourceClaimName: "x",
			},
			expectEqual: true,
		},
		"different-claim-name": {
			statusA: &corev1.PodExtendedResourceClaimStatus{
				RequestMappings:   []corev1.ContainerExtendedResourceRequest{ra, rb},
				ResourceClaimName: "x",
			},
			statusB: &corev1.PodExtendedResourceClaimStatus{
				RequestMappings:   []corev1.ContainerExtendedResourceRequest{ra, rb},
				ResourceClaimName: "y",
			},
			expectEqual: false,
		},
		"both-nil": {
			statusA:     nil,
			statusB:     nil,
			expectEqual: true,
		},
		"one-nil-other-not-nil": {
			statusA: nil,
			statusB: &corev1.PodExtendedResourceClaimStatus{
				RequestMappings:   []corev1.ContainerExtendedResourceRequest{ra, rb},
				ResourceClaimName: "y",
			},
			expectEqual: false,
		},
		"one-not-nil-other-nil": {
			statusA: &corev1.PodExtendedResourceClaimStatus{
				RequestMappings:   []corev1.ContainerExtendedResourceRequest{ra, rb},
				ResourceClaimName: "x",
			},
			statusB:     nil,
			expectEqual: false,
		},
	}

	for name, tc := range testcases {
		t.Run(name, func(t *testing.T) {
			if !podExtendedStatusEqual(tc.statusA, tc.statusA) {
				t.Error("status", tc.statusA)
			}
			if !podExtendedStatusEqual(tc.statusB, tc.statusB) {
				t.Error("status", tc.statusB)
			}
			if got := podExtendedStatusEqual(tc.statusA, tc.statusB); got != tc.expectEqual {
				t.Errorf("status %v and %v: expected %v, got %v", tc.statusA, tc.statusB, tc.expectEqual, got)
			}
		})
	}
}

func TestPodClaims(t *testing.T) {
	type claimEntry struct {
		name           string
		mustCheckOwner bool
	}

	collect := func(pod *corev1.Pod) []claimEntry {
		var res []claimEntry
		for name, mustCheckOwner := range podClaims(pod) {
			res = append(res, claimEntry{name: name, mustCheckOwner: mustCheckOwner})
		}
		return res
	}

	if got := collect(nil); len(got) != 0 {
		t.Errorf("nil pod: expected no claims, got %v", got)
	}
	if got := collect(&corev1.Pod{}); len(got) != 0 {
		t.Errorf("empty pod: expected no claims, got %v", got)
	}

	pod := &corev1.Pod{
		Spec: corev1.PodSpec{
			ResourceClaims: []corev1.PodResourceClaim{
				{Name: "direct", ResourceClaimName: new("claim-direct")},
				{Name: "template-created", ResourceClaimTemplateName: new("tpl-1")},
				{Name: "template-uncreated", ResourceClaimTemplateName: new("tpl-2")},
				{Name: "template-skipped", ResourceClaimTemplateName: new("tpl-3")},
				{Name: "unsupported"},
			},
		},
		Status: corev1.PodStatus{
			ResourceClaimStatuses: []corev1.PodResourceClaimStatus{
				{Name: "template-created", ResourceClaimName: new("claim-from-tpl")},
				{Name: "template-skipped", ResourceClaimName: nil},
			},
			ExtendedResourceClaimStatus: &corev1.PodExtendedResourceClaimStatus{
				ResourceClaimName: "pod-extended-resources-abc",
			},
		},
	}

	expected := []claimEntry{
		{name: "claim-direct", mustCheckOwner: false},
		{name: "claim-from-tpl", mustCheckOwner: true},
		{name: "pod-extended-resources-abc", mustCheckOwner: true},
	}
	if got := collect(pod); !reflect.DeepEqual(expected, got) {
		t.Errorf("expected %v, got %v", expected, got)
	}

	// Verify early break from iterator works properly.
	var firstOnly []claimEntry
	for name, mustCheckOwner := range podClaims(pod) {
		firstOnly = append(firstOnly, claimEntry{name: name, mustCheckOwner: mustCheckOwner})
		break
	}
	if !reflect.DeepEqual(expected[:1], firstOnly) {
		t.Errorf("expected %v, got %v", expected[:1], firstOnly)
	}
}
