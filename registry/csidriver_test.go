package registry

import (
	"reflect"
	"testing"

	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestSetDefaultCSIDriver, TestSetDefaultStorageCapacityEnabled,
// TestSetDefaultSELinuxMountReadWriteOncePodEnabled and
// TestSetDefaultPreventPodSchedulingIfMissingVolumeLimitScalingEnabled in
// k8s.io/kubernetes pkg/apis/storage/v1/defaults_test.go: a decoded
// driver is defaulted, and what it sets is kept.
func TestDefaultCSIDriver(t *testing.T) {
	d := decode(t, `{"apiVersion":"storage.k8s.io/v1","kind":"CSIDriver","metadata":{"name":"d"},"spec":{}}`).(*storagev1.CSIDriver)
	want := storagev1.CSIDriverSpec{
		AttachRequired:                ptrTo(true),
		PodInfoOnMount:                ptrTo(false),
		StorageCapacity:               ptrTo(false),
		FSGroupPolicy:                 ptrTo(storagev1.ReadWriteOnceWithFSTypeFSGroupPolicy),
		VolumeLifecycleModes:          []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecyclePersistent},
		RequiresRepublish:             ptrTo(false),
		SELinuxMount:                  ptrTo(false),
		PreventPodSchedulingIfMissing: ptrTo(false),
	}
	if !reflect.DeepEqual(d.Spec, want) {
		t.Errorf("defaulted spec = %+v, want %+v", d.Spec, want)
	}
	set := decode(t, `{"apiVersion":"storage.k8s.io/v1","kind":"CSIDriver","metadata":{"name":"d"},
		"spec":{"attachRequired":false,"volumeLifecycleModes":["Ephemeral"],"fsGroupPolicy":"File"}}`).(*storagev1.CSIDriver)
	if *set.Spec.AttachRequired || set.Spec.VolumeLifecycleModes[0] != storagev1.VolumeLifecycleEphemeral || *set.Spec.FSGroupPolicy != storagev1.FileFSGroupPolicy {
		t.Errorf("defaulting replaced set values: %+v", set.Spec)
	}
}

// csiDriver is a valid, defaulted driver.
func csiDriver(name string, f ...func(*storagev1.CSIDriverSpec)) *storagev1.CSIDriver {
	d := &storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: "1"}}
	for _, fn := range f {
		fn(&d.Spec)
	}
	defaultCSIDriver(d)
	return d
}

