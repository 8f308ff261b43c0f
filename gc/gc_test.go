package gc

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubestore/kubestore/mirrored"
)

// The informers keep of each object only what collecting needs.
func TestStrip(t *testing.T) {
	now := metav1.Now()
	in := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{
		Name: "n", Namespace: "ns", UID: "u", ResourceVersion: "5", Labels: map[string]string{"a": "b"},
		Annotations:     map[string]string{"big": "x", mirrored.AnnotationRule: "pods"},
		OwnerReferences: []metav1.OwnerReference{{UID: "o"}}, Finalizers: []string{"orphan"}, DeletionTimestamp: &now,
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "m"}},
	}}
	out, err := strip(in)
	if err != nil {
		t.Fatal(err)
	}
	m := out.(*metav1.PartialObjectMetadata)
	if m.Labels != nil || m.ManagedFields != nil || len(m.Annotations) != 1 || m.Annotations[mirrored.AnnotationRule] != "pods" {
		t.Errorf("kept too much: %+v", m.ObjectMeta)
	}
	if m.Name != "n" || m.Namespace != "ns" || m.UID != "u" || m.ResourceVersion != "5" || len(m.OwnerReferences) != 1 || len(m.Finalizers) != 1 || m.DeletionTimestamp == nil {
		t.Errorf("lost what collecting needs: %+v", m.ObjectMeta)
	}
}

// The dependents index follows an object's owner references as they
// change, and forgets it when it goes.
func TestIndex(t *testing.T) {
	c := &Collector{dependents: map[types.UID]map[item]struct{}{}, refs: map[item][]types.UID{}}
	cm := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	a, b := item{gvr: cm, namespace: "ns", name: "a"}, item{gvr: cm, namespace: "ns", name: "b"}
	c.index(a, []metav1.OwnerReference{{UID: "p"}, {UID: "q"}})
	c.index(b, []metav1.OwnerReference{{UID: "p"}})
	if got := len(c.dependentsOf("p")); got != 2 {
		t.Errorf("dependents of p: %d, want 2", got)
	}
	c.index(a, []metav1.OwnerReference{{UID: "q"}})
	if got := c.dependentsOf("p"); len(got) != 1 || got[0] != b {
		t.Errorf("dependents of p after a lost its reference: %v", got)
	}
	c.index(b, nil)
	c.index(a, nil)
	if len(c.dependents) != 0 || len(c.refs) != 0 {
		t.Errorf("index not empty after every object went: %v %v", c.dependents, c.refs)
	}
}
