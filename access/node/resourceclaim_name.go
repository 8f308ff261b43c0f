/*
Copyright 2022 The Kubernetes Authors.

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

// Ported from k8s.io/dynamic-resource-allocation resourceclaim/resourceclaim.go@v0.37.2
// (the version k8s.io/kubernetes v1.37.2 uses).
// Changed: only Name and the two errors it returns are ported, unexported as
// resourceClaimName, errClaimNotFound and errAPIUnsupported; kubestore's go.mod does
// not require k8s.io/dynamic-resource-allocation.

package node

import (
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
)

var (
	// errAPIUnsupported is wrapped by the actual errors returned by resourceClaimName and
	// indicates that none of the required fields are set.
	errAPIUnsupported = errors.New("none of the supported fields are set")

	// errClaimNotFound is wrapped by the actual errors returned by resourceClaimName and
	// indicates that the claim has not been created yet.
	errClaimNotFound = errors.New("ResourceClaim not created yet")
)

// resourceClaimName returns the name of the ResourceClaim object that gets
// referenced by or created for the PodResourceClaim. Three different
// results are possible:
//
//   - An error is returned when some field is not set as expected (either the
//     input is invalid or the API got extended and the library and the client
//     using it need to be updated) or the claim hasn't been created yet.
//
//     The error includes pod and pod claim name and the unexpected field and
//     is derived from one of the pre-defined errors in this package.
//
//   - A nil string pointer and no error when the ResourceClaim intentionally
//     didn't get created and the PodResourceClaim can be ignored.
//
//   - A pointer to the name and no error when the ResourceClaim got created.
//     In this case the boolean determines whether IsForPod must be called
//     after retrieving the ResourceClaim and before using it.
//
// Determining the name depends on Kubernetes >= 1.28.
func resourceClaimName(pod *corev1.Pod, podClaim *corev1.PodResourceClaim) (name *string, mustCheckOwner bool, err error) {
	switch {
	case podClaim.ResourceClaimName != nil:
		return podClaim.ResourceClaimName, false, nil
	case podClaim.ResourceClaimTemplateName != nil:
		for _, status := range pod.Status.ResourceClaimStatuses {
			if status.Name == podClaim.Name {
				return status.ResourceClaimName, true, nil
			}
		}
		return nil, false, fmt.Errorf(`pod "%s/%s": %w`, pod.Namespace, pod.Name, errClaimNotFound)
	default:
		return nil, false, fmt.Errorf(`pod "%s/%s", spec.resourceClaim %q: %w`, pod.Namespace, pod.Name, podClaim.Name, errAPIUnsupported)
	}
}
