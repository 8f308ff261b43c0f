package site

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/klog/v2"

	"github.com/kubestore/kubestore/access"
	"github.com/kubestore/kubestore/datadir"
	"github.com/kubestore/kubestore/records"
)

// removedHeader tells a member with data that the site no longer has it.
const removedHeader = "Kubestore-Member-Removed"

// handlerTimeout bounds the etcd requests of one join.
const handlerTimeout = 30 * time.Second

// WithJoin serves the join protocol (CAPath, JoinPath) of the member of dir
// in front of next, the API, with the site's etcd client and kubestore's
// records st on it, leader its server's (Health). The paths are answered before the API's
// authentication: a joiner has no identity in the site yet, and proves
// itself with the join secret instead.
func WithJoin(next http.Handler, dir datadir.Dir, client *clientv3.Client, leader func() uint64, st *records.Store) http.Handler {
	h := &handler{dir: dir, client: client, records: st, leader: ServerLeader(leader)}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case CAPath:
			h.ca(w, r)
		case JoinPath:
			h.join(w, r)
		default:
			next.ServeHTTP(w, r)
		}
	})
}

type handler struct {
	dir     datadir.Dir
	client  *clientv3.Client
	leader  Leader
	records *records.Store
	// mu lets one join at a time change the membership through this
	// member; etcd itself admits one learner at a time across the site.
	mu sync.Mutex
}

func (h *handler) ca(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		http.Error(w, "use GET", http.StatusMethodNotAllowed)
		return
	}
	data, err := os.ReadFile(filepath.Join(h.dir.PKI(), "ca.crt"))
	if err != nil {
		http.Error(w, "reading the site's CA", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/x-pem-file")
	w.Write(data)
}

// fail answers a join with code and a one-line reason the joiner prints.
func fail(w http.ResponseWriter, code int, format string, args ...any) {
	http.Error(w, fmt.Sprintf(format, args...), code)
}

func (h *handler) join(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		fail(w, http.StatusMethodNotAllowed, "use POST")
		return
	}
	secrets, err := access.ReadSiteSecrets(h.dir)
	if err != nil {
		klog.ErrorS(err, "Reading the site's secrets for a join")
		fail(w, http.StatusInternalServerError, "the member cannot read the site's secrets")
		return
	}
	given, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if subtle.ConstantTimeCompare([]byte(given), []byte(secrets.JoinSecret)) != 1 {
		fail(w, http.StatusUnauthorized, "the join token's secret is not this site's")
		return
	}
	var req joinRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<10)).Decode(&req); err != nil {
		fail(w, http.StatusBadRequest, "decoding the join request: %v", err)
		return
	}
	if msgs := validation.IsDNS1123Label(req.Name); len(msgs) > 0 {
		fail(w, http.StatusBadRequest, "invalid member name %q: %s", req.Name, strings.Join(msgs, "; "))
		return
	}
	if u, err := url.Parse(req.PeerURL); err != nil || u.Scheme != "https" || u.Port() == "" {
		fail(w, http.StatusBadRequest, "invalid peer URL %q: must be https://HOST:PORT", req.PeerURL)
		return
	}

	h.mu.Lock()
	defer h.mu.Unlock()
	ctx, cancel := context.WithTimeout(r.Context(), handlerTimeout)
	defer cancel()
	list, err := h.client.MemberList(ctx)
	if err != nil {
		fail(w, http.StatusServiceUnavailable, "the site cannot list its members (has it lost quorum?): %v", err)
		return
	}
	for _, m := range list.Members {
		if req.MemberID != 0 && m.ID == req.MemberID {
			writeJSON(w, joinResponse{Member: true})
			return
		}
	}
	if req.MemberID != 0 {
		// Whatever follows, the joiner knows its data is of a past
		// membership, and keeps asking rather than start on it.
		w.Header().Set(removedHeader, "true")
	}
	// Every check before any change: an entry with the joiner's peer URL
	// is replaced only if it is the joiner's own past one (its peer port
	// does not answer: the joiner's etcd is not running yet), or a learner
	// that never started; a live member at that address (a recycled
	// address, a mistyped flag) is never evicted.
	members, err := Members(ctx, h.dir, h.client, h.leader)
	if err != nil {
		fail(w, http.StatusServiceUnavailable, "the site cannot list its members (has it lost quorum?): %v", err)
		return
	}
	if err := h.rotating(ctx, secrets); err != nil {
		fail(w, http.StatusServiceUnavailable, "%v", err)
		return
	}
	var stale []Member
	for _, m := range members {
		switch {
		case contains(strings.Split(m.PeerURL, ","), req.PeerURL):
			if m.Name != "" && (m.Self || m.Unreachable == "") {
				fail(w, http.StatusConflict, "peer URL %s is the live member %s's: it answers there; give the joiner its own --peer-advertise-address, or remove %s first if it is gone (kubestore member remove %s)",
					req.PeerURL, m.Name, m.Name, m.Name)
				return
			}
			stale = append(stale, m)
		case m.Name == req.Name:
			fail(w, http.StatusConflict, "member name %s is taken by the member at %s; if that gateway is gone, remove it first (kubestore member remove %s), else choose another --member-name",
				req.Name, m.PeerURL, req.Name)
			return
		}
	}
	for _, m := range stale {
		// The joiner's own past entry: it was wiped, or removed and
		// re-added, or its last join never finished.
		if _, err := h.client.MemberRemove(ctx, m.ID); err != nil {
			fail(w, http.StatusServiceUnavailable, "removing the stale member %s (%x) at %s first: %v", m.Name, m.ID, req.PeerURL, err)
			return
		}
		klog.InfoS("Removed the joiner's stale member", "name", m.Name, "id", fmt.Sprintf("%x", m.ID), "peerURL", req.PeerURL)
	}
	added, err := h.client.MemberAddAsLearner(ctx, []string{req.PeerURL})
	switch {
	case errors.Is(err, rpctypes.ErrTooManyLearners):
		fail(w, http.StatusServiceUnavailable, "another member is joining and still catching up (etcd admits one learner at a time)")
		return
	case errors.Is(err, rpctypes.ErrMemberNotEnoughStarted), errors.Is(err, rpctypes.ErrUnhealthy):
		// etcd counts the joiner as down until it has caught up: with a
		// voter already unreachable, the site could lose quorum. With
		// every one reachable, etcd's members met less than 5 s ago (a
		// member that just joined or restarted): worth a retry.
		down := h.unreachable(ctx)
		if len(down) == 0 {
			fail(w, http.StatusServiceUnavailable, "the site's members reached each other less than 5 s ago")
			return
		}
		fail(w, http.StatusPreconditionFailed, "adding a member now could leave the site without quorum, since members %s are unreachable: start them again, or remove the dead ones first (kubestore member remove NAME)", strings.Join(down, ", "))
		return
	case err != nil:
		fail(w, http.StatusServiceUnavailable, "adding the member: %v", err)
		return
	}
	if err := h.rotating(ctx, secrets); err != nil {
		// The rotation began while the member was added: its command
		// may have listed the members before the add.
		if _, rerr := h.client.MemberRemove(ctx, added.Member.ID); rerr != nil {
			klog.ErrorS(rerr, "Removing a learner added as a rotation of the CA began", "id", fmt.Sprintf("%x", added.Member.ID))
		}
		fail(w, http.StatusServiceUnavailable, "%v", err)
		return
	}
	var cluster []string
	for _, m := range added.Members {
		name := m.Name
		if m.ID == added.Member.ID {
			name = req.Name
		}
		for _, u := range m.PeerURLs {
			cluster = append(cluster, name+"="+u)
		}
	}
	klog.InfoS("Added a member to the site as a learner", "name", req.Name, "id", fmt.Sprintf("%x", added.Member.ID), "peerURL", req.PeerURL)
	go h.nudge(added.Member.ID)
	writeJSON(w, joinResponse{MemberID: added.Member.ID, InitialCluster: strings.Join(cluster, ","), Secrets: &secrets})
}

