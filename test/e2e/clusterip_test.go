package e2e

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

func newService(name string) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": name}, Ports: []corev1.ServicePort{{Port: 80}}}}
}

// createServices creates n Services named prefix-i from clients
// concurrently (clients share the work).
func createServices(t *testing.T, clients []kubernetes.Interface, prefix string, n int) {
	t.Helper()
	var next = make(chan int)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for _, c := range clients {
		wg.Go(func() {
			for i := range next {
				if _, err := c.CoreV1().Services("default").Create(context.Background(), newService(fmt.Sprintf("%s-%03d", prefix, i)), metav1.CreateOptions{}); err != nil {
					errs <- err
				}
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("creating Services: %v", err)
	}
}

// clusterIPs maps each Service to its cluster IPs, failing on any IP two
// Services share or any outside cidr.
func clusterIPs(t *testing.T, c kubernetes.Interface, cidr netip.Prefix) map[string]string {
	t.Helper()
	l, err := c.CoreV1().Services("default").List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	byIP := map[string]string{}
	out := map[string]string{}
	for _, s := range l.Items {
		if s.Name == "kubernetes" {
			continue
		}
		a, err := netip.ParseAddr(s.Spec.ClusterIP)
		if err != nil || !cidr.Contains(a) || s.Spec.ClusterIPs[0] != s.Spec.ClusterIP {
			t.Errorf("Service %s has clusterIP %q (clusterIPs %v), not in %s", s.Name, s.Spec.ClusterIP, s.Spec.ClusterIPs, cidr)
			continue
		}
		if other, dup := byIP[s.Spec.ClusterIP]; dup {
			t.Errorf("Services %s and %s share %s", other, s.Name, s.Spec.ClusterIP)
		}
		byIP[s.Spec.ClusterIP] = s.Name
		out[s.Name] = s.Spec.ClusterIP
	}
	return out
}

func clientsFor(p *proc, n int) []kubernetes.Interface {
	out := make([]kubernetes.Interface, n)
	for i := range out {
		cfg := p.restConfig()
		cfg.Dial = (&net.Dialer{}).DialContext // a connection of its own
		out[i] = kubernetes.NewForConfigOrDie(cfg)
	}
	return out
}

// ClusterIPs as kube-apiserver allocates them from
// --service-cluster-ip-range: 200 Services from 16 clients at once get
// distinct IPs in range; a restart keeps them and never hands a held one
// out again; a full range refuses with upstream's error; a delete frees
// its IP for the next Service.
func TestClusterIPAllocation(t *testing.T) {
	dir := filepath.Join(shortTempDir(t), "data")
	cidr := netip.MustParsePrefix("10.0.0.0/24") // kube-apiserver's default
	p := start(t, dir)
	createServices(t, clientsFor(p, 16), "svc", 200)
	before := clusterIPs(t, p.clientset(), cidr)
	if len(before) != 200 {
		t.Fatalf("%d Services with a cluster IP, want 200", len(before))
	}

	if err := p.stop(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	p = start(t, dir)
	c := p.clientset()
	after := clusterIPs(t, c, cidr)
	if mapDiff(before, after, 5) != "" {
		t.Fatalf("cluster IPs changed across a restart: %s", mapDiff(before, after, 5))
	}
	// The /24 has 254 addresses, the first the Service default/kubernetes's:
	// fill it, from several clients.
	createServices(t, clientsFor(p, 16), "more", 53)
	full := clusterIPs(t, c, cidr)
	if len(full) != 253 {
		t.Fatalf("%d Services with an IP in a /24 besides default/kubernetes, want 253", len(full))
	}
	_, err := c.CoreV1().Services("default").Create(t.Context(), newService("one-too-many"), metav1.CreateOptions{})
	if !apierrors.IsInternalError(err) || !strings.Contains(err.Error(), "range is full") {
		t.Fatalf("a Service beyond the range: %v, want upstream's \"range is full\"", err)
	}
	freed := full["svc-007"]
	if err := c.CoreV1().Services("default").Delete(t.Context(), "svc-007", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err := c.CoreV1().Services("default").Create(t.Context(), newService("reuse"), metav1.CreateOptions{})
	if err != nil || got.Spec.ClusterIP != freed {
		t.Fatalf("after deleting svc-007 (%s): %v, IP %q", freed, err, got.Spec.ClusterIP)
	}
	// A requested IP that is taken, and one outside the range.
	taken := newService("taken")
	taken.Spec.ClusterIP = full["svc-001"]
	if _, err := c.CoreV1().Services("default").Create(t.Context(), taken, metav1.CreateOptions{}); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "already allocated") {
		t.Errorf("requesting a held IP: %v", err)
	}
	clusterIPs(t, c, cidr)
}

// Two kubestores on one etcd creating Services at the same time never
// give one IP twice: the claim is an atomic create in etcd.
func TestClusterIPTwoProcessesOneEtcd(t *testing.T) {
	dir := shortTempDir(t)
	a := start(t, filepath.Join(dir, "a"), "--service-cluster-ip-range", "10.96.0.0/25")
	b := start(t, filepath.Join(dir, "b"), "--service-cluster-ip-range", "10.96.0.0/25", "--etcd-servers", "unix://"+filepath.Join(a.dataDir, "etcd", "etcd.sock"))
	var wg sync.WaitGroup
	wg.Go(func() { createServices(t, clientsFor(a, 8), "a", 60) })
	wg.Go(func() { createServices(t, clientsFor(b, 8), "b", 60) })
	wg.Wait()
	if got := clusterIPs(t, a.clientset(), netip.MustParsePrefix("10.96.0.0/25")); len(got) != 120 {
		t.Errorf("%d Services with distinct IPs, want 120", len(got))
	}
}

// IPv6 and dual stack, with kubectl as a user would.
func TestClusterIPDualStackKubectl(t *testing.T) {
	requireKubectl(t)
	p := start(t, filepath.Join(shortTempDir(t), "data"), "--service-cluster-ip-range", "fd00:10:96::/112,10.96.0.0/24")
	p.mustKubectl("create", "service", "clusterip", "single", "--tcp=80")
	if out := p.mustKubectl("get", "service", "single", "-o", "jsonpath={.spec.ipFamilies} {.spec.ipFamilyPolicy} {.spec.clusterIP}"); !strings.HasPrefix(out, `["IPv6"] SingleStack fd00:10:96::`) {
		t.Errorf("single-stack Service on an IPv6-primary cluster: %s", out)
	}
	p.mustKubectl("apply", "-f", writeTemp(t, "apiVersion: v1\nkind: Service\nmetadata:\n  name: dual\nspec:\n  ipFamilyPolicy: RequireDualStack\n  ipFamilies: [IPv4, IPv6]\n  ports: [{port: 80}]\n"))
	out := p.mustKubectl("get", "service", "dual", "-o", "jsonpath={.spec.ipFamilies} {.spec.clusterIPs}")
	var fams, ips string
	fmt.Sscan(out, &fams, &ips)
	if fams != `["IPv4","IPv6"]` || !strings.Contains(ips, `"10.96.0.`) || !strings.Contains(ips, `"fd00:10:96::`) {
		t.Errorf("dual-stack Service: %s", out)
	}

	q := start(t, filepath.Join(shortTempDir(t), "data"))
	out, err := q.kubectl("apply", "-f", writeTemp(t, "apiVersion: v1\nkind: Service\nmetadata:\n  name: dual\nspec:\n  ipFamilyPolicy: RequireDualStack\n  ports: [{port: 80}]\n"))
	if err == nil || !strings.Contains(out, "spec.ipFamilyPolicy") || !strings.Contains(out, "not configured for dual-stack") {
		t.Errorf("RequireDualStack on a single-stack range: %v\n%s", err, out)
	}
}
