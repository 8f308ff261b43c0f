package maintenance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/kubestore/kubestore/access"
	"github.com/kubestore/kubestore/config"
	"github.com/kubestore/kubestore/datadir"
	"github.com/kubestore/kubestore/records"
)

// caStepWait is how long a command waits for this gateway's server to take
// the step it asked for (the server reads the record every 3 s).
const caStepWait = time.Minute

// CARotate rotates the CA of cc's data directory: a new CA, certified by
// the current one, signs from now on, and both are trusted until
// CAFinish (access.Rotation). The rotation is prepared first: every member
// of the site publishes a seal key for it, and the new CA's key and the
// site's new join secret are sealed for those keys alone. With a server
// running here, the command waits for it to take the step; without one,
// it prepares this gateway itself.
func CARotate(ctx context.Context, cc config.Completed, version string, w io.Writer) error {
	cfg := cc.Config()
	dir := datadir.Dir(cfg.DataDir)
	name, prep, err := access.PrepareRotation(dir, time.Now().UTC())
	if err != nil {
		return err
	}
	c, err := connect(ctx, cfg, version)
	if err != nil {
		return err
	}
	defer c.close()
	me, err := whoAmI(ctx, c, cfg)
	if err != nil {
		return err
	}
	rec := c.records.Record(name)
	data, err := json.Marshal(prep)
	if err != nil {
		return err
	}
	created, current, prepared, err := rec.Create(ctx, data)
	if err != nil {
		return err
	}
	if !created {
		// Prepared before (a command that gave up waiting): go on.
		if err := json.Unmarshal(current, &prep); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if prep.Phase != access.PhasePrepare {
			return errors.New("a rotation of this CA was begun already and the servers are taking it: kubestore ca status")
		}
	}
	keys, err := sealKeys(ctx, c, cfg, me, name)
	if err != nil {
		return err
	}
	rot, token, err := access.NewRotation(dir, prep, keys)
	if err != nil {
		return err
	}
	if data, err = json.Marshal(rot); err != nil {
		return err
	}
	taken, err := rec.PutAt(ctx, data, prepared)
	if err != nil {
		return err
	}
	if !taken {
		return errors.New("another kubestore ca rotate took the rotation meanwhile: kubestore ca status")
	}
	fmt.Fprintf(w, "a new CA signs from now on, and the previous one stays trusted until kubestore ca finish\n")
	if me.site {
		fmt.Fprintf(w, "the site's join token changed; new gateways join with:\n%s\n", token)
	}
	return waitStep(ctx, c, cfg, rot, w)
}

// sealKeys waits until every member of the site of me (learners too)
// published its seal key for the rotation name, preparing this gateway
// itself when no server runs here. A member that joins later is not
// among them: the join is refused while the rotation is prepared, and
// until the member it joins through has taken it (site.WithJoin).
func sealKeys(ctx context.Context, c *conn, cfg config.Config, me member, name string) (map[string][]byte, error) {
	self := me.name
	if !c.online {
		key, err := access.SealKey(datadir.Dir(cfg.DataDir))
		if err != nil {
			return nil, err
		}
		p, err := json.Marshal(access.RotationProgress{Phase: access.PhasePrepare, SealKey: key})
		if err != nil {
			return nil, err
		}
		if err := c.records.PutState(ctx, access.ProgressName(name, self), p); err != nil {
			return nil, err
		}
	}
	ctx, cancel := context.WithTimeout(ctx, caStepWait)
	defer cancel()
	for {
		_, progress, err := readRotation(ctx, c.records, name)
		if err != nil {
			return nil, err
		}
		members := []string{self}
		if me.site {
			if members, err = rotationMembers(ctx, c, me, progress); err != nil {
				return nil, err
			}
		}
		keys, missing := map[string][]byte{}, []string(nil)
		for _, m := range members {
			if k := progress[m].SealKey; k != nil {
				keys[m] = k
			} else {
				missing = append(missing, m)
			}
		}
		if len(missing) == 0 {
			return keys, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("members %s did not prepare the rotation within %s: start them (or kubestore member remove them), then run kubestore ca rotate again", strings.Join(missing, ", "), caStepWait)
		case <-time.After(time.Second):
		}
	}
}