// The cases of TestCSIDriverValidation, TestCSIServiceAccountToken and
// TestCSIDriverStorageCapacityEnablement in k8s.io/kubernetes
// pkg/apis/storage/validation/validation_test.go, with the gates at their
// 1.37 defaults, and the error each invalid one gets.
func TestCSIDriverValidate(t *testing.T) {
	invalidFSGroupPolicy := storagev1.FSGroupPolicy("invalid-mode")
	tokens := []storagev1.TokenRequest{{Audience: "test-audience"}}
	tests := []struct {
		name string
		d    *storagev1.CSIDriver
		err  string // "" when valid
	}{
		{name: "defaults", d: csiDriver("test-driver")},
		{name: "driver name: dot only", d: csiDriver("io.kubernetes.storage.csi.driver")},
		{name: "driver name: dash only", d: csiDriver("io-kubernetes-storage-csi-driver")},
		{name: "driver name: numbers", d: csiDriver("1csi2driver3")},
		{name: "driver name: dot and dash", d: csiDriver("io.kubernetes.storage.csi-driver")},
		{name: "both lifecycle modes, one twice", d: csiDriver("test-driver", func(s *storagev1.CSIDriverSpec) {
			s.VolumeLifecycleModes = []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecycleEphemeral, storagev1.VolumeLifecyclePersistent, storagev1.VolumeLifecycleEphemeral}
		})},
		{name: "fsGroupPolicy File", d: csiDriver("test-driver", func(s *storagev1.CSIDriverSpec) { s.FSGroupPolicy = ptrTo(storagev1.FileFSGroupPolicy) })},
		{name: "NodeAllocatableUpdatePeriodSeconds 10", d: csiDriver("test-driver", func(s *storagev1.CSIDriverSpec) { s.NodeAllocatableUpdatePeriodSeconds = ptrTo(int64(10)) })},
		{name: "ServiceAccountTokenInSecrets true with TokenRequests", d: csiDriver("test-driver", func(s *storagev1.CSIDriverSpec) {
			s.ServiceAccountTokenInSecrets, s.TokenRequests = ptrTo(true), tokens
		})},
		{name: "ServiceAccountTokenInSecrets false with TokenRequests", d: csiDriver("test-driver", func(s *storagev1.CSIDriverSpec) {
			s.ServiceAccountTokenInSecrets, s.TokenRequests = ptrTo(false), tokens
		})},
		{name: "TokenRequests has at most one token with empty string audience", d: csiDriver("test-driver", func(s *storagev1.CSIDriverSpec) {
			s.TokenRequests = []storagev1.TokenRequest{{Audience: ""}}
		})},
		{name: "TokenRequests has tokens with different audience", d: csiDriver("test-driver", func(s *storagev1.CSIDriverSpec) {
			s.TokenRequests = []storagev1.TokenRequest{{}, {Audience: "gcp"}, {Audience: "aws"}}
		})},

		{name: "invalid name", d: csiDriver("-invalid-@#$%^&*()-"), err: "metadata.name: Invalid value"},
		{name: "long name", d: csiDriver("my-a-b-c-d-c-f-g-h-i-j-k-l-m-n-o-p-q-r-s-t-u-v-w-x-y-z-ABCDEFGHIJKLMNOPQRSTUVWXYZ-driver"), err: "metadata.name: Invalid value"},
		{name: "AttachRequired not set", d: func() *storagev1.CSIDriver { d := csiDriver("test-driver"); d.Spec.AttachRequired = nil; return d }(),
			err: "spec.attachedRequired: Required value"},
		{name: "PodInfoOnMount not set", d: func() *storagev1.CSIDriver { d := csiDriver("test-driver"); d.Spec.PodInfoOnMount = nil; return d }(),
			err: "spec.podInfoOnMount: Required value"},
		{name: "StorageCapacity not set", d: func() *storagev1.CSIDriver { d := csiDriver("test-driver"); d.Spec.StorageCapacity = nil; return d }(),
			err: "spec.storageCapacity: Required value"},
		{name: "no SELinuxMount", d: func() *storagev1.CSIDriver { d := csiDriver("test-driver"); d.Spec.SELinuxMount = nil; return d }(),
			err: "spec.seLinuxMount: Required value"},
		{name: "no PreventPodSchedulingIfMissing", d: func() *storagev1.CSIDriver {
			d := csiDriver("test-driver")
			d.Spec.PreventPodSchedulingIfMissing = nil
			return d
		}(), err: "spec.preventPodSchedulingIfMissing: Required value"},
		{name: "invalid mode", d: csiDriver("test-driver", func(s *storagev1.CSIDriverSpec) {
			s.VolumeLifecycleModes = []storagev1.VolumeLifecycleMode{"no-such-mode"}
		}),
			err: "spec.volumeLifecycleModes: Unsupported value: \"no-such-mode\": supported values: \"Persistent\", \"Ephemeral\""},
		{name: "invalid fsGroupPolicy", d: csiDriver("test-driver", func(s *storagev1.CSIDriverSpec) { s.FSGroupPolicy = &invalidFSGroupPolicy }),
			err: "spec.fsGroupPolicy: Unsupported value: \"invalid-mode\": supported values: \"File\", \"None\", \"ReadWriteOnceWithFSType\""},
		{name: "NodeAllocatableUpdatePeriodSeconds less than 10", d: csiDriver("test-driver", func(s *storagev1.CSIDriverSpec) { s.NodeAllocatableUpdatePeriodSeconds = ptrTo(int64(9)) }),
			err: "spec.nodeAllocatableUpdatePeriodSeconds: Invalid value: 9: must be greater than or equal to 10 seconds"},
		{name: "ServiceAccountTokenInSecrets set without TokenRequests", d: csiDriver("test-driver", func(s *storagev1.CSIDriverSpec) { s.ServiceAccountTokenInSecrets = ptrTo(true) }),
			err: "spec.serviceAccountTokenInSecrets: Invalid value: true: serviceAccountTokenInSecrets is set but no tokenRequests are specified"},
		{name: "TokenRequests has tokens with the same audience", d: csiDriver("test-driver", func(s *storagev1.CSIDriverSpec) {
			s.TokenRequests = []storagev1.TokenRequest{{Audience: "gcp"}, {Audience: "gcp"}}
		}), err: "spec.tokenRequests[1].audience: Duplicate value: \"gcp\""},
		{name: "TokenRequests has tokens with ExpirationSeconds less than 10min", d: csiDriver("test-driver", func(s *storagev1.CSIDriverSpec) {
			s.TokenRequests = []storagev1.TokenRequest{{Audience: "gcp", ExpirationSeconds: ptrTo(int64(10))}}
		}), err: "spec.tokenRequests[0].expirationSeconds: Invalid value: 10: may not specify a duration less than 10 minutes"},
		{name: "TokenRequests has tokens with ExpirationSeconds longer than 1<<32", d: csiDriver("test-driver", func(s *storagev1.CSIDriverSpec) {
			s.TokenRequests = []storagev1.TokenRequest{{Audience: "gcp", ExpirationSeconds: ptrTo(int64(1<<32 + 1))}}
		}), err: "spec.tokenRequests[0].expirationSeconds: Invalid value: 4294967297: may not specify a duration larger than 2^32 seconds"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errorsContain(t, validateCreate(t, csiDriverDef(), tt.d), tt.err)
		})
	}
}

