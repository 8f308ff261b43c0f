package mirror

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"github.com/kubestore/kubestore/records/family"
	"io"
	"net/http"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	"k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/kubestore/kubestore/mirrored"
)

// SetTokenTrust relays the kubelet's TokenRequests for the node's pods to
// the cluster, trusting its issuer through t; call it before serving.
func (m *Mirror) SetTokenTrust(t TokenTrust) { m.up.trust = t }

// jwksPath is where a cluster serves its ServiceAccount issuer's keys
// (kube-apiserver's --service-account-jwks-uri default).
const jwksPath = "/openid/v1/jwks"

// JWKS reads the cluster's ServiceAccount keys: with the gateway's own
// credentials, else (a gateway that may not read them, as a node may
// not) with token's, a ServiceAccount's, which the cluster's
// system:service-account-issuer-discovery role lets read them.
func (l *link) JWKS(ctx context.Context, token string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, forwardTimeout)
	defer cancel()
	raw, err := l.raw.Get().AbsPath(jwksPath).SetHeader("Accept", jwksAccept).Do(ctx).Raw()
	if err == nil || token == "" || !apierrors.IsForbidden(err) && !apierrors.IsUnauthorized(err) {
		return raw, err
	}
	pod, err := l.asPod(token)
	if err != nil {
		return nil, err
	}
	return pod.Get().AbsPath(jwksPath).SetHeader("Accept", jwksAccept).Do(ctx).Raw()
}

// jwksAccept is what a JWKS is served as: kube-apiserver answers 406 to
// a client that accepts only application/json.
const jwksAccept = "application/jwk-set+json, application/json"

// asPod is a client of the upstream with token's credentials instead of
// the gateway's (its TLS settings kept).
func (l *link) asPod(token string) (rest.Interface, error) {
	return l.wire.client(l.wire.config(l.podConfig(token)), nil)
}

// podConfig is the upstream's client configuration with token's
// credentials.
func (l *link) podConfig(token string) *rest.Config {
	cfg := rest.CopyConfig(l.pods)
	cfg.BearerToken = token
	return cfg
}

type podTokenKey struct{}

// WithPodCredentials keeps a request's bearer token for the uplink, which
// sends a pod's write up with it when it is the cluster's (upstreamFor).
// It runs before the authentication, which removes the header.
func (m *Mirror) WithPodCredentials(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok && m.up.trust != nil {
			r = r.WithContext(context.WithValue(r.Context(), podTokenKey{}, token))
		}
		next.ServeHTTP(w, r)
	})
}

// upstreamFor is the client a request's write goes up with: a
// ServiceAccount's (a pod's) own credentials, the cluster's token it
// authenticated with; any other user's (the kubelet, the admin) the
// gateway's. A ServiceAccount without the cluster's token (one kubestore
// issued while the link was down, or a local ServiceAccount's) never
// borrows the gateway's: 403.
func (u *uplink) upstreamFor(r *http.Request) (rest.Interface, error) {
	user, ok := request.UserFrom(r.Context())
	if !ok || !strings.HasPrefix(user.GetName(), serviceaccount.ServiceAccountUsernamePrefix) {
		return u.raw, nil
	}
	token, _ := r.Context().Value(podTokenKey{}).(string)
	if token == "" || u.trust == nil || !u.trust.Issued(token) {
		return nil, fmt.Errorf("%s authenticated with a token the upstream %s did not issue (kubestore's own, issued while the upstream was not reachable, or a local ServiceAccount's): its writes go up with its own credentials only, never the gateway's; the kubelet replaces a pod's token with the cluster's once the link is back",
			user.GetName(), u.host)
	}
	return u.asPod(token)
}

