package registry

import (
	"bytes"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func newConfigMap(name, namespace string, data map[string]string, binary map[string][]byte) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, ResourceVersion: "1"}, Data: data, BinaryData: binary}
}

// The cases of TestValidateConfigMap in k8s.io/kubernetes
// pkg/apis/core/validation/validation_test.go.
func TestConfigMapValidate(t *testing.T) {
	tests := []struct {
		name  string
		cm    *corev1.ConfigMap
		valid bool
	}{
		{"valid", newConfigMap("validname", "validns", map[string]string{"key": "value"}, map[string][]byte{"bin": []byte("value")}), true},
		{"max key length", newConfigMap("validname", "validns", map[string]string{strings.Repeat("a", 253): "value"}, nil), true},
		{"leading dot key", newConfigMap("validname", "validns", map[string]string{".ab": "value"}, nil), true},
		{"binary leading dot key", newConfigMap("validname", "validns", nil, map[string][]byte{".ab": []byte("value")}), true},
		{"binary non-UTF-8 value", newConfigMap("validname", "validns", nil, map[string][]byte{"key": {0, 0xFE, 0, 0xFF}}), true},
		{"empty name", newConfigMap("", "validns", nil, nil), false},
		{"invalid name", newConfigMap("NoUppercaseOrSpecialCharsLike=Equals", "validns", nil, nil), false},
		{"empty namespace", newConfigMap("validname", "", nil, nil), false},
		{"invalid namespace", newConfigMap("validname", "NoUppercaseOrSpecialCharsLike=Equals", nil, nil), false},
		{"invalid key", newConfigMap("validname", "validns", map[string]string{"a*b": "value"}, nil), false},
		{"dot key", newConfigMap("validname", "validns", map[string]string{".": "value"}, nil), false},
		{"double dot key", newConfigMap("validname", "validns", map[string]string{"..": "value"}, nil), false},
		{"over max key length", newConfigMap("validname", "validns", map[string]string{strings.Repeat("a", 254): "value"}, nil), false},
		{"over max size", newConfigMap("validname", "validns", map[string]string{"key": strings.Repeat("a", corev1.MaxSecretSize+1)}, nil), false},
		{"duplicated key", newConfigMap("validname", "validns", map[string]string{"key": "value1"}, map[string][]byte{"key": []byte("value2")}), false},
		{"binary invalid key", newConfigMap("validname", "validns", nil, map[string][]byte{"a*b": []byte("value")}), false},
		{"binary dot key", newConfigMap("validname", "validns", nil, map[string][]byte{".": []byte("value")}), false},
		{"binary double dot key", newConfigMap("validname", "validns", nil, map[string][]byte{"..": []byte("value")}), false},
		{"binary over max key length", newConfigMap("validname", "validns", nil, map[string][]byte{strings.Repeat("a", 254): []byte("value")}), false},
		{"binary over max size", newConfigMap("validname", "validns", nil, map[string][]byte{"bin": bytes.Repeat([]byte("a"), corev1.MaxSecretSize+1)}), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errs := validateCreate(t, configMapDef(), tt.cm)
			if tt.valid != (len(errs) == 0) {
				t.Errorf("valid = %v, want %v (errors: %v)", len(errs) == 0, tt.valid, errs.ToAggregate())
			}
		})
	}
}

// The cases of TestValidateConfigMapUpdate in validation_test.go.
func TestConfigMapValidateUpdate(t *testing.T) {
	cm := func(immutable *bool, data map[string]string) *corev1.ConfigMap {
		c := newConfigMap("validname", "validns", data, nil)
		c.Immutable = immutable
		return c
	}
	yes, no := ptrTo(true), ptrTo(false)
	data := map[string]string{"key": "value"}
	added := map[string]string{"key": "value", "key-2": "value"}
	changed := map[string]string{"key": "other"}
	tests := []struct {
		name     string
		old, new *corev1.ConfigMap
		valid    bool
	}{
		{"mark configmap immutable", cm(nil, data), cm(yes, data), true},
		{"revert immutable configmap", cm(yes, data), cm(nil, data), false},
		{"mark immutable configmap mutable", cm(yes, data), cm(no, data), false},
		{"add data in configmap", cm(nil, data), cm(nil, added), true},
		{"add data in immutable configmap", cm(yes, data), cm(yes, added), false},
		{"change data in configmap", cm(nil, data), cm(nil, changed), true},
		{"change data in immutable configmap", cm(yes, data), cm(yes, changed), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errs := validateUpdate(t, configMapDef(), tt.new, tt.old)
			if tt.valid != (len(errs) == 0) {
				t.Errorf("valid = %v, want %v (errors: %v)", len(errs) == 0, tt.valid, errs.ToAggregate())
			}
		})
	}
}

// printConfigMap in k8s.io/kubernetes pkg/printers/internalversion/printers.go:
// the data count adds binaryData.
func TestConfigMapTable(t *testing.T) {
	cm := newConfigMap("cm", "ns", map[string]string{"a": "1", "b": "2"}, map[string][]byte{"c": nil})
	want := []any{"cm", int64(3), "<unknown>"}
	if got := tableRow(t, configMapDef(), cm); !reflect.DeepEqual(got, want) {
		t.Errorf("row = %#v, want %#v", got, want)
	}
}
