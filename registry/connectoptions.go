package registry

import (
	"fmt"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/conversion"
	"k8s.io/apimachinery/pkg/runtime"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
)

// connectOptions are the option kinds of the subresources that reach a
// kubelet (pods/log, exec, attach, portforward, proxy; nodes/proxy): the
// generic server decodes them from the request's query. Upstream they
// come with conversions from url.Values generated in k8s.io/kubernetes
// (pkg/apis/core/v1/zz_generated.conversion.go); here one conversion
// reads every option kind by its fields' JSON names.
var connectOptions = []runtime.Object{
	&corev1.PodLogOptions{}, &corev1.PodExecOptions{}, &corev1.PodAttachOptions{},
	&corev1.PodPortForwardOptions{}, &corev1.PodProxyOptions{}, &corev1.NodeProxyOptions{},
}

// addConnectOptionConversions registers the query conversion of every
// connect option kind in s.
func addConnectOptionConversions(s *runtime.Scheme) error {
	for _, o := range connectOptions {
		if err := s.AddConversionFunc((*url.Values)(nil), o, func(a, b any, _ conversion.Scope) error {
			return optionsFromQuery(*a.(*url.Values), b)
		}); err != nil {
			return err
		}
	}
	return nil
}

var timeType = reflect.TypeFor[metav1.Time]()

// optionsFromQuery sets each field of the struct out points to from the
// query parameter of its JSON name, as the generated conversions do: a
// missing parameter leaves the zero value; a list takes every value, any
// other field the first. A value that does not parse is a 400 naming the
// parameter.
func optionsFromQuery(query url.Values, out any) error {
	v := reflect.ValueOf(out).Elem()
	t := v.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" || name == "-" {
			continue
		}
		field := v.Field(i)
		field.SetZero()
		values, ok := query[name]
		if !ok || len(values) == 0 {
			continue
		}
		if err := setField(field, values); err != nil {
			return fmt.Errorf("query parameter %q: %w", name, err)
		}
	}
	return nil
}

func setField(field reflect.Value, values []string) error {
	typ := field.Type()
	if typ.Kind() == reflect.Pointer {
		elem := reflect.New(typ.Elem())
		if err := setField(elem.Elem(), values); err != nil {
			return err
		}
		field.Set(elem)
		return nil
	}
	if typ == timeType {
		t, err := time.Parse(time.RFC3339, values[0])
		if err != nil {
			return err
		}
		field.Set(reflect.ValueOf(metav1.NewTime(t)))
		return nil
	}
	switch typ.Kind() {
	case reflect.Slice:
		list := reflect.MakeSlice(typ, len(values), len(values))
		for i, s := range values {
			if err := setField(list.Index(i), []string{s}); err != nil {
				return err
			}
		}
		field.Set(list)
	case reflect.String:
		field.SetString(values[0])
	case reflect.Bool:
		// As runtime.Convert_Slice_string_To_bool: "false", "0" and
		// "" are false, anything else true.
		switch strings.ToLower(values[0]) {
		case "false", "0", "":
			field.SetBool(false)
		default:
			field.SetBool(true)
		}
	case reflect.Int32, reflect.Int64:
		n, err := strconv.ParseInt(values[0], 10, typ.Bits())
		if err != nil {
			return err
		}
		field.SetInt(n)
	default:
		return fmt.Errorf("unsupported field type %s", typ)
	}
	return nil
}

// Getter is the store of resource ("pods", "nodes") in the core group,
// for the subresources other packages serve on it (a rest.Getter); nil
// when not served.
func (s *Storage) Getter(resource string) *genericregistry.Store {
	for d, store := range s.stores {
		if d.gvr.Group == "" && d.gvr.Resource == resource {
			return store
		}
	}
	return nil
}
