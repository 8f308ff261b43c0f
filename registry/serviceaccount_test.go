package registry

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Service account names are DNS subdomains (ValidateServiceAccountName
// upstream); printServiceAccount counts the secrets.
func TestServiceAccount(t *testing.T) {
	for _, tt := range []struct {
		name  string
		valid bool
	}{{"default", true}, {"my.account", true}, {"My_Account", false}} {
		t.Run(tt.name, func(t *testing.T) {
			sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: tt.name, Namespace: "ns"}}
			if errs := validateCreate(t, serviceAccountDef(), sa); tt.valid != (len(errs) == 0) {
				t.Errorf("valid = %v, want %v: %v", len(errs) == 0, tt.valid, errs.ToAggregate())
			}
		})
	}
	t.Run("table", func(t *testing.T) {
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "sa"}, Secrets: []corev1.ObjectReference{{Name: "a"}, {Name: "b"}}}
		if got, want := tableRow(t, serviceAccountDef(), sa), []any{"sa", int64(2), "<unknown>"}; !reflect.DeepEqual(got, want) {
			t.Errorf("row = %#v, want %#v", got, want)
		}
	})
}