// The cases of TestCSIDriverValidationUpdate in validation_test.go.
func TestCSIDriverValidateUpdate(t *testing.T) {
	old := csiDriver("test-driver", func(s *storagev1.CSIDriverSpec) {
		s.AttachRequired = ptrTo(false)
		s.VolumeLifecycleModes = []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecycleEphemeral, storagev1.VolumeLifecyclePersistent}
		s.StorageCapacity = ptrTo(true)
		s.SELinuxMount = ptrTo(true)
	})
	tests := []struct {
		name   string
		modify func(*storagev1.CSIDriver)
		err    string
	}{
		{name: "no change", modify: func(*storagev1.CSIDriver) {}},
		{name: "change TokenRequests", modify: func(d *storagev1.CSIDriver) { d.Spec.TokenRequests = []storagev1.TokenRequest{{Audience: "gcp"}} }},
		{name: "change RequiresRepublish", modify: func(d *storagev1.CSIDriver) { d.Spec.RequiresRepublish = ptrTo(true) }},
		{name: "StorageCapacity changed", modify: func(d *storagev1.CSIDriver) { d.Spec.StorageCapacity = ptrTo(false) }},
		{name: "SELinuxMount changed", modify: func(d *storagev1.CSIDriver) { d.Spec.SELinuxMount = ptrTo(false) }},
		{name: "change PodInfoOnMount", modify: func(d *storagev1.CSIDriver) { d.Spec.PodInfoOnMount = ptrTo(true) }},
		{name: "change FSGroupPolicy", modify: func(d *storagev1.CSIDriver) { d.Spec.FSGroupPolicy = ptrTo(storagev1.FileFSGroupPolicy) }},
		{name: "NodeAllocatableUpdatePeriodSeconds from nil to valid value", modify: func(d *storagev1.CSIDriver) { d.Spec.NodeAllocatableUpdatePeriodSeconds = ptrTo(int64(10)) }},
		{name: "ServiceAccountTokenInSecrets from nil to true with TokenRequests", modify: func(d *storagev1.CSIDriver) {
			d.Spec.ServiceAccountTokenInSecrets, d.Spec.TokenRequests = ptrTo(true), []storagev1.TokenRequest{{Audience: "a"}}
		}},

		{name: "invalid name", modify: func(d *storagev1.CSIDriver) { d.Name = "-invalid-@#$%^&*()-" }, err: "metadata.name: Invalid value"},
		{name: "AttachRequired not set", modify: func(d *storagev1.CSIDriver) { d.Spec.AttachRequired = nil }, err: "spec.attachedRequired: Required value"},
		{name: "AttachRequired changed", modify: func(d *storagev1.CSIDriver) { d.Spec.AttachRequired = ptrTo(true) },
			err: "spec.attachedRequired: Invalid value: true: field is immutable"},
		{name: "PodInfoOnMount not set", modify: func(d *storagev1.CSIDriver) { d.Spec.PodInfoOnMount = nil }, err: "spec.podInfoOnMount: Required value"},
		{name: "invalid volume lifecycle mode", modify: func(d *storagev1.CSIDriver) {
			d.Spec.VolumeLifecycleModes = []storagev1.VolumeLifecycleMode{"no-such-mode"}
		},
			err: "spec.volumeLifecycleModes: Unsupported value"},
		{name: "volume lifecycle modes not set", modify: func(d *storagev1.CSIDriver) { d.Spec.VolumeLifecycleModes = nil },
			err: "spec.volumeLifecycleModes: Invalid value: null: field is immutable"},
		{name: "VolumeLifecyclePersistent removed", modify: func(d *storagev1.CSIDriver) {
			d.Spec.VolumeLifecycleModes = []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecycleEphemeral}
		}, err: "spec.volumeLifecycleModes: Invalid value"},
		{name: "FSGroupPolicy invalidated", modify: func(d *storagev1.CSIDriver) { d.Spec.FSGroupPolicy = ptrTo(storagev1.FSGroupPolicy("invalid")) },
			err: "spec.fsGroupPolicy: Unsupported value"},
		{name: "TokenRequests invalidated", modify: func(d *storagev1.CSIDriver) {
			d.Spec.TokenRequests = []storagev1.TokenRequest{{Audience: "gcp"}, {Audience: "gcp"}}
		}, err: "spec.tokenRequests[1].audience: Duplicate value"},
		{name: "invalid nil StorageCapacity", modify: func(d *storagev1.CSIDriver) { d.Spec.StorageCapacity = nil }, err: "spec.storageCapacity: Required value"},
		{name: "SELinuxMount not set", modify: func(d *storagev1.CSIDriver) { d.Spec.SELinuxMount = nil }, err: "spec.seLinuxMount: Required value"},
		{name: "NodeAllocatableUpdatePeriodSeconds to invalid value", modify: func(d *storagev1.CSIDriver) { d.Spec.NodeAllocatableUpdatePeriodSeconds = ptrTo(int64(9)) },
			err: "spec.nodeAllocatableUpdatePeriodSeconds: Invalid value: 9"},
		{name: "ServiceAccountTokenInSecrets set without TokenRequests", modify: func(d *storagev1.CSIDriver) { d.Spec.ServiceAccountTokenInSecrets = ptrTo(true) },
			err: "spec.serviceAccountTokenInSecrets: Invalid value"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := old.DeepCopy()
			tt.modify(d)
			errorsContain(t, validateUpdate(t, csiDriverDef(), d, old), tt.err)
		})
	}
}

