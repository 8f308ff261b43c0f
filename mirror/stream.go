package mirror

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/kubestore/kubestore/records/family"
	"maps"
	"math/rand/v2"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/apiserver/pkg/storage"
	"k8s.io/client-go/dynamic"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/kubestore/kubestore/mirrored"
)

// stream keeps the objects of one rule in one namespace (all when ""), or
// one object (name), in sync with the upstream.
type stream struct {
	m         *Mirror
	rule      *rule
	namespace string
	name      string

	mu sync.Mutex
	st streamStatus
	// persisted is the resourceVersion last written to the state, and
	// when.
	persisted   string
	persistedAt time.Time
	// applied is set when events were applied since the last record.
	applied bool
	// reported says which refusal of the rule, by the upstream (403) or
	// the local store, was logged last: each is logged once until the
	// rule works again. Only the stream's goroutine uses these five.
	reported string
	// heard is set when the current list or watch read data.
	heard bool
	// former are the selectors of the stream's record when the
	// configuration changed them since (resumeFrom): the first relist
	// deletes the copies they selected and the new ones do not.
	former string
}

// unreachableWait is how long a stream that failed to reach the upstream
// waits before it tries again: its back-off, which the link's coming up
// cuts short (see run's sleep); while the link is up for the others, this
// stream met a link coming and going and tries again soon.
func (s *stream) unreachableWait(backoff time.Duration) time.Duration {
	if s.m.Connected() {
		return min(backoff, upRetry)
	}
	return backoff
}

// hear records that the stream read data from the upstream: the link is
// up.
func (s *stream) hear() {
	s.m.heard()
	if !s.heard {
		s.heard = true
		s.m.reached(nil)
	}
}

type streamStatus struct {
	connected bool
	synced    bool
	lastSync  time.Time
	lastSeen  time.Time
	objects   int
	lagEvents int
	err       error
	// skipped are the upstream objects the stream could not store, by
	// namespace/name, with why (at most maxSkipped).
	skipped map[string]string
}

// maxSkipped bounds the skipped objects a stream reports.
const maxSkipped = 20

// skip records that u could not be stored (err says why) and goes on: one
// object the local store cannot take never wedges its stream.
func (s *stream) skip(u *unstructured.Unstructured, err error) {
	key := u.GetNamespace() + "/" + u.GetName()
	skippedObjects.WithLabelValues(s.rule.base).Inc()
	klog.InfoS("Mirror: skipped an upstream object the local store cannot take", "stream", s.id(), "object", key,
		"resourceVersion", u.GetResourceVersion(), "err", err)
	s.update(func(st *streamStatus) {
		if st.skipped == nil {
			st.skipped = map[string]string{}
		}
		if _, ok := st.skipped[key]; ok || len(st.skipped) < maxSkipped {
			st.skipped[key] = err.Error()
		}
	})
}

// id names the stream: rule, rule/namespace or rule/namespace/name.
func (s *stream) id() string {
	id := s.rule.name
	if s.namespace != "" {
		id += "/" + s.namespace
	}
	if s.name != "" {
		id += "/" + s.name
	}
	return id
}

// connected records that the upstream answered the stream's request: a
// list, or the start of a watch. The link counts as up only once the
// stream has read data from it (heard): a broken middlebox can answer 200
// to every request and then send nothing an API server sends.
func (s *stream) connected() {
	now := time.Now()
	s.update(func(st *streamStatus) { st.connected, st.err, st.lastSeen = true, nil, now })
	// A refusal by the upstream after this is reported again.
	if s.reported == reportedForbidden {
		s.reported = ""
	}
}

func (s *stream) status() streamStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.st
	st.skipped = maps.Clone(st.skipped)
	return st
}

func (s *stream) update(f func(st *streamStatus)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(&s.st)
}

