// Package certificates runs what kube-controller-manager does with
// CertificateSigningRequests, inside kubestore: the signing controller
// issues approved requests of the kubernetes.io client, kubelet client and
// kubelet serving signers with kubestore's own CA, the one that
// authenticates client certificates, so a kubelet's bootstrapped or
// rotated certificate logs it in as system:node:<name>; the approving
// controller approves a kubelet's client certificate requests that
// kubestore's authorizer allows (pkg/controller/certificates in
// k8s.io/kubernetes). Both write with the resourceVersion they read, so
// several kubestores on one etcd issue and approve each request once.
package certificates

import (
	"context"
	"crypto"
	"crypto/x509"
	"errors"
	"fmt"
	"sync"
	"time"

	"golang.org/x/time/rate"
	certificatesv1 "k8s.io/api/certificates/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/wait"
	authorizationv1client "k8s.io/client-go/kubernetes/typed/authorization/v1"
	certificatesv1client "k8s.io/client-go/kubernetes/typed/certificates/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
)

// Options says which controllers run.
type Options struct {
	// CA, when set, runs the signing controller: it issues certificates
	// of the Signers with the CA it returns at each request (a rotation
	// replaces it), each followed by chain (PEM, the CA certified by the
	// previous one after a rotation).
	CA func() (cert *x509.Certificate, key crypto.Signer, chain []byte)
	// Duration is the longest lifetime it issues (DefaultDuration when 0).
	Duration time.Duration
	// Approve runs the approving controller.
	Approve bool
	// CSRs, when set, lists and watches the CertificateSigningRequests
	// (kubestore's watch cache, registry.Storage.ListerWatcher); nil reads
	// them through cfg's client.
	CSRs cache.ListerWatcher
}

// Run runs the controllers of o on the API at cfg until ctx ends. Every
// goroutine it starts ends before it returns.
func Run(ctx context.Context, cfg *rest.Config, o Options) error {
	client, err := certificatesv1client.NewForConfig(cfg)
	if err != nil {
		return err
	}
	csrs := client.CertificateSigningRequests()
	var controllers []*controller
	if o.CA != nil {
		duration := o.Duration
		if duration == 0 {
			duration = DefaultDuration
		}
		c, err := newSigningController(csrs, &authority{current: o.CA}, duration)
		if err != nil {
			return err
		}
		controllers = append(controllers, c)
	}
	if o.Approve {
		reviews, err := authorizationv1client.NewForConfig(cfg)
		if err != nil {
			return err
		}
		controllers = append(controllers, newController("csrapproving",
			(&sarApprover{client: csrs, reviews: reviews.SubjectAccessReviews(), recognizers: recognizers()}).handle))
	}
	if len(controllers) == 0 {
		return nil
	}
	// One plain informer on the typed client: client-go's informer
	// factory would link every API group's informers into the binary.
	lw := o.CSRs
	if lw == nil {
		lw = cache.NewListWatchFromClient(client.RESTClient(), "certificatesigningrequests", metav1.NamespaceAll, fields.Everything())
	}
	informer := cache.NewSharedIndexInformer(lw, &certificatesv1.CertificateSigningRequest{}, 0, cache.Indexers{})
	for _, c := range controllers {
		c.store = informer.GetStore()
		if _, err := informer.AddEventHandler(c.handler()); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Go(func() { informer.RunWithContext(ctx) })
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		return nil
	}
	for _, c := range controllers {
		wg.Go(func() { c.run(ctx) })
	}
	<-ctx.Done()
	return nil
}

// newSigningController is the signing controller of every signer of
// Signers: kube-controller-manager runs one per signer, kubestore one
// queue for the three.
func newSigningController(client certificatesv1client.CertificateSigningRequestInterface, ca *authority, duration time.Duration) (*controller, error) {
	signers := map[string]*signer{}
	for _, name := range Signers {
		s, err := newSigner(name, ca, client, duration)
		if err != nil {
			return nil, err
		}
		signers[name] = s
	}
	return newController("csrsigning", func(ctx context.Context, csr *certificatesv1.CertificateSigningRequest) error {
		if s, ok := signers[csr.Spec.SignerName]; ok {
			return s.handle(ctx, csr)
		}
		return nil
	}), nil
}

// controller is upstream's CertificateController: a rate-limited queue of
// CSR names fed by the informer, and a handler that gets a copy of each
// request that has no certificate yet.
type controller struct {
	name   string
	queue  workqueue.TypedRateLimitingInterface[string]
	store  cache.Store
	handle func(ctx context.Context, csr *certificatesv1.CertificateSigningRequest) error
}

func newController(name string, handle func(context.Context, *certificatesv1.CertificateSigningRequest) error) *controller {
	return &controller{
		name: name,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedMaxOfRateLimiter(
				workqueue.NewTypedItemExponentialFailureRateLimiter[string](200*time.Millisecond, 1000*time.Second),
				// Only the retries' overall rate: 10 per second, bursts of 100.
				&workqueue.TypedBucketRateLimiter[string]{Limiter: rate.NewLimiter(rate.Limit(10), 100)},
			),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "kubestore_" + name}),
		handle: handle,
	}
}

func (c *controller) handler() cache.ResourceEventHandler {
	enqueue := func(obj any) {
		if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
			c.queue.Add(key)
		}
	}
	return cache.ResourceEventHandlerFuncs{AddFunc: enqueue, UpdateFunc: func(_, obj any) { enqueue(obj) }, DeleteFunc: enqueue}
}

// run works the queue until ctx ends.
func (c *controller) run(ctx context.Context) {
	go func() {
		<-ctx.Done()
		c.queue.ShutDown()
	}()
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		for c.processNext(ctx) {
		}
	}, time.Second)
}

func (c *controller) processNext(ctx context.Context) bool {
	key, quit := c.queue.Get()
	if quit {
		return false
	}
	defer c.queue.Done(key)
	if err := c.sync(ctx, key); err != nil {
		c.queue.AddRateLimited(key)
		var ign ignorable
		if errors.As(err, &ign) || apierrors.IsConflict(err) {
			// Another writer came first: retried on the new version.
			klog.V(4).InfoS("Certificate request: will retry", "controller", c.name, "csr", key, "err", err)
		} else {
			klog.ErrorS(err, "Certificate request: will retry", "controller", c.name, "csr", key)
		}
		return true
	}
	c.queue.Forget(key)
	return true
}

// sync hands a copy of the request to the handler, unless it is gone or
// has its certificate.
func (c *controller) sync(ctx context.Context, key string) error {
	obj, ok, err := c.store.GetByKey(key)
	if err != nil || !ok {
		return err
	}
	csr, isCSR := obj.(*certificatesv1.CertificateSigningRequest)
	if !isCSR {
		return fmt.Errorf("unexpected %T in the informer", obj)
	}
	if len(csr.Status.Certificate) > 0 {
		return nil
	}
	return c.handle(ctx, csr.DeepCopy())
}

// ignorable is an expected failure, retried without an error in the log
// (a request the approver recognized but may not approve).
type ignorable struct{ error }
