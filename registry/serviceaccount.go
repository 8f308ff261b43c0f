package registry

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

func serviceAccountDef() *resourceDef {
	return &resourceDef{
		gvr:         corev1.SchemeGroupVersion.WithResource("serviceaccounts"),
		kind:        "ServiceAccount",
		singular:    "serviceaccount",
		namespaced:  true,
		shortNames:  []string{"sa"},
		keyPrefix:   "serviceaccounts",
		newFunc:     func() runtime.Object { return &corev1.ServiceAccount{} },
		newListFunc: func() runtime.Object { return &corev1.ServiceAccountList{} },
		columns:     []metav1.TableColumnDefinition{nameCol, col("Secrets", "string", corev1.ServiceAccount{}.SwaggerDoc()["secrets"]), ageCol},
		row: func(obj runtime.Object) []any {
			sa := obj.(*corev1.ServiceAccount)
			return []any{sa.Name, int64(len(sa.Secrets)), age(sa.CreationTimestamp)}
		},
	}
}