// relayToken relays a TokenRequest to the cluster, when it is one for a
// mirrored ServiceAccount (bound, if to a pod, to a mirrored pod) and the
// link is up, and reports whether it answered. Anything else is left to
// the local issuer, with the request as it came; a request for a mirrored
// ServiceAccount that is not relayed, or whose relay fails, gets the
// cluster's token kept from an earlier relay of the same request
// (keptToken), or else is marked for the local issuer as standing in for
// the cluster (mirrored.WithStandIn).
func (u *uplink) relayToken(w http.ResponseWriter, r *http.Request, info *request.RequestInfo, decoder runtime.Decoder, maxBody int64) (bool, *http.Request) {
	ctx := r.Context()
	if u.trust == nil || !u.isCopy(ctx, "ServiceAccount", info.Namespace, info.Name) {
		return false, r
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	r.Body = io.NopCloser(bytes.NewReader(body))
	if err != nil || int64(len(body)) > maxBody {
		return false, r // the local server answers
	}
	u2, err := decodeBody(r.Header.Get("Content-Type"), body, decoder)
	if err != nil {
		return false, r
	}
	tr := &authenticationv1.TokenRequest{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u2.Object, tr); err != nil {
		return false, r
	}
	if ref := tr.Spec.BoundObjectRef; ref != nil && ref.Kind == "Pod" && !u.isCopy(ctx, "Pod", info.Namespace, ref.Name) {
		return false, r
	}
	dryRun := len(r.URL.Query()["dryRun"]) > 0
	key := u.tokenRecord(info.Namespace, info.Name, tr)
	err = fmt.Errorf("upstream %s not reachable", u.host)
	if u.Connected() {
		if err = u.relayTokenRequest(ctx, w, r, tr, key); err == nil {
			tokensRelayed.WithLabelValues("cluster").Inc()
			return true, r
		}
	}
	// The cluster's token it gave for the same request before, while it
	// is good: a kubelet that restarted offline asks again, and the pod
	// keeps the cluster's identity.
	if raw, ok := u.keptToken(ctx, key); ok && !dryRun {
		tokensRelayed.WithLabelValues("kept").Inc()
		w.Header().Set("Content-Type", runtime.ContentTypeJSON)
		w.WriteHeader(http.StatusCreated)
		w.Write(raw) //nolint:errcheck // the client went away
		return true, r
	}
	tokensRelayed.WithLabelValues("kubestore").Inc()
	klog.InfoS("Mirror: the cluster did not issue the pod's token; kubestore issues it, short-lived", "namespace", info.Namespace, "serviceAccount", info.Name, "err", err)
	r.Body = io.NopCloser(bytes.NewReader(body))
	return false, r.WithContext(mirrored.WithStandIn(ctx))
}

// keptTokenMargin is how long before its expiry a kept token is no
// longer given: the pod must have time to use it.
const keptTokenMargin = 5 * time.Minute

// keptToken is one record: the cluster's answer and when its token
// expires, and the pod it is bound to.
type keptToken struct {
	Answer  json.RawMessage `json:"answer"`
	Expires time.Time       `json:"expires"`
	PodUID  types.UID       `json:"podUID,omitempty"`
}

// tokenRecord names the record of a TokenRequest for namespace/sa: its
// ServiceAccount, bound object, audiences and lifetime.
func (u *uplink) tokenRecord(namespace, sa string, tr *authenticationv1.TokenRequest) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s/%s|%v|%v|", namespace, sa, tr.Spec.Audiences, ptr.Deref(tr.Spec.ExpirationSeconds, 0))
	if ref := tr.Spec.BoundObjectRef; ref != nil {
		fmt.Fprintf(h, "%s/%s/%s/%s", ref.APIVersion, ref.Kind, ref.Name, ref.UID)
	}
	return nodeState(family.MirrorTokens, u.node) + hex.EncodeToString(h.Sum(nil)[:16])
}

// keepToken keeps the cluster's answer raw under key, for the kubelet's
// next request while the link is down.
func (u *uplink) keepToken(ctx context.Context, key string, tr *authenticationv1.TokenRequest, answer *authenticationv1.TokenRequest, raw []byte) {
	k := keptToken{Answer: raw, Expires: answer.Status.ExpirationTimestamp.Time}
	if ref := tr.Spec.BoundObjectRef; ref != nil && ref.Kind == "Pod" {
		k.PodUID = ref.UID
	}
	data, err := json.Marshal(k)
	if err == nil {
		err = u.state.PutState(ctx, key, data)
	}
	if err != nil {
		klog.ErrorS(err, "Mirror: keeping the cluster's token for offline")
	}
}

// keptToken is the cluster's answer kept under key, while its token is
// good for keptTokenMargin yet.
func (u *uplink) keptToken(ctx context.Context, key string) ([]byte, bool) {
	data, err := u.state.GetState(ctx, key)
	if err != nil || data == nil {
		return nil, false
	}
	var k keptToken
	if json.Unmarshal(data, &k) != nil || time.Until(k.Expires) < keptTokenMargin {
		return nil, false
	}
	return k.Answer, true
}

