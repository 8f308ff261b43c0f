package registry

import (
	"context"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
)

// The causes of a review refused as Invalid, in order.
func invalidCauses(t *testing.T, err error) []string {
	t.Helper()
	if !apierrors.IsInvalid(err) {
		t.Fatalf("error %v, want Invalid", err)
	}
	var fields []string
	for _, c := range err.(apierrors.APIStatus).Status().Details.Causes {
		fields = append(fields, c.Field)
	}
	return fields
}

// validateLabelSelectorAttributes: each requirement is a valid label
// selector requirement, unknown operators allowed.
func TestSubjectAccessReviewLabelSelector(t *testing.T) {
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: "u", ResourceAttributes: &authorizationv1.ResourceAttributes{
		Verb: "list", Resource: "pods",
		LabelSelector: &authorizationv1.LabelSelectorAttributes{Requirements: []metav1.LabelSelectorRequirement{{Key: "bad key", Operator: metav1.LabelSelectorOpIn, Values: []string{"a"}}}},
	}}}
	_, err := subjectAccessReview(context.Background(), nil, sar)
	if got := invalidCauses(t, err); len(got) != 1 || got[0] != "spec.resourceAttributes.labelSelector.requirements[0].key" {
		t.Errorf("causes %v, want spec.resourceAttributes.labelSelector.requirements[0].key", got)
	}

	sar.Spec.ResourceAttributes.LabelSelector = &authorizationv1.LabelSelectorAttributes{}
	_, err = subjectAccessReview(context.Background(), nil, sar)
	if got := invalidCauses(t, err); len(got) != 1 || got[0] != "spec.resourceAttributes.labelSelector.requirements" {
		t.Errorf("causes %v, want spec.resourceAttributes.labelSelector.requirements", got)
	}
}

// ValidateLocalSubjectAccessReview: the attributes' namespace is the
// review's.
func TestLocalSubjectAccessReviewNamespaceMismatch(t *testing.T) {
	ctx := genericapirequest.WithNamespace(context.Background(), "default")
	lsar := &authorizationv1.LocalSubjectAccessReview{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default"},
		Spec: authorizationv1.SubjectAccessReviewSpec{User: "u", ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: "other", Verb: "get", Resource: "pods",
		}},
	}
	_, err := localSubjectAccessReview(ctx, nil, lsar)
	if got := invalidCauses(t, err); len(got) != 1 || got[0] != "spec.resourceAttributes.namespace" {
		t.Errorf("causes %v, want spec.resourceAttributes.namespace", got)
	}
}
