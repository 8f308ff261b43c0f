package gc

import (
	"context"
	"fmt"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
)

// unblockOwners sets blockOwnerDeletion false on every owner reference of
// obj (upstream's unblockOwnerReferences).
func (c *Collector) unblockOwners(ctx context.Context, it item, obj *metav1.PartialObjectMetadata) error {
	refs := slices.Clone(obj.OwnerReferences)
	changed := false
	for i := range refs {
		if refs[i].BlockOwnerDeletion != nil && *refs[i].BlockOwnerDeletion {
			refs[i].BlockOwnerDeletion = ptr.To(false)
			changed = true
		}
	}
	if !changed {
		return nil
	}
	if err := c.patchMeta(ctx, it, obj, map[string]any{"ownerReferences": refs}); err != nil {
		return fmt.Errorf("unblocking the owner references of %s: %w", it, err)
	}
	klog.V(2).InfoS("Garbage collector: owner references no longer block, to break a cycle of foreground deletions", "object", it)
	return nil
}

// removeReferences removes the references to uids from an object, by a
// merge patch that holds its resourceVersion: a concurrent change makes it
// fail and the object is judged again.
func (c *Collector) removeReferences(ctx context.Context, it item, obj *metav1.PartialObjectMetadata, uids []types.UID) (bool, error) {
	keep := make([]metav1.OwnerReference, 0, len(obj.OwnerReferences))
	for _, ref := range obj.OwnerReferences {
		if !slices.Contains(uids, ref.UID) {
			keep = append(keep, ref)
		}
	}
	if len(keep) == len(obj.OwnerReferences) {
		return false, nil
	}
	if err := c.patchMeta(ctx, it, obj, map[string]any{"ownerReferences": keep}); err != nil {
		return false, fmt.Errorf("removing owner references from %s: %w", it, err)
	}
	referencesRemoved.Add(float64(len(obj.OwnerReferences) - len(keep)))
	return true, nil
}