// TestCSIDriverPrepareForUpdate in k8s.io/kubernetes
// pkg/registry/storage/csidriver/strategy_test.go: a change of the spec
// is a new generation, a change of metadata is not.
func TestCSIDriverGeneration(t *testing.T) {
	st := newStrategy(nil, csiDriverDef())
	old := csiDriver("d")
	old.Generation = 1

	labelled := old.DeepCopy()
	labelled.Labels = map[string]string{"a": "b"}
	st.PrepareForUpdate(t.Context(), labelled, old)
	if labelled.Generation != 1 {
		t.Errorf("a label change made generation %d, want 1", labelled.Generation)
	}
	changed := old.DeepCopy()
	changed.Spec.PodInfoOnMount = ptrTo(true)
	st.PrepareForUpdate(t.Context(), changed, old)
	if changed.Generation != 2 {
		t.Errorf("a spec change made generation %d, want 2", changed.Generation)
	}
}

// TestWarningsOnCreate and TestWarningsOnUpdate in
// pkg/registry/storage/csidriver/strategy_test.go: token requests without
// serviceAccountTokenInSecrets warn on create and when they change.
func TestCSIDriverWarnings(t *testing.T) {
	st := newStrategy(nil, csiDriverDef())
	want := []string{warningServiceAccountTokenInSecretsRecommended}
	withTokens := csiDriver("d", func(s *storagev1.CSIDriverSpec) { s.TokenRequests = []storagev1.TokenRequest{{Audience: "a"}} })
	inSecrets := csiDriver("d", func(s *storagev1.CSIDriverSpec) {
		s.TokenRequests, s.ServiceAccountTokenInSecrets = []storagev1.TokenRequest{{Audience: "a"}}, ptrTo(false)
	})
	otherTokens := csiDriver("d", func(s *storagev1.CSIDriverSpec) { s.TokenRequests = []storagev1.TokenRequest{{Audience: "b"}} })
	tests := []struct {
		name     string
		obj, old *storagev1.CSIDriver
		want     []string
	}{
		{"create without tokens", csiDriver("d"), nil, nil},
		{"create with tokens", withTokens, nil, want},
		{"create with tokens in secrets", inSecrets, nil, nil},
		{"update adding tokens", withTokens, csiDriver("d"), want},
		{"update changing tokens", otherTokens, withTokens, want},
		{"update keeping tokens", withTokens, withTokens, nil},
		{"update removing tokens", csiDriver("d"), withTokens, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			if tt.old == nil {
				got = st.WarningsOnCreate(t.Context(), tt.obj)
			} else {
				got = st.WarningsOnUpdate(t.Context(), tt.obj, tt.old)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("warnings = %q, want %q", got, tt.want)
			}
		})
	}
}

