package gc

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/google/uuid"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"
)

// LeaseName is the Lease in kube-system whose holder collects, when
// several kubestores share one etcd.
const LeaseName = "kubestore-garbage-collector"

// Lease timing: twice kube-controller-manager's 15 s / 10 s / 2 s, with
// a renewal every 5 s instead of 2. The holder renews every retryPeriod
// whether or not there is garbage, and each renewal is an etcd write:
// at 2 s they were all a device wrote at idle, 10.4 KB/s of flash, and
// 1 KB of every update at 10 updates/s (docs/PERFORMANCE.md). A killed
// holder is replaced within leaseDuration + retryPeriod (35 s); a stopped
// one gives the Lease up at once.
const (
	leaseDuration = 30 * time.Second
	renewDeadline = 20 * time.Second
	retryPeriod   = 5 * time.Second
)

// RunWithLeaderElection collects while this process holds the Lease, and
// campaigns again when it loses it, until ctx is done; on ctx's end it
// gives the Lease up, so another process takes over at once.
func RunWithLeaderElection(ctx context.Context, cfg *rest.Config, local Source) error {
	c, err := New(cfg, local)
	if err != nil {
		return err
	}
	client, err := coordinationv1client.NewForConfig(cfg)
	if err != nil {
		return err
	}
	host, _ := os.Hostname()
	id := fmt.Sprintf("%s_%s", host, uuid.NewString())
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: metav1.NamespaceSystem, Name: LeaseName},
		Client:     client,
		LockConfig: resourcelock.ResourceLockConfig{Identity: id},
	}
	// The elector starts OnStartedLeading in a goroutine it does not wait
	// for; the collector runs here instead, handed each term's context, so
	// that it has stopped when this returns.
	terms := make(chan context.Context)
	for ctx.Err() == nil {
		le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock: lock, LeaseDuration: leaseDuration, RenewDeadline: renewDeadline, RetryPeriod: retryPeriod,
			ReleaseOnCancel: true, Name: LeaseName,
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(term context.Context) {
					select {
					case terms <- term:
					case <-term.Done():
					}
				},
				OnStoppedLeading: func() {},
			},
		})
		if err != nil {
			return err
		}
		elected := make(chan struct{})
		go func() {
			defer close(elected)
			le.Run(ctx)
		}()
		for running := true; running; {
			select {
			case term := <-terms:
				klog.InfoS("Garbage collector leads", "lease", "kube-system/"+LeaseName, "identity", id)
				c.Run(term)
			case <-elected:
				running = false
			}
		}
	}
	return nil
}
