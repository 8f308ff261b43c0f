package serviceaccount

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/storage/names"
	"k8s.io/utils/ptr"
)

// DefaultName is the ServiceAccount a pod runs as unless it names one.
const DefaultName = "default"

// mirrorPodAnnotation marks static pods a kubelet mirrors; they may not
// use a ServiceAccount.
const mirrorPodAnnotation = "kubernetes.io/config.mirror"

// Admission is the ServiceAccount admission plugin
// (plugin/pkg/admission/serviceaccount/admission.go): a pod created
// without a ServiceAccount runs as "default", one naming a ServiceAccount
// that does not exist is refused, and unless the pod or its
// ServiceAccount opts out (automountServiceAccountToken: false) its
// containers get the projected token volume kube-api-access-<random> at
// /var/run/secrets/kubernetes.io/serviceaccount, as on kube-apiserver: a
// token the kubelet requests for the pod, the CA of kube-root-ca.crt and
// the namespace.
type Admission struct {
	lookup func() (Lookup, error)
}

// NewAdmission reads ServiceAccounts through lookup.
func NewAdmission(lookup func() (Lookup, error)) *Admission { return &Admission{lookup: lookup} }

var (
	_ admission.MutationInterface   = (*Admission)(nil)
	_ admission.ValidationInterface = (*Admission)(nil)
)

func (a *Admission) Handles(op admission.Operation) bool { return op == admission.Create }

func pod(attrs admission.Attributes) *corev1.Pod {
	if attrs.GetResource().GroupResource() != corev1.Resource("pods") || attrs.GetSubresource() != "" {
		return nil
	}
	p, _ := attrs.GetObject().(*corev1.Pod)
	if p == nil || p.Annotations[mirrorPodAnnotation] != "" {
		return nil
	}
	return p
}

// Admit defaults spec.serviceAccountName and mounts the token volume. A
// ServiceAccount it cannot read is left to Validate to refuse; its
// automountServiceAccountToken then counts as unset.
func (a *Admission) Admit(ctx context.Context, attrs admission.Attributes, _ admission.ObjectInterfaces) error {
	p := pod(attrs)
	if p == nil {
		return nil
	}
	if p.Spec.ServiceAccountName == "" {
		p.Spec.ServiceAccountName = DefaultName
	}
	var sa *corev1.ServiceAccount
	if l, err := a.lookup(); err == nil {
		sa, _ = l.ServiceAccount(ctx, attrs.GetNamespace(), p.Spec.ServiceAccountName)
	}
	if automount(sa, p) {
		mountToken(p)
	}
	return nil
}

// The token volume (upstream's serviceaccount.TokenVolumeSource and
// admission.mountServiceAccountToken).
const (
	tokenVolumePrefix = "kube-api-access-"
	// TokenMountPath is where every container finds it.
	TokenMountPath = "/var/run/secrets/kubernetes.io/serviceaccount"
	// tokenExpirationSeconds is a bound token's lifetime as
	// kube-apiserver projects it (WarnOnlyBoundTokenExpirationSeconds):
	// an hour and 7 s, which the kubelet renews at 80 %.
	tokenExpirationSeconds = 3607
)

// automount is whether p gets a token volume: the pod's choice, else its
// ServiceAccount's, else yes.
func automount(sa *corev1.ServiceAccount, p *corev1.Pod) bool {
	if p.Spec.AutomountServiceAccountToken != nil {
		return *p.Spec.AutomountServiceAccountToken
	}
	if sa != nil && sa.AutomountServiceAccountToken != nil {
		return *sa.AutomountServiceAccountToken
	}
	return true
}

// mountToken adds the token volume to p (or reuses one of its name) and
// mounts it read-only in every container and init container that mounts
// nothing at TokenMountPath already.
func mountToken(p *corev1.Pod) {
	name := ""
	for _, v := range p.Spec.Volumes {
		if strings.HasPrefix(v.Name, tokenVolumePrefix) {
			name = v.Name
			break
		}
	}
	mounted := false
	mount := func(cs []corev1.Container) {
		for i := range cs {
			if slices.ContainsFunc(cs[i].VolumeMounts, func(m corev1.VolumeMount) bool { return m.MountPath == TokenMountPath }) {
				continue
			}
			if name == "" {
				name = names.SimpleNameGenerator.GenerateName(tokenVolumePrefix)
			}
			cs[i].VolumeMounts = append(cs[i].VolumeMounts, corev1.VolumeMount{Name: name, ReadOnly: true, MountPath: TokenMountPath})
			mounted = true
		}
	}
	mount(p.Spec.InitContainers)
	mount(p.Spec.Containers)
	if !mounted || slices.ContainsFunc(p.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == name }) {
		return
	}
	mode := int32(0o644)
	p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
		DefaultMode: &mode,
		Sources: []corev1.VolumeProjection{
			{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: ptr.To[int64](tokenExpirationSeconds)}},
			{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: RootCAConfigMap},
				Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
			{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{Path: "namespace",
				FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"}}}}},
		},
	}}})
}

// Validate refuses a pod whose ServiceAccount does not exist. The default
// one is looked up again for up to about two seconds, as upstream does:
// the controller creates it just after its namespace.
func (a *Admission) Validate(ctx context.Context, attrs admission.Attributes, _ admission.ObjectInterfaces) error {
	p := pod(attrs)
	if p == nil {
		return nil
	}
	name, namespace := p.Spec.ServiceAccountName, attrs.GetNamespace()
	l, err := a.lookup()
	if err != nil {
		return admission.NewForbidden(attrs, err)
	}
	attempts := 1
	if name == DefaultName {
		attempts = 10
	}
	pause := time.Duration(100+rand.IntN(100)) * time.Millisecond
	for i := range attempts {
		if i > 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(pause):
			}
		}
		_, err = l.ServiceAccount(ctx, namespace, name)
		if !apierrors.IsNotFound(err) {
			break
		}
		// The cache may lag a create: ask etcd too.
		if _, live := a.live(ctx, l, namespace, name); live == nil {
			err = nil
			break
		}
	}
	if err != nil {
		return admission.NewForbidden(attrs, fmt.Errorf("error looking up service account %s/%s: %w", namespace, name, err))
	}
	return nil
}

// live reads a ServiceAccount from etcd when the lookup reads clients'.
func (a *Admission) live(ctx context.Context, l Lookup, namespace, name string) (*corev1.ServiceAccount, error) {
	if cl, ok := l.(clientLookup); ok {
		return cl.c.ServiceAccounts(namespace).Get(ctx, name, metav1.GetOptions{})
	}
	return l.ServiceAccount(ctx, namespace, name)
}
