package registry

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/admission"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"
)

func createNamespace(t *testing.T, api *API, s *Storage, name string) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	api.Scheme().Default(ns)
	ctx := genericapirequest.WithNamespace(t.Context(), "")
	if _, err := s.namespaces.Create(ctx, ns, rest.ValidateAllObjectFunc, &metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating namespace %s: %v", name, err)
	}
}

func admit(t *testing.T, l admission.ValidationInterface, op admission.Operation, resource, namespace, name, subresource string) error {
	t.Helper()
	attrs := admission.NewAttributesRecord(nil, nil, corev1.SchemeGroupVersion.WithKind("Unused"), namespace, name,
		corev1.SchemeGroupVersion.WithResource(resource), subresource, op, nil, false, nil)
	if !l.Handles(op) {
		return nil
	}
	return l.Validate(t.Context(), attrs, nil)
}

// kube-apiserver's NamespaceLifecycle admission
// (plugin/pkg/admission/namespace/lifecycle): no content in a missing or
// terminating namespace, no deletion of the immortal namespaces.
func TestNamespaceLifecycle(t *testing.T) {
	api, s := newTestStorage(t)
	createNamespace(t, api, s, "ns1")
	l := s.NamespaceLifecycle()

	if l.Handles(admission.Update) || l.Handles(admission.Connect) {
		t.Error("handles updates or connects")
	}
	tests := []struct {
		name                     string
		op                       admission.Operation
		resource, namespace, obj string
		subresource              string
		check                    func(error) bool
	}{
		{"create in an active namespace", admission.Create, "pods", "ns1", "p", "", isNil},
		{"create in a missing namespace", admission.Create, "pods", "missing", "p", "", apierrors.IsNotFound},
		{"create a namespace", admission.Create, "namespaces", "", "new", "", isNil},
		{"create a cluster-scoped object", admission.Create, "nodes", "", "n", "", isNil},
		{"delete default", admission.Delete, "namespaces", "", "default", "", apierrors.IsForbidden},
		{"delete kube-system", admission.Delete, "namespaces", "", "kube-system", "", apierrors.IsForbidden},
		{"delete kube-public", admission.Delete, "namespaces", "", "kube-public", "", apierrors.IsForbidden},
		{"delete kube-node-lease", admission.Delete, "namespaces", "", "kube-node-lease", "", isNil},
		{"delete an ordinary namespace", admission.Delete, "namespaces", "", "ns1", "", isNil},
		{"delete in a missing namespace", admission.Delete, "pods", "missing", "p", "", isNil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := admit(t, l, tt.op, tt.resource, tt.namespace, tt.obj, tt.subresource); !tt.check(err) {
				t.Errorf("unexpected answer: %v", err)
			}
		})
	}

	t.Run("create in a terminating namespace", func(t *testing.T) {
		// As a request does: admission, then the store. The watch cache
		// may not have seen the deletion when the create comes.
		if err := admit(t, l, admission.Delete, "namespaces", "", "ns1", ""); err != nil {
			t.Fatal(err)
		}
		ctx := genericapirequest.WithNamespace(t.Context(), "")
		if _, _, err := s.namespaces.Delete(ctx, "ns1", rest.ValidateAllObjectFunc, nil); err != nil {
			t.Fatal(err)
		}
		err := admit(t, l, admission.Create, "configmaps", "ns1", "cm", "")
		if !apierrors.IsForbidden(err) || !apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
			t.Errorf("create in a terminating namespace: %v, want Forbidden with cause %s", err, corev1.NamespaceTerminatingCause)
		}
	})
}

func isNil(err error) bool { return err == nil }

// EnsureSystemNamespaces creates the namespaces every cluster has, as the
// system namespaces controller of kube-apiserver does, and is idempotent.
func TestEnsureSystemNamespaces(t *testing.T) {
	_, s := newTestStorage(t)
	for range 2 {
		if err := s.EnsureSystemNamespaces(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	ctx := genericapirequest.WithNamespace(t.Context(), "")
	for _, name := range []string{"default", "kube-system", "kube-public", "kube-node-lease"} {
		obj, err := s.namespaces.Get(ctx, name, &metav1.GetOptions{})
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		ns := obj.(*corev1.Namespace)
		if ns.Status.Phase != corev1.NamespaceActive || ns.Labels[corev1.LabelMetadataName] != name {
			t.Errorf("%s: phase %q, labels %v", name, ns.Status.Phase, ns.Labels)
		}
	}
}

// def is the catalog entry of kind.
func (s *Storage) def(kind string) *resourceDef {
	for _, d := range s.api.defs {
		if d.kind == kind {
			return d
		}
	}
	panic("no kind " + kind)
}
