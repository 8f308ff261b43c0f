package registry

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// eventTTL is how long an event is kept, kube-apiserver's --event-ttl
// default: events must not fill a device's flash.
const eventTTL = time.Hour

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
			return validateData(cm.Data, cm.BinaryData, "data", "binaryData")
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

// secretRequiredKeys are the data keys each built-in secret type must have.
var secretRequiredKeys = map[corev1.SecretType][]string{
	corev1.SecretTypeDockercfg:        {corev1.DockerConfigKey},
	corev1.SecretTypeDockerConfigJson: {corev1.DockerConfigJsonKey},
	corev1.SecretTypeSSHAuth:          {corev1.SSHAuthPrivateKey},
	corev1.SecretTypeTLS:              {corev1.TLSCertKey, corev1.TLSPrivateKeyKey},
}

func secretDef() *resourceDef {
	return &resourceDef{
		gvr:         corev1.SchemeGroupVersion.WithResource("secrets"),
		kind:        "Secret",
		singular:    "secret",
		namespaced:  true,
		keyPrefix:   "secrets",
		newFunc:     func() runtime.Object { return &corev1.Secret{} },
		newListFunc: func() runtime.Object { return &corev1.SecretList{} },
		defaults:    func(obj any) { defaultSecret(obj.(*corev1.Secret)) },
		fields: func(obj runtime.Object) fields.Set {
			return fields.Set{"type": string(obj.(*corev1.Secret).Type)}
		},
		fieldLabels: []string{"type"},
		validate:    validateSecret,
		validateUpdate: func(obj, old runtime.Object) field.ErrorList {
			s, o := obj.(*corev1.Secret), old.(*corev1.Secret)
			var errs field.ErrorList
			if s.Type != o.Type {
				errs = append(errs, field.Invalid(field.NewPath("type"), s.Type, "field is immutable"))
			}
			return append(errs, validateImmutable(s.Immutable, o.Immutable, apiequality.Semantic.DeepEqual(s.Data, o.Data))...)
		},
		columns: []metav1.TableColumnDefinition{
			nameCol,
			col("Type", "string", corev1.Secret{}.SwaggerDoc()["type"]),
			col("Data", "string", corev1.Secret{}.SwaggerDoc()["data"]),
			ageCol,
		},
		row: func(obj runtime.Object) []any {
			s := obj.(*corev1.Secret)
			return []any{s.Name, string(s.Type), int64(len(s.Data)), age(s.CreationTimestamp)}
		},
	}
}

// defaultSecret sets the type and folds the write-only stringData into
// data, as kube-apiserver's v1 conversion does.
func defaultSecret(s *corev1.Secret) {
	if s.Type == "" {
		s.Type = corev1.SecretTypeOpaque
	}
	if len(s.StringData) > 0 {
		if s.Data == nil {
			s.Data = map[string][]byte{}
		}
		for k, v := range s.StringData {
			s.Data[k] = []byte(v)
		}
		s.StringData = nil
	}
}

func validateSecret(obj runtime.Object) field.ErrorList {
	s := obj.(*corev1.Secret)
	errs := validateData(nil, s.Data, "", "data")
	dataPath := field.NewPath("data")
	for _, k := range secretRequiredKeys[s.Type] {
		if _, ok := s.Data[k]; !ok {
			errs = append(errs, field.Required(dataPath.Key(k), ""))
		}
	}
	switch s.Type {
	case corev1.SecretTypeServiceAccountToken:
		if s.Annotations[corev1.ServiceAccountNameKey] == "" {
			errs = append(errs, field.Required(field.NewPath("metadata", "annotations").Key(corev1.ServiceAccountNameKey), ""))
		}
	case corev1.SecretTypeBasicAuth:
		_, user := s.Data[corev1.BasicAuthUsernameKey]
		_, pass := s.Data[corev1.BasicAuthPasswordKey]
		if !user && !pass {
			errs = append(errs, field.Required(dataPath.Key(corev1.BasicAuthUsernameKey), ""),
				field.Required(dataPath.Key(corev1.BasicAuthPasswordKey), ""))
		}
	case corev1.SecretTypeDockercfg, corev1.SecretTypeDockerConfigJson:
		for _, k := range secretRequiredKeys[s.Type] {
			if v, ok := s.Data[k]; ok && !json.Valid(v) {
				errs = append(errs, field.Invalid(dataPath.Key(k), "<secret contents redacted>", "must be valid JSON"))
			}
		}
	}
	return errs
}

