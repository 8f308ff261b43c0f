package main

import (
	"context"
	"fmt"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// tokenAuthRequests is how many GETs each way of authenticating makes.
const tokenAuthRequests = 2000

// TokenAuthResult is what authenticating a request with a ServiceAccount
// token costs against a client certificate: the same GET, made
// tokenAuthRequests times by 4 workers, each way; Lookups are the server's
// reads of ServiceAccounts during the token's run (each an HTTPS request of
// its loopback client before kubestore cached tokens).
type TokenAuthResult struct {
	Requests    int     `json:"requests"`
	CertPerSec  float64 `json:"certPerSec"`
	TokenPerSec float64 `json:"tokenPerSec"`
	Lookups     float64 `json:"lookups"`
}

// tokenAuth measures it on the running server.
func (b *bench) tokenAuth(ctx context.Context) error {
	admin := b.client(true)
	_, err := admin.CoreV1().ServiceAccounts(metav1.NamespaceDefault).Create(ctx,
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "bench-token"}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating the bench's ServiceAccount: %w", err)
	}
	tr, err := admin.CoreV1().ServiceAccounts(metav1.NamespaceDefault).CreateToken(ctx, "bench-token", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("requesting the bench's token: %w", err)
	}
	cfg := rest.AnonymousClientConfig(b.srv.cfg)
	cfg.BearerToken = tr.Status.Token
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	token := kubernetes.NewForConfigOrDie(cfg)
	// /version: what every authenticated user may read, so the token's run
	// measures authentication, not authorization's refusals.
	run := func(c kubernetes.Interface) (float64, error) {
		d, err := parallel(ctx, 4, tokenAuthRequests, func(ctx context.Context, _, _ int) error {
			_, err := c.Discovery().RESTClient().Get().AbsPath("/version").DoRaw(ctx)
			return err
		})
		if err != nil {
			return 0, err
		}
		return float64(tokenAuthRequests) / d.Seconds(), nil
	}
	r := TokenAuthResult{Requests: tokenAuthRequests}
	if r.CertPerSec, err = run(admin); err != nil {
		return err
	}
	lookups := func() (float64, error) {
		m, err := metricsOf(ctx, b.srv, `apiserver_request_total{`)
		if err != nil {
			return 0, err
		}
		var n float64
		for series, v := range m {
			if label(series, "resource") == "serviceaccounts" && label(series, "verb") == "GET" {
				n += v
			}
		}
		return n, nil
	}
	before, err := lookups()
	if err != nil {
		return err
	}
	if r.TokenPerSec, err = run(token); err != nil {
		return err
	}
	after, err := lookups()
	if err != nil {
		return err
	}
	r.Lookups = after - before
	b.res.TokenAuth = r
	b.logf("token auth: %d GETs: %.0f/s with a client certificate, %.0f/s with a ServiceAccount token (%.0f lookups of ServiceAccounts)",
		r.Requests, r.CertPerSec, r.TokenPerSec, r.Lookups)
	return nil
}

func tokenAuthRows(row func(figure, value string, t target), r *Result) {
	a := r.TokenAuth
	if a.Requests == 0 {
		return
	}
	row(fmt.Sprintf("GETs/s, %d by 4 workers: certificate / ServiceAccount token", a.Requests),
		fmt.Sprintf("%.0f / %.0f (%.2fx; %.0f lookups of ServiceAccounts)", a.CertPerSec, a.TokenPerSec, a.TokenPerSec/a.CertPerSec, a.Lookups), target{})
}
