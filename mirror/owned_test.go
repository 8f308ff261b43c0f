package mirror

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubestore/kubestore/config"
)

// ownObject is an object of k that is node's own, as the write-through
// and the legacy records see it: its namespace, name and object.
func ownObject(k *ownedKind, node string) (namespace, name string, obj runtime.Object, attrs fields.Set) {
	if k.boundTo != nil {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "web"}, Spec: corev1.PodSpec{NodeName: node}}
		return pod.Namespace, pod.Name, pod, fields.Set{"metadata.namespace": pod.Namespace, "metadata.name": pod.Name, "spec.nodeName": node}
	}
	return k.namespace, node, nil, fields.Set{"metadata.namespace": k.namespace, "metadata.name": node}
}

// Every kind the node writes is mirrored by a default rule that selects
// the node's own object and no other node's, not even one whose name
// begins with the node's: a kind the node writes offline without a copy
// to write would be refused.
func TestOwnedKindsAreTheDefaultRulesNodeObjects(t *testing.T) {
	for gr, k := range ownedKinds {
		if k.gr != gr {
			t.Errorf("ownedKinds[%s] holds %s", gr, k.gr)
		}
		var r *rule
		for _, cfg := range config.DefaultMirrorRules() {
			if cfg.GroupResource() == gr && cfg.SelectsNode() {
				var err error
				if r, err = ruleFor(cfg, "n1"); err != nil {
					t.Fatal(err)
				}
			}
		}
		if r == nil {
			t.Errorf("%s: the node writes it, and no default rule mirrors the node's own", gr)
			continue
		}
		ns, _, _, own := ownObject(k, "n1")
		if !r.covers(ns) || !r.fields.Matches(own) {
			t.Errorf("%s: rule %s does not select the node's own object %v", gr, r.name, own)
		}
		_, _, _, other := ownObject(k, "n10")
		if r.fields.Matches(other) {
			t.Errorf("%s: rule %s selects another node's object %v", gr, r.name, other)
		}
	}
}

// The table's decision, kind by kind: which writes of the node's own
// objects are its own (kept pending offline), and that another node's
// object, even one whose name begins with the node's, is not.
func TestOwnWrite(t *testing.T) {
	final := func() bool { return true }
	notFinal := func() bool { return false }
	for _, tc := range []struct {
		gr                schema.GroupResource
		verb, subresource string
		final             func() bool
		want              ownWrite
	}{
		{nodesResource, "create", "", notFinal, ownCreate},
		{nodesResource, "patch", "status", notFinal, ownStatus},
		{nodesResource, "update", "status", notFinal, ownStatus},
		{nodesResource, "patch", "", notFinal, ownNotOwned},
		{nodesResource, "delete", "", final, ownNotOwned},
		{leasesResource, "create", "", notFinal, ownCreate},
		{leasesResource, "update", "", notFinal, ownSpec},
		{leasesResource, "patch", "status", notFinal, ownNotOwned},
		{leasesResource, "delete", "", final, ownNotOwned},
		{csiNodesResource, "create", "", notFinal, ownCreate},
		{csiNodesResource, "patch", "", notFinal, ownSpec},
		{podsResource, "create", "", notFinal, ownNotOwned},
		{podsResource, "patch", "status", notFinal, ownStatus},
		{podsResource, "patch", "", notFinal, ownNotOwned},
		{podsResource, "delete", "", final, ownDelete},
		{podsResource, "delete", "", notFinal, ownNotOwned},
		{podsResource, "delete", "status", final, ownNotOwned},
	} {
		k := ownedKinds[tc.gr]
		if got := k.write(tc.verb, tc.subresource, tc.final); got != tc.want {
			t.Errorf("%s %s %s: %q, want %q", tc.verb, tc.gr, tc.subresource, got, tc.want)
		}
	}
	for gr, k := range ownedKinds {
		ns, name, obj, _ := ownObject(k, "n1")
		if !k.mine("n1", ns, name, obj) {
			t.Errorf("%s %s/%s: not node n1's own", gr, ns, name)
		}
		ons, oname, oobj, _ := ownObject(k, "n10")
		if k.mine("n1", ons, oname, oobj) {
			t.Errorf("%s %s/%s of node n10: node n1's own", gr, ons, oname)
		}
		if k.boundTo == nil && k.mine("n1", "elsewhere", name, nil) {
			t.Errorf("%s elsewhere/%s: node n1's own outside %q", gr, name, k.namespace)
		}
		if k.boundTo != nil && k.mine("n1", ns, name, nil) {
			t.Errorf("%s %s/%s: the node's own without its object", gr, ns, name)
		}
		if ownedKindOf(k.kind) != k {
			t.Errorf("%s: an Event about a %s does not find it", gr, k.kind)
		}
	}
}
