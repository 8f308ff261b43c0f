package mirror

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/storage"

	"github.com/kubestore/kubestore/mirrored"
)

// Which rule mirrors what: the questions both flows ask of the rules, the
// streams to know what is theirs, the uplink to know which writes go up.

// rulesFor are the rules of gr.
func (m *Mirror) rulesFor(gr schema.GroupResource) []*rule {
	var out []*rule
	for _, r := range m.rules {
		if r.gr == gr {
			out = append(out, r)
		}
	}
	return out
}

// rule is the rule named name. The name of a rule that selects by the
// node on another gateway of the site (<base>@<other node>), or as a
// release before per-node names wrote it (<base>), resolves to this
// gateway's rule of that base: its objects are mirrored, of the same
// resource, and a write to them is forwarded.
func (m *Mirror) rule(name string) *rule {
	for _, r := range m.rules {
		if r.name == name {
			return r
		}
	}
	base, _, _ := strings.Cut(name, "@")
	for _, r := range m.rules {
		if r.nodeScoped() && r.base == base {
			return r
		}
	}
	return nil
}

// nodeScoped reports whether r selects by this gateway's node.
func (r *rule) nodeScoped() bool { return r.name != r.base }

// owns reports whether a local copy annotated with rule name ann is r's:
// annotated with r's name, or, for a rule that selects by the node, with
// the name of a release before per-node names (its base) and in r's
// selection (the node's own; another node's copies are not r's).
func (r *rule) owns(store *Store, ann string, obj runtime.Object) bool {
	if ann == r.name {
		return true
	}
	if !r.nodeScoped() || ann != r.base {
		return false
	}
	ls, fs, err := store.Attrs(obj)
	return err == nil && r.labels.Matches(ls) && r.fields.Matches(fs)
}

// mirroredBy is the rule that mirrored obj, or nil when obj is local.
func (m *Mirror) mirroredBy(obj metav1.Object) *rule {
	name, ok := obj.GetAnnotations()[mirrored.AnnotationRule]
	if !ok {
		return nil
	}
	return m.rule(name)
}

// covers reports whether the rule mirrors objects of namespace.
func (r *rule) covers(namespace string) bool {
	if len(r.cfg.Namespaces) == 0 || namespace == "" {
		return true
	}
	for _, ns := range r.cfg.Namespaces {
		if ns == namespace {
			return true
		}
	}
	return false
}

// matching is the rule that would mirror obj, of store's resource gr, or
// nil when obj is local. A rule's selectors match as the local server's
// list would select obj (store.Attrs: an unset spec.hostNetwork is
// "false" there).
func (m *Mirror) matching(store *Store, gr schema.GroupResource, namespace string, obj *unstructured.Unstructured) *rule {
	if obj.GetNamespace() != "" {
		namespace = obj.GetNamespace()
	}
	rules := m.rulesFor(gr)
	if len(rules) == 0 {
		return nil
	}
	typed, err := store.Convert(obj.Object)
	if err != nil {
		return nil
	}
	a, err := meta.Accessor(typed)
	if err != nil {
		return nil
	}
	if store.Namespaced {
		a.SetNamespace(namespace)
	}
	ls, fs, err := store.Attrs(typed)
	if err != nil {
		return nil
	}
	for _, r := range rules {
		if !r.covers(namespace) || !r.labels.Matches(ls) || !r.fields.Matches(fs) {
			continue
		}
		if r.referencedBy != "" && !m.refs.referenced(r, namespace, obj.GetName()) || r.object != "" && r.object != obj.GetName() {
			continue
		}
		return r
	}
	return nil
}

// namespaceDeletable refuses the deletion of a namespace that holds
// mirrored objects: the namespace controller would delete them below the
// mirror, a local fork the upstream never hears of.
func (m *Mirror) namespaceDeletable(ctx context.Context, namespace string) error {
	for _, r := range m.rules {
		if !r.covers(namespace) {
			continue
		}
		store, err := m.stores.Store(ctx, r.gr)
		if err != nil || !store.Namespaced {
			continue
		}
		local, err := m.localObjects(ctx, r, store, namespace, "")
		if err != nil {
			return apierrors.NewInternalError(err)
		}
		if len(local) > 0 {
			return apierrors.NewConflict(namespaces, namespace, fmt.Errorf("it holds %d %s mirrored from the upstream %s by rule %s; they go when the upstream deletes them, or the rule is removed",
				len(local), r.gr, m.host, r.name))
		}
	}
	return nil
}

// mirrors reports whether ref names a local copy of an object a rule
// mirrors.
func (m *Mirror) mirrors(ctx context.Context, ref corev1.ObjectReference) bool {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return false
	}
	for _, r := range m.rules {
		store, err := m.stores.Store(ctx, r.gr)
		if err != nil || store.GVK.Kind != ref.Kind || store.GVK.Group != gv.Group {
			continue
		}
		ns := ref.Namespace
		if !store.Namespaced {
			ns = ""
		}
		obj := store.New()
		if err := store.Get(ctx, store.Key(ns, ref.Name), storage.GetOptions{}, obj); err != nil {
			continue
		}
		if a, err := meta.Accessor(obj); err == nil && m.mirroredBy(a) != nil {
			return true
		}
	}
	return false
}
