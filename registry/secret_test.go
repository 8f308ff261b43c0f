package registry

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
)

func newSecret(typ corev1.SecretType, data map[string][]byte, opts ...func(*corev1.Secret)) *corev1.Secret {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "foo", Namespace: "bar", ResourceVersion: "1"}, Type: typ, Data: data}
	for _, o := range opts {
		o(s)
	}
	return s
}

// Secret defaulting: the type (SetDefaults_Secret) and the write-only
// stringData, which upstream's v1 conversion folds into data, winning
// over data's keys.
func TestDefaultSecret(t *testing.T) {
	tests := []struct {
		name string
		in   corev1.Secret
		want corev1.Secret
	}{
		{name: "type", want: corev1.Secret{Type: corev1.SecretTypeOpaque}},
		{name: "type kept", in: corev1.Secret{Type: corev1.SecretTypeTLS}, want: corev1.Secret{Type: corev1.SecretTypeTLS}},
		{name: "stringData folded into data",
			in:   corev1.Secret{Data: map[string][]byte{"a": []byte("1"), "b": []byte("2")}, StringData: map[string]string{"b": "two", "c": "3"}},
			want: corev1.Secret{Type: corev1.SecretTypeOpaque, Data: map[string][]byte{"a": []byte("1"), "b": []byte("two"), "c": []byte("3")}}},
		{name: "stringData without data",
			in:   corev1.Secret{StringData: map[string]string{"c": "3"}},
			want: corev1.Secret{Type: corev1.SecretTypeOpaque, Data: map[string][]byte{"c": []byte("3")}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := tt.in.DeepCopy()
			defaultSecret(s)
			if !apiequality.Semantic.DeepEqual(*s, tt.want) {
				t.Errorf("defaulted = %+v, want %+v", *s, tt.want)
			}
		})
	}
}

// The cases of the secret validation tests in k8s.io/kubernetes
// pkg/apis/core/validation/validation_test.go: TestValidateSecret and
// those of the docker config, basic-auth, SSH and TLS types.
func TestSecretValidate(t *testing.T) {
	data := func(kv ...string) map[string][]byte {
		m := map[string][]byte{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = []byte(kv[i+1])
		}
		return m
	}
	annotate := func(a map[string]string) func(*corev1.Secret) { return func(s *corev1.Secret) { s.Annotations = a } }
	dockercfg := `{"https://index.docker.io/v1/": {"auth": "Zm9vOmJhcgo=", "email": "foo@example.com"}}`
	dockerconfigjson := `{"auths": {"https://index.docker.io/v1/": {"auth": "Zm9vOmJhcgo=", "email": "foo@example.com"}}}`
	tests := []struct {
		name   string
		secret *corev1.Secret
		valid  bool
	}{
		{"valid", newSecret(corev1.SecretTypeOpaque, data("data-1", "bar")), true},
		{"empty name", newSecret(corev1.SecretTypeOpaque, data("data-1", "bar"), func(s *corev1.Secret) { s.Name = "" }), false},
		{"invalid name", newSecret(corev1.SecretTypeOpaque, nil, func(s *corev1.Secret) { s.Name = "NoUppercaseOrSpecialCharsLike=Equals" }), false},
		{"empty namespace", newSecret(corev1.SecretTypeOpaque, nil, func(s *corev1.Secret) { s.Namespace = "" }), false},
		{"invalid namespace", newSecret(corev1.SecretTypeOpaque, nil, func(s *corev1.Secret) { s.Namespace = "NoUppercaseOrSpecialCharsLike=Equals" }), false},
		{"over max size", newSecret(corev1.SecretTypeOpaque, map[string][]byte{"over": make([]byte, corev1.MaxSecretSize+1)}), false},
		{"invalid key", newSecret(corev1.SecretTypeOpaque, data("data-1", "bar", "a*b", "whatever")), false},
		{"leading dot key", newSecret(corev1.SecretTypeOpaque, data("data-1", "bar", ".key", "bar")), true},
		{"dot key", newSecret(corev1.SecretTypeOpaque, data("data-1", "bar", ".", "bar")), false},
		{"double dot key", newSecret(corev1.SecretTypeOpaque, data("data-1", "bar", "..", "bar")), false},

		{"valid service-account-token secret",
			newSecret(corev1.SecretTypeServiceAccountToken, data("data-1", "bar"), annotate(map[string]string{corev1.ServiceAccountNameKey: "foo"})), true},
		{"empty service-account-token annotation",
			newSecret(corev1.SecretTypeServiceAccountToken, data("data-1", "bar"), annotate(map[string]string{corev1.ServiceAccountNameKey: ""})), false},
		{"missing service-account-token annotation",
			newSecret(corev1.SecretTypeServiceAccountToken, data("data-1", "bar"), annotate(map[string]string{"other": "foo"})), false},
		{"missing service-account-token annotations", newSecret(corev1.SecretTypeServiceAccountToken, data("data-1", "bar")), false},

		{"valid dockercfg", newSecret(corev1.SecretTypeDockercfg, data(corev1.DockerConfigKey, dockercfg)), true},
		{"invalid dockercfg", newSecret(corev1.SecretTypeDockercfg, data(corev1.DockerConfigKey, "bad")), false},
		{"dockercfg that is not an object", newSecret(corev1.SecretTypeDockercfg, data(corev1.DockerConfigKey, "[]")), false},
		{"missing dockercfg", newSecret(corev1.SecretTypeDockercfg, data("other", dockercfg)), false},
		{"valid dockerconfigjson", newSecret(corev1.SecretTypeDockerConfigJson, data(corev1.DockerConfigJsonKey, dockerconfigjson)), true},
		{"invalid dockerconfigjson", newSecret(corev1.SecretTypeDockerConfigJson, data(corev1.DockerConfigJsonKey, "bad")), false},
		{"missing dockerconfigjson", newSecret(corev1.SecretTypeDockerConfigJson, data("other", dockerconfigjson)), false},

		{"valid basic auth", newSecret(corev1.SecretTypeBasicAuth, data(corev1.BasicAuthUsernameKey, "u", corev1.BasicAuthPasswordKey, "p")), true},
		{"basic auth with a password only", newSecret(corev1.SecretTypeBasicAuth, data(corev1.BasicAuthPasswordKey, "p")), true},
		{"basic auth with an empty username", newSecret(corev1.SecretTypeBasicAuth, data(corev1.BasicAuthUsernameKey, "")), true},
		{"basic auth missing username and password", newSecret(corev1.SecretTypeBasicAuth, data("other", "x")), false},

		{"valid ssh auth", newSecret(corev1.SecretTypeSSHAuth, data(corev1.SSHAuthPrivateKey, "key")), true},
		{"ssh auth missing private key", newSecret(corev1.SecretTypeSSHAuth, data("other", "x")), false},
		{"ssh auth with an empty private key", newSecret(corev1.SecretTypeSSHAuth, data(corev1.SSHAuthPrivateKey, "")), false},

		{"valid tls", newSecret(corev1.SecretTypeTLS, data(corev1.TLSCertKey, "c", corev1.TLSPrivateKeyKey, "k")), true},
		{"tls missing key", newSecret(corev1.SecretTypeTLS, data(corev1.TLSCertKey, "c")), false},
		{"tls missing certificate", newSecret(corev1.SecretTypeTLS, data(corev1.TLSPrivateKeyKey, "k")), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errs := validateCreate(t, secretDef(), tt.secret)
			if tt.valid != (len(errs) == 0) {
				t.Errorf("valid = %v, want %v (errors: %v)", len(errs) == 0, tt.valid, errs.ToAggregate())
			}
		})
	}
	t.Run("too big names data", func(t *testing.T) {
		errorsContain(t, validateCreate(t, secretDef(), newSecret(corev1.SecretTypeOpaque, map[string][]byte{"over": make([]byte, corev1.MaxSecretSize+1)})),
			"data: Too long")
	})
}