// Back-off after a failure, doubling from minBackoff to maxBackoff (an
// edge's link comes back, and a retry is one cheap request); a forbidden
// rule waits forbiddenBackoff: a permission changes rarely.
const (
	minBackoff       = 500 * time.Millisecond
	maxBackoff       = 10 * time.Second
	forbiddenBackoff = 2 * time.Minute
	// upRetry bounds the wait of a stream that failed to reach the
	// upstream while the link is up for the others.
	upRetry = 2 * time.Second
	// checkpointEvery bounds how often a busy stream writes its
	// resourceVersion to etcd: a restart replays at most that much, and
	// the replay writes nothing (the objects' resourceVersions say so).
	checkpointEvery = 5 * time.Second
	// idleCheckpointEvery is how often a stream that only gets bookmarks
	// records their resourceVersion; a graceful stop records the last.
	idleCheckpointEvery = 10 * time.Minute
	// watchTimeout is the upstream watch's timeout, randomised up to
	// twice it as the reflector does, so streams do not reconnect at once.
	watchTimeout = 5 * time.Minute
)

const (
	reportedForbidden = "forbidden"
	reportedLocal     = "local"
)

var errExpired = errors.New("the upstream's history no longer holds the resourceVersion")

// expired reports whether the upstream cannot resume from a
// resourceVersion: too old (410), or newer than it has (its data was
// restored from an older backup), which no wait would cure.
func expired(err error) bool {
	return apierrors.IsResourceExpired(err) || apierrors.IsGone(err) || storage.IsTooLargeResourceVersion(err)
}

// run syncs until ctx ends.
func (s *stream) run(ctx context.Context) {
	defer s.update(func(st *streamStatus) { st.connected = false })
	var store *Store
	backoff := minBackoff
	// sleep waits d, or until the link comes back up if it is down.
	sleep := func(d time.Duration) bool {
		var up <-chan struct{}
		if !s.m.Connected() {
			up = s.m.linkComesUp()
		}
		select {
		case <-ctx.Done():
			return false
		case <-up:
			return true
		case <-time.After(d + rand.N(d/4+1)):
			return true
		}
	}
	for store == nil {
		var err error
		if store, err = s.m.stores.Store(ctx, s.rule.gr); err != nil {
			s.update(func(st *streamStatus) { st.err = err })
			klog.V(2).InfoS("Mirror: local store not ready", "stream", s.id(), "err", err)
			if !sleep(backoff) {
				return
			}
			backoff = min(2*backoff, maxBackoff)
		}
	}
	if local, err := s.m.localObjects(ctx, s.rule, store, s.namespace, s.name); err == nil {
		s.update(func(st *streamStatus) { st.objects = len(local) })
	}
	rv := s.resumeFrom(ctx, store)
loop:
	for ctx.Err() == nil {
		var err error
		began := time.Now()
		if rv == "" {
			relists.WithLabelValues(s.rule.base).Inc()
			rv, err = s.relist(ctx, store)
		} else {
			rv, err = s.watch(ctx, store, rv, nil)
		}
		if ctx.Err() != nil {
			break
		}
		heard := s.heard
		s.heard = false
		if err != nil && noAnswer(err) {
			// Only a request the upstream did not answer says the link
			// is down: one stream's 5xx is its resource's trouble (the
			// probe judges an upstream that fails every request).
			s.m.reached(err)
		}
		switch {
		case err == nil && (heard || time.Since(began) >= time.Second):
			backoff = minBackoff
			// A watch the upstream ends at once, again and again (a
			// proxy's timeout), is not resumed in a hot loop.
			if time.Since(began) < time.Second && !sleep(minBackoff) {
				break loop
			}
			continue
		case err == nil:
			// A watch that ended before a single event could be read: the
			// connection broke at once (client-go ends a watch it cannot
			// read without an error when the stream looks cut). It backs
			// off like a failure to reach the upstream.
			if !sleep(s.unreachableWait(backoff)) {
				break loop
			}
			backoff = min(2*backoff, maxBackoff)
			continue
		case errors.Is(err, errExpired):
			klog.V(2).InfoS("Mirror: resourceVersion expired upstream, relisting", "stream", s.id(), "resourceVersion", rv)
			rv = ""
			continue
		}
		// In sync again only once caught up after the reconnection.
		s.update(func(st *streamStatus) { st.connected, st.synced, st.err = false, false, err })
		wait := backoff
		switch {
		case apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err):
			wait = forbiddenBackoff
			if s.reported != reportedForbidden {
				s.reported = reportedForbidden
				klog.ErrorS(err, "Mirror: the upstream refuses this rule; retrying every few minutes", "rule", s.rule.name,
					"resource", s.rule.gr, "namespace", s.namespace, "upstream", s.m.host)
			}
		case errors.As(err, new(localError)):
			if s.reported != reportedLocal {
				s.reported = reportedLocal
				klog.ErrorS(err, "Mirror: the local store refuses the upstream's objects; retrying", "stream", s.id())
			}
			backoff = min(2*backoff, maxBackoff)
		default:
			klog.V(2).InfoS("Mirror: upstream unreachable", "stream", s.id(), "err", err, "retryIn", backoff)
			wait = s.unreachableWait(backoff)
			backoff = min(2*backoff, maxBackoff)
		}
		if !sleep(wait) {
			break
		}
	}
	if rv != "" {
		// The stop's own context is done; this last record may use a
		// short one.
		pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		s.checkpoint(pctx, rv, true)
		cancel()
	}
}

