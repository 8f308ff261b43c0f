package mirror

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"github.com/kubestore/kubestore/records/family"
	"strings"
	"sync"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/klog/v2"
)

// The cluster's RBAC at the edge. A request of a ServiceAccount the mirror
// holds a copy of (a pod of the cluster on the node) is decided as the
// cluster decides it, never more broadly, online and offline: the cluster
// is asked (a SelfSubjectAccessReview, with the pod's own token, which any
// authenticated user may make) and its decision is kept, in memory and in
// the local etcd. While the link is up a decision older than
// decisionFresh is served and asked again behind it; while it is down the
// last decision stands, and a request the cluster was never asked about
// is refused: the edge does not guess what the cluster would allow.

// decisionFresh is how long a kept decision is served without asking the
// cluster again (while the link is up): a Role the cluster changes is
// honoured at the edge within about this long of the pod's next request.
const decisionFresh = 30 * time.Second

// maxDecisions bounds the decisions kept: past it, a new one is asked
// online and not kept.
const maxDecisions = 10000

// decision is one kept decision of the cluster.
type decision struct {
	Key     string    `json:"key"`
	Allowed bool      `json:"allowed"`
	Reason  string    `json:"reason,omitempty"`
	At      time.Time `json:"at"`
	// asking is set while the cluster is asked again.
	asking bool
}

// decisions are the cluster's decisions the gateway keeps.
type decisions struct {
	u      *uplink
	loaded sync.Once
	mu     sync.Mutex
	byKey  map[string]*decision
}

// ClusterAuthorizer decides the requests of the cluster's ServiceAccounts
// as the cluster does (above); it has no opinion on any other user's.
func (m *Mirror) ClusterAuthorizer() authorizer.Authorizer {
	return authorizer.AuthorizerFunc(m.up.decisions.authorize)
}

func (d *decisions) authorize(ctx context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	u := a.GetUser()
	if u == nil || !a.IsResourceRequest() || d.u.trust == nil {
		return authorizer.DecisionNoOpinion, "", nil
	}
	ns, name, err := serviceaccount.SplitUsername(u.GetName())
	if err != nil {
		return authorizer.DecisionNoOpinion, "", nil
	}
	d.loaded.Do(d.load)
	key := decisionKey(u.GetName(), a)
	d.mu.Lock()
	kept := d.byKey[key]
	var cur decision
	if kept != nil {
		cur = *kept
	}
	d.mu.Unlock()
	if kept == nil && !d.u.isCopy(ctx, "ServiceAccount", ns, name) {
		// A local ServiceAccount: kubestore's policy decides.
		return authorizer.DecisionNoOpinion, "", nil
	}
	token, _ := ctx.Value(podTokenKey{}).(string)
	if token != "" && !d.u.trust.Issued(token) {
		token = "" // kubestore's own token: it cannot ask the cluster
	}
	online := token != "" && d.u.Connected()
	switch {
	case kept != nil && (!online || time.Since(cur.At) < decisionFresh):
		return cur.verdict()
	case kept != nil:
		d.askLater(key, a, token)
		return cur.verdict()
	case !online:
		return authorizer.DecisionDeny, fmt.Sprintf("the upstream %s decides what %s may do, and this gateway does not know its decision yet (%s)",
			d.u.host, u.GetName(), map[bool]string{true: "the upstream is not reachable", false: "the request carries no token of the upstream's"}[token != ""]), nil
	}
	got, err := d.ask(ctx, key, a, token)
	if err != nil {
		return authorizer.DecisionDeny, fmt.Sprintf("asking the upstream %s what %s may do: %v", d.u.host, u.GetName(), err), nil
	}
	return got.verdict()
}

// verdict is the decision as the authorizer's: allowed, or denied for the
// cluster's reason (no other authorizer may widen it).
func (d decision) verdict() (authorizer.Decision, string, error) {
	if d.Allowed {
		return authorizer.DecisionAllow, "", nil
	}
	reason := "the upstream's RBAC does not allow it"
	if d.Reason != "" {
		reason += ": " + d.Reason
	}
	return authorizer.DecisionDeny, reason, nil
}