// forgetTokens deletes the kept tokens that expired or whose pod the
// gateway no longer holds.
func (u *uplink) forgetTokens(ctx context.Context) {
	recs, err := u.state.ListState(ctx, nodeState(family.MirrorTokens, u.node))
	if err != nil {
		klog.ErrorS(err, "Mirror: reading the kept tokens")
		return
	}
	var pods map[types.UID]bool
	for name, data := range recs {
		var k keptToken
		gone := json.Unmarshal(data, &k) != nil || time.Now().After(k.Expires)
		if !gone && k.PodUID != "" {
			if pods == nil {
				if pods, err = u.podUIDs(ctx); err != nil {
					klog.ErrorS(err, "Mirror: reading the pods of the kept tokens")
					return
				}
			}
			gone = !pods[k.PodUID]
		}
		if gone {
			if err := u.state.DeleteState(ctx, name); err != nil {
				klog.ErrorS(err, "Mirror: deleting a kept token")
			}
		}
	}
}

// relayTokenRequest asks the cluster for tr's token and answers with it,
// once the cluster's issuer is trusted with it.
func (u *uplink) relayTokenRequest(ctx context.Context, w http.ResponseWriter, r *http.Request, tr *authenticationv1.TokenRequest, key string) error {
	fctx, cancel := context.WithTimeout(ctx, forwardTimeout)
	defer cancel()
	body, err := json.Marshal(tr)
	if err != nil {
		return err
	}
	req := u.raw.Post().AbsPath(r.URL.Path).SetHeader("Content-Type", runtime.ContentTypeJSON).Body(body)
	for k, vs := range r.URL.Query() {
		for _, v := range vs {
			req.Param(k, v)
		}
	}
	var code int
	raw, err := req.Do(fctx).StatusCode(&code).Raw()
	if err != nil {
		if unreachable(err) {
			u.reached(err)
		}
		return err
	}
	u.reached(nil)
	answer := &authenticationv1.TokenRequest{}
	if err := json.Unmarshal(raw, answer); err != nil || answer.Status.Token == "" {
		return fmt.Errorf("the cluster's answer holds no token: %v", err)
	}
	if dryRun := len(r.URL.Query()["dryRun"]) > 0; !dryRun {
		// A token of the cluster's API must authenticate at the gateway:
		// its JWKS is read with the gateway's credentials, else the
		// token's own. A token for another audience (a third party's)
		// cannot read it; it is the pod's even if the gateway cannot
		// verify it.
		withToken := ""
		if len(tr.Spec.Audiences) == 0 {
			withToken = answer.Status.Token
		}
		err := u.trust.Learn(ctx, answer.Status.Token, tr.Spec.Audiences, func(ctx context.Context) ([]byte, error) { return u.JWKS(ctx, withToken) })
		switch {
		case err != nil && withToken != "":
			return err
		case err != nil:
			klog.V(2).InfoS("Mirror: the cluster's token for another audience cannot be verified at the gateway", "audiences", tr.Spec.Audiences, "err", err)
		}
		u.keepToken(ctx, key, tr, answer, raw)
	}
	w.Header().Set("Content-Type", runtime.ContentTypeJSON)
	w.WriteHeader(code)
	w.Write(raw) //nolint:errcheck // the client went away
	return nil
}

// isCopy reports whether namespace/name, a v1 object of kind, is a
// mirrored copy (downstream's mirrors, as for the node's Events).
func (u *uplink) isCopy(ctx context.Context, kind, namespace, name string) bool {
	return u.down.mirrors(ctx, corev1.ObjectReference{APIVersion: "v1", Kind: kind, Namespace: namespace, Name: name})
}

// podUIDs are the uids of the pods the gateway holds copies of.
func (u *uplink) podUIDs(ctx context.Context) (map[types.UID]bool, error) {
	out := map[types.UID]bool{}
	store, err := u.stores.Store(ctx, podsResource)
	if err != nil {
		return nil, err
	}
	for _, r := range u.down.rulesFor(podsResource) {
		refs, err := u.down.localObjects(ctx, r, store, "", "")
		if err != nil {
			return nil, err
		}
		for _, ref := range refs {
			out[types.UID(ref.uid)] = true
		}
	}
	return out, nil
}