// resumeFrom is the upstream resourceVersion to resume from: the
// stream's record, or for a stream of one object that object's own; ""
// means relist.
func (s *stream) resumeFrom(ctx context.Context, store *Store) string {
	if s.name != "" {
		obj := store.New()
		if err := store.Get(ctx, store.Key(s.namespace, s.name), storage.GetOptions{}, obj); err != nil {
			return ""
		}
		a, err := meta.Accessor(obj)
		if err != nil || !s.rule.owns(store, a.GetAnnotations()[mirrored.AnnotationRule], obj) {
			return ""
		}
		return a.GetAnnotations()[mirrored.AnnotationUpstreamResourceVersion]
	}
	data, err := s.m.state.GetState(ctx, s.stateName())
	if err != nil || data == nil {
		return ""
	}
	var c checkpoint
	if json.Unmarshal(data, &c) != nil {
		return ""
	}
	if c.Selectors != s.selectors() {
		if !s.rule.nodeScoped() {
			s.former = c.Selectors
		}
		return ""
	}
	s.persisted = c.ResourceVersion
	return c.ResourceVersion
}

// checkpoint is the persisted record of a stream.
type checkpoint struct {
	// Selectors are the ones the stream had: a record made under other
	// selectors (the config changed) is not resumed from.
	Selectors       string `json:"selectors"`
	ResourceVersion string `json:"resourceVersion"`
}

func (s *stream) stateName() string {
	ns := s.namespace
	if ns == "" {
		ns = "-"
	}
	return checkpoints(s.rule.name) + "/" + ns
}

// checkpointState starts the names of the streams' checkpoints:
// mirror/<rule>/<namespace or ->.
var checkpointState = family.Checkpoints.Start()

// checkpoints is the directory of a rule's streams' checkpoints.
func checkpoints(rule string) string { return checkpointState + rule }

func (s *stream) selectors() string { return s.rule.label + "|" + s.rule.field }

// checkpoint persists rv as the stream's record; unless now, at most
// every checkpointEvery. Streams of one object keep theirs in the object.
// A record only moves forward: another kubestore mirroring into the same
// etcd may be behind this one.
func (s *stream) checkpoint(ctx context.Context, rv string, now bool) {
	if s.name != "" || rv == s.persisted || (!now && time.Since(s.persistedAt) < checkpointEvery) {
		return
	}
	s.persist(ctx, rv, false)
}

// record persists the resourceVersion of a relist whatever the record
// says: after a relist that record may be from an upstream restored from
// an older backup.
func (s *stream) record(ctx context.Context, rv string) {
	if s.name != "" {
		return
	}
	s.persist(ctx, rv, true)
}

func (s *stream) persist(ctx context.Context, rv string, force bool) {
	data, _ := json.Marshal(checkpoint{Selectors: s.selectors(), ResourceVersion: rv})
	err := s.m.state.UpdateState(ctx, s.stateName(), func(old []byte) ([]byte, bool) {
		var c checkpoint
		if !force && json.Unmarshal(old, &c) == nil && c.Selectors == s.selectors() && !newer(rv, c.ResourceVersion) {
			return nil, false
		}
		return data, true
	})
	if err != nil {
		klog.V(2).InfoS("Mirror: recording the resourceVersion", "stream", s.id(), "err", err)
		return
	}
	s.persisted, s.persistedAt, s.applied = rv, time.Now(), false
}

