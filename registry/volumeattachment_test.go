package registry

import (
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// inlineSpec is validation_test.go's: a CSI volume migrated inline.
func inlineSpec() *corev1.PersistentVolumeSpec {
	return &corev1.PersistentVolumeSpec{
		AccessModes:            []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
		PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: "com.test.foo", VolumeHandle: "foobar"}},
	}
}

func volumeAttachment(name string, f ...func(*storagev1.VolumeAttachment)) *storagev1.VolumeAttachment {
	va := &storagev1.VolumeAttachment{
		ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: "1"},
		Spec: storagev1.VolumeAttachmentSpec{Attacher: "myattacher", NodeName: "mynode",
			Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: ptrTo("pv-name")}},
	}
	for _, fn := range f {
		fn(va)
	}
	return va
}

func withStatus(detachMessage string, attachCode *int32) func(*storagev1.VolumeAttachment) {
	return func(va *storagev1.VolumeAttachment) {
		va.Status = storagev1.VolumeAttachmentStatus{Attached: true, AttachmentMetadata: map[string]string{"foo": "bar"},
			AttachError: &storagev1.VolumeError{Message: "hello world", ErrorCode: attachCode},
			DetachError: &storagev1.VolumeError{Message: detachMessage}}
	}
}

func withSource(pv *string, inline *corev1.PersistentVolumeSpec) func(*storagev1.VolumeAttachment) {
	return func(va *storagev1.VolumeAttachment) {
		va.Spec.Source = storagev1.VolumeAttachmentSource{PersistentVolumeName: pv, InlineVolumeSpec: inline}
	}
}

func withInline(f func(*corev1.PersistentVolumeSpec)) func(*storagev1.VolumeAttachment) {
	spec := inlineSpec()
	f(spec)
	return withSource(nil, spec)
}