// validateData checks the keys and total size of a ConfigMap's or
// Secret's data maps.
func validateData(str map[string]string, bin map[string][]byte, strField, binField string) field.ErrorList {
	var errs field.ErrorList
	size := 0
	for k, v := range str {
		for _, msg := range utilvalidation.IsConfigMapKey(k) {
			errs = append(errs, field.Invalid(field.NewPath(strField).Key(k), k, msg))
		}
		size += len(v)
	}
	for k, v := range bin {
		for _, msg := range utilvalidation.IsConfigMapKey(k) {
			errs = append(errs, field.Invalid(field.NewPath(binField).Key(k), k, msg))
		}
		if _, dup := str[k]; dup {
			errs = append(errs, field.Invalid(field.NewPath(binField).Key(k), k, "duplicate of key present in "+strField))
		}
		size += len(v)
	}
	if size > corev1.MaxSecretSize {
		errs = append(errs, field.TooLong(field.NewPath(""), "", corev1.MaxSecretSize))
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

func eventDef() *resourceDef {
	return &resourceDef{
		gvr:         corev1.SchemeGroupVersion.WithResource("events"),
		kind:        "Event",
		singular:    "event",
		namespaced:  true,
		shortNames:  []string{"ev"},
		keyPrefix:   "events",
		newFunc:     func() runtime.Object { return &corev1.Event{} },
		newListFunc: func() runtime.Object { return &corev1.EventList{} },
		fields:      eventFields,
		fieldLabels: []string{"involvedObject.kind", "involvedObject.namespace", "involvedObject.name", "involvedObject.uid",
			"involvedObject.apiVersion", "involvedObject.resourceVersion", "involvedObject.fieldPath",
			"reason", "reportingComponent", "source", "type"},
		validate:            validateEvent,
		allowCreateOnUpdate: true,
		ttl:                 eventTTL,
		columns: []metav1.TableColumnDefinition{
			col("Last Seen", "string", corev1.Event{}.SwaggerDoc()["lastTimestamp"]),
			col("Type", "string", corev1.Event{}.SwaggerDoc()["type"]),
			col("Reason", "string", corev1.Event{}.SwaggerDoc()["reason"]),
			col("Object", "string", corev1.Event{}.SwaggerDoc()["involvedObject"]),
			wideCol("Subobject", "string", corev1.ObjectReference{}.SwaggerDoc()["fieldPath"]),
			wideCol("Source", "string", corev1.Event{}.SwaggerDoc()["source"]),
			col("Message", "string", corev1.Event{}.SwaggerDoc()["message"]),
			wideCol("First Seen", "string", corev1.Event{}.SwaggerDoc()["firstTimestamp"]),
			wideCol("Count", "string", corev1.Event{}.SwaggerDoc()["count"]),
			wideCol("Name", "string", metav1.ObjectMeta{}.SwaggerDoc()["name"]),
		},
		row: func(obj runtime.Object) []any { return eventRow(obj.(*corev1.Event)) },
	}
}

func eventFields(obj runtime.Object) fields.Set {
	e := obj.(*corev1.Event)
	source := e.Source.Component
	if source == "" {
		source = e.ReportingController
	}
	return fields.Set{
		"involvedObject.kind":            e.InvolvedObject.Kind,
		"involvedObject.namespace":       e.InvolvedObject.Namespace,
		"involvedObject.name":            e.InvolvedObject.Name,
		"involvedObject.uid":             string(e.InvolvedObject.UID),
		"involvedObject.apiVersion":      e.InvolvedObject.APIVersion,
		"involvedObject.resourceVersion": e.InvolvedObject.ResourceVersion,
		"involvedObject.fieldPath":       e.InvolvedObject.FieldPath,
		"reason":                         e.Reason,
		"reportingComponent":             e.ReportingController,
		"source":                         source,
		"type":                           e.Type,
	}
}

func validateEvent(obj runtime.Object) field.ErrorList {
	e := obj.(*corev1.Event)
	ns := field.NewPath("involvedObject", "namespace")
	switch {
	case e.InvolvedObject.Namespace == "":
		// Cluster-scoped objects' events live in "default", as upstream.
		if e.Namespace != metav1.NamespaceDefault {
			return field.ErrorList{field.Invalid(ns, e.InvolvedObject.Namespace, "does not match event.namespace")}
		}
	case e.InvolvedObject.Namespace != e.Namespace:
		return field.ErrorList{field.Invalid(ns, e.InvolvedObject.Namespace, "does not match event.namespace")}
	}
	return nil
}

func eventRow(e *corev1.Event) []any {
	first := age(e.FirstTimestamp)
	if e.FirstTimestamp.IsZero() {
		first = microAge(e.EventTime)
	}
	last := age(e.LastTimestamp)
	if e.LastTimestamp.IsZero() {
		last = first
	}
	count := e.Count
	if e.Series != nil {
		last, count = microAge(e.Series.LastObservedTime), e.Series.Count
	} else if count == 0 {
		count = 1
	}
	source := e.Source.Component
	if source == "" {
		source = e.ReportingController
	}
	if e.Source.Host != "" {
		source += ", " + e.Source.Host
	} else if e.ReportingInstance != "" {
		source += ", " + e.ReportingInstance
	}
	object := fmt.Sprintf("%s/%s", strings.ToLower(e.InvolvedObject.Kind), e.InvolvedObject.Name)
	return []any{last, e.Type, e.Reason, object, e.InvolvedObject.FieldPath, source, strings.TrimSpace(e.Message), first, int64(count), e.Name}
}

func leaseDef() *resourceDef {
	return &resourceDef{
		gvr:         coordinationv1.SchemeGroupVersion.WithResource("leases"),
		kind:        "Lease",
		singular:    "lease",
		namespaced:  true,
		keyPrefix:   "leases",
		newFunc:     func() runtime.Object { return &coordinationv1.Lease{} },
		newListFunc: func() runtime.Object { return &coordinationv1.LeaseList{} },
		validate: func(obj runtime.Object) field.ErrorList {
			s := obj.(*coordinationv1.Lease).Spec
			var errs field.ErrorList
			if d := s.LeaseDurationSeconds; d != nil && *d <= 0 {
				errs = append(errs, field.Invalid(field.NewPath("spec", "leaseDurationSeconds"), *d, "must be greater than 0"))
			}
			if t := s.LeaseTransitions; t != nil && *t < 0 {
				errs = append(errs, field.Invalid(field.NewPath("spec", "leaseTransitions"), *t, "must be greater than or equal to 0"))
			}
			return errs
		},
		allowCreateOnUpdate: true,
		columns:             []metav1.TableColumnDefinition{nameCol, col("Holder", "string", coordinationv1.LeaseSpec{}.SwaggerDoc()["holderIdentity"]), ageCol},
		row: func(obj runtime.Object) []any {
			l := obj.(*coordinationv1.Lease)
			holder := ""
			if l.Spec.HolderIdentity != nil {
				holder = *l.Spec.HolderIdentity
			}
			return []any{l.Name, holder, age(l.CreationTimestamp)}
		},
	}
}
