// Package node is a port of the Kubernetes Node authorizer
// (k8s.io/kubernetes plugin/pkg/auth/authorizer/node at v1.37.2) for
// kubestore. It authorizes the requests of kubelets: users named
// "system:node:<name>" in the group "system:nodes". A node may access a
// secret, configmap, persistent volume claim, persistent volume, resource
// claim, volume attachment, service account, resource slice or pod
// certificate request only when a graph of the cluster's objects relates
// the object to that node, and may access its own Node, Lease and CSINode
// objects; everything else is decided by the static rules upstream grants
// every node (NodeRules). Requests of other users get no opinion, and so do
// the requests the authorizer refuses, so that another authorizer may still
// allow them.
//
// The Graph is kept up to date from informers by AddGraphEventHandlers.
//
// Upstream consults Kubernetes feature gates. This port fixes each of them
// to its default at v1.37 (k8s.io/kubernetes pkg/features/kube_features.go):
//
//   - PodCertificateRequest: on (GA in 1.37). Nodes may create
//     podcertificaterequests, get those related to them, and list/watch
//     them with a spec.nodeName field selector naming themselves; they may
//     get the service accounts of their pods.
//   - KubeletServiceAccountTokenForCredentialProviders: on (beta since 1.34).
//     Nodes may get the service accounts of their pods.
//   - CSIVolumeHealth: off (alpha). Nodes may not access csinodes/status.
//   - DynamicResourceAllocation: on (GA, locked). NodeRules grants get of
//     resourceclaims and deletecollection of resourceslices.
//   - ClusterTrustBundle: on (GA in 1.37). NodeRules grants get/list/watch
//     of clustertrustbundles.
//
// Only the code path of each gate's default state is ported.
package node