// client is the upstream client of the stream's resource.
func (s *stream) client(store *Store) dynamic.ResourceInterface {
	r := s.m.dyn.Resource(store.GVR)
	if store.Namespaced && s.namespace != "" {
		return r.Namespace(s.namespace)
	}
	return r
}

func (s *stream) fieldSelector() string {
	if s.name == "" {
		return s.rule.field
	}
	byName := fields.OneTermEqualSelector("metadata.name", s.name)
	if s.rule.field == "" {
		return byName.String()
	}
	return fields.AndSelectors(byName, s.rule.fields).String()
}

// relist reads the upstream's current state, writes what differs from the
// local copies and deletes the local copies the upstream no longer has. It
// then goes on watching, returning as watch does.
func (s *stream) relist(ctx context.Context, store *Store) (string, error) {
	s.update(func(st *streamStatus) { st.synced = false })
	// A WatchList the upstream refuses as a bad request is tried again as
	// a list: if that works, the upstream does not serve WatchList (too
	// old, or the feature is off) and every relist lists from then on.
	var watchListErr error
	if !s.m.noWatchList.Load() {
		rv, err := s.watchList(ctx, store)
		if err == nil || !(apierrors.IsInvalid(err) || apierrors.IsBadRequest(err)) {
			return rv, err
		}
		watchListErr = err
	}
	rl, err := s.newRelisting(ctx, store)
	if err != nil {
		return "", err
	}
	defer rl.wait() //nolint:errcheck // on the error paths: their error is returned
	opts := metav1.ListOptions{LabelSelector: s.rule.label, FieldSelector: s.fieldSelector(), Limit: 500}
	var rv string
	for {
		list, err := s.client(store).List(ctx, opts)
		if err != nil {
			if expired(err) {
				return "", errExpired
			}
			return "", err
		}
		s.connected()
		s.hear()
		if watchListErr != nil {
			klog.InfoS("Mirror: the upstream does not serve WatchList; listing instead", "upstream", s.m.host, "err", watchListErr)
			s.m.noWatchList.Store(true)
			watchListErr = nil
		}
		for i := range list.Items {
			if err := rl.apply(ctx, s, store, &list.Items[i]); err != nil {
				return "", err
			}
		}
		rv = list.GetResourceVersion()
		if list.GetContinue() == "" {
			break
		}
		opts.Continue = list.GetContinue()
	}
	if err := s.synced(ctx, store, rl, rv); err != nil {
		return "", err
	}
	return s.watch(ctx, store, rv, nil)
}

// watchList is relist by a WatchList (KEP-3157): the upstream streams its
// state as ADDED events up to a bookmark, and the same watch goes on.
func (s *stream) watchList(ctx context.Context, store *Store) (string, error) {
	w, err := s.client(store).Watch(ctx, metav1.ListOptions{
		LabelSelector:        s.rule.label,
		FieldSelector:        s.fieldSelector(),
		SendInitialEvents:    ptr.To(true),
		ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan,
		AllowWatchBookmarks:  true,
		TimeoutSeconds:       ptr.To(watchTimeoutSeconds()),
	})
	if err != nil {
		return "", err
	}
	s.connected()
	rl, err := s.newRelisting(ctx, store)
	if err != nil {
		w.Stop()
		return "", err
	}
	return s.watch(ctx, store, "", &watchStream{w: w, initial: rl})
}

// relistWrites is how many of a relist's writes run at once. Each is an
// etcd commit, and etcd fsyncs its WAL once for the commits that arrive
// together, so a first sync takes a fraction of the time and of the flash
// writes it takes one by one. A relist holds each object once, so the
// order of its writes does not matter; a watch's events are applied in
// order.
const relistWrites = 8

// relisting is a relist in progress: the local copies before it, the
// upstream objects seen so far, and the writes under way.
type relisting struct {
	local map[string]localRef
	// former are the copies of local only the rule's former selectors
	// selected, owned by formerRule.
	former     sets.Set[string]
	formerRule *rule
	seen       sets.Set[string]
	slots      chan struct{}
	wg         sync.WaitGroup

	mu      sync.Mutex
	applied int
	err     error
}

