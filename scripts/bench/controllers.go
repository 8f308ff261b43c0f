package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// The controllers --controllers switches (config.Controllers); each is
// measured alone over a server that runs none.
var benchControllers = []string{
	"namespace-controller",
	"serviceaccount-controller",
	"root-ca-certificate-publisher-controller",
	"garbage-collector-controller",
	"pod-garbage-collector-controller",
	"service-cluster-ip-allocator",
	"certificatesigningrequest-signing-controller",
	"certificatesigningrequest-approving-controller",
}

// ControllersResult is the memory of one kubestore on the same small
// cluster-like data set with no controller, each controller alone, and
// all of them: what each one costs a device.
type ControllersResult struct {
	Namespaces int `json:"namespaces"`
	// Per namespace: one parent ConfigMap owning Children ConfigMaps, and
	// Services of type ClusterIP.
	Children int `json:"children"`
	Services int `json:"services"`
	// Runs are "none", each controller's name, and "all".
	Runs []ControllerRun `json:"runs"`
}

// ControllerRun is one server: its --controllers and memory once idle
// with the data.
type ControllerRun struct {
	Name        string  `json:"name"`
	Controllers string  `json:"controllers"`
	Mem         Mem     `json:"mem"`
	LoadMs      float64 `json:"loadMs"`
}

// controllers starts one fresh server per run, loads the data set, idles
// and samples its memory.
func (b *bench) controllers(ctx context.Context) error {
	r := &ControllersResult{Namespaces: b.o.ControllerNamespaces, Children: 20, Services: 4}
	b.res.Controllers = r
	runs := []ControllerRun{{Name: "none", Controllers: "-" + strings.Join(benchControllers, ",-")}}
	for _, c := range benchControllers {
		runs = append(runs, ControllerRun{Name: c, Controllers: c})
	}
	runs = append(runs, ControllerRun{Name: "all", Controllers: "*"})
	for i, run := range runs {
		dir := filepath.Join(b.root, fmt.Sprintf("controllers-%d", i))
		// A /16: the data set's Services outnumber the default /24.
		srv, _, err := b.startOn(ctx, dir, "controllers", "--controllers="+run.Controllers, "--service-cluster-ip-range=10.96.0.0/16")
		if err != nil {
			return err
		}
		start := time.Now()
		err = b.controllersLoad(ctx, srv, r)
		run.LoadMs = ms(time.Since(start))
		if err == nil {
			b.logf("controllers %s: loaded in %v; idling %v", run.Name, time.Since(start).Round(time.Millisecond), b.o.Idle)
			err = sleep(ctx, b.o.Idle)
		}
		if err == nil {
			run.Mem, err = b.memOf(srv, "controllers "+run.Name)
		}
		if serr := stopServer(srv); err == nil {
			err = serr
		}
		if err != nil {
			return fmt.Errorf("controllers %s: %w", run.Name, err)
		}
		os.RemoveAll(dir)
		r.Runs = append(r.Runs, run)
	}
	return nil
}

// controllersLoad creates the namespaces, in each a parent ConfigMap and
// its owned children, and the Services.
func (b *bench) controllersLoad(ctx context.Context, srv *server, r *ControllersResult) error {
	cs := b.clientsOf(srv, b.o.Clients)
	_, err := parallel(ctx, b.o.Clients, r.Namespaces, func(ctx context.Context, w, i int) error {
		c := cs[w].CoreV1()
		ns := fmt.Sprintf("ctl-%03d", i)
		if _, err := c.Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			return err
		}
		parent, err := c.ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "parent"}}, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		owner := []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: parent.Name, UID: parent.UID}}
		for k := range r.Children {
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("child-%02d", k), OwnerReferences: owner},
				Data: map[string]string{"payload": payload(k, 0)}}
			if _, err := c.ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
				return err
			}
		}
		for k := range r.Services {
			svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("svc-%d", k)},
				Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "x"},
					Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}}}
			if _, err := c.Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
				return err
			}
		}
		return nil
	})
	return err
}

// controllersRows are the figures of the controllers section: each
// controller's cost over the server that runs none.
func controllersRows(row func(figure, value string, t target), r *Result) {
	c := r.Controllers
	var none Mem
	for _, run := range c.Runs {
		if run.Name == "none" {
			none = run.Mem
			row("controllers: none, RSS (anonymous)", fmt.Sprintf("%s (%s)", mib(none.VmRSS), mib(none.RssAnon)), target{})
			continue
		}
		row("controllers: "+run.Name+", over none", fmt.Sprintf("RSS %+.1f MiB, anonymous %+.1f MiB", float64(run.Mem.VmRSS-none.VmRSS)/(1<<20), float64(run.Mem.RssAnon-none.RssAnon)/(1<<20)), target{})
	}
}
