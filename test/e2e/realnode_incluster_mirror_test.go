package e2e

import (
	"bufio"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/kubestore/kubestore/config"
)

// The in-cluster client through the mirror (README, "the node's pods have
// their own identity"): the node's view of the cluster's Service
// default/kubernetes leads it to the gateway, its token is the cluster's,
// the cluster's RBAC decides what it may do at the edge and its writes
// reach the cluster as the pod, online; offline it keeps its watch and
// its reads, and its writes are refused at once.

// inClusterAuditPolicy has kube-apiserver log who wrote the ConfigMaps of
// the in-cluster client's namespace.
const inClusterAuditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
  resources: [{group: "", resources: [configmaps]}]
  namespaces: [` + appsNS + `]
  verbs: [create, update, patch]
- level: None
`

// inClusterClusterArgs are kube-apiserver's flags for the mirror phase:
// the audit log at dir/audit.log, and the Service default/kubernetes's
// endpoint written as a cluster's is (the lease reconciler, at an address
// nothing here calls: the node sees the gateway's instead).
func inClusterClusterArgs(t *testing.T, dir string) []string {
	t.Helper()
	policy := filepath.Join(dir, "audit-policy.yaml")
	must(t, os.WriteFile(policy, []byte(inClusterAuditPolicy), 0o600))
	return []string{"--audit-policy-file", policy, "--audit-log-path", filepath.Join(dir, "audit.log"),
		"--advertise-address", "192.0.2.1", "--endpoint-reconciler-type", "lease"}
}

// inClusterMirrorConfig is the gateway's --config: the default rules, the
// ConfigMaps of the apps namespace mirrored whole instead of those its
// pods reference, so that the in-cluster client's list and watch are the
// gateway's to serve, online and offline.
func inClusterMirrorConfig(t *testing.T) string {
	t.Helper()
	var rules []config.MirrorRule
	for _, r := range config.DefaultMirrorRules() {
		if r.Name != "configmaps" {
			rules = append(rules, r)
		}
	}
	rules = append(rules, config.MirrorRule{Name: "apps-configmaps", Resource: "configmaps", Namespaces: []string{appsNS}},
		config.MirrorRule{Name: "widgets", Resource: inClusterCustom, Namespaces: []string{appsNS}})
	b, err := yaml.Marshal(map[string]any{"mirror": map[string]any{"rules": rules}})
	must(t, err)
	path := filepath.Join(shortTempDir(t), "kubestore.yaml")
	must(t, os.WriteFile(path, b, 0o600))
	return path
}

// inClusterCustom is the custom resource the in-cluster client lists and
// writes the status of through the mirror, and inClusterCRD its
// definition.
const (
	inClusterCustom = "widgets.example.com"
	inClusterCRD    = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  names: {kind: Widget, plural: widgets, singular: widget, listKind: WidgetList}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
`
)

// applyInClusterCustom defines the custom resource, with kubectl.
func applyInClusterCustom(t *testing.T, kubectl func(args ...string) string) {
	t.Helper()
	crd := filepath.Join(shortTempDir(t), "crd.yaml")
	must(t, os.WriteFile(crd, []byte(inClusterCRD), 0o600))
	kubectl("apply", "-f", crd)
	kubectl("wait", "--for", "condition=Established", "--timeout", "60s", "crd/"+inClusterCustom)
}

// createWidget creates the widget w1, whose status the in-cluster client
// writes, with kubectl.
func createWidget(t *testing.T, kubectl func(args ...string) string) {
	t.Helper()
	w := filepath.Join(shortTempDir(t), "widget.yaml")
	must(t, os.WriteFile(w, []byte("apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w1, namespace: "+appsNS+"}\nspec: {size: 1}\n"), 0o600))
	kubectl("apply", "-f", w)
}

// defineInClusterCustom defines the custom resource on the cluster and
// lets the gateway, whose role covers the default rules, mirror it.
func defineInClusterCustom(t *testing.T, kubectl func(args ...string) string, gatewaySA string) {
	t.Helper()
	applyInClusterCustom(t, kubectl)
	kubectl("create", "clusterrole", "gateway-widgets", "--verb", "get,list,watch", "--resource", inClusterCustom+",customresourcedefinitions.apiextensions.k8s.io")
	kubectl("create", "clusterrolebinding", "gateway-widgets", "--clusterrole", "gateway-widgets", "--serviceaccount", gatewaySA)
}

