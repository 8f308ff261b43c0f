package serviceip

import (
	"context"
	"net/netip"
	"slices"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"
)

// DefaultServiceCIDRName is the ServiceCIDR that stands for
// --service-cluster-ip-range, upstream's.
const DefaultServiceCIDRName = "kubernetes"

// DefaultServiceCIDRInterval is how often the default ServiceCIDR is
// checked, upstream's (the endpoint reconciler's interval).
const DefaultServiceCIDRInterval = 10 * time.Second

// ServiceCIDRClient is what the default ServiceCIDR controller needs of a
// client: client-go's ServiceCIDRInterface has it.
type ServiceCIDRClient interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*networkingv1.ServiceCIDR, error)
	Create(ctx context.Context, c *networkingv1.ServiceCIDR, opts metav1.CreateOptions) (*networkingv1.ServiceCIDR, error)
	Update(ctx context.Context, c *networkingv1.ServiceCIDR, opts metav1.UpdateOptions) (*networkingv1.ServiceCIDR, error)
	UpdateStatus(ctx context.Context, c *networkingv1.ServiceCIDR, opts metav1.UpdateOptions) (*networkingv1.ServiceCIDR, error)
}

// DefaultServiceCIDR keeps the ServiceCIDR "kubernetes" as kube-apiserver's
// default-servicecidr controller does (pkg/controlplane/controller/
// defaultservicecidr in k8s.io/kubernetes): created from the service
// cluster IP range when missing, upgraded from single to dual stack when
// the range gained the other family, and its Ready condition set to True
// when it has none (or Unknown) and its CIDRs are the range's. A
// ServiceCIDR whose CIDRs differ, that another writer marked Ready=False,
// or that is being deleted is left alone and logged once.
//
// Several kubestores on one etcd may run it at once: the create is
// refused with AlreadyExists to all but one, and every update carries the
// resourceVersion it was computed from, so a write based on a stale read
// is refused with Conflict and the next pass reads again. (Upstream
// writes the status with a forced server-side apply; the precondition
// keeps a Ready=False that another process set in the meantime.)
type DefaultServiceCIDR struct {
	cidrs  []string // the primary family first
	client ServiceCIDRClient

	reportedMismatchedCIDRs   bool
	reportedNotReadyCondition bool
}

// NewDefaultServiceCIDR keeps the default ServiceCIDR of cidrs
// (config.Completed.ServiceCIDRs) through client.
func NewDefaultServiceCIDR(cidrs []netip.Prefix, client ServiceCIDRClient) *DefaultServiceCIDR {
	d := &DefaultServiceCIDR{client: client}
	for _, p := range cidrs {
		d.cidrs = append(d.cidrs, p.String())
	}
	return d
}

// Start returns once a pass succeeded, retrying every 100 ms, or when ctx
// is done: upstream holds the API server's start until the default
// ServiceCIDR exists.
func (d *DefaultServiceCIDR) Start(ctx context.Context) {
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		err := d.sync(ctx)
		if err != nil {
			klog.V(2).InfoS("Initializing the default ServiceCIDR", "err", err)
		}
		return err == nil, nil
	})
	if err != nil {
		klog.ErrorS(err, "Initializing the default ServiceCIDR")
	}
}

// Run passes every DefaultServiceCIDRInterval until ctx is done, the first
// one an interval after Start's. A write refused with Conflict was based
// on a stale read (the client may read a cache, as upstream's reads its
// informer's lister, that has not yet seen the last write): the next pass
// reads again, and nothing is wrong.
func (d *DefaultServiceCIDR) Run(ctx context.Context) {
	t := time.NewTicker(DefaultServiceCIDRInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		switch err := d.sync(ctx); {
		case err == nil:
		case apierrors.IsConflict(err):
			klog.V(2).InfoS("The default ServiceCIDR changed after it was read; the next pass reads it again", "err", err)
		default:
			klog.ErrorS(err, "Syncing the default ServiceCIDR")
		}
	}
}

