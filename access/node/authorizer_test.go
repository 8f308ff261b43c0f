package node

import (
	"context"
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
)

// These tests are kubestore's: they cover what upstream's tests of the
// node authorizer leave to other packages or do not check.

func TestAuthorizerNonNodeUsers(t *testing.T) {
	g := NewGraph()
	g.AddPod(&corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "pod1", Namespace: "ns1"},
		Spec: corev1.PodSpec{
			NodeName: "node1",
			Volumes:  []corev1.Volume{{VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "s1"}}}},
		},
	})
	authz := NewAuthorizer(g)

	for _, tc := range []struct {
		name         string
		user         user.Info
		expectReason string
	}{
		{name: "no user", user: nil},
		{name: "node name without group", user: &user.DefaultInfo{Name: "system:node:node1"}},
		{name: "group without node name", user: &user.DefaultInfo{Name: "alice", Groups: []string{user.NodesGroup}}},
		{name: "admin", user: &user.DefaultInfo{Name: "admin", Groups: []string{user.SystemPrivilegedGroup}}},
		{name: "empty node name", user: &user.DefaultInfo{Name: "system:node:", Groups: []string{user.NodesGroup}}, expectReason: `unknown node for user "system:node:"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			attrs := authorizer.AttributesRecord{User: tc.user, ResourceRequest: true, Verb: "get", Resource: "secrets", Namespace: "ns1", Name: "s1"}
			decision, reason, err := authz.Authorize(context.Background(), attrs)
			if err != nil {
				t.Fatal(err)
			}
			if decision != authorizer.DecisionNoOpinion || reason != tc.expectReason {
				t.Errorf("expected %v with reason %q, got %v with %q", authorizer.DecisionNoOpinion, tc.expectReason, decision, reason)
			}
		})
	}
}

func TestAuthorizerRulesFor(t *testing.T) {
	authz := NewAuthorizer(NewGraph())
	resourceRules, nonResourceRules, incomplete, err := authz.RulesFor(context.Background(), &user.DefaultInfo{Name: "system:node:node1", Groups: []string{user.NodesGroup}}, "ns1")
	if err == nil || !incomplete || resourceRules != nil || nonResourceRules != nil {
		t.Errorf("node: expected no rules, incomplete and an error, got %v, %v, %v, %v", resourceRules, nonResourceRules, incomplete, err)
	}
	resourceRules, nonResourceRules, incomplete, err = authz.RulesFor(context.Background(), &user.DefaultInfo{Name: "alice"}, "ns1")
	if err != nil || incomplete || resourceRules != nil || nonResourceRules != nil {
		t.Errorf("non-node: expected no rules, complete, no error, got %v, %v, %v, %v", resourceRules, nonResourceRules, incomplete, err)
	}
}

func TestAuthorizerConditions(t *testing.T) {
	authz := NewAuthorizer(NewGraph())
	node1 := &user.DefaultInfo{Name: "system:node:node1", Groups: []string{user.NodesGroup}}
	d := authz.ConditionsAwareAuthorize(context.Background(), authorizer.AttributesRecord{User: node1, ResourceRequest: true, Verb: "get", Resource: "nodes", Name: "node1"})
	if !d.IsAllow() {
		t.Errorf("expected an unconditional allow, got %#v", d)
	}
	decision, _, err := authz.EvaluateConditions(context.Background(), d, nil)
	if decision != authorizer.DecisionDeny || !errors.Is(err, authorizer.ErrorConditionEvaluationNotSupported) {
		t.Errorf("expected deny with %v, got %v, %v", authorizer.ErrorConditionEvaluationNotSupported, decision, err)
	}
}

func TestAuthorizerGraphRelationships(t *testing.T) {
	g := NewGraph()
	authz := NewAuthorizer(g)
	node1 := &user.DefaultInfo{Name: "system:node:node1", Groups: []string{user.NodesGroup}}
	node2 := &user.DefaultInfo{Name: "system:node:node2", Groups: []string{user.NodesGroup}}

	g.AddPod(&corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "pod1", Namespace: "ns1"},
		Spec: corev1.PodSpec{
			NodeName: "node1",
			Volumes: []corev1.Volume{
				{Name: "scratch", VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{}}},
				{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "pvc1"}}},
			},
		},
	})
	mirror := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "mirror", Namespace: "ns1", Annotations: map[string]string{corev1.MirrorPodAnnotationKey: "x"}},
		Spec: corev1.PodSpec{
			NodeName:           "node2",
			ServiceAccountName: "sa-mirror",
			Volumes:            []corev1.Volume{{VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "mirror-secret"}}}},
		},
	}
	g.AddPod(mirror)
	g.AddPV(&corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "pv1"},
		Spec: corev1.PersistentVolumeSpec{
			ClaimRef: &corev1.ObjectReference{Namespace: "ns1", Name: "pvc1"},
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{
				NodePublishSecretRef:       &corev1.SecretReference{Namespace: "ns1", Name: "publish"},
				ControllerPublishSecretRef: &corev1.SecretReference{Namespace: "ns1", Name: "controller"},
			}},
		},
	})
	g.AddVolumeAttachment("va-unbound", "")

	for _, tc := range []struct {
		name         string
		attrs        authorizer.AttributesRecord
		expect       authorizer.Decision
		expectReason string
	}{
		{
			name:   "ephemeral volume claim of a pod on the node",
			attrs:  authorizer.AttributesRecord{User: node1, ResourceRequest: true, Verb: "get", Resource: "persistentvolumeclaims", Namespace: "ns1", Name: "pod1-scratch"},
			expect: authorizer.DecisionAllow,
		},
		{
			name:         "ephemeral volume claim of a pod on another node",
			attrs:        authorizer.AttributesRecord{User: node2, ResourceRequest: true, Verb: "get", Resource: "persistentvolumeclaims", Namespace: "ns1", Name: "pod1-scratch"},
			expect:       authorizer.DecisionNoOpinion,
			expectReason: "no relationship found between node 'node2' and this object",
		},
		{
			name:   "update status of a related pvc",
			attrs:  authorizer.AttributesRecord{User: node1, ResourceRequest: true, Verb: "update", Resource: "persistentvolumeclaims", Subresource: "status", Namespace: "ns1", Name: "pvc1"},
			expect: authorizer.DecisionAllow,
		},
		{
			name:         "get status of a related pvc",
			attrs:        authorizer.AttributesRecord{User: node1, ResourceRequest: true, Verb: "get", Resource: "persistentvolumeclaims", Subresource: "status", Namespace: "ns1", Name: "pvc1"},
			expect:       authorizer.DecisionNoOpinion,
			expectReason: "can only get/update/patch this type",
		},
		{
			name:         "list pvcs",
			attrs:        authorizer.AttributesRecord{User: node1, ResourceRequest: true, Verb: "list", Resource: "persistentvolumeclaims", Namespace: "ns1"},
			expect:       authorizer.DecisionNoOpinion,
			expectReason: "can only get individual resources of this type",
		},
		{
			name:   "pv bound to a claim of a pod on the node",
			attrs:  authorizer.AttributesRecord{User: node1, ResourceRequest: true, Verb: "get", Resource: "persistentvolumes", Name: "pv1"},
			expect: authorizer.DecisionAllow,
		},
		{
			name:   "node publish secret of the pv",
			attrs:  authorizer.AttributesRecord{User: node1, ResourceRequest: true, Verb: "get", Resource: "secrets", Namespace: "ns1", Name: "publish"},
			expect: authorizer.DecisionAllow,
		},
		{
			name:         "controller publish secret of the pv is not visible to the kubelet",
			attrs:        authorizer.AttributesRecord{User: node1, ResourceRequest: true, Verb: "get", Resource: "secrets", Namespace: "ns1", Name: "controller"},
			expect:       authorizer.DecisionNoOpinion,
			expectReason: "no relationship found between node 'node1' and this object",
		},
		{
			name:         "node publish secret of the pv from another node",
			attrs:        authorizer.AttributesRecord{User: node2, ResourceRequest: true, Verb: "get", Resource: "secrets", Namespace: "ns1", Name: "publish"},
			expect:       authorizer.DecisionNoOpinion,
			expectReason: "no relationship found between node 'node2' and this object",
		},
		{
			name:   "mirror pod itself",
			attrs:  authorizer.AttributesRecord{User: node2, ResourceRequest: true, Verb: "get", Resource: "pods", Namespace: "ns1", Name: "mirror"},
			expect: authorizer.DecisionAllow,
		},
		{
			name:         "secret of a mirror pod",
			attrs:        authorizer.AttributesRecord{User: node2, ResourceRequest: true, Verb: "get", Resource: "secrets", Namespace: "ns1", Name: "mirror-secret"},
			expect:       authorizer.DecisionNoOpinion,
			expectReason: "no relationship found between node 'node2' and this object",
		},
		{
			name:         "service account token of a mirror pod",
			attrs:        authorizer.AttributesRecord{User: node2, ResourceRequest: true, Verb: "create", Resource: "serviceaccounts", Subresource: "token", Namespace: "ns1", Name: "sa-mirror"},
			expect:       authorizer.DecisionNoOpinion,
			expectReason: "no relationship found between node 'node2' and this object",
		},
		{
			name:         "volume attachment without a node",
			attrs:        authorizer.AttributesRecord{User: node1, ResourceRequest: true, Verb: "get", APIGroup: "storage.k8s.io", Resource: "volumeattachments", Name: "va-unbound"},
			expect:       authorizer.DecisionNoOpinion,
			expectReason: "no relationship found between node 'node1' and this object",
		},
		{
			name:         "secret without a name",
			attrs:        authorizer.AttributesRecord{User: node1, ResourceRequest: true, Verb: "get", Resource: "secrets", Namespace: "ns1"},
			expect:       authorizer.DecisionNoOpinion,
			expectReason: "No Object name found",
		},
		{
			name:         "update a secret",
			attrs:        authorizer.AttributesRecord{User: node1, ResourceRequest: true, Verb: "update", Resource: "secrets", Namespace: "ns1", Name: "publish"},
			expect:       authorizer.DecisionNoOpinion,
			expectReason: "can only read resources of this type",
		},
		{
			name:         "pcr status",
			attrs:        authorizer.AttributesRecord{User: node1, ResourceRequest: true, Verb: "update", APIGroup: "certificates.k8s.io", Resource: "podcertificaterequests", Subresource: "status", Namespace: "ns1", Name: "pcr"},
			expect:       authorizer.DecisionNoOpinion,
			expectReason: "nodes may not access the status subresource of PodCertificateRequests",
		},
		{
			name:         "delete pcr",
			attrs:        authorizer.AttributesRecord{User: node1, ResourceRequest: true, Verb: "delete", APIGroup: "certificates.k8s.io", Resource: "podcertificaterequests", Namespace: "ns1", Name: "pcr"},
			expect:       authorizer.DecisionNoOpinion,
			expectReason: "nodes may not delete podcertificaterequests",
		},
		{
			name:   "deletecollection of the node's resourceslices",
			attrs:  authorizer.AttributesRecord{User: node1, ResourceRequest: true, Verb: "deletecollection", APIGroup: "resource.k8s.io", Resource: "resourceslices", FieldSelectorRequirements: mustParseFields("spec.nodeName=node1")},
			expect: authorizer.DecisionAllow,
		},
		{
			name:         "deletecollection of another node's resourceslices",
			attrs:        authorizer.AttributesRecord{User: node1, ResourceRequest: true, Verb: "deletecollection", APIGroup: "resource.k8s.io", Resource: "resourceslices", FieldSelectorRequirements: mustParseFields("spec.nodeName=node2")},
			expect:       authorizer.DecisionNoOpinion,
			expectReason: "can only list/watch/deletecollection resourceslices with nodeName field selector",
		},
		{
			name:         "list pods with a negated node selector",
			attrs:        authorizer.AttributesRecord{User: node1, ResourceRequest: true, Verb: "list", Resource: "pods", FieldSelectorRequirements: mustParseFields("spec.nodeName!=node1")},
			expect:       authorizer.DecisionNoOpinion,
			expectReason: "can only list/watch pods with spec.nodeName field selector",
		},
		{
			name:         "lease in another namespace",
			attrs:        authorizer.AttributesRecord{User: node1, ResourceRequest: true, Verb: "get", APIGroup: "coordination.k8s.io", Resource: "leases", Namespace: "default", Name: "node1"},
			expect:       authorizer.DecisionNoOpinion,
			expectReason: `can only access leases in the "kube-node-lease" system namespace`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			decision, reason, err := authz.Authorize(context.Background(), tc.attrs)
			if err != nil {
				t.Fatal(err)
			}
			if decision != tc.expect {
				t.Errorf("expected %v, got %v (%s)", tc.expect, decision, reason)
			}
			if reason != tc.expectReason {
				t.Errorf("expected reason %q, got %q", tc.expectReason, reason)
			}
		})
	}

	// Deleting the pod takes its relationships away.
	g.DeletePod("pod1", "ns1")
	for _, attrs := range []authorizer.AttributesRecord{
		{User: node1, ResourceRequest: true, Verb: "get", Resource: "persistentvolumeclaims", Namespace: "ns1", Name: "pod1-scratch"},
		{User: node1, ResourceRequest: true, Verb: "get", Resource: "persistentvolumes", Name: "pv1"},
		{User: node1, ResourceRequest: true, Verb: "get", Resource: "secrets", Namespace: "ns1", Name: "publish"},
	} {
		if decision, _, _ := authz.Authorize(context.Background(), attrs); decision != authorizer.DecisionNoOpinion {
			t.Errorf("after deleting the pod, %s %s/%s: expected %v, got %v", attrs.Resource, attrs.Namespace, attrs.Name, authorizer.DecisionNoOpinion, decision)
		}
	}
}
