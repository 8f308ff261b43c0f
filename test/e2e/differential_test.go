package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"
)

// knownDifferences are the cases of testdata/differential/cases.yaml whose
// answer from kubestore differs from kube-apiserver's, each with the reason,
// a true statement about kubestore. docs/REGISTRY-DIFFERENCES.md lists the
// same lines; TestRegistryAgainstKubeAPIServer fails on a difference not
// listed here and on a listed one that no longer differs.
var knownDifferences = map[string]string{
	// kubestore accepts what kube-apiserver refuses, or answers another code.
	// What kubestore does not serve.
	"pod/priority-class-invalid": "kubestore serves no PriorityClasses and has no Priority admission: kube-apiserver refuses a pod naming an unknown class (403) before validation, kubestore accepts it without checking the class name",
	// Both refuse, with the same code and reason, naming other fields.
	"configmap/data-key-duplicated-in-binary": "kubestore names the cause binaryData[key], kube-apiserver data[key]",
	"namespace/finalizer-invalid":             "kubestore names the cause spec.finalizers[0], kube-apiserver spec.finalizers",
	"namespace/finalizer-unqualified":         "kubestore names the cause spec.finalizers[0], kube-apiserver spec.finalizers",
	"pod/init-container-name-clash":           "kubestore names the duplicate spec.containers[0].name, kube-apiserver spec.initContainers[0].name",
	"service/cluster-ip-invalid":              "kubestore names both spec.clusterIP and spec.clusterIPs[0], kube-apiserver only spec.clusterIPs[0]",
	"service/cluster-ip-change":               "kubestore names the cause spec.clusterIP, kube-apiserver spec.clusterIPs[0]",
	"node/pod-cidr-invalid":                   "kubestore names both spec.podCIDR and spec.podCIDRs[0], kube-apiserver only spec.podCIDRs[0]",
	"node/taint-effect-invalid":               "kubestore names the cause spec.taints[0].effect, kube-apiserver metadata.taints[0].effect (upstream's path)",
	"node/taint-effect-missing":               "kubestore names the cause spec.taints[0].effect, kube-apiserver metadata.taints[0].effect (upstream's path)",
	"node/taint-key-invalid":                  "kubestore names the cause spec.taints[0].key, kube-apiserver metadata.taints[0].key (upstream's path)",
	"node/taint-value-invalid":                "kubestore names the cause spec.taints[0].value, kube-apiserver metadata.taints[0].value (upstream's path)",
	"node/taints-duplicated":                  "kubestore names the cause spec.taints[1], kube-apiserver metadata.taints[1] (upstream's path)",
	"eventv1/reporting-controller-missing":    "kubestore names the cause reportingComponent (the core/v1 field), kube-apiserver reportingController (the events.k8s.io/v1 field)",
	"endpointslice/address-ipv6-in-ipv4":      "kubestore names the cause endpoints[0].addresses[0], kube-apiserver endpoints[0].addresses",
	"subjectaccessreview/no-attributes":       "kubestore names the cause spec.resourceAttributes, kube-apiserver spec",
	"subjectaccessreview/both-attributes":     "kubestore names the cause spec.nonResourceAttributes, kube-apiserver spec",
	"selfsubjectaccessreview/no-attributes":   "kubestore names the cause spec.resourceAttributes, kube-apiserver spec",
	"selfsubjectaccessreview/both-attributes": "kubestore names the cause spec.nonResourceAttributes, kube-apiserver spec",
}

// differentialDoc is the documentation listing knownDifferences, one
// "- `case`: reason" line each.
const differentialDoc = "../../docs/REGISTRY-DIFFERENCES.md"

// diffKind is one kind of testdata/differential/cases.yaml: where it is
// created, a valid object (each case names it diff-<kind>-<n> unless it has
// a name; reviews stay nameless), and the cases, each a JSON merge patch
// (RFC 7386) of the valid object.
type diffKind struct {
	Kind string `json:"kind"`
	// Path is the collection URL; objects are updated at Path/name.
	Path string `json:"path"`
	// NoDryRun: the kind stores nothing (the reviews), so a create is
	// sent as is.
	NoDryRun bool           `json:"noDryRun"`
	Valid    map[string]any `json:"valid"`
	Cases    []diffCase     `json:"cases"`
}