// The cases of TestVolumeAttachmentValidation and
// TestVolumeAttachmentValidationV1 in k8s.io/kubernetes
// pkg/apis/storage/validation/validation_test.go, and of
// TestVolumeAttachmentValidation in
// pkg/registry/storage/volumeattachment/strategy_test.go, with the error
// each invalid one gets; then the inline volume spec's rules of
// ValidatePersistentVolumeSpec.
func TestVolumeAttachmentValidate(t *testing.T) {
	tests := []struct {
		name string
		va   *storagev1.VolumeAttachment
		err  string // "" when valid
	}{
		{name: "persistent volume", va: volumeAttachment("foo")},
		{name: "inline spec", va: volumeAttachment("foo-with-inlinespec", withSource(nil, inlineSpec()))},
		{name: "with status", va: volumeAttachment("foo-with-status", withStatus("hello world", nil))},
		{name: "inline spec and status", va: volumeAttachment("foo-with-inlinespec-and-status", withSource(nil, inlineSpec()), withStatus("hello world", nil))},
		{name: "valid error code", va: volumeAttachment("foo-with-valid-error-code", withStatus("hello world", ptrTo(int32(7))))},

		{name: "empty attacher name", va: volumeAttachment("foo", func(va *storagev1.VolumeAttachment) { va.Spec.Attacher = "" }),
			err: "spec.attacher: Required value"},
		{name: "invalid attacher name", va: volumeAttachment("foo", func(va *storagev1.VolumeAttachment) { va.Spec.Attacher = "invalid-@#$%^&*()" }),
			err: "spec.attacher: Invalid value: \"invalid-@#$%^&*()\""},
		{name: "empty node name", va: volumeAttachment("foo", func(va *storagev1.VolumeAttachment) { va.Spec.NodeName = "" }),
			err: "spec.nodeName: Invalid value: \"\""},
		{name: "no volume name", va: volumeAttachment("foo", withSource(nil, nil)),
			err: "spec.source: Required value: must specify exactly one of inlineVolumeSpec and persistentVolumeName"},
		{name: "empty volume name", va: volumeAttachment("foo", withSource(ptrTo(""), nil)),
			err: "spec.source.persistentVolumeName: Required value: must specify non empty persistentVolumeName"},
		{name: "invalid PV name", va: volumeAttachment("foo", withSource(ptrTo("-invalid-@#$%^&*()-"), nil)),
			err: "spec.source.persistentVolumeName: Invalid value: \"-invalid-@#$%^&*()-\""},
		{name: "too long error message", va: volumeAttachment("foo", withStatus(strings.Repeat("a", maxVolumeErrorMessageSize+1), nil)),
			err: "status.detachError.message: Too long: may not be more than 1024 bytes"},
		{name: "negative error code", va: volumeAttachment("foo", withStatus("hello world", ptrTo(int32(-1)))),
			err: "status.attachError.errorCode: Invalid value: -1: must be between 0 and 2147483647, inclusive"},
		{name: "too long metadata", va: volumeAttachment("foo", withStatus("hello world", nil), func(va *storagev1.VolumeAttachment) {
			va.Status.AttachmentMetadata = map[string]string{"foo": strings.Repeat("a", maxAttachedVolumeMetadataSize)}
		}), err: "status.attachmentMetadata: Too long: may not be more than 262144 bytes"},
		{name: "persistent volume name and inline spec", va: volumeAttachment("foo", withSource(ptrTo("pv-name"), inlineSpec())),
			err: "spec.source: Forbidden: must specify exactly one of inlineVolumeSpec and persistentVolumeName"},
		{name: "inline spec without CSI source", va: volumeAttachment("foo", withSource(ptrTo("pv-name"), &corev1.PersistentVolumeSpec{
			Capacity:               corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10G")},
			AccessModes:            []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeSource: corev1.PersistentVolumeSource{FlexVolume: &corev1.FlexPersistentVolumeSource{Driver: "kubernetes.io/blue", FSType: "ext4"}},
			StorageClassName:       "test-storage-class",
		})), err: "spec.source: Forbidden"},

		{name: "inline: no CSI source", va: volumeAttachment("foo", withInline(func(s *corev1.PersistentVolumeSpec) {
			s.CSI, s.NFS = nil, &corev1.NFSVolumeSource{Server: "s", Path: "/p"}
		})), err: "spec.source.inlineVolumeSpec.csi: Required value: has to be specified in the context of inline volumes"},
		{name: "inline: two sources", va: volumeAttachment("foo", withInline(func(s *corev1.PersistentVolumeSpec) { s.NFS = &corev1.NFSVolumeSource{Server: "s", Path: "/p"} })),
			err: "spec.source.inlineVolumeSpec.csi: Forbidden: may not specify more than 1 volume type"},
		{name: "inline: capacity, claim, class, affinity", va: volumeAttachment("foo", withInline(func(s *corev1.PersistentVolumeSpec) {
			s.Capacity = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}
			s.ClaimRef = &corev1.ObjectReference{Name: "c"}
			s.StorageClassName = "sc"
			s.NodeAffinity = &corev1.VolumeNodeAffinity{}
		})), err: "spec.source.inlineVolumeSpec.claimRef: Forbidden: may not be specified in the context of inline volumes"},
		{name: "inline: no access modes", va: volumeAttachment("foo", withInline(func(s *corev1.PersistentVolumeSpec) { s.AccessModes = nil })),
			err: "spec.source.inlineVolumeSpec.accessModes: Required value"},
		{name: "inline: ReadWriteOncePod with another mode", va: volumeAttachment("foo", withInline(func(s *corev1.PersistentVolumeSpec) {
			s.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOncePod, corev1.ReadOnlyMany}
		})), err: "spec.source.inlineVolumeSpec.accessModes: Forbidden: may not use ReadWriteOncePod with other access modes"},
		{name: "inline: reclaim policy Retain", va: volumeAttachment("foo", withInline(func(s *corev1.PersistentVolumeSpec) {
			s.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimRetain
		}))},
		{name: "inline: reclaim policy Delete", va: volumeAttachment("foo", withInline(func(s *corev1.PersistentVolumeSpec) {
			s.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimDelete
		})), err: "spec.source.inlineVolumeSpec.persistentVolumeReclaimPolicy: Forbidden: may only be Retain in the context of inline volumes"},
		{name: "inline: block mode", va: volumeAttachment("foo", withInline(func(s *corev1.PersistentVolumeSpec) { s.VolumeMode = ptrTo(corev1.PersistentVolumeBlock) })),
			err: "spec.source.inlineVolumeSpec.volumeMode: Forbidden: may not specify volumeMode other than Filesystem in the context of inline volumes"},
		{name: "inline: CSI source without handle, bad secret reference", va: volumeAttachment("foo", withInline(func(s *corev1.PersistentVolumeSpec) {
			s.CSI.VolumeHandle = ""
			s.CSI.NodePublishSecretRef = &corev1.SecretReference{Name: "s"}
		})), err: "spec.source.inlineVolumeSpec.csi.nodePublishSecretRef.namespace: Required value"},
		{name: "inline: empty volume attributes class", va: volumeAttachment("foo", withInline(func(s *corev1.PersistentVolumeSpec) { s.VolumeAttributesClassName = ptrTo("") })),
			err: "spec.source.inlineVolumeSpec.volumeAttributesClassName: Required value: an empty string is disallowed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errorsContain(t, validateCreate(t, volumeAttachmentDef(), tt.va), tt.err)
		})
	}
}

