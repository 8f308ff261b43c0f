package serviceaccount

import (
	"context"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// ClientLookup reads through the server's loopback client, from the watch
// cache (resourceVersion "0"): no informer, so no second copy of every
// Pod; a ServiceAccount or Pod just created may take a moment to show.
func ClientLookup(cfg *rest.Config) func() (Lookup, error) {
	return sync.OnceValues(func() (Lookup, error) {
		c, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return nil, err
		}
		return clientLookup{c}, nil
	})
}

type clientLookup struct{ c kubernetes.Interface }

var cached = metav1.GetOptions{ResourceVersion: "0"}

func (l clientLookup) ServiceAccount(ctx context.Context, namespace, name string) (*corev1.ServiceAccount, error) {
	return l.c.CoreV1().ServiceAccounts(namespace).Get(ctx, name, cached)
}

func (l clientLookup) Pod(ctx context.Context, namespace, name string) (*corev1.Pod, error) {
	return l.c.CoreV1().Pods(namespace).Get(ctx, name, cached)
}

func (l clientLookup) Secret(ctx context.Context, namespace, name string) (*corev1.Secret, error) {
	return l.c.CoreV1().Secrets(namespace).Get(ctx, name, cached)
}
