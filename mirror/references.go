package mirror

import (
	"context"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apiserver/pkg/storage"
	"k8s.io/klog/v2"

	"github.com/kubestore/kubestore/access/node"
	"github.com/kubestore/kubestore/mirrored"
)

// references runs a stream per object that the mirrored pods reference
// (rules with referencedBy), as the kubelet watches each ConfigMap and
// Secret its pods use; an object no pod references any more is deleted.
type references struct {
	m       *Mirror
	mu      sync.Mutex
	byPod   map[string]sets.Set[refKey]
	count   map[refKey]int
	running map[refKey]*refStream
	ctx     context.Context
}

// refKey is one referenced object of one rule.
type refKey struct {
	rule            *rule
	namespace, name string
}

type refStream struct {
	cancel context.CancelFunc
	done   chan struct{}
}

func newReferences(m *Mirror) *references {
	return &references{m: m, byPod: map[string]sets.Set[refKey]{}, count: map[refKey]int{}, running: map[refKey]*refStream{}}
}

// dependents are the rules whose objects the pods of rule r reference.
func (x *references) dependents(r *rule) []*rule {
	var out []*rule
	for _, d := range x.m.rules {
		if d.referencedBy == r.base {
			out = append(out, d)
		}
	}
	return out
}

// seed registers the references of the pods already mirrored, deletes the
// referenced objects no pod references any more, and from then on starts
// a stream per reference while ctx lasts.
func (x *references) seed(ctx context.Context) error {
	x.mu.Lock()
	x.ctx = ctx
	x.mu.Unlock()
	for _, r := range x.m.rules {
		deps := x.dependents(r)
		if len(deps) == 0 {
			continue
		}
		store, err := x.m.stores.Store(ctx, r.gr)
		if err != nil {
			return err
		}
		list := store.NewList()
		if err := store.GetList(ctx, store.Prefix+"/", storage.ListOptions{Recursive: true, Predicate: storage.Everything}, list); err != nil {
			return err
		}
		if err := meta.EachListItem(list, func(obj runtime.Object) error {
			if a, err := meta.Accessor(obj); err == nil && r.owns(store, a.GetAnnotations()[mirrored.AnnotationRule], obj) {
				x.changed(r, obj)
			}
			return nil
		}); err != nil {
			return err
		}
		for _, d := range deps {
			ds, err := x.m.stores.Store(ctx, d.gr)
			if err != nil {
				return err
			}
			local, err := x.m.localObjects(ctx, d, ds, "", "")
			if err != nil {
				return err
			}
			x.mu.Lock()
			for _, ref := range local {
				if x.count[refKey{d, ref.namespace, ref.name}] == 0 && !x.referencedLocally(ctx, d, ref.namespace, ref.name) {
					if _, err := x.m.remove(ctx, d, ds, ref.namespace, ref.name, "", false); err != nil {
						klog.V(2).InfoS("Mirror: deleting an object no pod references", "rule", d.name, "object", ref, "err", err)
					}
				}
			}
			x.mu.Unlock()
		}
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	for k := range x.count {
		x.startLocked(k)
	}
	return nil
}

// changed records the references of pod obj of rule r (none when it was
// deleted) and starts or stops the streams of what changed.
func (x *references) changed(r *rule, obj runtime.Object) {
	if r.foreign {
		// Another gateway's pod: that gateway follows its references.
		return
	}
	deps := x.dependents(r)
	if len(deps) == 0 {
		return
	}
	var refs sets.Set[refKey]
	key := ""
	if d, ok := obj.(deletedObject); ok {
		obj = d.Object
	} else if pod, ok := obj.(*corev1.Pod); ok {
		refs = podReferences(pod, deps)
	}
	if a, err := meta.Accessor(obj); err == nil {
		key = a.GetNamespace() + "/" + a.GetName()
	}
	var stopped []stoppedRef
	x.mu.Lock()
	old := x.byPod[key]
	if refs.Len() == 0 {
		delete(x.byPod, key)
	} else {
		x.byPod[key] = refs
	}
	for k := range refs.Difference(old) {
		x.count[k]++
		if x.count[k] == 1 && x.ctx != nil {
			x.startLocked(k)
		}
	}
	for k := range old.Difference(refs) {
		x.count[k]--
		if x.count[k] == 0 {
			delete(x.count, k)
			if rs, ok := x.running[k]; ok {
				delete(x.running, k)
				stopped = append(stopped, stoppedRef{k, rs})
			}
		}
	}
	ctx := x.ctx
	x.mu.Unlock()
	// Outside the lock: the pods' applies do not wait for a stream to end
	// or for an etcd delete.
	for _, s := range stopped {
		x.stop(ctx, s)
	}
}

// stoppedRef is a reference no pod holds any more, and its stream.
type stoppedRef struct {
	key refKey
	rs  *refStream
}

func (x *references) startLocked(k refKey) {
	if _, ok := x.running[k]; ok || x.ctx == nil {
		return
	}
	ctx, cancel := context.WithCancel(x.ctx)
	rs := &refStream{cancel: cancel, done: make(chan struct{})}
	x.running[k] = rs
	s := x.m.newStream(k.rule, k.namespace, k.name)
	go func() {
		defer close(rs.done)
		s.run(ctx)
	}()
}

// stop ends the stream of a reference and deletes its object, unless a
// pod references it again by then: no mirrored pod references it.
func (x *references) stop(ctx context.Context, s stoppedRef) {
	k := s.key
	s.rs.cancel()
	<-s.rs.done
	x.mu.Lock()
	again := x.count[k] > 0
	if !again {
		x.m.dropStream(&stream{rule: k.rule, namespace: k.namespace, name: k.name})
	}
	x.mu.Unlock()
	if again || ctx == nil || ctx.Err() != nil || x.referencedLocally(ctx, k.rule, k.namespace, k.name) {
		return
	}
	store, err := x.m.stores.Store(ctx, k.rule.gr)
	if err == nil {
		_, err = x.m.remove(ctx, k.rule, store, k.namespace, k.name, "", false)
	}
	if err != nil {
		klog.V(2).InfoS("Mirror: deleting an object no pod references", "rule", k.rule.name, "namespace", k.namespace, "name", k.name, "err", err)
	}
	// A pod that came to reference it during the delete started a stream
	// that may have resumed before it: that stream starts again, from a
	// relist of the object.
	x.mu.Lock()
	rs, restart := x.running[k]
	if restart {
		delete(x.running, k)
	}
	x.mu.Unlock()
	if !restart {
		return
	}
	rs.cancel()
	<-rs.done
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.count[k] > 0 {
		x.startLocked(k)
	}
}

// wait returns once every stream of a reference has ended (their context
// is Run's).
func (x *references) wait() {
	x.mu.Lock()
	running := x.running
	x.running = map[refKey]*refStream{}
	x.mu.Unlock()
	for _, rs := range running {
		rs.cancel()
		<-rs.done
	}
}

var (
	configMaps      = schema.GroupResource{Resource: "configmaps"}
	secrets         = schema.GroupResource{Resource: "secrets"}
	serviceAccounts = schema.GroupResource{Resource: "serviceaccounts"}
)

// podReferences are the objects pod uses, each under the dependent rule of
// its resource, as the kubelet reads them: the Secrets and ConfigMaps of
// upstream's VisitPodSecretNames and VisitPodConfigmapNames (access/node's
// port: image pull secrets, env and envFrom of every container, and
// volumes, projected and those of volume plugins that take a secret), and
// the ServiceAccount its tokens are for.
func podReferences(pod *corev1.Pod, deps []*rule) sets.Set[refKey] {
	out := sets.New[refKey]()
	add := func(gr schema.GroupResource) func(name string) bool {
		return func(name string) bool {
			for _, d := range deps {
				if d.gr == gr && name != "" {
					out.Insert(refKey{d, pod.Namespace, name})
				}
			}
			return true
		}
	}
	add(serviceAccounts)(pod.Spec.ServiceAccountName)
	node.VisitPodSecretNames(pod, add(secrets))
	node.VisitPodConfigmapNames(pod, add(configMaps))
	return out
}

// referencedLocally reports whether a pod in the local store, of any
// node's rule of the pods d follows, references namespace/name under d:
// on a site, the other gateways' pods (not counted here, whose
// references their own gateway follows) keep what they use. An error
// counts as referenced: nothing is deleted on a guess.
func (x *references) referencedLocally(ctx context.Context, d *rule, namespace, name string) bool {
	store, err := x.m.stores.Store(ctx, podsResource)
	if err != nil {
		return true
	}
	prefix := store.Prefix + "/"
	if namespace != "" {
		prefix += namespace + "/"
	}
	list := store.NewList()
	if err := store.GetList(ctx, prefix, storage.ListOptions{Recursive: true, Predicate: storage.Everything}, list); err != nil {
		return true
	}
	key, found := refKey{d, namespace, name}, false
	meta.EachListItem(list, func(obj runtime.Object) error { //nolint:errcheck // the function returns none
		pod, ok := obj.(*corev1.Pod)
		if !ok || found {
			return nil
		}
		if r := x.m.rule(pod.Annotations[mirrored.AnnotationRule]); r != nil && r.base == d.referencedBy {
			found = podReferences(pod, []*rule{d}).Has(key)
		}
		return nil
	})
	return found
}

// referenced reports whether a mirrored pod references namespace/name
// under rule r.
func (x *references) referenced(r *rule, namespace, name string) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.count[refKey{r, namespace, name}] > 0
}
