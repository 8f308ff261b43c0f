package server_test

import (
	"strings"
	"sync"
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kubestore/kubestore/config"
	"github.com/kubestore/kubestore/serviceip"
)

// The default ServiceCIDR exists with Ready=True once /readyz is ok, as
// kube-proxy lists and watches it (in protobuf), is stored under
// kube-apiserver's key, and comes back when deleted, read from the watch
// cache (no GET reaches the API).
func TestDefaultServiceCIDR(t *testing.T) {
	ts := startServer(t, testConfig(t))
	ctx := t.Context()
	cfg := rest.CopyConfig(ts.rest)
	cfg.ContentType = runtime.ContentTypeProtobuf
	cfg.AcceptContentTypes = runtime.ContentTypeProtobuf
	pb := kubernetes.NewForConfigOrDie(cfg).NetworkingV1().ServiceCIDRs()
	// The metrics are the process's: count from here.
	gets := func() float64 {
		return ts.metric("apiserver_request_total", map[string]string{"verb": "GET", "resource": "servicecidrs"})
	}
	getsBefore := gets()

	list, err := pb.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 {
		t.Fatalf("%d ServiceCIDRs once ready, want the default one", len(list.Items))
	}
	c := list.Items[0]
	if c.Name != serviceip.DefaultServiceCIDRName || strings.Join(c.Spec.CIDRs, ",") != config.DefaultServiceClusterIPRange {
		t.Errorf("default ServiceCIDR %s %v, want kubernetes [%s]", c.Name, c.Spec.CIDRs, config.DefaultServiceClusterIPRange)
	}
	ready := apimeta.FindStatusCondition(c.Status.Conditions, networkingv1.ServiceCIDRConditionReady)
	if ready == nil || ready.Status != metav1.ConditionTrue || ready.Message != "Kubernetes default Service CIDR is ready" {
		t.Errorf("Ready condition %+v, want True", ready)
	}
	resp, err := ts.backend.Client().Get(ctx, "/registry/servicecidrs/kubernetes")
	if err != nil || len(resp.Kvs) != 1 || !strings.HasPrefix(string(resp.Kvs[0].Value), "k8s\x00") {
		t.Errorf("not stored as protobuf under /registry/servicecidrs/kubernetes: %v %v", err, resp)
	}

	w, err := pb.Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if err := pb.Delete(ctx, serviceip.DefaultServiceCIDRName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// Deleted, created again and made Ready within an interval.
	var seen []watch.EventType
	deadline := time.After(serviceip.DefaultServiceCIDRInterval + 10*time.Second)
	for {
		select {
		case ev := <-w.ResultChan():
			seen = append(seen, ev.Type)
			got, ok := ev.Object.(*networkingv1.ServiceCIDR)
			if ok && ev.Type == watch.Modified && apimeta.IsStatusConditionTrue(got.Status.Conditions, networkingv1.ServiceCIDRConditionReady) {
				if strings.Join(got.Spec.CIDRs, ",") != config.DefaultServiceClusterIPRange {
					t.Errorf("recreated with %v", got.Spec.CIDRs)
				}
				if seen[0] != watch.Deleted || seen[1] != watch.Added {
					t.Errorf("watch events %v, want DELETED, ADDED, MODIFIED", seen)
				}
				// Its passes read the watch cache, never the API: a GET
				// every 10 s ran the whole HTTP stack on an idle server.
				if n := gets() - getsBefore; n != 0 {
					t.Errorf("the controller's passes made %v GETs of servicecidrs, want none", n)
				}
				return
			}
		case <-deadline:
			t.Fatalf("the default ServiceCIDR was not recreated and made Ready; watch events %v", seen)
		}
	}
}

// Several controllers on one store at once, as several kubestores on one
// etcd: one create wins, every one returns, the object has one Ready
// condition, and none writes again once it is Ready.
func TestDefaultServiceCIDRSeveralControllers(t *testing.T) {
	ts := startServer(t, testConfig(t))
	ctx := t.Context()
	cidrs := ts.client.NetworkingV1().ServiceCIDRs()
	if err := cidrs.Delete(ctx, serviceip.DefaultServiceCIDRName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	ranges, err := config.ParseServiceClusterIPRange(config.DefaultServiceClusterIPRange)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() { serviceip.NewDefaultServiceCIDR(ranges, cidrs).Start(ctx) })
	}
	wg.Wait()
	c, err := cidrs.Get(ctx, serviceip.DefaultServiceCIDRName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Status.Conditions) != 1 || !apimeta.IsStatusConditionTrue(c.Status.Conditions, networkingv1.ServiceCIDRConditionReady) {
		t.Errorf("conditions %+v, want one Ready=True", c.Status.Conditions)
	}
	// A controller with another range leaves it alone.
	other, err := config.ParseServiceClusterIPRange("10.1.0.0/24")
	if err != nil {
		t.Fatal(err)
	}
	serviceip.NewDefaultServiceCIDR(other, cidrs).Start(ctx)
	serviceip.NewDefaultServiceCIDR(ranges, cidrs).Start(ctx)
	after, err := cidrs.Get(ctx, serviceip.DefaultServiceCIDRName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if after.ResourceVersion != c.ResourceVersion {
		t.Errorf("a Ready default ServiceCIDR was written again: %v", after)
	}
	if _, err := cidrs.Create(ctx, &networkingv1.ServiceCIDR{ObjectMeta: metav1.ObjectMeta{Name: serviceip.DefaultServiceCIDRName}, Spec: networkingv1.ServiceCIDRSpec{CIDRs: []string{"10.2.0.0/24"}}}, metav1.CreateOptions{}); !apierrors.IsAlreadyExists(err) {
		t.Errorf("a second create: %v, want AlreadyExists", err)
	}
}
