package server_test

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
)

// Restarting on the same data directory keeps every object, its
// resourceVersion and the PKI; resourceVersions keep increasing.
func TestRestartKeepsData(t *testing.T) {
	cfg := testConfig(t)
	ts := startServer(t, cfg)
	ctx := t.Context()
	if _, err := ts.client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "keep"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{} // kind/name -> resourceVersion
	var maxRV uint64
	note := func(kind, name, rv string) {
		want[kind+"/"+name] = rv
		maxRV = max(maxRV, mustRV(t, rv))
	}
	for i := range 20 {
		cm, err := ts.client.CoreV1().ConfigMaps("keep").Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%d", i)}, Data: map[string]string{"i": strconv.Itoa(i)}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		note("ConfigMap", cm.Name, cm.ResourceVersion)
	}
	sec, err := ts.client.CoreV1().Secrets("keep").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s"}, StringData: map[string]string{"k": "v"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	note("Secret", sec.Name, sec.ResourceVersion)
	lease, err := ts.client.CoordinationV1().Leases("keep").Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "l"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("me"), LeaseDurationSeconds: ptr.To[int32](10)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	note("Lease", lease.Name, lease.ResourceVersion)
	caBefore := kubeconfigCA(t, ts.server.Kubeconfig())

	ts.stop()
	ts = startServer(t, cfg)

	cms, err := ts.client.CoreV1().ConfigMaps("keep").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, cm := range cms.Items {
		got["ConfigMap/"+cm.Name] = cm.ResourceVersion
		if i, _ := strconv.Atoi(cm.Name[len("cm-"):]); cm.Data["i"] != strconv.Itoa(i) {
			t.Errorf("%s lost its data: %v", cm.Name, cm.Data)
		}
	}
	s, err := ts.client.CoreV1().Secrets("keep").Get(ctx, "s", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if string(s.Data["k"]) != "v" {
		t.Errorf("secret data after restart: %q", s.Data)
	}
	got["Secret/s"] = s.ResourceVersion
	l, err := ts.client.CoordinationV1().Leases("keep").Get(ctx, "l", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got["Lease/l"] = l.ResourceVersion
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("after restart:\n got  %v\n want %v", got, want)
	}

	cm, err := ts.client.CoreV1().ConfigMaps("keep").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "new"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if mustRV(t, cm.ResourceVersion) <= maxRV {
		t.Errorf("resourceVersion went backwards: %s after %d", cm.ResourceVersion, maxRV)
	}
	if caAfter := kubeconfigCA(t, ts.server.Kubeconfig()); !bytes.Equal(caBefore, caAfter) {
		t.Errorf("the CA changed across a restart")
	}
}

func mustRV(t *testing.T, s string) uint64 {
	t.Helper()
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func kubeconfigCA(t *testing.T, path string) []byte {
	t.Helper()
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("kubeconfig %s: %v, mode %v; want 0600", path, err, fi.Mode())
	}
	kc, err := clientcmd.LoadFromFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return kc.Clusters[kc.Contexts[kc.CurrentContext].Cluster].CertificateAuthorityData
}
