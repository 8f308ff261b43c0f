package registry

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/registry/rest"
)

// Bad input gets a 4xx Status that names the field at fault. Upstream's
// stores answer a few malformed writes with a 500 (a plain error from deep
// inside, which the handlers cannot tell from a server fault); the two
// guards here close those gaps. The server's query check does the same for
// query parameters, and server/malformed_test.go is the suite that found
// them.

// checkedUpdate is the object of a PUT or PATCH, checked before the store
// uses it. Errors that applying the request to the stored object returns
// as plain errors (a strategic merge patch with an unknown $patch
// directive, a server-side apply of a field the schema does not have) are
// the request's fault: 400, not 500. A metadata.resourceVersion that is not
// a number made the store fail with a 500 too.
type checkedUpdate struct {
	rest.UpdatedObjectInfo
}

func (u checkedUpdate) UpdatedObject(ctx context.Context, old runtime.Object) (runtime.Object, error) {
	obj, err := u.UpdatedObjectInfo.UpdatedObject(ctx, old)
	if err != nil {
		var status apierrors.APIStatus
		if errors.As(err, &status) || ctx.Err() != nil {
			return nil, err
		}
		return nil, apierrors.NewBadRequest(err.Error())
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, err
	}
	if rv := m.GetResourceVersion(); rv != "" {
		if _, err := strconv.ParseUint(rv, 10, 64); err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid metadata.resourceVersion %q: must be a resourceVersion returned by the server (a decimal number)", rv))
		}
	}
	return obj, nil
}

// checkCreate refuses an object to create that carries a resourceVersion:
// the etcd store refuses a number with a plain error (a 500) and ignores
// anything else.
func checkCreate(obj runtime.Object) error {
	m, err := meta.Accessor(obj)
	if err != nil {
		return err
	}
	if rv := m.GetResourceVersion(); rv != "" {
		return apierrors.NewBadRequest(fmt.Sprintf("invalid metadata.resourceVersion %q: must not be set on create", rv))
	}
	return nil
}
