package registry

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// decode decodes a JSON or YAML object as a request body is: into the
// kind's internal version, defaulted.
func decode(t *testing.T, doc string) runtime.Object {
	t.Helper()
	api, err := New()
	if err != nil {
		t.Fatal(err)
	}
	obj, _, err := api.Codecs().UniversalDecoder().Decode([]byte(doc), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return obj
}

// TestSetDefaultVolumeBindingMode in k8s.io/kubernetes
// pkg/apis/storage/v1/defaults_test.go, and the reclaim policy of
// SetDefaults_StorageClass: a decoded class is defaulted.
func TestDefaultStorageClass(t *testing.T) {
	sc := decode(t, `{"apiVersion":"storage.k8s.io/v1","kind":"StorageClass","metadata":{"name":"sc"},"provisioner":"p"}`).(*storagev1.StorageClass)
	if sc.VolumeBindingMode == nil || *sc.VolumeBindingMode != storagev1.VolumeBindingImmediate {
		t.Errorf("volumeBindingMode = %v, want Immediate", sc.VolumeBindingMode)
	}
	if sc.ReclaimPolicy == nil || *sc.ReclaimPolicy != corev1.PersistentVolumeReclaimDelete {
		t.Errorf("reclaimPolicy = %v, want Delete", sc.ReclaimPolicy)
	}
	set := decode(t, `{"apiVersion":"storage.k8s.io/v1","kind":"StorageClass","metadata":{"name":"sc"},"provisioner":"p",
		"reclaimPolicy":"Retain","volumeBindingMode":"WaitForFirstConsumer"}`).(*storagev1.StorageClass)
	if *set.VolumeBindingMode != storagev1.VolumeBindingWaitForFirstConsumer || *set.ReclaimPolicy != corev1.PersistentVolumeReclaimRetain {
		t.Errorf("defaulting replaced set values: %v %v", *set.VolumeBindingMode, *set.ReclaimPolicy)
	}
}

func storageClass(mode *storagev1.VolumeBindingMode, topologies ...corev1.TopologySelectorTerm) *storagev1.StorageClass {
	return &storagev1.StorageClass{
		ObjectMeta:        metav1.ObjectMeta{Name: "foo", ResourceVersion: "1"},
		Provisioner:       "kubernetes.io/foo-provisioner",
		ReclaimPolicy:     ptrTo(corev1.PersistentVolumeReclaimDelete),
		VolumeBindingMode: mode,
		AllowedTopologies: topologies,
	}
}

func topologyTerm(exprs ...corev1.TopologySelectorLabelRequirement) corev1.TopologySelectorTerm {
	return corev1.TopologySelectorTerm{MatchLabelExpressions: exprs}
}

func topologyExpr(key string, values ...string) corev1.TopologySelectorLabelRequirement {
	return corev1.TopologySelectorLabelRequirement{Key: key, Values: values}
}

// The cases of TestValidateStorageClass, TestValidateVolumeBindingMode and
// TestValidateAllowedTopologies in k8s.io/kubernetes
// pkg/apis/storage/validation/validation_test.go, with the error each
// invalid one gets.
func TestStorageClassValidate(t *testing.T) {
	immediate, waiting, invalid := storagev1.VolumeBindingImmediate, storagev1.VolumeBindingWaitForFirstConsumer, storagev1.VolumeBindingMode("foo")
	with := func(f func(*storagev1.StorageClass)) *storagev1.StorageClass {
		sc := storageClass(&immediate)
		f(sc)
		return sc
	}
	longParameters := map[string]string{}
	for size := 0; size < maxProvisionerParameterSize; {
		k, v := fmt.Sprintf("param/%d", size), fmt.Sprintf("value-%d", size)
		longParameters[k] = v
		size += len(k) + len(v)
	}
	zone, host := "failure-domain.beta.kubernetes.io/zone", "kubernetes.io/hostname"
	tests := []struct {
		name string
		sc   *storagev1.StorageClass
		err  string // "" when valid
	}{
		{name: "empty parameters", sc: with(func(sc *storagev1.StorageClass) { sc.Parameters = map[string]string{} })},
		{name: "nil parameters", sc: storageClass(&immediate)},
		{name: "some parameters", sc: with(func(sc *storagev1.StorageClass) {
			sc.Parameters = map[string]string{"kubernetes.io/foo-parameter": "free/form/string", "foo-parameter": "free-form-string",
				"foo-parameter2": "{\"embedded\": \"json\", \"with\": {\"structures\":\"inside\"}}"}
		})},
		{name: "retain reclaimPolicy", sc: with(func(sc *storagev1.StorageClass) { sc.ReclaimPolicy = ptrTo(corev1.PersistentVolumeReclaimRetain) })},
		{name: "namespace is present", sc: with(func(sc *storagev1.StorageClass) { sc.Namespace = "bar" }), err: "metadata.namespace: Forbidden"},
		{name: "invalid provisioner", sc: with(func(sc *storagev1.StorageClass) { sc.Provisioner = "kubernetes.io/invalid/provisioner" }),
			err: "provisioner: Invalid value: \"kubernetes.io/invalid/provisioner\""},
		{name: "invalid empty parameter name", sc: with(func(sc *storagev1.StorageClass) { sc.Parameters = map[string]string{"": "value"} }),
			err: "parameters: Invalid value: \"\": field can not be empty."},
		{name: "provisioner: Required value", sc: with(func(sc *storagev1.StorageClass) { sc.Provisioner = "" }), err: "provisioner: Required value"},
		{name: "too long parameters", sc: with(func(sc *storagev1.StorageClass) { sc.Parameters = longParameters }),
			err: "parameters: Too long: may not be more than 512 bytes"}, // more than 512 parameters, upstream's message
		{name: "parameters over 256 kB", sc: with(func(sc *storagev1.StorageClass) {
			sc.Parameters = map[string]string{"k": strings.Repeat("v", maxProvisionerParameterSize)}
		}), err: "parameters: Too long: may not be more than 262144 bytes"},
		{name: "invalid reclaimpolicy", sc: with(func(sc *storagev1.StorageClass) { sc.ReclaimPolicy = ptrTo(corev1.PersistentVolumeReclaimRecycle) }),
			err: "reclaimPolicy: Unsupported value: \"Recycle\": supported values: \"Delete\", \"Retain\""},
		{name: "no mode", sc: storageClass(nil), err: "volumeBindingMode: Required value"},
		{name: "waiting mode", sc: storageClass(&waiting)},
		{name: "invalid mode", sc: storageClass(&invalid), err: "volumeBindingMode: Unsupported value: \"foo\""},

		{name: "valid topology", sc: storageClass(&waiting,
			topologyTerm(topologyExpr(zone, "zone1"), topologyExpr(host, "node1")), topologyTerm(topologyExpr(zone, "zone2"), topologyExpr(host, "node2")))},
		{name: "topology invalid key", sc: storageClass(&waiting, topologyTerm(topologyExpr("/invalidkey", "zone1"))),
			err: "allowedTopologies[0].matchLabelExpressions[0].key: Invalid value: \"/invalidkey\""},
		{name: "topology lack of values", sc: storageClass(&waiting, topologyTerm(topologyExpr(host))),
			err: "allowedTopologies[0].matchLabelExpressions[0].values: Required value"},
		{name: "duplicate TopologySelectorRequirement values", sc: storageClass(&waiting, topologyTerm(topologyExpr(host, "node1", "node1"))),
			err: "allowedTopologies[0].matchLabelExpressions[0].values[1]: Duplicate value: \"node1\""},
		{name: "multiple TopologySelectorRequirement values", sc: storageClass(&waiting, topologyTerm(topologyExpr(host, "node1", "node2")))},
		{name: "empty MatchLabelExpressions", sc: storageClass(&waiting, topologyTerm()),
			err: "allowedTopologies[0].matchLabelExpressions: Duplicate value: \"\""},
		{name: "duplicate MatchLabelExpression keys", sc: storageClass(&waiting, topologyTerm(topologyExpr(host, "node1"), topologyExpr(host, "node2"))),
			err: "allowedTopologies[0].matchLabelExpressions[1].key: Duplicate value: \"kubernetes.io/hostname\""},
		{name: "duplicate MatchLabelExpression keys but across separate terms", sc: storageClass(&waiting,
			topologyTerm(topologyExpr(host, "node1")), topologyTerm(topologyExpr(host, "node2")))},
		{name: "duplicate AllowedTopologies terms - identical", sc: storageClass(&waiting,
			topologyTerm(topologyExpr(zone, "zone1"), topologyExpr(host, "node1")), topologyTerm(topologyExpr(zone, "zone1"), topologyExpr(host, "node1"))),
			err: "allowedTopologies[1].matchLabelExpressions: Duplicate value: \"\""},
		{name: "two terms, with a pair of the same MatchLabelExpressions and a pair of different ones", sc: storageClass(&waiting,
			topologyTerm(topologyExpr(zone, "zone1"), topologyExpr(host, "node1")), topologyTerm(topologyExpr(zone, "zone1"), topologyExpr(host, "node2")))},
		{name: "two terms, with a pair of the same Values and a pair of different ones", sc: storageClass(&waiting,
			topologyTerm(topologyExpr(host, "node1", "node2")), topologyTerm(topologyExpr(host, "node1", "node3")))},
		{name: "duplicate AllowedTopologies terms - different MatchLabelExpressions order", sc: storageClass(&waiting,
			topologyTerm(topologyExpr(host, "node1"), topologyExpr(zone, "zone1")), topologyTerm(topologyExpr(zone, "zone1"), topologyExpr(host, "node1"))),
			err: "allowedTopologies[1].matchLabelExpressions: Duplicate value"},
		{name: "duplicate AllowedTopologies terms - different TopologySelectorRequirement values order", sc: storageClass(&waiting,
			topologyTerm(topologyExpr(zone, "zone1", "zone2")), topologyTerm(topologyExpr(zone, "zone2", "zone1"))),
			err: "allowedTopologies[1].matchLabelExpressions: Duplicate value"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errorsContain(t, validateCreate(t, storageClassDef(), tt.sc), tt.err)
		})
	}
}

