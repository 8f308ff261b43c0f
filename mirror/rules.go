package mirror

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
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

// nodeScoped reports whether r selects by a node (its name is
// <base>@<node>).
func (r *rule) nodeScoped() bool { return r.name != r.base }

// owns reports whether a local copy annotated with rule name ann is r's.
// A copy of a rule that selects by the node is its by name: the node's
// own. A shared rule's copy is its by name and only in its selection: two
// gateways of a site may run shared rules of one name that select
// differently, and neither owns (so deletes) the other's. A copy named as
// a release before per-node names wrote it (the base) is a node's rule's
// when in its selection (the node's own; another node's copies are not
// r's).
func (r *rule) owns(store *Store, ann string, obj runtime.Object) bool {
	switch {
	case ann == r.name && (r.nodeScoped() || r.foreign):
		return true
	case ann == r.name, r.nodeScoped() && ann == r.base:
		return r.selects(store, obj)
	}
	return false
}

// selects reports whether obj is in r's selection, as a list of the local
// server with r's selectors would select it.
func (r *rule) selects(store *Store, obj runtime.Object) bool {
	a, err := meta.Accessor(obj)
	if err != nil || !r.covers(a.GetNamespace()) || r.object != "" && a.GetName() != r.object {
		return false
	}
	ls, fs, err := store.Attrs(obj)
	return err == nil && r.labels.Matches(ls) && r.fields.Matches(fs)
}

// mirroredBy is the rule whose copy obj is, nil when obj is local: the
// rule its annotation names. That is this gateway's rule, or, for a copy
// of another gateway of the site (another node's rule, a shared rule only
// that gateway runs, or a copy named by a release before per-node names
// that this node's rule does not select), that rule as a foreign one, so
// that a write through this gateway keeps the copy its rule's: never
// this gateway's, whose relist would delete it, and never a local object.
func (m *Mirror) mirroredBy(store *Store, obj runtime.Object) *rule {
	a, err := meta.Accessor(obj)
	if err != nil {
		return nil
	}
	name, ok := a.GetAnnotations()[mirrored.AnnotationRule]
	if !ok {
		return nil
	}
	for _, r := range m.rules {
		if r.name == name {
			return r
		}
	}
	if own := m.rule(name); own != nil && own.owns(store, name, obj) {
		return own
	}
	return m.foreign(name, store)
}

// foreign is the rule named name that another gateway of the site runs,
// as mirroredBy finds its copies in store: another node's rule of a base
// this gateway has, with that node's selectors, or else a rule of that
// name selecting everything.
func (m *Mirror) foreign(name string, store *Store) *rule {
	gr := store.GVR.GroupResource()
	key := gr.String() + "/" + name
	if r, ok := m.foreignRules.Load(key); ok {
		return r.(*rule)
	}
	r := &rule{name: name, base: name, gr: gr, labels: labels.Everything(), fields: fields.Everything()}
	if base, node, ok := strings.Cut(name, "@"); ok {
		r.base = base
		if own := m.rule(name); own != nil && own.gr == gr {
			if nr, err := ruleFor(own.cfg, node); err == nil {
				r = nr
			}
		}
	}
	r.foreign = true
	actual, _ := m.foreignRules.LoadOrStore(key, r)
	return actual.(*rule)
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

// siteRulesEvery bounds how often the rules of the site's other gateways
// are read again for a write to a resource this gateway does not mirror.
const siteRulesEvery = 10 * time.Second

// siteResources are the resources the rules of every gateway of the site
// mirror, as their records say (mirror-rules/), and when they were read.
type siteResources struct {
	mu  sync.Mutex
	at  time.Time
	set map[schema.GroupResource]bool
}

// mirroredOnSite reports whether a rule of this gateway or of another of
// the site mirrors gr, by the rules' records read at most every
// siteRulesEvery; an unreadable record says yes.
func (m *Mirror) mirroredOnSite(ctx context.Context, gr schema.GroupResource) bool {
	if len(m.rulesFor(gr)) > 0 {
		return true
	}
	m.site.mu.Lock()
	defer m.site.mu.Unlock()
	if time.Since(m.site.at) > siteRulesEvery {
		recs, err := m.state.ListState(ctx, rulesState)
		if err != nil {
			return true
		}
		m.site.set = map[schema.GroupResource]bool{}
		for _, data := range recs {
			m.site.set[recordResource(data)] = true
		}
		m.site.at = time.Now()
	}
	return m.site.set[gr]
}

// namespaceDeletable refuses the deletion of a namespace that holds
// copies, of this gateway's rules or of another gateway's of the site
// (each records its rules' resources): the namespace controller would
// delete them below the mirror, a local fork the upstream never hears of.
func (m *Mirror) namespaceDeletable(ctx context.Context, namespace string) error {
	resources := map[schema.GroupResource]bool{}
	for _, r := range m.rules {
		resources[r.gr] = true
	}
	recs, err := m.state.ListState(ctx, rulesState)
	if err != nil {
		return apierrors.NewInternalError(err)
	}
	for _, data := range recs {
		resources[recordResource(data)] = true
	}
	for _, gr := range slices.SortedFunc(maps.Keys(resources), func(a, b schema.GroupResource) int { return strings.Compare(a.String(), b.String()) }) {
		store, err := m.stores.Store(ctx, gr)
		if err != nil || !store.Namespaced {
			continue
		}
		list := store.NewList()
		if err := store.GetList(ctx, store.Prefix+"/"+namespace+"/", storage.ListOptions{Recursive: true, Predicate: storage.Everything}, list); err != nil {
			return apierrors.NewInternalError(err)
		}
		copies, rules := 0, map[string]bool{}
		meta.EachListItem(list, func(obj runtime.Object) error { //nolint:errcheck // the function returns none
			if a, err := meta.Accessor(obj); err == nil && mirrored.Is(a.GetAnnotations()) {
				copies++
				rules[a.GetAnnotations()[mirrored.AnnotationRule]] = true
			}
			return nil
		})
		if copies > 0 {
			return apierrors.NewConflict(namespaces, namespace, fmt.Errorf("it holds %d %s mirrored from the upstream %s by rule %s; they go when the upstream deletes them, or the rule is removed",
				copies, gr, m.host, strings.Join(slices.Sorted(maps.Keys(rules)), ", ")))
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
		if m.mirroredBy(store, obj) != nil {
			return true
		}
	}
	return false
}
