package registry

import (
	"context"
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"
	clientfeatures "k8s.io/client-go/features"
	clientfeaturestesting "k8s.io/client-go/features/testing"
	"k8s.io/client-go/tools/cache"

	"github.com/kubestore/kubestore/cacher"
)

// An informer on ListerWatcher sees what a client's informer sees (the
// list, then every change, a field selector applied), whether client-go
// would use WatchList or not, and what it lists shares its maps with the
// watch cache: a typed informer and a metadata informer hold the same
// labels map, where a decoded copy of their own (or WatchList's initial
// events, deep copies) would hold two.
func TestListerWatcher(t *testing.T) {
	for _, watchList := range []bool{true, false} {
		t.Run(map[bool]string{true: "watchlist", false: "list then watch"}[watchList], func(t *testing.T) {
			clientfeaturestesting.SetFeatureDuringTest(t, clientfeatures.WatchListClient, watchList)
			api, s := newTestStorage(t)
			s.ReadWatchedObjectsWith(cacher.SharedObject) // as the server does
			createNamespace(t, api, s, "lw")
			ctx := genericapirequest.WithNamespace(t.Context(), "lw")
			configMaps := s.stores[s.def("ConfigMap")]
			create := func(name string) {
				t.Helper()
				cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "lw", Labels: map[string]string{"app": name},
					OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "owner", UID: "u-1"}}}}
				if _, err := configMaps.Create(ctx, cm, rest.ValidateAllObjectFunc, &metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			create("one")
			// The informers' first list reads the cache as it is (RV 0): once
			// it has one, both list it rather than hear of it.
			waitFor(t, "the watch cache to have one", func() bool {
				l, err := configMaps.List(ctx, &metainternalversion.ListOptions{ResourceVersion: "0"})
				return err == nil && len(l.(*corev1.ConfigMapList).Items) == 1
			})

			gvr := corev1.SchemeGroupVersion.WithResource("configmaps")
			if _, ok := s.ListerWatcher(schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "devices"}, nil, true); ok {
				t.Error("a resource the registry does not serve has a ListerWatcher")
			}
			metaLW, ok := s.ListerWatcher(gvr, nil, true)
			if !ok {
				t.Fatal("configmaps have no ListerWatcher")
			}
			typedLW, _ := s.ListerWatcher(gvr, fields.OneTermEqualSelector("metadata.name", "one"), false)
			metas := cache.NewSharedIndexInformer(metaLW, &metav1.PartialObjectMetadata{}, 0, cache.Indexers{})
			typed := cache.NewSharedIndexInformer(typedLW, &corev1.ConfigMap{}, 0, cache.Indexers{})
			go metas.RunWithContext(t.Context())
			go typed.RunWithContext(t.Context())
			if !cache.WaitForCacheSync(t.Context().Done(), metas.HasSynced, typed.HasSynced) {
				t.Fatal("informers not synced")
			}
			get := func(inf cache.SharedIndexInformer, name string) any {
				obj, _, _ := inf.GetStore().GetByKey("lw/" + name)
				return obj
			}
			m, _ := get(metas, "one").(*metav1.PartialObjectMetadata)
			c, _ := get(typed, "one").(*corev1.ConfigMap)
			if m == nil || c == nil {
				t.Fatalf("after the sync: metadata %v, typed %v", m, c)
			}
			if len(m.OwnerReferences) != 1 || m.OwnerReferences[0].UID != "u-1" || m.Labels["app"] != "one" {
				t.Errorf("metadata of one: %+v", m.ObjectMeta)
			}
			if reflect.ValueOf(m.Labels).UnsafePointer() != reflect.ValueOf(c.Labels).UnsafePointer() {
				t.Error("the two informers hold two copies of one's labels, want the watch cache's one")
			}

			// Later changes, and the typed informer's selector.
			create("two")
			obj, err := configMaps.Get(ctx, "one", &metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			updated := obj.(*corev1.ConfigMap).DeepCopy()
			updated.Labels["app"] = "changed"
			if _, _, err := configMaps.Update(ctx, "one", rest.DefaultUpdatedObjectInfo(updated), rest.ValidateAllObjectFunc, rest.ValidateAllObjectUpdateFunc, false, &metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			waitFor(t, "the metadata informer to see two and one's change", func() bool {
				m, _ := get(metas, "one").(*metav1.PartialObjectMetadata)
				return get(metas, "two") != nil && m != nil && m.Labels["app"] == "changed"
			})
			waitFor(t, "the typed informer to see one's change", func() bool {
				c, _ := get(typed, "one").(*corev1.ConfigMap)
				return c != nil && c.Labels["app"] == "changed"
			})
			// What a watch event brought is the watch cache's object too,
			// not the copy the cacher's wrapper hands out
			// (cacher.SharedObject, whose reading of the wrapper this pins
			// on the pinned k8s.io/apiserver): an informer that holds every
			// pod would otherwise hold a second decoded pod per change.
			l, err := configMaps.List(ctx, &metainternalversion.ListOptions{ResourceVersion: "0"})
			if err != nil {
				t.Fatal(err)
			}
			c, _ = get(typed, "one").(*corev1.ConfigMap)
			for _, item := range l.(*corev1.ConfigMapList).Items {
				if item.Name == "one" && reflect.ValueOf(item.Labels).UnsafePointer() != reflect.ValueOf(c.Labels).UnsafePointer() {
					t.Error("the typed informer holds a copy of one as its watch event brought it, want the watch cache's object")
				}
			}
			if get(typed, "two") != nil {
				t.Error("the typed informer selecting metadata.name=one has two")
			}
			if _, _, err := configMaps.Delete(ctx, "one", rest.ValidateAllObjectFunc, &metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			waitFor(t, "both informers to see one deleted", func() bool {
				return get(metas, "one") == nil && get(typed, "one") == nil
			})
		})
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(t.Context(), 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return cond(), nil
	}); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

// The watch cache's pods of one template hold their containers and their
// managedFields' fieldsV1 once (cacher's withSharedParts), and an update
// of one changes that one alone.
func TestWatchCachePodsShareTheirTemplate(t *testing.T) {
	api, s := newTestStorage(t)
	createNamespace(t, api, s, "tpl")
	ctx := genericapirequest.WithNamespace(t.Context(), "tpl")
	pods := s.stores[s.def("Pod")]
	for _, name := range []string{"a", "b"} {
		p := makePod(name, func(p *corev1.Pod) {
			p.Namespace, p.ResourceVersion, p.Spec.NodeName = "tpl", "", "node-"+name
			// As the API's field manager records a create.
			p.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "agent", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1",
				FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{"f:containers":{"k:{\"name\":\"ctr\"}":{}},"f:nodeName":{}}}`)}}}
		})
		if _, err := pods.Create(ctx, p, rest.ValidateAllObjectFunc, &metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	cached := func() map[string]*corev1.Pod {
		l, err := pods.List(ctx, &metainternalversion.ListOptions{ResourceVersion: "0"})
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]*corev1.Pod{}
		for i := range l.(*corev1.PodList).Items {
			p := &l.(*corev1.PodList).Items[i]
			out[p.Name] = p
		}
		return out
	}
	waitFor(t, "the watch cache to hold both pods", func() bool { return len(cached()) == 2 })
	c := cached()
	a, b := c["a"], c["b"]
	if &a.Spec.Containers[0] != &b.Spec.Containers[0] {
		t.Error("the cached pods a and b hold two copies of one template's containers")
	}
	if len(a.ManagedFields) == 0 || len(b.ManagedFields) == 0 || &a.ManagedFields[0].FieldsV1.Raw[0] != &b.ManagedFields[0].FieldsV1.Raw[0] {
		t.Error("the cached pods a and b hold two copies of one fieldsV1")
	}

	obj, err := pods.Get(ctx, "b", &metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	updated := obj.(*corev1.Pod).DeepCopy()
	updated.Spec.Containers[0].Image = "image:v2"
	if _, _, err := pods.Update(ctx, "b", rest.DefaultUpdatedObjectInfo(updated), rest.ValidateAllObjectFunc, rest.ValidateAllObjectUpdateFunc, false, &metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the watch cache to hold b's update", func() bool { return cached()["b"].Spec.Containers[0].Image == "image:v2" })
	c = cached()
	if c["a"].Spec.Containers[0].Image != "image" || a.Spec.Containers[0].Image != "image" {
		t.Errorf("a's image after b's update: %q, %q; want image", c["a"].Spec.Containers[0].Image, a.Spec.Containers[0].Image)
	}
	if &c["a"].Spec.Containers[0] == &c["b"].Spec.Containers[0] {
		t.Error("b's update shares a's containers")
	}
}
