package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"k8s.io/klog/v2"

	"github.com/kubestore/kubestore/access"
	"github.com/kubestore/kubestore/datadir"
	"github.com/kubestore/kubestore/serviceaccount"
)

// caRotationPoll is how often a server reads the record of a rotation of
// its CA (kubestore ca rotate): one read of one key.
const caRotationPoll = 3 * time.Second

// caRotation takes the steps of a rotation of the CA (access.Rotation)
// that its record in etcd asks for: the PKI's files, the leaves issued
// anew, the admin kubeconfig, the bundle of kube-root-ca.crt; then records
// where this member stands, for kubestore ca finish and status.
type caRotation struct {
	dir        datadir.Dir
	pki        *access.PKI
	st         caRecords
	keys       *serviceaccount.Keys
	member     string
	kubeconfig func() error
	// reported is the progress last recorded.
	reported []byte
}

// caRecords are the state records a rotation reads and writes.
type caRecords interface {
	serviceaccount.State
	GetState(ctx context.Context, name string) ([]byte, error)
}

// run reconciles every caRotationPoll, and at once when a client of the
// previous CA was seen, until ctx ends.
func (r *caRotation) run(ctx context.Context) {
	t := time.NewTicker(caRotationPoll)
	defer t.Stop()
	for {
		if err := r.reconcile(ctx); err != nil && ctx.Err() == nil {
			klog.ErrorS(err, "Rotating the CA")
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-r.pki.PreviousCAClientsSeen():
		}
	}
}

func (r *caRotation) reconcile(ctx context.Context) error {
	// The rotation that replaces the signing CA, or, once it signs, the
	// one that replaced the previous CA, until it is finished.
	name := access.RotationName(r.pki.Signing())
	if previous := r.pki.Previous(); previous != nil {
		name = access.RotationName(previous)
	}
	data, err := r.st.GetState(ctx, name)
	if err != nil || data == nil {
		return err
	}
	var rot access.Rotation
	if err := json.Unmarshal(data, &rot); err != nil {
		return fmt.Errorf("the record %s: %w", name, err)
	}
	changed, err := r.pki.ApplyRotation(r.dir, rot)
	if err != nil {
		return err
	}
	if changed {
		klog.InfoS("The CA rotation took a step here", "phase", rot.Phase)
		if err := r.pki.Renew(); err != nil {
			return err
		}
		if err := r.kubeconfig(); err != nil {
			return err
		}
		if err := r.keys.PublishCA(ctx, r.st, r.pki.CAPEM()); err != nil {
			return err
		}
	}
	progress, err := json.Marshal(access.RotationProgress{Phase: rot.Phase, PreviousCAClients: r.pki.PreviousCAClients()})
	if err != nil || bytes.Equal(progress, r.reported) {
		return err
	}
	if err := r.st.PutState(ctx, access.ProgressName(name, r.member), progress); err != nil {
		return err
	}
	r.reported = progress
	return nil
}