// printCSIDriver in k8s.io/kubernetes pkg/printers/internalversion/printers.go:
// unset fields print as their defaults.
func TestCSIDriverTable(t *testing.T) {
	tests := []struct {
		name string
		spec storagev1.CSIDriverSpec
		want []any
	}{
		{"unset", storagev1.CSIDriverSpec{}, []any{"d", true, false, false, "<unset>", false, "<none>", "<unknown>"}},
		{"defaulted", csiDriver("d").Spec, []any{"d", true, false, false, "<unset>", false, "Persistent", "<unknown>"}},
		{"everything", storagev1.CSIDriverSpec{AttachRequired: ptrTo(false), PodInfoOnMount: ptrTo(true), StorageCapacity: ptrTo(true),
			TokenRequests: []storagev1.TokenRequest{{Audience: "a"}, {Audience: "b"}}, RequiresRepublish: ptrTo(true),
			VolumeLifecycleModes: []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecyclePersistent, storagev1.VolumeLifecycleEphemeral}},
			[]any{"d", false, true, true, "a,b", true, "Persistent,Ephemeral", "<unknown>"}},
		{"empty token requests", storagev1.CSIDriverSpec{TokenRequests: []storagev1.TokenRequest{}}, []any{"d", true, false, false, "", false, "<none>", "<unknown>"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := &storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: "d"}, Spec: tt.spec}
			if got := tableRow(t, csiDriverDef(), d); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("row = %#v, want %#v", got, tt.want)
			}
		})
	}
}