// diffCase is a create of the valid object patched by Patch, or, when
// Update is set, a create of it (for real) then a dry-run update of what
// the server returned, patched by Update.
type diffCase struct {
	Name   string         `json:"name"`
	Patch  map[string]any `json:"patch"`
	Update map[string]any `json:"update"`
}

// diffOutcome is a server's answer to a case: its HTTP code and, for a
// refusal, the Status reason and the sorted field paths of its causes.
type diffOutcome struct {
	code    int
	reason  string
	fields  []string
	message string
}

func (o diffOutcome) String() string {
	if o.code/100 == 2 {
		return fmt.Sprintf("%d accepted", o.code)
	}
	return fmt.Sprintf("%d %s [%s]", o.code, o.reason, strings.Join(o.fields, " "))
}

// TestRegistryAgainstKubeAPIServer sends the cases of
// testdata/differential/cases.yaml, a valid object and invalid ones of
// every kind kubestore serves (many from upstream's validation tests), to
// kube-apiserver 1.37 and to kubestore, and compares whether each is
// accepted, the HTTP code, the Status reason and the field paths of the
// Status causes.
func TestRegistryAgainstKubeAPIServer(t *testing.T) {
	releaseOnly(t)
	kinds := loadDiffKinds(t)
	upstreamBinary(t, "kube-apiserver") // skips without the upstream binaries
	// kubestore starts while kube-apiserver does; same Service range.
	ks := launch(t, binary(t), nil, shortTempDir(t), "--service-cluster-ip-range", "10.96.0.0/24")
	c := startCluster(t)
	ks.waitReady()
	servers := []*rest.Config{ks.restConfig(), c.rest}
	clients := make([]*http.Client, len(servers))
	for i, cfg := range servers {
		hc, err := rest.HTTPClientFor(cfg)
		must(t, err)
		clients[i] = hc
	}

	type row struct{ name, kubestore, upstream, known string }
	var diffs []row
	cases, agree, known := 0, 0, 0
	seen := map[string]bool{}
	perKind := map[string]int{}
	for _, k := range kinds {
		for i, dc := range append([]diffCase{{Name: "valid"}}, k.Cases...) {
			name := strings.ToLower(k.Kind) + "/" + dc.Name
			if seen[name] {
				t.Fatalf("case %s is twice in the cases", name)
			}
			seen[name] = true
			cases++
			perKind[k.Kind]++
			obj := deepCopyJSON(k.Valid)
			if !k.NoDryRun {
				setName(obj, fmt.Sprintf("diff-%s-%d", strings.ToLower(k.Kind), i))
			}
			obj = mergePatch(obj, dc.Patch).(map[string]any)
			var got [2]diffOutcome
			var wg sync.WaitGroup
			for s := range servers {
				wg.Go(func() { got[s] = runDiffCase(t, servers[s], clients[s], k, obj, dc.Update) })
			}
			wg.Wait()
			reason, listed := knownDifferences[name]
			switch {
			case got[0].String() == got[1].String() && listed:
				t.Errorf("%s: listed as a known difference (%s), but both servers answer %s", name, reason, got[0])
			case got[0].String() == got[1].String():
				agree++
			case listed:
				known++
				diffs = append(diffs, row{name, got[0].String(), got[1].String(), reason})
			default:
				diffs = append(diffs, row{name, got[0].String(), got[1].String(), ""})
				t.Errorf("%s: kubestore answers %s, kube-apiserver %s\n  kubestore: %s\n  kube-apiserver: %s",
					name, got[0], got[1], got[0].message, got[1].message)
			}
		}
	}
	n, a := connectCases(t, servers, clients)
	cases, agree = cases+n, agree+a
	n, a = kubernetesServiceCases(t, servers, clients)
	cases, agree = cases+n, agree+a
	n, a = projectedVolumeCases(t, servers, clients)
	cases, agree = cases+n, agree+a
	for name := range knownDifferences {
		if !seen[name] {
			t.Errorf("%s: listed as a known difference, but no such case", name)
		}
	}
	checkDifferentialDoc(t)

	var b strings.Builder
	fmt.Fprintf(&b, "%-55s %-45s %-45s %s\n", "CASE", "KUBESTORE", "KUBE-APISERVER", "KNOWN")
	for _, r := range diffs {
		known := "NOT LISTED"
		if r.known != "" {
			known = r.known
		}
		fmt.Fprintf(&b, "%-55s %-45s %-45s %s\n", r.name, r.kubestore, r.upstream, known)
	}
	t.Logf("differences:\n%s", b.String())
	var per []string
	for _, k := range kinds {
		per = append(per, fmt.Sprintf("%s %d", k.Kind, perKind[k.Kind]))
	}
	t.Logf("cases per kind: %s", strings.Join(per, ", "))
	t.Logf("cases: %d, agreeing: %d, known differences: %d, unlisted differences: %d", cases, agree, known, len(diffs)-known)
}

