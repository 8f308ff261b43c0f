// Package carotation is each server's part in a rotation of its CA
// (access.Rotation; the operator's kubestore ca rotate, finish and status
// are maintenance's): the steps the rotation's record in etcd asks for,
// where this member stands, and, on a site, the restart of a member whose
// etcd peer port still trusts a CA the member dropped (peerrestart.go).
// The server builds one (New) and runs it as a worker (Server.Run).
package carotation

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/klog/v2"

	"github.com/kubestore/kubestore/access"
	"github.com/kubestore/kubestore/datadir"
	"github.com/kubestore/kubestore/records"
	"github.com/kubestore/kubestore/serviceaccount"
)

// caRotationPoll is how often a server reads the record of a rotation of
// its CA (kubestore ca rotate): one read of one key.
const caRotationPoll = 3 * time.Second

// Server is a server's part in a rotation of its CA (maintenance.CARotate,
// access.Rotation): it takes the steps the rotation's record in etcd asks
// for (the PKI's files, the leaves issued anew, the admin kubeconfig, the
// bundle of kube-root-ca.crt), then records where this member stands, for
// kubestore ca finish and status.
type Server struct {
	dir        datadir.Dir
	pki        *access.PKI
	st         caRecords
	keys       *serviceaccount.Keys
	member     string
	kubeconfig func() error
	// peer restarts a site's member whose etcd peer port trusts a CA it
	// dropped (nil without a site: RestartPeerPort).
	peer *peerRestart
	// reported is the progress last recorded; recalled, whether the
	// clients of the previous CA recorded before a restart were read back.
	reported []byte
	recalled bool
}

// caRecords are the records a rotation reads and writes: its state
// records, and the record of the site's turn to restart (peerRestart).
type caRecords interface {
	serviceaccount.State
	GetState(ctx context.Context, name string) ([]byte, error)
	Record(name string) records.Record
}

// New is the rotation's part of the server of member (a site's
// member name, "" alone) on dir with pki, its records in st: keys publishes
// the CA bundle, kubeconfig writes the admin kubeconfig anew.
func New(dir datadir.Dir, pki *access.PKI, st *records.Store, keys *serviceaccount.Keys, member string, kubeconfig func() error) *Server {
	return &Server{dir: dir, pki: pki, st: st, keys: keys, member: member, kubeconfig: kubeconfig}
}

// RestartPeerPort makes r, on a site's member whose etcd trusts the CAs
// trust since its start, have the server started again (restart) once the
// peer port trusts a CA the member dropped, the members taking turns
// through a record among r's; client, on the same etcd, lists the site's
// members.
func (r *Server) RestartPeerPort(client *clientv3.Client, trust []*x509.Certificate, restart func(reason string)) {
	r.peer = &peerRestart{dir: r.dir, client: client, turn: r.st.Record(peerRestartKey), member: r.member, trust: trust, restart: restart}
}

// Run reconciles every caRotationPoll, and at once when a client of the
// previous CA was seen, until ctx ends.
func (r *Server) Run(ctx context.Context) {
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

func (r *Server) reconcile(ctx context.Context) error {
	if r.peer != nil {
		trusted := [][]byte{r.pki.Signing()}
		if previous := r.pki.Previous(); previous != nil {
			trusted = append(trusted, previous)
		}
		if err := r.peer.reconcile(ctx, trusted); err != nil {
			return err
		}
	}
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
	progressKey := access.ProgressName(name, r.member)
	if rot.Phase == access.PhasePrepare {
		// A seal key for this rotation alone, created now: the rotating
		// command seals the new CA's key and join secret for it.
		key, err := access.SealKey(r.dir)
		if err != nil {
			return err
		}
		return r.report(ctx, progressKey, access.RotationProgress{Phase: rot.Phase, SealKey: key})
	}
	if !r.recalled {
		if err := r.recall(ctx, progressKey); err != nil {
			return err
		}
	}
	changed, err := r.pki.ApplyRotation(r.dir, rot, r.member)
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
	next, err := rot.Certificate()
	if err != nil {
		return err
	}
	progress := access.RotationProgress{Phase: rot.Phase, PreviousCAClients: r.pki.PreviousCAClients()}
	if r.peer != nil {
		progress.PeerTrustsPrevious = slices.ContainsFunc(r.peer.trust, func(c *x509.Certificate) bool { return !c.Equal(next) })
	}
	return r.report(ctx, progressKey, progress)
}

// report records p under key, unless it is what was recorded last.
func (r *Server) report(ctx context.Context, key string, p access.RotationProgress) error {
	progress, err := json.Marshal(p)
	if err != nil || bytes.Equal(progress, r.reported) {
		return err
	}
	if err := r.st.PutState(ctx, key, progress); err != nil {
		return err
	}
	r.reported = progress
	return nil
}

// recall reads back the clients of the previous CA this member recorded
// before a restart: the finish names them until they renewed.
func (r *Server) recall(ctx context.Context, key string) error {
	data, err := r.st.GetState(ctx, key)
	if err != nil {
		return err
	}
	var p access.RotationProgress
	if data != nil {
		if err := json.Unmarshal(data, &p); err != nil {
			return fmt.Errorf("the record %s: %w", key, err)
		}
		r.pki.RememberPreviousCAClients(p.PreviousCAClients)
	}
	r.recalled = true
	return nil
}
