package gc

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// item names one object.
type item struct {
	gvr             schema.GroupVersionResource
	namespace, name string
}

func (i item) String() string {
	return fmt.Sprintf("%s %s/%s", i.gvr.GroupResource(), i.namespace, i.name)
}

func (c *Collector) index(it item, refs []metav1.OwnerReference) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, uid := range c.refs[it] {
		delete(c.dependents[uid], it)
		if len(c.dependents[uid]) == 0 {
			delete(c.dependents, uid)
		}
	}
	delete(c.refs, it)
	for _, r := range refs {
		if c.dependents[r.UID] == nil {
			c.dependents[r.UID] = map[item]struct{}{}
		}
		c.dependents[r.UID][it] = struct{}{}
		c.refs[it] = append(c.refs[it], r.UID)
	}
	tracked.Set(float64(len(c.refs)))
}

func (c *Collector) dependentsOf(uid types.UID) []item {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]item, 0, len(c.dependents[uid]))
	for it := range c.dependents[uid] {
		out = append(out, it)
	}
	return out
}

func (c *Collector) addDependents(uid types.UID) {
	for _, it := range c.dependentsOf(uid) {
		c.queue.Add(it)
	}
}