// diffRepeat is "$repeat(s,n)" inside a string of the cases: s n times, for
// values too long to write out.
var diffRepeat = regexp.MustCompile(`\$repeat\(([^,)]*),(\d+)\)`)

func loadDiffKinds(t *testing.T) []diffKind {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "differential", "cases.yaml"))
	must(t, err)
	var kinds []diffKind
	if err := yaml.UnmarshalStrict(data, &kinds); err != nil {
		t.Fatalf("cases.yaml: %v", err)
	}
	for i := range kinds {
		kinds[i].Valid = expandRepeat(kinds[i].Valid).(map[string]any)
		for j := range kinds[i].Cases {
			c := &kinds[i].Cases[j]
			if c.Patch != nil {
				c.Patch = expandRepeat(c.Patch).(map[string]any)
			}
			if c.Update != nil {
				c.Update = expandRepeat(c.Update).(map[string]any)
			}
		}
	}
	return kinds
}

// expandRepeat expands $repeat in the strings and map keys of v.
func expandRepeat(v any) any {
	expand := func(s string) string {
		return diffRepeat.ReplaceAllStringFunc(s, func(m string) string {
			sub := diffRepeat.FindStringSubmatch(m)
			n, _ := strconv.Atoi(sub[2])
			return strings.Repeat(sub[1], n)
		})
	}
	switch v := v.(type) {
	case string:
		return expand(v)
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[expand(k)] = expandRepeat(e)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = expandRepeat(e)
		}
		return out
	}
	return v
}

// runDiffCase sends one case to a server: a dry-run create of obj or,
// with update set, a create then a dry-run update.
func runDiffCase(t *testing.T, cfg *rest.Config, hc *http.Client, k diffKind, obj, update map[string]any) diffOutcome {
	dryRun := "?dryRun=All"
	if k.NoDryRun {
		dryRun = ""
	}
	if update == nil {
		return sendDiff(t, cfg, hc, http.MethodPost, k.Path+dryRun, obj)
	}
	created := sendDiff(t, cfg, hc, http.MethodPost, k.Path, obj)
	if created.code/100 != 2 {
		created.reason = "create: " + created.reason
		return created
	}
	var stored map[string]any
	if err := json.Unmarshal([]byte(created.message), &stored); err != nil {
		return diffOutcome{reason: "create: decoding the answer: " + err.Error()}
	}
	name := stored["metadata"].(map[string]any)["name"].(string)
	// A controller may write the object between the create and the
	// update (a CRD's status): take its latest version and try again.
	for try := 0; ; try++ {
		updated := mergePatch(stored, update).(map[string]any)
		o := sendDiff(t, cfg, hc, http.MethodPut, k.Path+"/"+name+dryRun, updated)
		if o.code != http.StatusConflict || try == 3 {
			return o
		}
		latest := sendDiff(t, cfg, hc, http.MethodGet, k.Path+"/"+name, nil)
		if latest.code != http.StatusOK || json.Unmarshal([]byte(latest.message), &stored) != nil {
			return o
		}
	}
}