// The cases of TestVolumeAttachmentUpdateValidation in validation_test.go:
// the spec is immutable, status is validated.
func TestVolumeAttachmentValidateUpdate(t *testing.T) {
	old := volumeAttachment("foo")
	tests := []struct {
		name string
		new  *storagev1.VolumeAttachment
		err  string
	}{
		{name: "no change", new: volumeAttachment("foo")},
		{name: "modify status", new: volumeAttachment("foo", withStatus("hello world", nil))},
		{name: "change attacher", new: volumeAttachment("foo", func(va *storagev1.VolumeAttachment) { va.Spec.Attacher = "another-attacher" }),
			err: "spec: Invalid value"},
		{name: "change source volume name", new: volumeAttachment("foo", withSource(ptrTo("bar"), nil)), err: "spec: Invalid value"},
		{name: "change node", new: volumeAttachment("foo", func(va *storagev1.VolumeAttachment) { va.Spec.NodeName = "anothernode" }),
			err: "spec: Invalid value"},
		{name: "change source", new: volumeAttachment("foo", withSource(nil, inlineSpec())), err: "spec: Invalid value"},
		{name: "add invalid status", new: volumeAttachment("foo", withStatus(strings.Repeat("a", maxVolumeErrorMessageSize+1), nil)),
			err: "status.detachError.message: Too long"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errs := validateUpdate(t, volumeAttachmentDef(), tt.new, old)
			errorsContain(t, errs, tt.err)
			if tt.err == "spec: Invalid value" && !strings.Contains(errs.ToAggregate().Error(), "field is immutable") {
				t.Errorf("errors %v do not say the spec is immutable", errs)
			}
		})
	}
}

// TestVolumeAttachmentStatusStrategy, TestUpdatePreventsStatusWrite,
// TestCreatePreventsStatusWrite and
// TestVolumeAttachmentStrategySourceInlineSpec in k8s.io/kubernetes
// pkg/registry/storage/volumeattachment/strategy_test.go, with
// MutableCSINodeAllocatableCount on (GA): error codes are kept.
func TestVolumeAttachmentStrategy(t *testing.T) {
	ctx := t.Context()
	st := newStrategy(nil, volumeAttachmentDef())
	status := statusStrategy{strategy: st}

	created := volumeAttachment("va", withSource(nil, inlineSpec()), func(va *storagev1.VolumeAttachment) { va.Status.Attached = true })
	st.PrepareForCreate(ctx, created)
	if created.Status.Attached || created.Spec.Source.InlineVolumeSpec == nil {
		t.Errorf("create kept status %v or dropped the inline spec", created.Status)
	}

	va := volumeAttachment("va")
	updated := va.DeepCopy()
	updated.Status.Attached = true
	st.PrepareForUpdate(ctx, updated, va)
	if updated.Status.Attached {
		t.Error("an update of the main resource wrote status")
	}

	attached := va.DeepCopy()
	attached.Status = storagev1.VolumeAttachmentStatus{Attached: true,
		AttachError: &storagev1.VolumeError{Message: "attach error", ErrorCode: ptrTo(int32(7))}}
	want := attached.DeepCopy()
	status.PrepareForUpdate(ctx, attached, va)
	if !apiequality.Semantic.DeepEqual(attached, want) {
		t.Errorf("a status update changed what it wrote: %+v", attached)
	}

	meddling := va.DeepCopy()
	meddling.Spec.NodeName = "valid-node-2"
	meddling.Labels = map[string]string{"foo": "bar"}
	meddling.Annotations = map[string]string{"foo": "baz"}
	meddling.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "Foo"}}
	status.PrepareForUpdate(ctx, meddling, va)
	if !apiequality.Semantic.DeepEqual(meddling, va) {
		t.Errorf("a status update changed spec or metadata: %+v", meddling)
	}

	// The status subresource validates the whole object, spec as stored.
	if errs := status.ValidateUpdate(ctx, volumeAttachment("va", withStatus("hello", ptrTo(int32(-1)))), va); len(errs) == 0 ||
		!strings.Contains(errs.ToAggregate().Error(), "status.attachError.errorCode") {
		t.Errorf("status validation: %v", errs)
	}
	if got := status.GetResetFields()["storage.k8s.io/v1"].String(); got != ".metadata\n.spec" {
		t.Errorf("status reset fields %q", got)
	}
	if st.AllowUnconditionalUpdate(ctx) || status.AllowUnconditionalUpdate(ctx) || st.AllowCreateOnUpdate(ctx) {
		t.Error("volume attachments are updated only conditionally and never created by an update")
	}
}

// printVolumeAttachment in k8s.io/kubernetes pkg/printers/internalversion/printers.go.
func TestVolumeAttachmentTable(t *testing.T) {
	tests := []struct {
		name string
		va   *storagev1.VolumeAttachment
		want []any
	}{
		{"persistent volume, attached", volumeAttachment("va", func(va *storagev1.VolumeAttachment) { va.Status.Attached = true }),
			[]any{"va", "myattacher", "pv-name", "mynode", true, "<unknown>"}},
		{"inline", volumeAttachment("va", withSource(nil, inlineSpec())), []any{"va", "myattacher", "", "mynode", false, "<unknown>"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tableRow(t, volumeAttachmentDef(), tt.va); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("row = %#v, want %#v", got, tt.want)
			}
		})
	}
}
