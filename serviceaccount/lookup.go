package serviceaccount

import (
	"context"
	"sync"

	corev1 "k8s.io/api/core/v1"
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

func (l clientLookup) ServiceAccount(ctx context.Context, namespace, name string) (*corev1.ServiceAccount, error) {
	return l.c.ServiceAccounts(namespace).Get(ctx, name, cached)
}

func (l clientLookup) Pod(ctx context.Context, namespace, name string) (*corev1.Pod, error) {
	return l.c.Pods(namespace).Get(ctx, name, cached)
}

func (l clientLookup) Secret(ctx context.Context, namespace, name string) (*corev1.Secret, error) {
	return l.c.Secrets(namespace).Get(ctx, name, cached)
}