// send makes one request; the diffOutcome's message is the body.
func sendDiff(t *testing.T, cfg *rest.Config, hc *http.Client, method, path string, obj map[string]any) diffOutcome {
	var body []byte
	if obj != nil {
		var err error
		if body, err = json.Marshal(obj); err != nil {
			return diffOutcome{reason: "encoding: " + err.Error()}
		}
	}
	req, err := http.NewRequestWithContext(t.Context(), method, strings.TrimSuffix(cfg.Host, "/")+path, bytes.NewReader(body))
	if err != nil {
		return diffOutcome{reason: "request: " + err.Error()}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	var resp *http.Response
	// A fresh kube-apiserver may still be settling (429 or 5xx): retry.
	for try := 0; ; try++ {
		resp, err = hc.Do(req)
		if err != nil {
			return diffOutcome{reason: "transport: " + err.Error()}
		}
		if (resp.StatusCode != http.StatusTooManyRequests && resp.StatusCode < 500) || try == 5 {
			break
		}
		resp.Body.Close()
		time.Sleep(time.Second)
		req.Body = io.NopCloser(bytes.NewReader(body))
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return diffOutcome{reason: "reading the answer: " + err.Error()}
	}
	o := diffOutcome{code: resp.StatusCode, message: string(data)}
	if o.code/100 == 2 {
		return o
	}
	var status struct {
		Reason  string `json:"reason"`
		Message string `json:"message"`
		Details struct {
			Causes []struct {
				Field string `json:"field"`
			} `json:"causes"`
		} `json:"details"`
	}
	if json.Unmarshal(data, &status) == nil {
		o.reason, o.message = status.Reason, status.Message
		for _, c := range status.Details.Causes {
			if c.Field != "" && !slices.Contains(o.fields, c.Field) {
				o.fields = append(o.fields, c.Field)
			}
		}
		slices.Sort(o.fields)
	}
	return o
}

// mergePatch applies a JSON merge patch (RFC 7386) to v.
func mergePatch(v any, patch any) any {
	p, ok := patch.(map[string]any)
	if !ok {
		return patch
	}
	m, ok := v.(map[string]any)
	if !ok {
		m = map[string]any{}
	}
	for k, pv := range p {
		if pv == nil {
			delete(m, k)
			continue
		}
		m[k] = mergePatch(m[k], pv)
	}
	return m
}

func deepCopyJSON(m map[string]any) map[string]any {
	data, err := json.Marshal(m)
	if err != nil {
		panic(err)
	}
	var out map[string]any
	if err := json.Unmarshal(data, &out); err != nil {
		panic(err)
	}
	return out
}

func setName(obj map[string]any, name string) {
	md, _ := obj["metadata"].(map[string]any)
	if md == nil {
		md = map[string]any{}
		obj["metadata"] = md
	}
	if md["name"] == nil {
		md["name"] = name
	}
}

// checkDifferentialDoc checks that docs/REGISTRY-DIFFERENCES.md lists
// exactly knownDifferences.
func checkDifferentialDoc(t *testing.T) {
	t.Helper()
	data, err := os.ReadFile(differentialDoc)
	must(t, err)
	line := regexp.MustCompile("^- `([^`]+)`: (.*)$")
	doc := map[string]string{}
	for _, l := range strings.Split(string(data), "\n") {
		if m := line.FindStringSubmatch(l); m != nil {
			doc[m[1]] = m[2]
		}
	}
	if d := mapDiff(knownDifferences, doc, 20); d != "" {
		t.Errorf("%s does not list knownDifferences (want: the map, got: the file):\n%s", differentialDoc, d)
	}
}

// connectCases sends the requests of the subresources that reach a
// kubelet (pods/log, exec, portforward, nodes/proxy) where no kubelet can
// be reached: an unknown pod, an unknown or unnamed container, bad log
// options, a pod on no node, a node without an address. Both servers must
// answer each alike: no known difference is allowed here. The count of
// cases and of agreeing ones.
func connectCases(t *testing.T, servers []*rest.Config, clients []*http.Client) (cases, agree int) {
	t.Helper()
	const pods = "/api/v1/namespaces/default/pods"
	pod := func(name, node string, containers ...string) map[string]any {
		var cs []any
		for _, c := range containers {
			cs = append(cs, map[string]any{"name": c, "image": "busybox"})
		}
		spec := map[string]any{"containers": cs, "automountServiceAccountToken": false}
		if node != "" {
			spec["nodeName"] = node
		}
		return map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": map[string]any{"name": name}, "spec": spec}
	}
	for s := range servers {
		for _, c := range []struct {
			path string
			obj  map[string]any
		}{
			{"/api/v1/nodes", map[string]any{"apiVersion": "v1", "kind": "Node", "metadata": map[string]any{"name": "diff-bare"}}},
			{pods, pod("diff-one", "diff-bare", "c")},
			{pods, pod("diff-two", "diff-bare", "a", "b")},
			{pods, pod("diff-waiting", "", "c")},
		} {
			if o := sendDiff(t, servers[s], clients[s], http.MethodPost, c.path, c.obj); o.code/100 != 2 {
				t.Fatalf("server %d: creating %s in %s: %s %s", s, c.obj["metadata"], c.path, o, o.message)
			}
		}
	}
	for _, c := range []struct{ name, method, path string }{
		{"log/unknown-pod", http.MethodGet, pods + "/nope/log"},
		{"log/container-unnamed", http.MethodGet, pods + "/diff-two/log"},
		{"log/container-unknown", http.MethodGet, pods + "/diff-one/log?container=nope"},
		{"log/tail-lines-negative", http.MethodGet, pods + "/diff-one/log?tailLines=-1"},
		{"log/since-both", http.MethodGet, pods + "/diff-one/log?sinceSeconds=1&sinceTime=2026-01-01T00:00:00Z"},
		{"log/node-without-address", http.MethodGet, pods + "/diff-one/log"},
		{"log/pod-on-no-node", http.MethodGet, pods + "/diff-waiting/log"},
		{"exec/unknown-pod", http.MethodPost, pods + "/nope/exec?command=true&stdout=1"},
		{"exec/container-unknown", http.MethodPost, pods + "/diff-one/exec?command=true&stdout=1&container=nope"},
		{"exec/pod-on-no-node", http.MethodPost, pods + "/diff-waiting/exec?command=true&stdout=1"},
		{"exec/node-without-address", http.MethodPost, pods + "/diff-one/exec?command=true&stdout=1"},
		{"attach/container-unnamed", http.MethodPost, pods + "/diff-two/attach?stdout=1"},
		{"portforward/node-without-address", http.MethodPost, pods + "/diff-one/portforward?ports=80"},
		{"node-proxy/unknown-node", http.MethodGet, "/api/v1/nodes/nope/proxy/healthz"},
		{"node-proxy/node-without-address", http.MethodGet, "/api/v1/nodes/diff-bare/proxy/healthz"},
	} {
		cases++
		var got [2]diffOutcome
		var wg sync.WaitGroup
		for s := range servers {
			wg.Go(func() { got[s] = sendDiff(t, servers[s], clients[s], c.method, c.path, nil) })
		}
		wg.Wait()
		if got[0].String() != got[1].String() {
			t.Errorf("connect/%s: kubestore answers %s, kube-apiserver %s\n  kubestore: %s\n  kube-apiserver: %s",
				c.name, got[0], got[1], got[0].message, got[1].message)
			continue
		}
		agree++
	}
	return cases, agree
}

// kubernetesServiceCases compares the Service default/kubernetes each
// server keeps (its spec and labels, the target port being each server's
// own port) and the answer to another Service asking its address. The
// count of cases and of agreeing ones.
func kubernetesServiceCases(t *testing.T, servers []*rest.Config, clients []*http.Client) (cases, agree int) {
	t.Helper()
	const path = "/api/v1/namespaces/default/services"
	var shape [2]string
	for s, cfg := range servers {
		u, err := url.Parse(cfg.Host)
		must(t, err)
		var svc struct {
			Metadata struct {
				Labels map[string]string `json:"labels"`
			} `json:"metadata"`
			Spec map[string]any `json:"spec"`
		}
		if !eventually(15*time.Second, func() bool {
			hc := clients[s]
			resp, err := hc.Get(strings.TrimSuffix(cfg.Host, "/") + path + "/kubernetes")
			if err != nil {
				return false
			}
			defer resp.Body.Close()
			return resp.StatusCode == http.StatusOK && json.NewDecoder(resp.Body).Decode(&svc) == nil
		}) {
			t.Fatalf("server %d keeps no Service default/kubernetes", s)
		}
		for _, p := range svc.Spec["ports"].([]any) {
			if port := p.(map[string]any); fmt.Sprint(port["targetPort"]) == u.Port() {
				port["targetPort"] = "<the server's port>"
			}
		}
		b, err := json.Marshal(map[string]any{"labels": svc.Metadata.Labels, "spec": svc.Spec})
		must(t, err)
		shape[s] = string(b)
	}
	cases++
	if shape[0] != shape[1] {
		t.Errorf("kubernetes-service/shape: kubestore keeps %s, kube-apiserver %s", shape[0], shape[1])
	} else {
		agree++
	}
	squatter := map[string]any{"apiVersion": "v1", "kind": "Service", "metadata": map[string]any{"name": "diff-squatter"},
		"spec": map[string]any{"clusterIP": "10.96.0.1", "ports": []any{map[string]any{"port": 80}}}}
	var got [2]diffOutcome
	for s := range servers {
		got[s] = sendDiff(t, servers[s], clients[s], http.MethodPost, path, squatter)
	}
	cases++
	if got[0].String() != got[1].String() {
		t.Errorf("kubernetes-service/address-taken: kubestore answers %s, kube-apiserver %s\n  kubestore: %s\n  kube-apiserver: %s",
			got[0], got[1], got[0].message, got[1].message)
	} else {
		agree++
	}
	return cases, agree
}

// projectedVolumeCases compares the ServiceAccount token volume each
// server's admission gives a pod (kube-api-access-<random>: the token,
// the kube-root-ca.crt ConfigMap's ca.crt, the namespace) and its mount
// in every container, on a dry run of a pod of the default
// ServiceAccount. The count of cases and of agreeing ones.
func projectedVolumeCases(t *testing.T, servers []*rest.Config, clients []*http.Client) (cases, agree int) {
	t.Helper()
	const ns = "/api/v1/namespaces/default/"
	var shape [2]string
	for s, cfg := range servers {
		// kube-apiserver alone has no controller that creates it.
		sendDiff(t, cfg, clients[s], http.MethodPost, ns+"serviceaccounts", map[string]any{"apiVersion": "v1", "kind": "ServiceAccount", "metadata": map[string]any{"name": "default"}})
		body, err := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": map[string]any{"name": "diff-projected"},
			"spec": map[string]any{"containers": []any{map[string]any{"name": "a", "image": "busybox"}}, "initContainers": []any{map[string]any{"name": "b", "image": "busybox"}}}})
		must(t, err)
		resp, err := clients[s].Post(strings.TrimSuffix(cfg.Host, "/")+ns+"pods?dryRun=All", "application/json", bytes.NewReader(body))
		must(t, err)
		var pod struct {
			Spec struct {
				Volumes        []map[string]any `json:"volumes"`
				Containers     []map[string]any `json:"containers"`
				InitContainers []map[string]any `json:"initContainers"`
			} `json:"spec"`
		}
		err = json.NewDecoder(resp.Body).Decode(&pod)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusCreated {
			t.Fatalf("server %d: a dry run of a pod: %d, %v", s, resp.StatusCode, err)
		}
		b, err := json.Marshal(map[string]any{"volumes": pod.Spec.Volumes, "mounts": [][]any{
			{pod.Spec.Containers[0]["volumeMounts"]}, {pod.Spec.InitContainers[0]["volumeMounts"]}}})
		must(t, err)
		// The volume's name ends in 5 random characters.
		shape[s] = regexp.MustCompile(`kube-api-access-[a-z0-9]{5}`).ReplaceAllString(string(b), "kube-api-access-<random>")
	}
	cases++
	if !strings.Contains(shape[0], `"mountPath":"/var/run/secrets/kubernetes.io/serviceaccount"`) {
		t.Errorf("projected-token-volume/shape: kubestore gives no token volume: %s", shape[0])
	}
	if shape[0] != shape[1] {
		t.Errorf("projected-token-volume/shape: kubestore gives %s, kube-apiserver %s", shape[0], shape[1])
	} else {
		agree++
	}
	return cases, agree
}