// rotating refuses a join while a rotation of the CA that secrets hold
// (the signing one, first in ca.crt) is prepared, or under way and not yet
// taken by this member. The rotation seals the new CA's key and join
// secret for the members its command listed once it was prepared
// (maintenance.CARotate): a member added later could open neither, would
// never take the new CA, and would keep the previous one trusted on its
// peer port after the finish. The joiner retries a 503: it joins once
// this member took the new CA, with its secrets.
func (h *handler) rotating(ctx context.Context, secrets access.SiteSecrets) error {
	block, _ := pem.Decode(secrets.CACert)
	if block == nil {
		return errors.New("the member's CA certificate does not read")
	}
	data, err := h.records.GetState(ctx, access.RotationName(block.Bytes))
	switch {
	case err != nil:
		return fmt.Errorf("the site cannot tell whether its CA is being rotated (has it lost quorum?): %v", err)
	case data != nil:
		return errors.New("the site's CA is being rotated and this member has not taken the new one yet (kubestore ca status): the join waits for it")
	}
	return nil
}

// nudgeFor bounds how long a learner is nudged (nudge): longer than a
// joiner's --etcd-start-timeout.
const nudgeFor = 10 * time.Minute

// nudge makes the site write a raft entry every second until the learner
// id is promoted or gone. It works around etcd 3.7: the applied index its
// request limiter reads is set when an entry is applied, not a snapshot
// (etcdserver/server.go, applySnapshot sets the progress's appliedi only),
// so a joiner that catches up by the leader's snapshot of more than 5,000
// entries (maxGapBetweenApplyAndCommitIndex) refuses every proposal, its
// own publish included, with "too many requests" until it applies one
// entry after the snapshot, and never becomes ready on a site that writes
// nothing (since the garbage collector elects without a Lease, an idle
// site writes nothing: TestSiteOfThreeGateways' rejoin hung). A lease
// granted and revoked is two entries that touch no key.
func (h *handler) nudge(id uint64) {
	ctx, cancel := context.WithTimeout(h.client.Ctx(), nudgeFor)
	defer cancel()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		list, err := h.client.MemberList(ctx)
		if err != nil {
			continue
		}
		learner := false
		for _, m := range list.Members {
			learner = learner || m.ID == id && m.IsLearner
		}
		if !learner {
			return
		}
		if l, err := h.client.Grant(ctx, 10); err == nil {
			h.client.Revoke(ctx, l.ID) //nolint:errcheck // it expires anyway
		}
	}
}

// unreachable names the members this one does not reach.
func (h *handler) unreachable(ctx context.Context) []string {
	members, err := Members(ctx, h.dir, h.client, h.leader)
	if err != nil {
		return []string{"(the site's members cannot be listed: " + err.Error() + ")"}
	}
	var down []string
	for _, m := range members {
		if m.Unreachable != "" {
			down = append(down, m.Name)
		}
	}
	return down
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
