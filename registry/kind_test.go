package registry

import (
	"context"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// validateCreate runs a kind's create validation as the store does:
// metadata, then the kind's rules.
func validateCreate(t *testing.T, d *resourceDef, obj runtime.Object) field.ErrorList {
	t.Helper()
	return newStrategy(nil, d).Validate(context.Background(), obj)
}

// validateUpdate runs a kind's update validation as the store does.
func validateUpdate(t *testing.T, d *resourceDef, obj, old runtime.Object) field.ErrorList {
	t.Helper()
	return newStrategy(nil, d).ValidateUpdate(context.Background(), obj, old)
}

// tableRow is the first row's cells of obj in d's table.
func tableRow(t *testing.T, d *resourceDef, obj runtime.Object) []any {
	t.Helper()
	table, err := d.tableConvertor().ConvertToTable(context.Background(), obj, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(table.Rows) != 1 {
		t.Fatalf("%d rows, want 1", len(table.Rows))
	}
	if n, m := len(table.Rows[0].Cells), len(table.ColumnDefinitions); n != m {
		t.Fatalf("%d cells for %d columns", n, m)
	}
	return table.Rows[0].Cells
}

// kube-apiserver's ValidateObjectMeta (pkg/apis/core/validation) checks
// finalizer names for every built-in kind, on create and update: a
// finalizer without a domain must be a standard one.
func TestMetadataFinalizers(t *testing.T) {
	tests := []struct {
		finalizers []string
		err        string
		onCreate   bool // only create checks it, as upstream
	}{
		{finalizers: []string{"kubernetes"}},
		{finalizers: []string{"orphan"}},
		{finalizers: []string{"foregroundDeletion"}},
		{finalizers: []string{"example.com/cleanup"}},
		{finalizers: []string{"cleanup"}, err: "metadata.finalizers[0]: Invalid value"},
		{finalizers: []string{"example.com/ok", "Not Valid"}, err: "metadata.finalizers[1]"},
		{finalizers: []string{"orphan", "foregroundDeletion"}, err: "metadata.finalizers", onCreate: true},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.finalizers, ","), func(t *testing.T) {
			cm := newConfigMap("cm", "ns", nil, nil)
			cm.Finalizers = tt.finalizers
			errorsContain(t, validateCreate(t, configMapDef(), cm), tt.err)
			if !tt.onCreate {
				errorsContain(t, validateUpdate(t, configMapDef(), cm, newConfigMap("cm", "ns", nil, nil)), tt.err)
			}
		})
	}
}
