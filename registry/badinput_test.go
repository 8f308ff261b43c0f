package registry

import (
	"context"
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/registry/rest"
)

// updatedObject is the object of an update as the handlers build it.
type updatedObject struct {
	rest.UpdatedObjectInfo
	obj runtime.Object
	err error
}

func (u updatedObject) UpdatedObject(context.Context, runtime.Object) (runtime.Object, error) {
	return u.obj, u.err
}

// The guards that turn a bad object into a 400 instead of the store's
// 500 (server/malformed_test.go drives them through HTTP).
func TestCheckCreate(t *testing.T) {
	tests := []struct {
		rv      string
		invalid bool
	}{{"", false}, {"5", true}, {"abc", true}}
	for _, tt := range tests {
		t.Run(tt.rv, func(t *testing.T) {
			err := checkCreate(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm", ResourceVersion: tt.rv}})
			if tt.invalid != apierrors.IsBadRequest(err) || (!tt.invalid && err != nil) {
				t.Errorf("checkCreate with resourceVersion %q: %v", tt.rv, err)
			}
		})
	}
}

func TestCheckedUpdate(t *testing.T) {
	cm := func(rv string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm", ResourceVersion: rv}}
	}
	conflict := apierrors.NewConflict(corev1.Resource("configmaps"), "cm", errors.New("changed"))
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name  string
		ctx   context.Context
		obj   runtime.Object
		err   error
		check func(error) bool
	}{
		{"numeric resourceVersion", context.Background(), cm("12"), nil, isNil},
		{"no resourceVersion", context.Background(), cm(""), nil, isNil},
		{"resourceVersion that is not a number", context.Background(), cm("x1"), nil, apierrors.IsBadRequest},
		{"plain error applying the request", context.Background(), nil, errors.New("unknown $patch directive"), apierrors.IsBadRequest},
		{"API status passes through", context.Background(), nil, conflict, apierrors.IsConflict},
		{"cancelled request keeps its error", cancelled, nil, context.Canceled, func(err error) bool { return errors.Is(err, context.Canceled) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := checkedUpdate{updatedObject{obj: tt.obj, err: tt.err}}.UpdatedObject(tt.ctx, cm("1"))
			if !tt.check(err) {
				t.Errorf("unexpected error: %v", err)
			}
		})
	}
}