func (s *stream) newRelisting(ctx context.Context, store *Store) (*relisting, error) {
	local, err := s.m.localObjects(ctx, s.rule, store, s.namespace, s.name)
	if err != nil {
		return nil, err
	}
	rl := &relisting{local: local, seen: sets.New[string](), slots: make(chan struct{}, relistWrites)}
	if s.former != "" {
		former, old, err := s.m.formerCopies(ctx, s.rule, store, s.namespace, s.former)
		if err != nil {
			return nil, err
		}
		rl.former, rl.formerRule = sets.New[string](), old
		for k, ref := range former {
			if _, ok := local[k]; !ok {
				local[k] = ref
				rl.former.Insert(k)
			}
		}
	}
	return rl, nil
}

// apply writes u unless the local copy listed before the relist already
// has its content: an unchanged object costs no read and no write. The
// write runs beside others; a failure is returned by a later apply or by
// wait.
func (rl *relisting) apply(ctx context.Context, s *stream, store *Store, u *unstructured.Unstructured) error {
	key := u.GetNamespace() + "/" + u.GetName()
	rl.seen.Insert(key)
	c, ok := rl.local[key]
	if ok && c.uid == string(u.GetUID()) && c.upstreamRV != "" && !newer(u.GetResourceVersion(), c.upstreamRV) {
		applied.WithLabelValues(s.rule.base, opUnchanged).Inc()
		return nil
	}
	select {
	case rl.slots <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	rl.mu.Lock()
	err := rl.err
	rl.mu.Unlock()
	if err != nil {
		<-rl.slots
		return err
	}
	rl.wg.Add(1)
	go func() {
		defer func() {
			<-rl.slots
			rl.wg.Done()
		}()
		op, err := s.m.applyObject(ctx, s.rule, store, u, applyHow{absent: !ok})
		if errors.As(err, new(skippedError)) {
			s.skip(u, err)
			err = nil
		}
		rl.mu.Lock()
		defer rl.mu.Unlock()
		switch {
		case err != nil && rl.err == nil:
			rl.err = err
		case err == nil && op != opUnchanged:
			rl.applied++
		}
	}()
	return nil
}

// wait returns once the relist's writes are done, with the first failure.
func (rl *relisting) wait() error {
	rl.wg.Wait()
	rl.mu.Lock()
	defer rl.mu.Unlock()
	return rl.err
}

type watchStream struct {
	w       watch.Interface
	initial *relisting
}

func watchTimeoutSeconds() int64 {
	return int64((watchTimeout + rand.N(watchTimeout)).Seconds())
}

// synced ends a relist: the local copies no upstream object was seen for
// are deleted.
func (s *stream) synced(ctx context.Context, store *Store, rl *relisting, rv string) error {
	if err := rl.wait(); err != nil {
		return err
	}
	for key, ref := range rl.local {
		if rl.seen.Has(key) {
			continue
		}
		if rec, ok := s.m.up.pending.get(s.rule.gr, ref.namespace, ref.name); ok && rec.has(ownCreate) {
			// Created by the node while offline: the upstream gets it
			// when the write is reconciled.
			continue
		}
		owner := s.rule
		if rl.former.Has(key) {
			owner = rl.formerRule
		}
		if deleted, err := s.m.remove(ctx, owner, store, ref.namespace, ref.name, "", false); err != nil {
			return err
		} else if deleted {
			s.m.deleted.add(types.UID(ref.uid))
			rl.applied++
		}
	}
	s.former = ""
	now := time.Now()
	s.update(func(st *streamStatus) {
		st.synced, st.lastSync, st.lastSeen, st.objects, st.lagEvents = true, now, now, rl.seen.Len(), rl.applied
	})
	s.record(ctx, rv)
	return nil
}

// watch applies the upstream's events from rv on (or those of ws, already
// open) until the watch ends, and returns the last resourceVersion
// applied. A watch the upstream ends is not an error: the caller resumes.
func (s *stream) watch(ctx context.Context, store *Store, rv string, ws *watchStream) (string, error) {
	var initial *relisting
	var w watch.Interface
	if ws != nil {
		w, initial = ws.w, ws.initial
		// A watch that ends before its initial events do leaves no
		// write of theirs running.
		defer ws.initial.wait() //nolint:errcheck // the watch's own error is returned
	} else {
		var err error
		w, err = s.client(store).Watch(ctx, metav1.ListOptions{
			ResourceVersion:     rv,
			LabelSelector:       s.rule.label,
			FieldSelector:       s.fieldSelector(),
			AllowWatchBookmarks: true,
			TimeoutSeconds:      ptr.To(watchTimeoutSeconds()),
		})
		if err != nil {
			if expired(err) {
				return rv, errExpired
			}
			return rv, err
		}
		s.connected()
		resumes.WithLabelValues(s.rule.base).Inc()
	}
	defer w.Stop()
	// Events applied since the watch began, until the stream was in sync:
	// how far behind a resume found it.
	catchUp, caughtUp := 0, initial != nil
	quiet := time.NewTimer(time.Second)
	defer quiet.Stop()
	for {
		var ev watch.Event
		var ok bool
		select {
		case <-ctx.Done():
			return rv, nil
		case <-quiet.C:
			if !caughtUp {
				caughtUp = true
				now := time.Now()
				s.update(func(st *streamStatus) { st.synced, st.lastSync, st.lagEvents = true, now, catchUp })
			}
			if s.applied {
				s.checkpoint(ctx, rv, false)
			}
			continue
		case ev, ok = <-w.ResultChan():
		}
		if !ok {
			return rv, nil
		}
		quiet.Reset(time.Second)
		if ev.Type == watch.Error {
			err := apierrors.FromObject(ev.Object)
			if expired(err) {
				return rv, errExpired
			}
			return rv, err
		}
		u, isU := ev.Object.(*unstructured.Unstructured)
		if !isU {
			return rv, fmt.Errorf("unexpected %T in the watch of %s", ev.Object, s.rule.gr)
		}
		s.hear()
		now := time.Now()
		switch ev.Type {
		case watch.Added, watch.Modified:
			if initial != nil {
				if err := initial.apply(ctx, s, store, u); err != nil {
					return rv, err
				}
				break
			}
			op, err := s.m.apply(ctx, s.rule, store, u)
			if errors.As(err, new(skippedError)) {
				s.skip(u, err)
				break
			}
			if err != nil {
				return rv, err
			}
			if s.reported == reportedLocal {
				s.reported = ""
			}
			if ev.Type == watch.Added {
				// Upstream's view: the object began to match (a write
				// through the edge may have stored it already).
				s.update(func(st *streamStatus) { st.objects++ })
			}
			if op != opUnchanged {
				catchUp++
			}
		case watch.Deleted:
			s.m.deleted.add(u.GetUID())
			deleted, err := s.m.remove(ctx, s.rule, store, u.GetNamespace(), u.GetName(), u.GetResourceVersion(), false)
			if err != nil {
				return rv, err
			}
			if deleted {
				catchUp++
			}
			s.update(func(st *streamStatus) { st.objects = max(st.objects-1, 0) })
		case watch.Bookmark:
			if initial != nil && u.GetAnnotations()[metav1.InitialEventsAnnotationKey] == "true" {
				if err := s.synced(ctx, store, initial, u.GetResourceVersion()); err != nil {
					return rv, err
				}
				initial, caughtUp = nil, true
			} else if caughtUp {
				s.update(func(st *streamStatus) { st.synced, st.lastSync = true, now })
			}
		}
		if initial == nil {
			rv = u.GetResourceVersion()
			switch {
			case ev.Type != watch.Bookmark:
				s.applied = true
			case time.Since(s.persistedAt) > idleCheckpointEvery:
				// A quiet stream's record follows the bookmarks
				// rarely: each record is a write to flash, and a
				// restart from an older one costs at most a relist
				// that writes nothing.
				s.checkpoint(ctx, rv, true)
			}
			s.update(func(st *streamStatus) { st.lastSeen = now })
			if ev.Type == watch.Deleted {
				// A delete is recorded at once: replaying the create
				// of an object deleted since would bring it back for a
				// moment.
				s.checkpoint(ctx, rv, true)
			}
		}
	}
}
