package server_test

import (
	"fmt"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
)

// A site's kubelets on one store: each may do what its own kubelet needs
// on its own node's objects and nothing on another node's, as
// kube-apiserver's Node authorizer and NodeRestriction decide (ported
// with upstream's own cases in access/node and access/noderestriction;
// here they are checked wired into the server, through its API).
func TestEachKubeletOnItsOwnNode(t *testing.T) {
	t.Parallel()
	ts := startServer(t, testConfig(t))
	ctx := t.Context()
	nodes := []string{"edge-a", "edge-b", "edge-c"}
	kubelet := map[string]kubernetes.Interface{}
	for _, n := range nodes {
		kubelet[n] = nodeClient(t, ts, n)
		// Each kubelet registers its own Node and Lease.
		if _, err := kubelet[n].CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}}, metav1.CreateOptions{}); err != nil {
			t.Fatalf("%s registering its Node: %v", n, err)
		}
		lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: n, Namespace: corev1.NamespaceNodeLease},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(n), LeaseDurationSeconds: ptr.To[int32](40)}}
		if _, err := kubelet[n].CoordinationV1().Leases(corev1.NamespaceNodeLease).Create(ctx, lease, metav1.CreateOptions{}); err != nil {
			t.Fatalf("%s creating its Lease: %v", n, err)
		}
	}
	if _, err := ts.client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "work"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Each node's pod references a Secret and a ConfigMap of its own.
	for _, n := range nodes {
		if _, err := ts.client.CoreV1().Secrets("work").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s-" + n}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := ts.client.CoreV1().ConfigMaps("work").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm-" + n}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p-" + n}, Spec: corev1.PodSpec{NodeName: n,
			Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10",
				EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cm-" + n}}}}}},
			Volumes: []corev1.Volume{{Name: "s", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "s-" + n}}},
				{Name: "token", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
					{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token"}}}}}}}}}
		if _, err := ts.client.CoreV1().Pods("work").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	a := kubelet["edge-a"]

	// What edge-a's kubelet needs, on its own objects.
	eventually(t, 10*time.Second, "edge-a reads the Secret its pod references", func() (bool, error) {
		_, err := a.CoreV1().Secrets("work").Get(ctx, "s-edge-a", metav1.GetOptions{})
		return err == nil, err
	})
	allowed := map[string]func() error{
		"get its pod's ConfigMap": func() error {
			_, err := a.CoreV1().ConfigMaps("work").Get(ctx, "cm-edge-a", metav1.GetOptions{})
			return err
		},
		"list the pods bound to it": func() error {
			_, err := a.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=edge-a"})
			return err
		},
		"patch its Node's status": func() error {
			_, err := a.CoreV1().Nodes().Patch(ctx, "edge-a", types.StrategicMergePatchType,
				[]byte(`{"status":{"conditions":[{"type":"Ready","status":"True","reason":"KubeletReady"}]}}`), metav1.PatchOptions{}, "status")
			return err
		},
		"renew its Lease": func() error {
			_, err := a.CoordinationV1().Leases(corev1.NamespaceNodeLease).Patch(ctx, "edge-a", types.MergePatchType,
				fmt.Appendf(nil, `{"spec":{"renewTime":%q}}`, time.Now().UTC().Format("2006-01-02T15:04:05.000000Z")), metav1.PatchOptions{})
			return err
		},
		"write its pod's status": func() error {
			_, err := a.CoreV1().Pods("work").Patch(ctx, "p-edge-a", types.StrategicMergePatchType, []byte(`{"status":{"phase":"Running"}}`), metav1.PatchOptions{}, "status")
			return err
		},
		"ask for its pod's ServiceAccount token": func() error {
			pod, err := ts.client.CoreV1().Pods("work").Get(ctx, "p-edge-a", metav1.GetOptions{})
			if err != nil {
				return err
			}
			_, err = a.CoreV1().ServiceAccounts("work").CreateToken(ctx, pod.Spec.ServiceAccountName, tokenRequestFor(pod), metav1.CreateOptions{})
			return err
		},
	}
	for what, do := range allowed {
		if err := do(); err != nil {
			t.Errorf("edge-a's kubelet cannot %s: %v", what, err)
		}
	}

	// Nothing of edge-b's.
	forbidden := map[string]func() error{
		"get the Secret only edge-b's pod references": func() error {
			_, err := a.CoreV1().Secrets("work").Get(ctx, "s-edge-b", metav1.GetOptions{})
			return err
		},
		"get the ConfigMap only edge-b's pod references": func() error {
			_, err := a.CoreV1().ConfigMaps("work").Get(ctx, "cm-edge-b", metav1.GetOptions{})
			return err
		},
		"list Secrets": func() error {
			_, err := a.CoreV1().Secrets("work").List(ctx, metav1.ListOptions{})
			return err
		},
		"patch edge-b's Node status": func() error {
			_, err := a.CoreV1().Nodes().Patch(ctx, "edge-b", types.StrategicMergePatchType,
				[]byte(`{"status":{"conditions":[{"type":"Ready","status":"False","reason":"Forged"}]}}`), metav1.PatchOptions{}, "status")
			return err
		},
		"delete edge-b's pod": func() error {
			return a.CoreV1().Pods("work").Delete(ctx, "p-edge-b", metav1.DeleteOptions{})
		},
		"write edge-b's pod status": func() error {
			_, err := a.CoreV1().Pods("work").Patch(ctx, "p-edge-b", types.StrategicMergePatchType, []byte(`{"status":{"phase":"Failed"}}`), metav1.PatchOptions{}, "status")
			return err
		},
		"renew edge-b's Lease": func() error {
			_, err := a.CoordinationV1().Leases(corev1.NamespaceNodeLease).Patch(ctx, "edge-b", types.MergePatchType, []byte(`{"spec":{"holderIdentity":"edge-a"}}`), metav1.PatchOptions{})
			return err
		},
		"create a pod that is not a mirror pod": func() error {
			_, err := a.CoreV1().Pods("work").Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "sneaky"},
				Spec: corev1.PodSpec{NodeName: "edge-a", Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}}}, metav1.CreateOptions{})
			return err
		},
		"ask for edge-b's pod's ServiceAccount token": func() error {
			pod, err := ts.client.CoreV1().Pods("work").Get(ctx, "p-edge-b", metav1.GetOptions{})
			if err != nil {
				return err
			}
			_, err = a.CoreV1().ServiceAccounts("work").CreateToken(ctx, pod.Spec.ServiceAccountName, tokenRequestFor(pod), metav1.CreateOptions{})
			return err
		},
	}
	for what, do := range forbidden {
		if err := do(); !apierrors.IsForbidden(err) {
			t.Errorf("edge-a's kubelet may %s: %v, want 403 Forbidden", what, err)
		}
	}
	for _, n := range []string{"edge-b", "edge-c"} {
		if p, err := ts.client.CoreV1().Pods("work").Get(ctx, "p-"+n, metav1.GetOptions{}); err != nil || p.Status.Phase == corev1.PodFailed || p.DeletionTimestamp != nil {
			t.Errorf("%s's pod after edge-a's attempts: %v, %v", n, err, p)
		}
	}

	// Once edge-b's pod is deleted, edge-b's kubelet loses its Secret too.
	if err := ts.client.CoreV1().Pods("work").Delete(ctx, "p-edge-b", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "edge-b no longer reads its deleted pod's Secret", func() (bool, error) {
		_, err := kubelet["edge-b"].CoreV1().Secrets("work").Get(ctx, "s-edge-b", metav1.GetOptions{})
		return apierrors.IsForbidden(err), err
	})

	// kubectl auth can-i --list says a kubelet's rules are not all listed.
	rr, err := a.AuthorizationV1().SelfSubjectRulesReviews().Create(ctx, &authorizationv1.SelfSubjectRulesReview{Spec: authorizationv1.SelfSubjectRulesReviewSpec{Namespace: "work"}}, metav1.CreateOptions{})
	if err != nil || !rr.Status.Incomplete {
		t.Errorf("a kubelet's rules review: %v, %+v; want incomplete", err, rr)
	}
}

// nodeClient is a client of ts as node's kubelet (system:node:<node> in
// system:nodes), impersonated by the admin.
func nodeClient(t *testing.T, ts *testServer, node string) kubernetes.Interface {
	t.Helper()
	cfg := rest.CopyConfig(ts.rest)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:node:" + node, Groups: []string{"system:nodes", "system:authenticated"}}
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// tokenRequestFor is a TokenRequest bound to pod, as the kubelet asks for
// its projected token (no audience: the API's).
func tokenRequestFor(pod *corev1.Pod) *authenticationv1.TokenRequest {
	return &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
	}}
}
