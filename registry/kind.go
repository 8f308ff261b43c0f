package registry

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/storage"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
)

// resourceDef is everything kubestore knows about one built-in resource
// that upstream keeps in k8s.io/kubernetes: how it is named, stored,
// defaulted, validated, selected and printed. The catalog in registry.go
// lists them all.
type resourceDef struct {
	gvr        schema.GroupVersionResource
	kind       string
	singular   string
	namespaced bool
	shortNames []string
	categories []string
	// keyPrefix is the etcd key prefix under --etcd-prefix, the same as
	// kube-apiserver's so that etcd data is laid out as on a cluster.
	keyPrefix   string
	newFunc     func() runtime.Object
	newListFunc func() runtime.Object

	// nameFunc validates metadata.name; DNS subdomain when nil.
	nameFunc validation.ValidateNameFunc
	// defaults is the scheme defaulting function of the kind.
	defaults func(obj any)
	// fields are the kind's selectable fields besides metadata.name and
	// metadata.namespace; fieldLabels lists their names.
	fields      func(obj runtime.Object) fields.Set
	fieldLabels []string
	// index, when set, is a field the watch cache indexes, so that a watch
	// or list selecting one value does not scan every object.
	index *fieldIndex

	// prepareForCreate gets the request's context: a
	// CertificateSigningRequest records who asked for it.
	prepareForCreate func(ctx context.Context, obj runtime.Object)
	prepareForUpdate func(obj, old runtime.Object)
	// validate checks the kind's fields on create, and on update too
	// unless ownUpdateValidation is set.
	validate       func(obj runtime.Object) field.ErrorList
	validateUpdate func(obj, old runtime.Object) field.ErrorList
	// ownUpdateValidation makes validateUpdate the whole of the kind's
	// update validation, for kinds whose upstream update validation is not
	// the create validation plus checks (ValidateServiceCIDRUpdate does not
	// revalidate unchanged CIDRs; ValidateResourceSliceUpdate skips
	// unchanged capacities and taints).
	ownUpdateValidation bool
	// validateRequest, when set, adds the validation of the group version
	// the request came in (old is nil on create): events.k8s.io/v1 is
	// stricter than core/v1 about the same stored Event.
	validateRequest func(gv schema.GroupVersion, obj, old runtime.Object) field.ErrorList
	// alsoServedAs are further API versions the kind's one store is
	// installed under, as kube-apiserver serves core/v1 Events as
	// events.k8s.io/v1 Events from the same etcd keys. The scheme registers
	// the kind's Go type as each one's internal version and converts.
	alsoServedAs        []servedAs
	allowCreateOnUpdate bool
	// conditionalUpdate refuses an update that names no resourceVersion
	// (upstream's AllowUnconditionalUpdate false): kinds whose writers
	// must have read what they replace (CSINode, CSIDriver,
	// PodCertificateRequest, ...).
	conditionalUpdate   bool
	returnDeletedObject bool
	// warnings, when set, are the warnings of a create (old is nil) or
	// update that is otherwise allowed: upstream's WarningsOnCreate and
	// WarningsOnUpdate (deprecated node labels, ...).
	warnings func(obj, old runtime.Object) []string
	// gracefulDelete implements rest.RESTGracefulDeleteStrategy for kinds
	// whose deletion waits for an agent (pods).
	gracefulDelete func(ctx context.Context, obj runtime.Object, options *metav1.DeleteOptions) bool
	// ttl, when set, expires objects (events).
	ttl time.Duration

	status *statusDef
	// subresources are further subresources that each update one part of
	// the object, by name ("approval" of CertificateSigningRequests).
	subresources map[string]*statusDef
	// resetFields, when set, are the fields a write to the main resource
	// does not own in server-side apply; by default status, when the kind
	// has a status subresource.
	resetFields []fieldpath.Path

	columns []metav1.TableColumnDefinition
	row     func(obj runtime.Object) []any
	// listRow, when set, makes the row function of a list from the whole
	// list, for kinds whose row depends on the other items (the effective
	// default StorageClass is marked "(default)"); row still prints one
	// object.
	listRow func(list runtime.Object) func(obj runtime.Object) []any
	// rowConditions, when set, are the conditions of an object's row
	// (a finished pod is Completed).
	rowConditions func(obj runtime.Object) []metav1.TableRowCondition
}

// servedAs is one further version of a kind: its group version, its kind's
// external types and the conversions to and from the stored type.
type servedAs struct {
	gv                schema.GroupVersion
	newFunc, listFunc func() runtime.Object
	// addConversions registers the conversions and field label mapping.
	addConversions func(s *runtime.Scheme) error
}