// The cases of TestValidateSecretUpdate in validation_test.go, and the
// type, which never changes.
func TestSecretValidateUpdate(t *testing.T) {
	secret := func(immutable *bool, data map[string][]byte) *corev1.Secret {
		return newSecret(corev1.SecretTypeOpaque, data, func(s *corev1.Secret) { s.Immutable = immutable })
	}
	yes, no := ptrTo(true), ptrTo(false)
	data := map[string][]byte{"data-1": []byte("bar")}
	added := map[string][]byte{"data-1": []byte("bar"), "data-2": []byte("baz")}
	changed := map[string][]byte{"data-1": []byte("foo")}
	tests := []struct {
		name     string
		old, new *corev1.Secret
		valid    bool
	}{
		{"mark secret immutable", secret(nil, data), secret(yes, data), true},
		{"revert immutable secret", secret(yes, data), secret(nil, data), false},
		{"mark immutable secret mutable", secret(yes, data), secret(no, data), false},
		{"add data in secret", secret(nil, data), secret(nil, added), true},
		{"add data in immutable secret", secret(yes, data), secret(yes, added), false},
		{"change data in secret", secret(nil, data), secret(nil, changed), true},
		{"change data in immutable secret", secret(yes, data), secret(yes, changed), false},
		{"change type", secret(nil, data), newSecret("example.com/other", data), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errs := validateUpdate(t, secretDef(), tt.new, tt.old)
			if tt.valid != (len(errs) == 0) {
				t.Errorf("valid = %v, want %v (errors: %v)", len(errs) == 0, tt.valid, errs.ToAggregate())
			}
		})
	}
}

// Secrets are selectable by type (upstream's SelectableFields in
// pkg/registry/core/secret/strategy.go); printSecret's row.
func TestSecretFieldsAndTable(t *testing.T) {
	s := newSecret(corev1.SecretTypeTLS, map[string][]byte{"a": nil, "b": nil})
	_, got, err := secretDef().getAttrs(s)
	if err != nil {
		t.Fatal(err)
	}
	want := fields.Set{"metadata.name": "foo", "metadata.namespace": "bar", "type": string(corev1.SecretTypeTLS)}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("fields = %v, want %v", got, want)
	}
	if row, want := tableRow(t, secretDef(), s), []any{"foo", "kubernetes.io/tls", int64(2), "<unknown>"}; !reflect.DeepEqual(row, want) {
		t.Errorf("row = %#v, want %#v", row, want)
	}
}
