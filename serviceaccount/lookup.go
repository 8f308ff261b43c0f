package serviceaccount

import (
	"context"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
)

// ClientLookup reads through the server's loopback client, from the watch
// cache (resourceVersion "0"): no informer, so no second copy of every
// Pod; a ServiceAccount or Pod just created may take a moment to show.
func ClientLookup(cfg *rest.Config) func() (Lookup, error) {
	return sync.OnceValues(func() (Lookup, error) {
		c, err := corev1client.NewForConfig(cfg)
		if err != nil {
			return nil, err
		}
		return clientLookup{c}, nil
	})
}

// clientLookup holds the concrete core client: a whole clientset in an
// interface would keep every API group's client in the binary (10 MB).
type clientLookup struct{ c *corev1client.CoreV1Client }

var cached = metav1.GetOptions{ResourceVersion: "0"}

// get reads from the watch cache, and reads again from etcd what the cache
// does not have yet: an object created a moment ago (a ServiceAccount, then
// its first token), as upstream's getters fall back from their listers to
// a live lookup.
func get[T any](ctx context.Context, get func(context.Context, string, metav1.GetOptions) (T, error), name string) (T, error) {
	obj, err := get(ctx, name, cached)
	if apierrors.IsNotFound(err) {
		return get(ctx, name, metav1.GetOptions{})
	}
	return obj, err
}

func (l clientLookup) ServiceAccount(ctx context.Context, namespace, name string) (*corev1.ServiceAccount, error) {
	return get(ctx, l.c.ServiceAccounts(namespace).Get, name)
}

func (l clientLookup) Pod(ctx context.Context, namespace, name string) (*corev1.Pod, error) {
	return get(ctx, l.c.Pods(namespace).Get, name)
}

func (l clientLookup) Secret(ctx context.Context, namespace, name string) (*corev1.Secret, error) {
	return get(ctx, l.c.Secrets(namespace).Get, name)
}
