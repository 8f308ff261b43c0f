package gc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/metadata"
	"k8s.io/klog/v2"
)

// resolve maps an owner reference to its resource.
func (c *Collector) resolve(ref metav1.OwnerReference) (schema.GroupVersionResource, bool, error) {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return schema.GroupVersionResource{}, false, err
	}
	mapping, err := c.mapper.RESTMapping(gv.WithKind(ref.Kind).GroupKind(), gv.Version)
	if err != nil {
		return schema.GroupVersionResource{}, false, err
	}
	return mapping.Resource, mapping.Scope.Name() == meta.RESTScopeNameNamespace, nil
}

func (c *Collector) resource(it item) metadata.ResourceInterface {
	if it.namespace == "" {
		return c.client.Resource(it.gvr)
	}
	return c.client.Resource(it.gvr).Namespace(it.namespace)
}

// delete deletes one object, only as it was judged: its uid and
// resourceVersion. A conflict with a change that left its owner references
// as they were deletes it anyway (a busy object is not starved); one that
// changed them is judged again (upstream's deleteObject).
func (c *Collector) delete(ctx context.Context, it item, obj *metav1.PartialObjectMetadata, policy metav1.DeletionPropagation) error {
	uid, rv := obj.UID, obj.ResourceVersion
	for {
		pre := &metav1.Preconditions{UID: &uid}
		if rv != "" {
			pre.ResourceVersion = &rv
		}
		err := c.resource(it).Delete(ctx, it.name, metav1.DeleteOptions{Preconditions: pre, PropagationPolicy: &policy})
		switch {
		case err == nil:
			deletes.WithLabelValues(string(policy)).Inc()
			klog.V(2).InfoS("Garbage collector deleted an object whose owners are gone", "object", it, "propagation", policy)
			return nil
		case apierrors.IsNotFound(err):
			return nil
		case apierrors.IsConflict(err) && rv != "":
			live, lerr := c.resource(it).Get(ctx, it.name, metav1.GetOptions{})
			switch {
			case apierrors.IsNotFound(lerr):
				return nil
			case lerr != nil:
				return lerr
			case live.UID == uid && reflect.DeepEqual(live.OwnerReferences, obj.OwnerReferences):
				rv = ""
				continue
			}
			return fmt.Errorf("%s changed while it was judged: %w", it, errJudgeAgain)
		case apierrors.IsConflict(err):
			return nil // another object by now
		}
		return fmt.Errorf("deleting %s: %w", it, err)
	}
}

// errJudgeAgain makes the queue judge an object again.
var errJudgeAgain = errors.New("to be judged again")

func (c *Collector) removeFinalizer(ctx context.Context, it item, obj *metav1.PartialObjectMetadata, finalizer string) error {
	keep := slices.DeleteFunc(slices.Clone(obj.Finalizers), func(f string) bool { return f == finalizer })
	if err := c.patchMeta(ctx, it, obj, map[string]any{"finalizers": keep}); err != nil {
		return fmt.Errorf("removing finalizer %s from %s: %w", finalizer, it, err)
	}
	finalizersRemoved.WithLabelValues(finalizer).Inc()
	return nil
}

func (c *Collector) patchMeta(ctx context.Context, it item, obj *metav1.PartialObjectMetadata, fields map[string]any) error {
	fields["uid"] = obj.UID
	fields["resourceVersion"] = obj.ResourceVersion
	patch, err := json.Marshal(map[string]any{"metadata": fields})
	if err != nil {
		return err
	}
	_, err = c.resource(it).Patch(ctx, it.name, types.MergePatchType, patch, metav1.PatchOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
