package registry

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
)

func newNamespace(name string, finalizers ...corev1.FinalizerName) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: "1"}, Spec: corev1.NamespaceSpec{Finalizers: finalizers}}
}

// The cases of TestValidateNamespace and TestValidateNamespaceFinalizeUpdate
// in k8s.io/kubernetes pkg/apis/core/validation/validation_test.go.
func TestNamespaceValidate(t *testing.T) {
	tests := []struct {
		name string
		ns   *corev1.Namespace
		err  string // "" when valid
	}{
		{name: "labels", ns: func() *corev1.Namespace { n := newNamespace("abc"); n.Labels = map[string]string{"a": "b"}; return n }()},
		{name: "qualified finalizers", ns: newNamespace("abc-123", "example.com/something", "example.com/other")},
		{name: "standard finalizer", ns: newNamespace("abc", corev1.FinalizerKubernetes)},
		{name: "zero-length name", ns: newNamespace(""), err: "metadata.name"},
		{name: "name is a DNS label", ns: newNamespace("a.b"), err: "metadata.name"},
		{name: "defined-namespace", ns: func() *corev1.Namespace { n := newNamespace("abc-123"); n.Namespace = "makesnosense"; return n }(),
			err: "metadata.namespace"},
		{name: "invalid-labels", ns: func() *corev1.Namespace {
			n := newNamespace("abc")
			n.Labels = map[string]string{"NoUppercaseOrSpecialCharsLike=Equals": "b"}
			return n
		}(), err: "metadata.labels"},
		{name: "finalizer without a domain", ns: newNamespace("abc", "something"), err: "spec.finalizers[0]: Invalid value"},
		{name: "invalid finalizer", ns: newNamespace("abc", "Foo"), err: "spec.finalizers[0]: Invalid value"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errorsContain(t, validateCreate(t, namespaceDef(), tt.ns), tt.err)
		})
	}
}

func TestNamespaceFinalizeUpdate(t *testing.T) {
	tests := []struct {
		name     string
		old, new *corev1.Namespace
		err      string
	}{
		{name: "nothing", old: newNamespace("foo"), new: newNamespace("foo")},
		{name: "invalid finalizer", old: newNamespace("foo"), new: newNamespace("foo", "Foo"), err: "spec.finalizers[0]: Invalid value"},
		{name: "add a finalizer", old: newNamespace("foo", "foo.com/bar"), new: newNamespace("foo", "foo.com/bar", "what.com/bar")},
		{name: "empty finalizer", old: newNamespace("fooemptyfinalizer", "foo.com/bar"), new: newNamespace("fooemptyfinalizer", "", "foo.com/bar", "what.com/bar"),
			err: "spec.finalizers[0]"},
		{name: "remove the kubernetes finalizer", old: newNamespace("foo", corev1.FinalizerKubernetes), new: newNamespace("foo")},
	}
	st := finalizeStrategy{newStrategy(nil, namespaceDef())}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errorsContain(t, st.ValidateUpdate(t.Context(), tt.new, tt.old), tt.err)
		})
	}
	t.Run("only finalizers change", func(t *testing.T) {
		old, ns := newNamespace("foo", corev1.FinalizerKubernetes), newNamespace("foo", "example.com/x")
		old.Status.Phase, ns.Status.Phase = corev1.NamespaceTerminating, corev1.NamespaceActive
		ns.Labels = map[string]string{"a": "b"}
		st.PrepareForUpdate(t.Context(), ns, old)
		if ns.Status.Phase != corev1.NamespaceTerminating || ns.Labels != nil || !reflect.DeepEqual(ns.Spec.Finalizers, []corev1.FinalizerName{"example.com/x"}) {
			t.Errorf("finalize changed more than finalizers: %+v", ns)
		}
	})
}

// What the namespace strategy and defaulting do (pkg/registry/core/namespace
// and SetDefaults_Namespace): a new namespace is Active, carries the
// kubernetes finalizer and the kubernetes.io/metadata.name label; an
// update keeps spec.finalizers and status and the label.
func TestNamespacePrepare(t *testing.T) {
	st := newStrategy(nil, namespaceDef())
	t.Run("create", func(t *testing.T) {
		ns := newNamespace("foo", "example.com/x")
		ns.Status.Phase = corev1.NamespaceTerminating
		st.PrepareForCreate(t.Context(), ns)
		want := []corev1.FinalizerName{"example.com/x", corev1.FinalizerKubernetes}
		if !reflect.DeepEqual(ns.Spec.Finalizers, want) || ns.Status.Phase != corev1.NamespaceActive || ns.Labels[corev1.LabelMetadataName] != "foo" {
			t.Errorf("prepared = %+v", ns)
		}
	})
	t.Run("update", func(t *testing.T) {
		old := newNamespace("foo", corev1.FinalizerKubernetes)
		old.Status.Phase = corev1.NamespaceActive
		ns := newNamespace("foo")
		ns.Labels = map[string]string{corev1.LabelMetadataName: "bar"}
		ns.Status.Phase = corev1.NamespaceTerminating
		st.PrepareForUpdate(t.Context(), ns, old)
		if !reflect.DeepEqual(ns.Spec.Finalizers, old.Spec.Finalizers) || ns.Status.Phase != corev1.NamespaceActive || ns.Labels[corev1.LabelMetadataName] != "foo" {
			t.Errorf("prepared = %+v", ns)
		}
	})
	t.Run("default", func(t *testing.T) {
		for _, tt := range []struct {
			name   string
			labels map[string]string
		}{{"foo", map[string]string{corev1.LabelMetadataName: "foo"}}, {"", nil}} {
			ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tt.name}}
			namespaceDef().defaults(ns)
			if !reflect.DeepEqual(ns.Labels, tt.labels) {
				t.Errorf("labels of %q = %v, want %v", tt.name, ns.Labels, tt.labels)
			}
		}
	})
}

// printNamespace's row and the status.phase field selector.
func TestNamespaceTableAndFields(t *testing.T) {
	ns := newNamespace("foo")
	ns.Status.Phase = corev1.NamespaceTerminating
	if got, want := tableRow(t, namespaceDef(), ns), []any{"foo", "Terminating", "<unknown>"}; !reflect.DeepEqual(got, want) {
		t.Errorf("row = %#v, want %#v", got, want)
	}
	_, got, err := namespaceDef().getAttrs(ns)
	if err != nil {
		t.Fatal(err)
	}
	if want := (fields.Set{"metadata.name": "foo", "status.phase": "Terminating"}); !reflect.DeepEqual(got, want) {
		t.Errorf("fields = %v, want %v", got, want)
	}
}
