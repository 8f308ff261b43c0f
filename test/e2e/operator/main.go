// Command operator is a small controller-runtime operator the e2e tests
// run against kubestore, as an operator author would write one: a Manager
// with leader election on a Lease, reconciling Widgets
// (demo.kubestore.io/v1, a custom resource) into an owned ConfigMap, a
// Ready condition on the status subresource and an Event through the
// manager's events.k8s.io/v1 recorder. It prints "LEADER <id>" when it
// starts leading and "RECONCILED <id> <name> <generation>" after each
// reconcile, for the test to wait on.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

var widgetGVK = schema.GroupVersionKind{Group: "demo.kubestore.io", Version: "v1", Kind: "Widget"}

func main() {
	// controller-runtime registers --kubeconfig itself (ctrl.GetConfig).
	id := flag.String("id", "", "this replica's name")
	lease := flag.Duration("lease-duration", 4*time.Second, "leader election lease duration")
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseDevMode(false)))
	if err := run(*id, *lease); err != nil {
		fmt.Fprintln(os.Stderr, "operator:", err)
		os.Exit(1)
	}
}

func run(id string, lease time.Duration) error {
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return err
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	renew := lease * 3 / 4
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                  scheme,
		Metrics:                 metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress:  "0",
		LeaderElection:          true,
		LeaderElectionID:        "widget-operator",
		LeaderElectionNamespace: "default",
		LeaseDuration:           &lease,
		RenewDeadline:           &renew,
		RetryPeriod:             ptr(lease / 8),
	})
	if err != nil {
		return err
	}
	if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		fmt.Println("LEADER", id)
		<-ctx.Done()
		return nil
	})); err != nil {
		return err
	}
	r := &reconciler{Client: mgr.GetClient(), scheme: scheme, recorder: mgr.GetEventRecorder("widget-operator"), id: id}
	widget := &unstructured.Unstructured{}
	widget.SetGroupVersionKind(widgetGVK)
	if err := ctrl.NewControllerManagedBy(mgr).For(widget).Owns(&corev1.ConfigMap{}).Complete(r); err != nil {
		return err
	}
	return mgr.Start(ctrl.SetupSignalHandler())
}

type reconciler struct {
	client.Client
	scheme   *runtime.Scheme
	recorder events.EventRecorder
	id       string
}

func (r *reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	w := &unstructured.Unstructured{}
	w.SetGroupVersionKind(widgetGVK)
	if err := r.Get(ctx, req.NamespacedName, w); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if w.GetDeletionTimestamp() != nil {
		return ctrl.Result{}, nil // the garbage collector's turn
	}
	message, _, _ := unstructured.NestedString(w.Object, "spec", "message")
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: w.GetName() + "-config", Namespace: w.GetNamespace()}}
	if _, err := controllerutil.CreateOrUpdate(ctx, r.Client, cm, func() error {
		cm.Data = map[string]string{"message": message}
		return controllerutil.SetControllerReference(w, cm, r.scheme)
	}); err != nil {
		return ctrl.Result{}, err
	}

	var conditions []metav1.Condition
	if raw, ok, _ := unstructured.NestedSlice(w.Object, "status", "conditions"); ok {
		for _, c := range raw {
			var cond metav1.Condition
			if m, ok := c.(map[string]any); ok && runtime.DefaultUnstructuredConverter.FromUnstructured(m, &cond) == nil {
				conditions = append(conditions, cond)
			}
		}
	}
	changed := meta.SetStatusCondition(&conditions, metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue,
		Reason: "ConfigMapReady", Message: "ConfigMap " + cm.Name + " holds the message", ObservedGeneration: w.GetGeneration()})
	if changed {
		var raw []any
		for _, c := range conditions {
			m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&c)
			if err != nil {
				return ctrl.Result{}, err
			}
			raw = append(raw, m)
		}
		if err := unstructured.SetNestedSlice(w.Object, raw, "status", "conditions"); err != nil {
			return ctrl.Result{}, err
		}
		if err := r.Status().Update(ctx, w); err != nil {
			if apierrors.IsConflict(err) {
				return ctrl.Result{Requeue: true}, nil
			}
			return ctrl.Result{}, err
		}
		r.recorder.Eventf(w, cm, corev1.EventTypeNormal, "Reconciled", "Reconcile", "generation %d written to %s by %s", w.GetGeneration(), cm.Name, r.id)
	}
	fmt.Println("RECONCILED", r.id, w.GetName(), w.GetGeneration())
	return ctrl.Result{}, nil
}

func ptr[T any](v T) *T { return &v }