// decisionKey names a request's attributes, for user.
func decisionKey(user string, a authorizer.Attributes) string {
	return strings.Join([]string{user, a.GetVerb(), a.GetAPIGroup(), a.GetAPIVersion(), a.GetResource(), a.GetSubresource(), a.GetNamespace(), a.GetName()}, "|")
}

// ask asks the cluster, with the pod's token, and keeps its decision.
func (d *decisions) ask(ctx context.Context, key string, a authorizer.Attributes, token string) (decision, error) {
	ctx, cancel := context.WithTimeout(ctx, forwardTimeout)
	defer cancel()
	pod, err := d.u.asPod(token)
	if err != nil {
		return decision{}, err
	}
	review := &authorizationv1.SelfSubjectAccessReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "authorization.k8s.io/v1", Kind: "SelfSubjectAccessReview"},
		Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: a.GetNamespace(), Verb: a.GetVerb(), Group: a.GetAPIGroup(), Version: a.GetAPIVersion(),
			Resource: a.GetResource(), Subresource: a.GetSubresource(), Name: a.GetName()}}}
	body, err := json.Marshal(review)
	if err != nil {
		return decision{}, err
	}
	raw, err := pod.Post().AbsPath("/apis/authorization.k8s.io/v1/selfsubjectaccessreviews").
		SetHeader("Content-Type", "application/json").Body(body).Do(ctx).Raw()
	if err != nil {
		if unreachable(err) {
			d.u.reached(err)
		}
		return decision{}, err
	}
	d.u.reached(nil)
	answer := &authorizationv1.SelfSubjectAccessReview{}
	if err := json.Unmarshal(raw, answer); err != nil {
		return decision{}, fmt.Errorf("reading the upstream's answer: %w", err)
	}
	got := decision{Key: key, Allowed: answer.Status.Allowed && !answer.Status.Denied, Reason: answer.Status.Reason, At: time.Now()}
	d.keep(ctx, got)
	return got, nil
}

// askLater asks the cluster again behind a kept decision, once at a time.
func (d *decisions) askLater(key string, a authorizer.Attributes, token string) {
	d.mu.Lock()
	kept := d.byKey[key]
	if kept == nil || kept.asking {
		d.mu.Unlock()
		return
	}
	kept.asking = true
	d.mu.Unlock()
	go func() {
		_, err := d.ask(context.Background(), key, a, token)
		d.mu.Lock()
		if kept := d.byKey[key]; kept != nil {
			kept.asking = false
		}
		d.mu.Unlock()
		if err != nil {
			klog.V(2).InfoS("Mirror: asking the upstream again for a kept decision", "key", key, "err", err)
		}
	}()
}

// keep keeps got, in memory and, when it changed, in the local etcd.
func (d *decisions) keep(ctx context.Context, got decision) {
	d.mu.Lock()
	old := d.byKey[got.Key]
	if old == nil && len(d.byKey) >= maxDecisions {
		d.mu.Unlock()
		return
	}
	changed := old == nil || old.Allowed != got.Allowed || old.Reason != got.Reason
	if old != nil {
		got.asking = old.asking
	}
	d.byKey[got.Key] = &got
	d.mu.Unlock()
	if !changed {
		return
	}
	data, err := json.Marshal(got)
	if err == nil {
		err = d.u.state.PutState(ctx, d.record(got.Key), data)
	}
	if err != nil {
		klog.ErrorS(err, "Mirror: keeping the upstream's decision", "key", got.Key)
	}
}

// record names the record of key.
func (d *decisions) record(key string) string {
	sum := sha256.Sum256([]byte(key))
	return nodeState(family.MirrorDecisions, d.u.node) + hex.EncodeToString(sum[:16])
}

// load reads the decisions kept before.
func (d *decisions) load() {
	ctx, cancel := context.WithTimeout(context.Background(), forwardTimeout)
	defer cancel()
	d.mu.Lock()
	defer d.mu.Unlock()
	d.byKey = map[string]*decision{}
	recs, err := d.u.state.ListState(ctx, nodeState(family.MirrorDecisions, d.u.node))
	if err != nil {
		klog.ErrorS(err, "Mirror: reading the upstream's kept decisions")
		return
	}
	for _, data := range recs {
		var got decision
		if json.Unmarshal(data, &got) == nil && got.Key != "" {
			d.byKey[got.Key] = &got
		}
	}
}
