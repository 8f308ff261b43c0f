/*
Copyright 2021 The Kubernetes Authors.

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

// Ported from k8s.io/component-helpers storage/ephemeral/ephemeral.go@v0.37.2
// (the version k8s.io/kubernetes v1.37.2 uses).
// Changed: only VolumeClaimName is ported, unexported as
// EphemeralVolumeClaimName; kubestore's go.mod does not require
// k8s.io/component-helpers.

package node

import (
	corev1 "k8s.io/api/core/v1"
)

// EphemeralVolumeClaimName returns the name of the PersistentVolumeClaim
// object that gets created for the generic ephemeral inline volume. The
// name is deterministic and therefore this function does not need any
// additional information besides the Pod name and volume name and it
// will never fail.
//
// Before using the PVC for the Pod, the caller must check that it is
// indeed the PVC that was created for the Pod by calling IsUsable.
func EphemeralVolumeClaimName(pod *corev1.Pod, volume *corev1.Volume) string {
	return pod.Name + "-" + volume.Name
}