// CAFinish ends the rotation under way: only the new CA is trusted from
// then on. It refuses while a member has not taken the new CA, or while
// clients still authenticate with certificates of the previous one,
// unless force.
func CAFinish(ctx context.Context, cc config.Completed, force bool, version string, w io.Writer) error {
	cfg := cc.Config()
	dir := datadir.Dir(cfg.DataDir)
	_, previous, err := access.CAOf(dir)
	if err != nil {
		return err
	}
	if previous == nil {
		return errors.New("no rotation of the CA is under way here (kubestore ca rotate begins one)")
	}
	c, err := connect(ctx, cfg, version)
	if err != nil {
		return err
	}
	defer c.close()
	me, err := whoAmI(ctx, c, cfg)
	if err != nil {
		return err
	}
	name := access.RotationName(previous.Raw)
	rot, progress, err := readRotation(ctx, c.records, name)
	if err != nil {
		return err
	}
	members, err := rotationMembers(ctx, c, me, progress)
	if err != nil {
		return err
	}
	var behind, clients, peerTrust []string
	for _, m := range members {
		p, ok := progress[m]
		if !ok || p.Phase == access.PhasePrepare {
			behind = append(behind, m)
			continue
		}
		for user, at := range p.PreviousCAClients {
			clients = append(clients, fmt.Sprintf("%s (on %s, last %s)", user, m, at.Format(time.RFC3339)))
		}
		if p.PeerTrustsPrevious {
			peerTrust = append(peerTrust, m)
		}
	}
	slices.Sort(clients)
	switch {
	case len(behind) > 0:
		return fmt.Errorf("members %s have not taken the new CA yet: start them, or wait until kubestore ca status lists them", strings.Join(behind, ", "))
	case len(clients) > 0 && !force:
		return fmt.Errorf("clients still authenticate with certificates of the previous CA, which the finish refuses: %s; give them certificates of the new one (a kubelet: remove its client certificate and bootstrap it again), or --force", strings.Join(clients, ", "))
	}
	if rot.Phase != access.PhaseFinished {
		rot.Phase = access.PhaseFinished
		data, err := json.Marshal(rot)
		if err != nil {
			return err
		}
		if err := c.records.PutState(ctx, name, data); err != nil {
			return err
		}
	}
	fmt.Fprintf(w, "the previous CA is no longer trusted by the API\n")
	if len(peerTrust) > 0 {
		fmt.Fprintf(w, "the etcd peer ports of %s trust it until they start again: each does by itself, one at a time, while every member is a reachable voter\n", strings.Join(peerTrust, ", "))
	}
	return waitStep(ctx, c, cfg, rot, w)
}

// CAStatus prints the CA of cc's data directory and the rotation under
// way, with where each member stands.
func CAStatus(ctx context.Context, cc config.Completed, version string, w io.Writer) error {
	cfg := cc.Config()
	signing, previous, err := access.CAOf(datadir.Dir(cfg.DataDir))
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "CA %s, valid until %s\n", signing.Subject.CommonName, signing.NotAfter.Format(time.RFC3339))
	if previous == nil {
		return nil
	}
	fmt.Fprintf(w, "rotation under way: the previous CA %s (valid until %s) is still trusted\n", previous.Subject.CommonName, previous.NotAfter.Format(time.RFC3339))
	c, err := connect(ctx, cfg, version)
	if err != nil {
		return err
	}
	defer c.close()
	me, err := whoAmI(ctx, c, cfg)
	if err != nil {
		return err
	}
	_, progress, err := readRotation(ctx, c.records, access.RotationName(previous.Raw))
	if err != nil {
		return err
	}
	members, err := rotationMembers(ctx, c, me, progress)
	if err != nil {
		return err
	}
	for _, m := range members {
		p, ok := progress[m]
		if !ok {
			fmt.Fprintf(w, "member %s: has not taken the new CA\n", m)
			continue
		}
		peer := ""
		if p.PeerTrustsPrevious {
			peer = ", its etcd peer port trusts the previous CA until it starts again"
		}
		fmt.Fprintf(w, "member %s: %s, %d clients of the previous CA%s\n", m, p.Phase, len(p.PreviousCAClients), peer)
	}
	return nil
}

// readRotation reads the record name and the members' progress records
// in st.
func readRotation(ctx context.Context, st *records.Store, name string) (access.Rotation, map[string]access.RotationProgress, error) {
	var rot access.Rotation
	data, err := st.GetState(ctx, name)
	if err != nil {
		return rot, nil, err
	}
	if data == nil {
		return rot, nil, fmt.Errorf("no record of the rotation in etcd (%s)", name)
	}
	if err := json.Unmarshal(data, &rot); err != nil {
		return rot, nil, fmt.Errorf("%s: %w", name, err)
	}
	members := access.ProgressName(name, "")
	recs, err := st.ListState(ctx, members)
	if err != nil {
		return rot, nil, err
	}
	progress := map[string]access.RotationProgress{}
	for rec, value := range recs {
		var p access.RotationProgress
		if err := json.Unmarshal(value, &p); err == nil {
			progress[strings.TrimPrefix(rec, members)] = p
		}
	}
	return rot, progress, nil
}

// rotationMembers are the names of the processes that share the CA of
// me: a site's members, learners included (memberName), or, on a gateway
// of its own, those that recorded their progress.
func rotationMembers(ctx context.Context, c *conn, me member, progress map[string]access.RotationProgress) ([]string, error) {
	if !me.site {
		if len(progress) == 0 {
			return []string{"(this gateway's server)"}, nil
		}
		return slices.Sorted(maps.Keys(progress)), nil
	}
	list, err := c.client.MemberList(ctx)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, m := range list.Members {
		names = append(names, memberName(m))
	}
	slices.Sort(names)
	return names, nil
}

// waitStep waits, with a server running here, until it took phase: its
// PKI signs with the rotation's CA, and after the finish trusts it alone.
func waitStep(ctx context.Context, c *conn, cfg config.Config, rot access.Rotation, w io.Writer) error {
	if !c.online {
		fmt.Fprintln(w, "the server takes the step at its next start")
		return nil
	}
	next, err := rot.Certificate()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, caStepWait)
	defer cancel()
	for {
		signing, previous, err := access.CAOf(datadir.Dir(cfg.DataDir))
		if err == nil && signing.Equal(next) && (rot.Phase != access.PhaseFinished || previous == nil) {
			fmt.Fprintln(w, "this gateway took the step; kubestore ca status shows the others")
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("this gateway's server did not take the step within %s: see its log", caStepWait)
		case <-time.After(time.Second):
		}
	}
}
