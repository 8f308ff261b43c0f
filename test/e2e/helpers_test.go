package e2e

import (
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Helpers shared by the e2e suites: kubeconfigs and raw requests,
// metrics, objects to write, and small utilities.

// writeEdgeKubeconfig writes the edge's upstream kubeconfig: the
// upstream's admin kubeconfig with the server on the link, and the token
// instead of the admin certificate when given.
func writeEdgeKubeconfig(t *testing.T, upstream, linkAddr, token, path string) {
	t.Helper()
	kc, err := clientcmd.LoadFromFile(upstream)
	must(t, err)
	for _, c := range kc.Clusters {
		c.Server = "https://" + linkAddr
	}
	if token != "" {
		for name := range kc.AuthInfos {
			kc.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: token}
		}
	}
	must(t, clientcmd.WriteToFile(*kc, path))
}

func restConfigOf(t *testing.T, kubeconfig string) *rest.Config {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	must(t, err)
	cfg.QPS, cfg.Burst = -1, -1
	cfg.Timeout = 30 * time.Second
	return cfg
}

// doRequest makes one request with the config's identity and returns the
// code, header and body.
func doRequest(t *testing.T, cfg *rest.Config, method, path, contentType, body string) (int, http.Header, string) {
	t.Helper()
	hc, err := rest.HTTPClientFor(cfg)
	must(t, err)
	req, err := http.NewRequestWithContext(t.Context(), method, strings.TrimSuffix(cfg.Host, "/")+path, strings.NewReader(body))
	must(t, err)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	req.Header.Set("Accept", "application/json, */*")
	resp, err := hc.Do(req)
	if err != nil {
		return 0, nil, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

// metricsText is a Prometheus text exposition.
type metricsText string

// value sums the samples of name whose labels include the given
// label/value pairs, and reports whether there was one.
func (m metricsText) value(name string, labelPairs ...string) (float64, bool) {
	var sum float64
	found := false
	for _, line := range strings.Split(string(m), "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		sp := strings.LastIndexByte(line, ' ')
		if sp < 0 {
			continue
		}
		series, val := line[:sp], line[sp+1:]
		n, labels := series, ""
		if i := strings.IndexByte(series, '{'); i >= 0 {
			n, labels = series[:i], strings.TrimSuffix(series[i+1:], "}")
		}
		if n != name {
			continue
		}
		ok := true
		for i := 0; i+1 < len(labelPairs); i += 2 {
			if !strings.Contains(","+labels+",", fmt.Sprintf(",%s=%q,", labelPairs[i], labelPairs[i+1])) {
				ok = false
			}
		}
		if !ok {
			continue
		}
		f, err := strconv.ParseFloat(val, 64)
		if err != nil {
			continue
		}
		sum += f
		found = true
	}
	return sum, found
}

// podReferences are the namespace/names of the configmaps or secrets a
// pod references, as the kubelet reads them.
func podReferences(p *corev1.Pod, resource string) []string {
	var names []string
	add := func(n string) {
		if n != "" {
			names = append(names, p.Namespace+"/"+n)
		}
	}
	for _, v := range p.Spec.Volumes {
		switch {
		case resource == "configmaps" && v.ConfigMap != nil:
			add(v.ConfigMap.Name)
		case resource == "secrets" && v.Secret != nil:
			add(v.Secret.SecretName)
		case v.Projected != nil:
			for _, s := range v.Projected.Sources {
				if resource == "configmaps" && s.ConfigMap != nil {
					add(s.ConfigMap.Name)
				}
				if resource == "secrets" && s.Secret != nil {
					add(s.Secret.Name)
				}
			}
		}
	}
	containers := append(append([]corev1.Container{}, p.Spec.InitContainers...), p.Spec.Containers...)
	for _, c := range containers {
		for _, e := range c.EnvFrom {
			if resource == "configmaps" && e.ConfigMapRef != nil {
				add(e.ConfigMapRef.Name)
			}
			if resource == "secrets" && e.SecretRef != nil {
				add(e.SecretRef.Name)
			}
		}
		for _, e := range c.Env {
			if e.ValueFrom == nil {
				continue
			}
			if resource == "configmaps" && e.ValueFrom.ConfigMapKeyRef != nil {
				add(e.ValueFrom.ConfigMapKeyRef.Name)
			}
			if resource == "secrets" && e.ValueFrom.SecretKeyRef != nil {
				add(e.ValueFrom.SecretKeyRef.Name)
			}
		}
	}
	if resource == "secrets" {
		for _, s := range p.Spec.ImagePullSecrets {
			add(s.Name)
		}
	}
	return names
}

// kinded sets an object's apiVersion and kind, as clients send them.
func kinded[T interface {
	runtime.Object
	*corev1.ConfigMap | *corev1.Pod
}](obj T, kind string) T {
	obj.GetObjectKind().SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind(kind))
	return obj
}

func cm(ns, name, v string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"test": "mirror"}}, Data: map[string]string{"v": v}}
}

func secret(ns, name, v string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Data: map[string][]byte{"v": []byte(v)}}
}

func pod(ns, name, node string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}}}
}

func service(ns, name, mirror string) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"mirror": mirror}},
		Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Ports: []corev1.ServicePort{{Name: "http", Port: 80}}, Selector: map[string]string{"app": name}}}
}

func widget(ns, name string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.com/v1", "kind": "Widget",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec":     map[string]any{"size": int64(1)},
	}}
}

func key(u *unstructured.Unstructured) string {
	if u.GetNamespace() == "" {
		return u.GetName()
	}
	return u.GetNamespace() + "/" + u.GetName()
}

func names(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for n := range m {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func mirrorAnnotations(ann map[string]string) string {
	var out []string
	for k := range ann {
		if strings.HasPrefix(k, "mirror.kubestore.io/") {
			out = append(out, k)
		}
	}
	return strings.Join(out, ",")
}

func describeCM(c *corev1.ConfigMap) string {
	if c == nil {
		return "<nil>"
	}
	return fmt.Sprintf("%s/%s uid=%s rv=%s labels=%v annotations=%v data=%v", c.Namespace, c.Name, c.UID, c.ResourceVersion, c.Labels, c.Annotations, c.Data)
}

func slicesContain(s []string, v string) bool {
	for _, e := range s {
		if e == v {
			return true
		}
	}
	return false
}

// parallel runs f(0..n-1) on workers goroutines and fails on the first
// error.
func parallel(t *testing.T, n, workers int, f func(i int) error) {
	t.Helper()
	var next atomic.Int64
	errs := make(chan error, workers)
	for range workers {
		go func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					errs <- nil
					return
				}
				if err := f(i); err != nil {
					errs <- fmt.Errorf("item %d: %w", i, err)
					return
				}
			}
		}()
	}
	var first error
	for range workers {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	if first != nil {
		t.Fatal(first)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func ptr[T any](v T) *T { return &v }
