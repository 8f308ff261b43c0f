package serviceaccount

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/admission"
)

// DefaultName is the ServiceAccount a pod runs as unless it names one.
const DefaultName = "default"

// mirrorPodAnnotation marks static pods a kubelet mirrors; they may not
// use a ServiceAccount.
const mirrorPodAnnotation = "kubernetes.io/config.mirror"

// Admission is the ServiceAccount admission plugin's check
// (plugin/pkg/admission/serviceaccount/admission.go): a pod created
// without a ServiceAccount runs as "default", and one naming a
// ServiceAccount that does not exist is refused. Token volumes are not
// projected into pods.
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

// Admit defaults spec.serviceAccountName.
func (a *Admission) Admit(_ context.Context, attrs admission.Attributes, _ admission.ObjectInterfaces) error {
	if p := pod(attrs); p != nil && p.Spec.ServiceAccountName == "" {
		p.Spec.ServiceAccountName = DefaultName
	}
	return nil
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