// grantInCluster gives the in-cluster client's ServiceAccount, on the
// cluster, the ConfigMaps of its namespace and its widgets with their
// status, and nothing else: Roles. It creates the widget w1.
func grantInCluster(t *testing.T, kubectl func(args ...string) string) {
	t.Helper()
	kubectl("create", "role", "incluster", "--namespace", appsNS, "--verb", "get,list,watch,create,update,patch", "--resource", "configmaps")
	kubectl("create", "rolebinding", "incluster", "--namespace", appsNS, "--role", "incluster", "--serviceaccount", appsNS+":"+inClusterSA)
	kubectl("create", "role", "incluster-widgets", "--namespace", appsNS, "--verb", "get,list,watch,patch", "--resource", inClusterCustom+","+inClusterCustom+"/status")
	kubectl("create", "rolebinding", "incluster-widgets", "--namespace", appsNS, "--role", "incluster-widgets", "--serviceaccount", appsNS+":"+inClusterSA)
	createWidget(t, kubectl)
}

// checkInClusterCustom checks that the in-cluster client listed the
// widget and wrote its status (through the mirror: at the gateway, and it
// reached the cluster as written by the pod).
func checkInClusterCustom(t *testing.T, kubectl func(args ...string) string) {
	t.Helper()
	var got string
	if !eventually(30*time.Second, func() bool {
		got = strings.TrimSpace(kubectl("get", inClusterCustom, "w1", "--namespace", appsNS, "-o", "jsonpath={.status.observedBy}"))
		return got == inClusterUser
	}) {
		t.Errorf("the widget w1 has status.observedBy %q, want %s: the in-cluster client's status write", got, inClusterUser)
	}
}

// inClusterToken is the in-cluster client's token, as its container reads
// it: the kube-api-access volume's file in the kubelet's pod directory.
func inClusterToken(t *testing.T, n *realNode, uid types.UID) string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(n.dir, "kubelet", "pods", string(uid), "volumes", "kubernetes.io~projected", "kube-api-access-*", "token"))
	must(t, err)
	if len(files) != 1 {
		t.Fatalf("the in-cluster client's pod %s has %d kube-api-access tokens", uid, len(files))
	}
	return strings.TrimSpace(string(mustRead(t, files[0])))
}

// checkInClusterIdentity checks that the in-cluster client's token is the
// cluster's (its TokenReview accepts it), and that the cluster's audit log
// has the client's writes of its report as its ServiceAccount, not as the
// gateway.
func checkInClusterIdentity(t *testing.T, c *cluster, g *realGateway, auditLog, token string) {
	t.Helper()
	review, err := c.cs.AuthenticationV1().TokenReviews().Create(t.Context(), &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
	must(t, err)
	if !review.Status.Authenticated || review.Status.User.Username != inClusterUser {
		t.Errorf("the in-cluster client's token at the cluster: %+v; want %s, the cluster's token; the gateway said:\n%s", review.Status, inClusterUser,
			grepLines(g.p.logs(), "token"))
	}
	var writers map[string]int
	if !eventually(10*time.Second, func() bool {
		writers = auditedWriters(t, auditLog, inClusterReport)
		return writers[inClusterUser] > 0
	}) {
		t.Errorf("the cluster's audit log has the in-cluster client's report written by %v; want %s", writers, inClusterUser)
	}
	for user := range writers {
		if user != inClusterUser {
			t.Errorf("the cluster's audit log has the in-cluster client's report written by %s too", user)
		}
	}
}

// auditedWriters counts the writes of the ConfigMap name the cluster
// accepted, by user, in kube-apiserver's audit log.
func auditedWriters(t *testing.T, log, name string) map[string]int {
	t.Helper()
	out := map[string]int{}
	f, err := os.Open(log)
	if err != nil {
		return out
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var ev struct {
			Stage string `json:"stage"`
			User  struct {
				Username string `json:"username"`
			} `json:"user"`
			ObjectRef struct {
				Name string `json:"name"`
			} `json:"objectRef"`
			ResponseStatus struct {
				Code int `json:"code"`
			} `json:"responseStatus"`
		}
		if json.Unmarshal(sc.Bytes(), &ev) == nil && ev.Stage == "ResponseComplete" && ev.ObjectRef.Name == name && ev.ResponseStatus.Code < 300 {
			out[ev.User.Username]++
		}
	}
	return out
}

// checkInClusterOffline acts as the in-cluster client, with its own
// token, on the gateway whose link is down: its ConfigMaps are read from
// local data, its write is refused with 503 at once, the Secrets stay
// refused (the cluster's decision, kept) and a request the cluster was
// never asked about is refused, not guessed.
func checkInClusterOffline(t *testing.T, g *realGateway, token, when string) {
	t.Helper()
	ctx := t.Context()
	cs := asToken(t, g, token)
	cms := cs.CoreV1().ConfigMaps(appsNS)
	list, err := cms.List(ctx, metav1.ListOptions{})
	if err != nil || len(list.Items) == 0 {
		t.Errorf("%s: the in-cluster client's list of its ConfigMaps at the gateway: %v", when, err)
	}
	// The client's own write, which the cluster allowed it online.
	report, err := cms.Get(ctx, inClusterReport, metav1.GetOptions{})
	if err != nil {
		t.Errorf("%s: the in-cluster client's read of its report at the gateway: %v", when, err)
		return
	}
	report.Data["offline"] = "yes"
	start := time.Now()
	_, err = cms.Update(ctx, report, metav1.UpdateOptions{})
	if took := time.Since(start); !apierrors.IsServiceUnavailable(err) || took > 2*time.Second {
		t.Errorf("%s: the in-cluster client's write at the gateway: %v after %s; want 503 at once", when, err, took.Round(time.Millisecond))
	} else {
		t.Logf("%s: the in-cluster client's write was refused (503) in %s", when, took.Round(time.Millisecond))
	}
	if _, err := cs.CoreV1().Secrets(appsNS).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("%s: the in-cluster client's list of Secrets: %v; want 403, the cluster's decision", when, err)
	}
	if _, err := cms.Get(ctx, "never-asked", metav1.GetOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("%s: a request the cluster was never asked about: %v; want 403", when, err)
	}
}

