package registry

import (
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func configMapDef() *resourceDef {
	return &resourceDef{
		gvr:         corev1.SchemeGroupVersion.WithResource("configmaps"),
		kind:        "ConfigMap",
		singular:    "configmap",
		namespaced:  true,
		shortNames:  []string{"cm"},
		keyPrefix:   "configmaps",
		newFunc:     func() runtime.Object { return &corev1.ConfigMap{} },
		newListFunc: func() runtime.Object { return &corev1.ConfigMapList{} },
		validate: func(obj runtime.Object) field.ErrorList {
			cm := obj.(*corev1.ConfigMap)
			// The size error is about the whole object.
			return validateData(cm.Data, cm.BinaryData, "data", "binaryData", field.NewPath(""))
		},
		validateUpdate: func(obj, old runtime.Object) field.ErrorList {
			cm, o := obj.(*corev1.ConfigMap), old.(*corev1.ConfigMap)
			return validateImmutable(cm.Immutable, o.Immutable,
				apiequality.Semantic.DeepEqual(cm.Data, o.Data) && apiequality.Semantic.DeepEqual(cm.BinaryData, o.BinaryData))
		},
		columns: []metav1.TableColumnDefinition{nameCol, col("Data", "integer", corev1.ConfigMap{}.SwaggerDoc()["data"]), ageCol},
		row: func(obj runtime.Object) []any {
			cm := obj.(*corev1.ConfigMap)
			return []any{cm.Name, int64(len(cm.Data) + len(cm.BinaryData)), age(cm.CreationTimestamp)}
		},
	}
}