// TestValidateUpdateVolumeBindingMode in validation_test.go, and the other
// fields ValidateStorageClassUpdate fixes at creation.
func TestStorageClassValidateUpdate(t *testing.T) {
	immediate, immediate2, waiting := storagev1.VolumeBindingImmediate, storagev1.VolumeBindingImmediate, storagev1.VolumeBindingWaitForFirstConsumer
	with := func(f func(*storagev1.StorageClass)) *storagev1.StorageClass {
		sc := storageClass(&immediate)
		f(sc)
		return sc
	}
	tests := []struct {
		name     string
		old, new *storagev1.StorageClass
		err      string
	}{
		{name: "old and new same mode ptr", old: storageClass(&immediate), new: storageClass(&immediate)},
		{name: "old and new same mode value", old: storageClass(&immediate), new: storageClass(&immediate2)},
		{name: "labels and allowVolumeExpansion change", old: storageClass(&immediate), new: with(func(sc *storagev1.StorageClass) {
			sc.Labels = map[string]string{"a": "b"}
			sc.AllowVolumeExpansion = ptrTo(true)
		})},
		{name: "nil and empty parameters are the same", old: storageClass(&immediate), new: with(func(sc *storagev1.StorageClass) { sc.Parameters = map[string]string{} })},
		{name: "old no mode, new mode", old: storageClass(nil), new: storageClass(&waiting), err: "volumeBindingMode: Invalid value: \"WaitForFirstConsumer\": field is immutable"},
		{name: "old and new different modes", old: storageClass(&waiting), new: storageClass(&immediate), err: "volumeBindingMode: Invalid value: \"Immediate\": field is immutable"},
		{name: "provisioner", old: storageClass(&immediate), new: with(func(sc *storagev1.StorageClass) { sc.Provisioner = "other" }),
			err: "provisioner: Invalid value: \"other\": field is immutable"},
		{name: "parameters", old: storageClass(&immediate), new: with(func(sc *storagev1.StorageClass) { sc.Parameters = map[string]string{"a": "b"} }),
			err: "parameters: Invalid value"},
		{name: "reclaimPolicy", old: storageClass(&immediate), new: with(func(sc *storagev1.StorageClass) { sc.ReclaimPolicy = ptrTo(corev1.PersistentVolumeReclaimRetain) }),
			err: "reclaimPolicy: Invalid value: \"Retain\": field is immutable"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errorsContain(t, validateUpdate(t, storageClassDef(), tt.new, tt.old), tt.err)
		})
	}
}

