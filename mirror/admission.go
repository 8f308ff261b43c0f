package mirror

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/admission"

	"github.com/kubestore/kubestore/mirrored"
)

// Annotations is the admission that keeps the mirror's annotations the
// mirror's: a write through the API (a local object, or the node's own
// write of a copy applied locally) may not add one or change its value. A
// local object that claimed a rule would have its writes forwarded to the
// upstream with the edge's credentials, and its namespace could no longer
// be deleted. The mirror's own writes below the API are not admitted; the
// one it makes through the API, the node's creation of its own objects
// offline, carries mirrored.WithCopyWrite. Removing an annotation stays
// allowed: a copy whose rule is gone from every gateway becomes a local
// object so.
func Annotations() admission.ValidationInterface { return annotations{} }

type annotations struct{}

var reserved = []string{mirrored.AnnotationRule, mirrored.AnnotationUpstreamResourceVersion, mirrored.AnnotationView}

func (annotations) Handles(op admission.Operation) bool {
	return op == admission.Create || op == admission.Update
}

func (annotations) Validate(ctx context.Context, a admission.Attributes, _ admission.ObjectInterfaces) error {
	if mirrored.CopyWrite(ctx) {
		return nil
	}
	obj, err := meta.Accessor(a.GetObject())
	if err != nil {
		return nil
	}
	var old map[string]string
	if a.GetOldObject() != nil {
		if o, err := meta.Accessor(a.GetOldObject()); err == nil {
			old = o.GetAnnotations()
		}
	}
	var errs field.ErrorList
	for _, key := range reserved {
		v, ok := obj.GetAnnotations()[key]
		if was, had := old[key]; !ok || had && was == v {
			continue
		}
		errs = append(errs, field.Forbidden(field.NewPath("metadata", "annotations").Key(key),
			"is set by kubestore's mirror on its copies of the upstream's objects; a write through the API may not set or change it"))
	}
	if len(errs) == 0 {
		return nil
	}
	return apierrors.NewInvalid(a.GetKind().GroupKind(), a.GetName(), errs)
}
