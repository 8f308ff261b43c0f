package server_test

import (
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kubestore/kubestore/mirrored"
	"github.com/kubestore/kubestore/test/link"
)

// A pod on the gateway has its own identity, which the cluster knows:
// while the link is up the kubelet's TokenRequest for it is relayed, so
// its token is the cluster's (the cluster's TokenReview accepts it); the
// gateway accepts that token too, online, offline and after a restart;
// the pod's writes that go up carry it, so the cluster's authorizer
// decides on the pod (a write it does not grant is refused naming the
// ServiceAccount, not the gateway). The cluster's RBAC decides the pod's
// requests at the edge too, never more broadly than the cluster and
// whatever the edge's own policy grants: online, offline (its decisions
// kept; one never asked is refused) and after a restart. While the link
// is down the gateway issues the token itself; such a token never
// borrows the gateway's credentials once the link is back (403). What the
// mirror does not hold whole is read from the cluster online, and is 503
// offline.
func TestPodTokensAreTheClusters(t *testing.T) {
	t.Parallel()
	const sa = "system:serviceaccount:apps:app"
	upCfg := testConfig(t)
	upPolicy := filepath.Join(t.TempDir(), "policy.yaml")
	upCfg.Server.AuthorizationPolicyFile = writeFile(t, upPolicy,
		"rules:\n- users: ["+sa+"]\n  verbs: [get, list, watch, patch]\n  resources: [configmaps]\n  namespaces: [apps]\n")
	up := startServer(t, upCfg)
	l := link.New(t, strings.TrimPrefix(up.rest.Host, "https://"))
	cfg := edgeConfig(t, up, "https://"+l.Addr, "edge-a")
	cfg.Server.AuthorizationPolicyFile = writeFile(t, filepath.Join(t.TempDir(), "policy.yaml"),
		"rules:\n- groups: [system:serviceaccounts:apps]\n  verbs: [get, list, watch, patch]\n  resources: [configmaps, secrets]\n  namespaces: [apps]\n")
	p := &mirrorPair{up: up, edge: startServer(t, cfg), link: l, node: "edge-a"}
	p.waitMirrorz(t, http.StatusOK)
	ctx := t.Context()

	// The cluster's pod on the node, of its ServiceAccount, using a
	// ConfigMap and a Secret.
	if _, err := up.client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "apps"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	mustCreate(t, func() error {
		_, err := up.client.CoreV1().ServiceAccounts("apps").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "app"}}, metav1.CreateOptions{})
		return err
	})
	mustCreate(t, func() error {
		_, err := up.client.CoreV1().ConfigMaps("apps").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings"}}, metav1.CreateOptions{})
		return err
	})
	mustCreate(t, func() error {
		_, err := up.client.CoreV1().Secrets("apps").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "creds"}}, metav1.CreateOptions{})
		return err
	})
	pod, err := up.client.CoreV1().Pods("apps").Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "app"},
		Spec: corev1.PodSpec{NodeName: "edge-a", ServiceAccountName: "app", Containers: []corev1.Container{{Name: "c", Image: "busybox",
			EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}}},
				{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "creds"}}}}}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 15*time.Second, "the pod, its ServiceAccount and references mirrored", func() (bool, error) {
		_, err1 := p.edge.client.CoreV1().Pods("apps").Get(ctx, "app", metav1.GetOptions{})
		_, err2 := p.edge.client.CoreV1().ServiceAccounts("apps").Get(ctx, "app", metav1.GetOptions{})
		_, err3 := p.edge.client.CoreV1().ConfigMaps("apps").Get(ctx, "settings", metav1.GetOptions{})
		_, err4 := p.edge.client.CoreV1().Secrets("apps").Get(ctx, "creds", metav1.GetOptions{})
		return err1 == nil && err2 == nil && err3 == nil && err4 == nil, nil
	})
	// The kubelet's request for the pod's token, on its own certificate
	// and in protobuf, as the kubelet sends it.
	kubelet := kubeletClient(t, p.edge, "edge-a")
	var requestToken func(expirationSeconds *int64) *authenticationv1.TokenRequest
	request := func() string {
		t.Helper()
		tr := requestToken(nil)
		return tr.Status.Token
	}
	requestToken = func(expirationSeconds *int64) *authenticationv1.TokenRequest {
		t.Helper()
		tr, err := kubelet.CoreV1().ServiceAccounts("apps").CreateToken(ctx, "app", &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
			ExpirationSeconds: expirationSeconds, BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: "app", UID: pod.UID}}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("the kubelet's TokenRequest: %v", err)
		}
		return tr
	}
	reviewed := func(ts *testServer, token string) bool {
		t.Helper()
		r, err := ts.client.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return r.Status.Authenticated && r.Status.User.Username == sa
	}
	asPod := func(token string) kubernetes.Interface {
		return kubernetes.NewForConfigOrDie(&rest.Config{Host: p.edge.rest.Host, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{CAData: p.edge.rest.CAData}})
	}
	whoami := func(token string) (string, error) {
		r, err := asPod(token).AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
		if err != nil {
			return "", err
		}
		return r.Status.UserInfo.Username, nil
	}
	// The cluster's RBAC decides at the edge: its ConfigMap, not its
	// Secret, though the edge's own policy would grant both. The copy is
	// read locally (a copy, of a local resourceVersion).
	wantRBAC := func(token, when string) {
		t.Helper()
		c := asPod(token).CoreV1()
		cm, err := c.ConfigMaps("apps").Get(ctx, "settings", metav1.GetOptions{})
		if err != nil || !mirrored.Is(cm.Annotations) {
			t.Errorf("%s: the pod's read of its ConfigMap: %v, %v; want the local copy, the cluster allows it", when, cm, err)
		}
		if _, err := c.Secrets("apps").Get(ctx, "creds", metav1.GetOptions{}); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "upstream") {
			t.Errorf("%s: the pod's read of a Secret: %v; want 403, the cluster's RBAC", when, err)
		}
	}
	// A list of ConfigMaps, which the mirror holds only as the node's pods
	// reference them, is the cluster's to answer: passed through online,
	// 503 offline.
	list := func(token string) (*corev1.ConfigMapList, error) {
		return asPod(token).CoreV1().ConfigMaps("apps").List(ctx, metav1.ListOptions{})
	}
	patch := func(token, resource string) error {
		c, body := asPod(token).CoreV1(), []byte(`{"metadata":{"annotations":{"by":"the pod"}}}`)
		var err error
		if resource == "configmaps" {
			_, err = c.ConfigMaps("apps").Patch(ctx, "settings", types.MergePatchType, body, metav1.PatchOptions{})
		} else {
			_, err = c.Secrets("apps").Patch(ctx, "creds", types.MergePatchType, body, metav1.PatchOptions{})
		}
		return err
	}

	cluster := request()
	if !reviewed(up, cluster) {
		t.Fatal("the cluster does not accept the token the gateway relayed")
	}
	if who, err := whoami(cluster); err != nil || who != sa {
		t.Fatalf("the cluster's token at the gateway: %q, %v; want %s", who, err, sa)
	}
	if p.edge.metric("kubestore_mirror_tokens_total", map[string]string{"issuer": "cluster"}) < 1 {
		t.Error("kubestore_mirror_tokens_total{issuer=cluster} did not count the relayed token")
	}
	// The pod's write goes up as the pod: the cluster grants it the
	// ConfigMap, not the Secret, which the gateway's credentials could.
	if err := patch(cluster, "configmaps"); err != nil {
		t.Fatalf("the pod's patch of its ConfigMap: %v", err)
	}
	if cm, err := up.client.CoreV1().ConfigMaps("apps").Get(ctx, "settings", metav1.GetOptions{}); err != nil || cm.Annotations["by"] != "the pod" {
		t.Errorf("the cluster's ConfigMap after the pod's patch: %v, %v", cm, err)
	}
	if err := patch(cluster, "secrets"); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), sa) {
		t.Errorf("the pod's patch of a Secret the cluster does not grant it: %v; want 403 naming %s", err, sa)
	}
	wantRBAC(cluster, "online")
	mustCreate(t, func() error {
		_, err := up.client.CoreV1().ConfigMaps("apps").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "unreferenced"}}, metav1.CreateOptions{})
		return err
	})
	if l, err := list(cluster); err != nil || !slices.ContainsFunc(l.Items, func(cm corev1.ConfigMap) bool { return cm.Name == "unreferenced" && !mirrored.Is(cm.Annotations) }) {
		t.Errorf("the pod's list of ConfigMaps online: %v, %v; want the cluster's, passed through", l, err)
	}
	if p.edge.metric("kubestore_mirror_passed_through_total", nil) < 1 {
		t.Error("kubestore_mirror_passed_through_total did not count the list")
	}
	// The cluster takes the patch back: the edge's kept decision still
	// allows it for a moment, the cluster itself refuses the pod: the
	// write went up with the pod's credentials.
	writeFile(t, upPolicy, "rules:\n- users: ["+sa+"]\n  verbs: [get, list, watch]\n  resources: [configmaps]\n  namespaces: [apps]\n")
	if err := up.server.Reload(); err != nil {
		t.Fatal(err)
	}
	if err := patch(cluster, "configmaps"); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "upstream") || !strings.Contains(err.Error(), sa) {
		t.Errorf("the pod's patch the cluster no longer grants: %v; want the cluster's 403 naming %s", err, sa)
	}
	writeFile(t, upPolicy, "rules:\n- users: ["+sa+"]\n  verbs: [get, list, watch, patch]\n  resources: [configmaps]\n  namespaces: [apps]\n")
	if err := up.server.Reload(); err != nil {
		t.Fatal(err)
	}

	// Offline: the cluster's token still authenticates, and is given
	// again for the same request (a kubelet that restarted asks again);
	// the gateway issues any other token itself; writes go nowhere.
	p.outage(t, "refused")
	if who, err := whoami(cluster); err != nil || who != sa {
		t.Errorf("the cluster's token offline: %q, %v", who, err)
	}
	if again := request(); again != cluster {
		t.Error("offline, the kubelet's same request did not get the cluster's token again")
	}
	half := int64(1800)
	standIn := requestToken(&half)
	local := standIn.Status.Token
	// Short-lived: the kubelet asks again within 8 minutes (80 %), and
	// gets the cluster's once the link is back.
	if *standIn.Spec.ExpirationSeconds != 600 || time.Until(standIn.Status.ExpirationTimestamp.Time) > 10*time.Minute {
		t.Errorf("the gateway's own token for the cluster's pod: %d s, expiring %s; want 10 minutes", *standIn.Spec.ExpirationSeconds, standIn.Status.ExpirationTimestamp)
	}
	if reviewed(up, local) || !reviewed(p.edge, local) {
		t.Error("offline, the token should be the gateway's own: good at the gateway, not at the cluster")
	}
	if err := patch(cluster, "configmaps"); !apierrors.IsServiceUnavailable(err) {
		t.Errorf("the pod's write offline: %v, want 503", err)
	}
	wantRBAC(cluster, "offline")
	if _, err := list(cluster); !apierrors.IsServiceUnavailable(err) || !strings.Contains(err.Error(), "not mirrored whole") {
		t.Errorf("the pod's list of ConfigMaps offline: %v; want 503 naming the upstream", err)
	}
	wantRBAC(local, "offline, the gateway's own token")
	if _, err := asPod(cluster).CoreV1().ConfigMaps("apps").Get(ctx, "never-asked", metav1.GetOptions{}); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "does not know") {
		t.Errorf("offline, a request the cluster was never asked about: %v; want 403, not a guess", err)
	}
	// A restart offline keeps the cluster's issuer.
	p.edge.stop()
	p.edge = startServer(t, cfg)
	if who, err := whoami(cluster); err != nil || who != sa {
		t.Errorf("the cluster's token after a restart offline: %q, %v", who, err)
	}
	wantRBAC(cluster, "after a restart offline")

	// Back online: the gateway's own token does not borrow the gateway's
	// credentials.
	l.Restore()
	p.waitMirrorz(t, http.StatusOK)
	if err := patch(local, "configmaps"); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "did not issue") {
		t.Errorf("the pod's write with the gateway's own token: %v; want 403, never the gateway's credentials", err)
	}
	if err := patch(cluster, "configmaps"); err != nil {
		t.Errorf("the pod's write with the cluster's token, back online: %v", err)
	}
}

// mustCreate fails the test when create does.
func mustCreate(t *testing.T, create func() error) {
	t.Helper()
	if err := create(); err != nil {
		t.Fatal(err)
	}
}