// GetWarningsForStorageClass (pkg/api/storage): deprecated node labels in
// allowed topologies, on create and update.
func TestStorageClassWarnings(t *testing.T) {
	waiting := storagev1.VolumeBindingWaitForFirstConsumer
	sc := storageClass(&waiting, topologyTerm(topologyExpr("kubernetes.io/hostname", "n")),
		topologyTerm(topologyExpr("topology.kubernetes.io/zone", "a"), topologyExpr("failure-domain.beta.kubernetes.io/zone", "a")))
	want := []string{`allowedTopologies[1].matchLabelExpressions[1].key: deprecated since v1.17; use "topology.kubernetes.io/zone" instead`}
	st := newStrategy(nil, storageClassDef())
	if got := st.WarningsOnCreate(t.Context(), sc); !reflect.DeepEqual(got, want) {
		t.Errorf("create warnings = %q, want %q", got, want)
	}
	if got := st.WarningsOnUpdate(t.Context(), sc, sc); !reflect.DeepEqual(got, want) {
		t.Errorf("update warnings = %q, want %q", got, want)
	}
	if got := st.WarningsOnCreate(t.Context(), storageClass(&waiting)); got != nil {
		t.Errorf("warnings without topologies: %q", got)
	}
}

// The cases of TestPrintStorageClass and
// TestPrintStorageClassListEffectiveDefault in k8s.io/kubernetes
// pkg/printers/internalversion/printers_test.go.
func TestStorageClassTable(t *testing.T) {
	retain, wait := corev1.PersistentVolumeReclaimRetain, storagev1.VolumeBindingWaitForFirstConsumer
	tests := []struct {
		sc   storagev1.StorageClass
		want []any
	}{
		{storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "sc1"}, Provisioner: "kubernetes.io/glusterfs"},
			[]any{"sc1", "kubernetes.io/glusterfs", "Delete", "Immediate", false, "<unknown>"}},
		{storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "sc4"}, Provisioner: "kubernetes.io/nfs", ReclaimPolicy: &retain},
			[]any{"sc4", "kubernetes.io/nfs", "Retain", "Immediate", false, "<unknown>"}},
		{storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "sc6"}, Provisioner: "kubernetes.io/nfs", ReclaimPolicy: &retain,
			AllowVolumeExpansion: ptrTo(true), VolumeBindingMode: &wait},
			[]any{"sc6", "kubernetes.io/nfs", "Retain", "WaitForFirstConsumer", true, "<unknown>"}},
		// One object is never marked default: only a list knows.
		{storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "standard", Annotations: map[string]string{isDefaultStorageClassAnnotation: "true"}},
			Provisioner: "p"}, []any{"standard", "p", "Delete", "Immediate", false, "<unknown>"}},
	}
	for _, tt := range tests {
		t.Run(tt.sc.Name, func(t *testing.T) {
			if got := tableRow(t, storageClassDef(), &tt.sc); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("row = %#v, want %#v", got, tt.want)
			}
		})
	}

	now := metav1.Now()
	earlier := metav1.NewTime(now.Add(-time.Hour))
	class := func(name string, created metav1.Time, annotation string) storagev1.StorageClass {
		sc := storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: created}, Provisioner: "kubernetes.io/gce-pd"}
		if annotation != "" {
			sc.Annotations = map[string]string{annotation: "true"}
		}
		return sc
	}
	lists := []struct {
		name  string
		items []storagev1.StorageClass
		want  []string
	}{
		{"single default", []storagev1.StorageClass{class("standard", now, isDefaultStorageClassAnnotation), class("fast", earlier, "")},
			[]string{"standard (default)", "fast"}},
		{"multiple defaults - newest wins", []storagev1.StorageClass{class("standard", earlier, isDefaultStorageClassAnnotation), class("fast", now, isDefaultStorageClassAnnotation)},
			[]string{"standard", "fast (default)"}},
		{"same time - first by name wins", []storagev1.StorageClass{class("b", now, isDefaultStorageClassAnnotation), class("a", now, betaIsDefaultStorageClassAnnotation)},
			[]string{"b", "a (default)"}},
		{"no default", []storagev1.StorageClass{class("standard", now, ""), class("fast", earlier, "")}, []string{"standard", "fast"}},
	}
	for _, tt := range lists {
		t.Run(tt.name, func(t *testing.T) {
			table, err := storageClassDef().tableConvertor().ConvertToTable(t.Context(), &storagev1.StorageClassList{Items: tt.items}, nil)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, r := range table.Rows {
				names = append(names, r.Cells[0].(string))
			}
			if !reflect.DeepEqual(names, tt.want) {
				t.Errorf("names = %q, want %q", names, tt.want)
			}
		})
	}
}