// gatewayConnected reports whether the gateway's /mirrorz says its link
// is up.
func gatewayConnected(t *testing.T, g *realGateway) bool {
	t.Helper()
	code, _, _ := doRequest(t, g.p.restConfig(), http.MethodGet, mirrorzPath, "", "")
	return code == http.StatusOK
}

// asToken is a client of the gateway with token.
func asToken(t *testing.T, g *realGateway, token string) kubernetes.Interface {
	t.Helper()
	admin := g.p.restConfig()
	cs, err := kubernetes.NewForConfig(&rest.Config{Host: admin.Host, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{CAData: admin.CAData, CAFile: admin.CAFile}})
	must(t, err)
	return cs
}

// checkInClusterResumed checks that the in-cluster client went through
// the outage as a client on a cluster does: its container never
// restarted; the link's outage itself never made it list again: a list
// again only ever follows a watch that could not be resumed for its
// resourceVersion (410: a gateway restarted, and its watch cache starts
// after it, as kube-apiserver's does), never while the link was down and
// the gateway had not restarted yet, and at most once per restart; and a
// change the cluster makes after the link's return reaches it and its
// report reaches the cluster, with nothing done by the pod.
func checkInClusterResumed(t *testing.T, n *realNode, c *cluster, created, down, firstRestart time.Time, restarts int) {
	t.Helper()
	ctr, err := n.running(appsNS, inClusterPod, inClusterPod)
	if err != nil {
		t.Errorf("the in-cluster client after the outage: %v", err)
		return
	}
	raw := n.logs(ctr.ID)
	if ctr.Attempt != 0 {
		t.Errorf("the in-cluster client's container restarted %d times through the outage; want never:\n%s", ctr.Attempt, tail(raw, 8<<10))
	}
	relists, lastError := 0, ""
	for _, line := range strings.Split(raw, "\n") {
		f := strings.SplitN(line, " ", 3)
		if len(f) < 3 {
			continue
		}
		switch f[1] {
		case "WATCH-ERROR":
			lastError = f[2]
		case "RELISTED":
			relists++
			at, _ := time.Parse(time.RFC3339Nano, f[0])
			if !strings.Contains(lastError, "too old resource version") || at.After(down) && at.Before(firstRestart) {
				t.Errorf("the in-cluster client listed again at %s after %q: only a gateway's restart may make it (the link went down at %s, the gateway first restarted at %s)",
					at.Format(time.TimeOnly), lastError, down.Format(time.TimeOnly), firstRestart.Format(time.TimeOnly))
			}
			lastError = ""
		}
	}
	if relists > restarts {
		t.Errorf("the in-cluster client listed again %d times for the gateway's %d restarts:\n%s", relists, restarts, grepLines(raw, "WATCH-")+"\n"+grepLines(raw, "RELISTED"))
	}
	t.Logf("the in-cluster client listed again %d times, for the gateway's %d restarts offline (410 each: the watch cache starts at the restart)", relists, restarts)
	checkInCluster(t, n, c.cs, serviceAddress(t, c.cs, "default", "kubernetes"), created)
}

// firstReadAfterRestart kills the gateway (as a power cut would) and
// starts it again, and logs how long after the kill the in-cluster
// client's list of its ConfigMaps, with its token, is answered again.
func firstReadAfterRestart(t *testing.T, g *realGateway, token, when string) {
	t.Helper()
	at := time.Now()
	g.restart(g.bin, true)
	cs := asToken(t, g, token)
	var err error
	if !eventually(60*time.Second, func() bool {
		_, err = cs.CoreV1().ConfigMaps(appsNS).List(t.Context(), metav1.ListOptions{})
		return err == nil
	}) {
		t.Errorf("%s: the in-cluster client's list at the gateway, 60 s after its restart: %v", when, err)
		return
	}
	t.Logf("%s: the in-cluster client's first read was answered %s after the gateway was killed and started again", when, time.Since(at).Round(10*time.Millisecond))
}
