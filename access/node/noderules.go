/*
Copyright 2016 The Kubernetes Authors.

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

// Ported from k8s.io/kubernetes plugin/pkg/auth/authorizer/rbac/bootstrappolicy/policy.go@v1.37.2.
// Changed: only NodeRules and the constants it uses are ported; the feature
// gates it consults are fixed to their v1.37 defaults (see doc.go):
// the CSIVolumeHealth rule (csinodes/status) is left out, the
// DynamicResourceAllocation, ClusterTrustBundle,
// KubeletServiceAccountTokenForCredentialProviders and PodCertificateRequest
// rules are always included. The rules are otherwise unchanged and in the
// same order.

package node

import (
	rbacv1 "k8s.io/api/rbac/v1"
)

// read is bootstrappolicy's Read, the verbs of read access.
var read = []string{"get", "list", "watch"}

const (
	legacyGroup         = ""
	authenticationGroup = "authentication.k8s.io"
	authorizationGroup  = "authorization.k8s.io"
	certificatesGroup   = "certificates.k8s.io"
	resourceGroup       = "resource.k8s.io"
	storageGroup        = "storage.k8s.io"
	eventsGroup         = "events.k8s.io"
)

// NodeRules returns the static rules every node is allowed by, upstream's
// bootstrappolicy.NodeRules at Kubernetes v1.37 with the default feature
// gates. The node authorizer falls back on them for the resources it does
// not subdivide by the graph. Each call returns a new slice.
func NodeRules() []rbacv1.PolicyRule {
	nodePolicyRules := []rbacv1.PolicyRule{
		// Needed to check API access.  These creates are non-mutating
		newRule("create").Groups(authenticationGroup).Resources("tokenreviews").RuleOrDie(),
		newRule("create").Groups(authorizationGroup).Resources("subjectaccessreviews", "localsubjectaccessreviews").RuleOrDie(),

		// Needed to build serviceLister, to populate env vars for services
		newRule(read...).Groups(legacyGroup).Resources("services").RuleOrDie(),

		// Nodes can register Node API objects and report status.
		// Use the NodeRestriction admission plugin to limit a node to creating/updating its own API object.
		newRule("create", "get", "list", "watch").Groups(legacyGroup).Resources("nodes").RuleOrDie(),
		newRule("update", "patch").Groups(legacyGroup).Resources("nodes/status").RuleOrDie(),
		newRule("update", "patch").Groups(legacyGroup).Resources("nodes").RuleOrDie(),

		// TODO: restrict to the bound node as creator in the NodeRestrictions admission plugin
		newRule("create", "update", "patch").Groups(legacyGroup, eventsGroup).Resources("events").RuleOrDie(),

		// Use the Node authorizer to limit get to pods related to the node, and to limit list/watch to field selectors related to the node.
		newRule(read...).Groups(legacyGroup).Resources("pods").RuleOrDie(),

		// Needed for the node to create/delete mirror pods.
		// Use the NodeRestriction admission plugin to limit a node to creating/deleting mirror pods bound to itself.
		newRule("create", "delete").Groups(legacyGroup).Resources("pods").RuleOrDie(),
		// Needed for the node to report status of pods it is running.
		// Use the NodeRestriction admission plugin to limit a node to updating status of pods bound to itself.
		newRule("update", "patch").Groups(legacyGroup).Resources("pods/status").RuleOrDie(),
		// Needed for the node to create pod evictions.
		// Use the NodeRestriction admission plugin to limit a node to creating evictions for pods bound to itself.
		newRule("create").Groups(legacyGroup).Resources("pods/eviction").RuleOrDie(),

		// Needed for imagepullsecrets, rbd/ceph and secret volumes, and secrets in envs
		// Needed for configmap volume and envs
		// Use the Node authorization mode to limit a node to get secrets/configmaps referenced by pods bound to itself.
		newRule("get", "list", "watch").Groups(legacyGroup).Resources("secrets", "configmaps").RuleOrDie(),
		// Needed for persistent volumes
		// Use the Node authorization mode to limit a node to get pv/pvc objects referenced by pods bound to itself.
		newRule("get").Groups(legacyGroup).Resources("persistentvolumeclaims", "persistentvolumes").RuleOrDie(),

		// TODO: add to the Node authorizer and restrict to endpoints referenced by pods or PVs bound to the node
		// Needed for glusterfs volumes
		newRule("get").Groups(legacyGroup).Resources("endpoints").RuleOrDie(),
		// Used to create a certificatesigningrequest for a node-specific client certificate, and watch
		// for it to be signed. This allows the kubelet to rotate it's own certificate.
		newRule("create", "get", "list", "watch").Groups(certificatesGroup).Resources("certificatesigningrequests").RuleOrDie(),

		// Leases
		newRule("get", "create", "update", "patch", "delete").Groups("coordination.k8s.io").Resources("leases").RuleOrDie(),

		// CSI
		newRule("get").Groups(storageGroup).Resources("volumeattachments").RuleOrDie(),

		// Use the Node authorization to limit a node to create tokens for service accounts running on that node
		// Use the NodeRestriction admission plugin to limit a node to create tokens bound to pods on that node
		newRule("create").Groups(legacyGroup).Resources("serviceaccounts/token").RuleOrDie(),
	}

	// Use the Node authorization mode to limit a node to update status of pvc objects referenced by pods bound to itself.
	// Use the NodeRestriction admission plugin to limit a node to just update the status stanza.
	pvcStatusPolicyRule := newRule("get", "update", "patch").Groups(legacyGroup).Resources("persistentvolumeclaims/status").RuleOrDie()
	nodePolicyRules = append(nodePolicyRules, pvcStatusPolicyRule)

	// CSI
	csiDriverRule := newRule("get", "watch", "list").Groups("storage.k8s.io").Resources("csidrivers").RuleOrDie()
	nodePolicyRules = append(nodePolicyRules, csiDriverRule)
	csiNodeInfoRule := newRule("get", "create", "update", "patch", "delete").Groups("storage.k8s.io").Resources("csinodes").RuleOrDie()
	nodePolicyRules = append(nodePolicyRules, csiNodeInfoRule)
	// Upstream adds get/update/patch of storage.k8s.io csinodes/status here
	// when CSIVolumeHealth is enabled; it is off by default at v1.37.

	// RuntimeClass
	nodePolicyRules = append(nodePolicyRules, newRule("get", "list", "watch").Groups("node.k8s.io").Resources("runtimeclasses").RuleOrDie())

	// DRA Resource Claims (DynamicResourceAllocation, on by default)
	nodePolicyRules = append(nodePolicyRules, newRule("get").Groups(resourceGroup).Resources("resourceclaims").RuleOrDie())
	nodePolicyRules = append(nodePolicyRules, newRule("deletecollection").Groups(resourceGroup).Resources("resourceslices").RuleOrDie())
	// Kubelet needs access to ClusterTrustBundles to support the pemTrustAnchors volume type.
	// (ClusterTrustBundle, on by default)
	nodePolicyRules = append(nodePolicyRules, newRule("get", "list", "watch").Groups(certificatesGroup).Resources("clustertrustbundles").RuleOrDie())
	// Kubelet needs access to ServiceAccounts to support sending service account tokens to the credential provider.
	// Use the Node authorizer to limit get to service accounts related to the node.
	// (KubeletServiceAccountTokenForCredentialProviders, on by default)
	nodePolicyRules = append(nodePolicyRules, newRule("get").Groups(legacyGroup).Resources("serviceaccounts").RuleOrDie())
	// Kubelet needs to create arbitrary PodCertificateRequests to implement
	// podCertificate volumes.
	// (PodCertificateRequest, on by default)
	nodePolicyRules = append(nodePolicyRules, newRule("get", "list", "watch", "create").Groups(certificatesGroup).Resources("podcertificaterequests").RuleOrDie())

	return nodePolicyRules
}
