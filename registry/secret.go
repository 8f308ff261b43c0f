package registry

import (
	"encoding/json"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// secretRequiredKeys are the data keys each built-in secret type must
// have; an SSH key must not be empty either.
var secretRequiredKeys = map[corev1.SecretType][]string{
	corev1.SecretTypeDockercfg:        {corev1.DockerConfigKey},
	corev1.SecretTypeDockerConfigJson: {corev1.DockerConfigJsonKey},
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

// validateSecret is upstream's ValidateSecret (pkg/apis/core/validation).
func validateSecret(obj runtime.Object) field.ErrorList {
	s := obj.(*corev1.Secret)
	dataPath := field.NewPath("data")
	errs := validateData(nil, s.Data, "", "data", dataPath)
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
	case corev1.SecretTypeSSHAuth:
		if len(s.Data[corev1.SSHAuthPrivateKey]) == 0 {
			errs = append(errs, field.Required(dataPath.Key(corev1.SSHAuthPrivateKey), ""))
		}
	case corev1.SecretTypeDockercfg, corev1.SecretTypeDockerConfigJson:
		// The content must be a JSON object.
		for _, k := range secretRequiredKeys[s.Type] {
			if v, ok := s.Data[k]; ok {
				if err := json.Unmarshal(v, &map[string]any{}); err != nil {
					errs = append(errs, field.Invalid(dataPath.Key(k), "<secret contents redacted>", err.Error()))
				}
			}
		}
	}
	return errs
}