// statusDef describes a status subresource ("<resource>/status"), or
// another subresource that updates one part of the object.
type statusDef struct {
	// keepStatus copies old's status into obj: updates of the main
	// resource do not change status. Only for status.
	keepStatus func(obj, old runtime.Object)
	// keepSpec copies old's spec into obj: status updates do not change
	// spec. A subresource owning less than the whole status also copies
	// the rest of it.
	keepSpec func(obj, old runtime.Object)
	// prepare, when set, runs after keepSpec on an update of the
	// subresource (a CSR's status keeps its approval conditions).
	prepare func(obj, old runtime.Object)
	// resetOnCreate, when set, drops the status a client sent on create.
	// Only for status.
	resetOnCreate func(obj runtime.Object)
	// validate checks an update of the subresource.
	validate func(obj, old runtime.Object) field.ErrorList
	// resetFields, when set, are the fields an update of the subresource
	// does not own in server-side apply; spec by default.
	resetFields []fieldpath.Path
	// keepMetadata: a status update also keeps the stored labels,
	// annotations, finalizers, owner references, generation and deletion
	// timestamp (ResetObjectMetaForStatus), and owns neither metadata nor
	// spec in server-side apply.
	keepMetadata bool
}

type fieldIndex struct {
	field string
	value func(obj runtime.Object) string
}

func (d *resourceDef) gvk() schema.GroupVersionKind { return d.gvr.GroupVersion().WithKind(d.kind) }

// getAttrs returns the labels and selectable fields of an object.
func (d *resourceDef) getAttrs(obj runtime.Object) (labels.Set, fields.Set, error) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, nil, err
	}
	fs := fields.Set{"metadata.name": m.GetName()}
	if d.namespaced {
		fs["metadata.namespace"] = m.GetNamespace()
	}
	if d.fields != nil {
		for k, v := range d.fields(obj) {
			fs[k] = v
		}
	}
	return labels.Set(m.GetLabels()), fs, nil
}

func (d *resourceDef) predicate(label labels.Selector, field fields.Selector) storage.SelectionPredicate {
	p := storage.SelectionPredicate{Label: label, Field: field, GetAttrs: d.getAttrs}
	if d.index != nil {
		p.IndexFields = []string{d.index.field}
	}
	return p
}

// Validators shared by several kinds.

// protocols are the protocols of container, service and endpoint ports.
var protocols = sets.New(corev1.ProtocolTCP, corev1.ProtocolUDP, corev1.ProtocolSCTP)

// invalidEach is an Invalid error at path for each message of an
// apimachinery validator (utilvalidation.IsDNS1123Label, ...), in order,
// as upstream's validation reports them. value is reported as given: its
// type is part of the error.
func invalidEach(path *field.Path, value any, msgs []string) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range msgs {
		errs = append(errs, field.Invalid(path, value, msg))
	}
	return errs
}

func dnsLabel(path *field.Path, value string) field.ErrorList {
	return invalidEach(path, value, utilvalidation.IsDNS1123Label(value))
}

func qualifiedName(path *field.Path, value string) field.ErrorList {
	return invalidEach(path, value, utilvalidation.IsQualifiedName(value))
}

func portNumber(path *field.Path, port int32) field.ErrorList {
	return invalidEach(path, port, utilvalidation.IsValidPortNum(int(port)))
}

func ptrTo[T any](v T) *T { return &v }

// validateData checks the keys and total size of a ConfigMap's or
// Secret's data maps; a size error names sizePath.
func validateData(str map[string]string, bin map[string][]byte, strField, binField string, sizePath *field.Path) field.ErrorList {
	var errs field.ErrorList
	size := 0
	for k, v := range str {
		errs = append(errs, invalidEach(field.NewPath(strField).Key(k), k, utilvalidation.IsConfigMapKey(k))...)
		size += len(v)
	}
	for k, v := range bin {
		errs = append(errs, invalidEach(field.NewPath(binField).Key(k), k, utilvalidation.IsConfigMapKey(k))...)
		if _, dup := str[k]; dup {
			errs = append(errs, field.Invalid(field.NewPath(binField).Key(k), k, "duplicate of key present in "+strField))
		}
		size += len(v)
	}
	if size > corev1.MaxSecretSize {
		errs = append(errs, field.TooLong(sizePath, "", corev1.MaxSecretSize))
	}
	return errs
}

// validateImmutable enforces the immutable field of ConfigMaps and Secrets.
func validateImmutable(immutable, oldImmutable *bool, sameData bool) field.ErrorList {
	if oldImmutable == nil || !*oldImmutable {
		return nil
	}
	var errs field.ErrorList
	if immutable == nil || !*immutable {
		errs = append(errs, field.Forbidden(field.NewPath("immutable"), "field is immutable when `immutable` is set"))
	}
	if !sameData {
		errs = append(errs, field.Forbidden(field.NewPath("data"), "field is immutable when `immutable` is set"))
	}
	return errs
}