// sync is one pass: upstream's sync.
func (d *DefaultServiceCIDR) sync(ctx context.Context) error {
	c, err := d.client.Get(ctx, DefaultServiceCIDRName, metav1.GetOptions{})
	switch {
	case err == nil:
		if len(d.cidrs) == 2 && len(c.Spec.CIDRs) == 1 && d.cidrs[0] == c.Spec.CIDRs[0] {
			klog.InfoS("Updating the default ServiceCIDR from single-stack to dual-stack", "from", c.Spec.CIDRs, "to", d.cidrs)
			c = c.DeepCopy()
			c.Spec.CIDRs = slices.Clone(d.cidrs)
			if _, err := d.client.Update(ctx, c, metav1.UpdateOptions{}); err != nil {
				klog.ErrorS(err, "The default ServiceCIDR can not be updated to dual stack", "from", d.cidrs[0], "to", d.cidrs)
			}
			return nil
		}
		return d.syncStatus(ctx, c)
	case !apierrors.IsNotFound(err):
		return err
	}
	klog.InfoS("Creating the default ServiceCIDR", "cidrs", d.cidrs)
	c, err = d.client.Create(ctx, &networkingv1.ServiceCIDR{
		ObjectMeta: metav1.ObjectMeta{Name: DefaultServiceCIDRName},
		Spec:       networkingv1.ServiceCIDRSpec{CIDRs: slices.Clone(d.cidrs)},
	}, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		// Another kubestore created it first: read what it wrote.
		if c, err = d.client.Get(ctx, DefaultServiceCIDRName, metav1.GetOptions{}); err != nil {
			return err
		}
	} else if err != nil {
		return err
	}
	return d.syncStatus(ctx, c)
}

// syncStatus sets the Ready condition to True when the CIDRs are the
// configured ones and no condition says otherwise, upstream's syncStatus.
// A refused write (a Conflict: c was stale) is returned, so that the
// caller reads again.
func (d *DefaultServiceCIDR) syncStatus(ctx context.Context, c *networkingv1.ServiceCIDR) error {
	if c.DeletionTimestamp != nil {
		klog.V(6).InfoS("The default ServiceCIDR is being deleted, skipping status sync", "serviceCIDR", klog.KObj(c))
		return nil
	}
	if !slices.Equal(d.cidrs, c.Spec.CIDRs) {
		if !d.reportedMismatchedCIDRs {
			klog.InfoS("The default ServiceCIDR does not match the service cluster IP range", "serviceCIDR", klog.KObj(c), "controllerCIDRs", d.cidrs, "serviceCIDRs", c.Spec.CIDRs)
			d.reportedMismatchedCIDRs = true
		}
		return nil
	}
	ready := apimeta.FindStatusCondition(c.Status.Conditions, networkingv1.ServiceCIDRConditionReady)
	switch {
	case ready != nil && ready.Status == metav1.ConditionFalse:
		// Another component set it: do not fight it.
		if !d.reportedNotReadyCondition {
			klog.InfoS("Default ServiceCIDR condition Ready is False, but controller configuration matches. Please validate your cluster's network configuration.",
				"serviceCIDR", klog.KObj(c), "status", ready.Status, "reason", ready.Reason, "message", ready.Message)
			d.reportedNotReadyCondition = true
		}
		return nil
	case ready != nil && ready.Status == metav1.ConditionTrue:
		return nil
	}
	klog.InfoS("Setting default ServiceCIDR condition Ready to True")
	c = c.DeepCopy()
	apimeta.SetStatusCondition(&c.Status.Conditions, metav1.Condition{
		Type:               networkingv1.ServiceCIDRConditionReady,
		Status:             metav1.ConditionTrue,
		Message:            "Kubernetes default Service CIDR is ready",
		LastTransitionTime: metav1.Now(),
	})
	_, err := d.client.UpdateStatus(ctx, c, metav1.UpdateOptions{FieldManager: "kubernetes-service-cidr-controller"})
	return err
}
