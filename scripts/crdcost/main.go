// Command crdcost measures what serving custom resources costs a built
// kubestore binary, as separate processes: idle memory with
// --custom-resources=true and false, and memory with N custom objects of
// 1 KiB beside the same number of ConfigMaps of 1 KiB. Each reading gives
// the RSS and the live heap after a forced garbage collection.
//
//	go run ./scripts/crdcost -bin bin/kubestore [-objects 10000] [-idle 35s] [-serve-arg=--memory-limit=128Mi]
package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

func main() {
	bin := flag.String("bin", "bin/kubestore", "kubestore binary to measure")
	objects := flag.Int("objects", 10000, "custom objects (and ConfigMaps) of 1 KiB to create")
	idle := flag.Duration("idle", 35*time.Second, "wait after start before the idle reading (the server releases start-up memory after 10s)")
	settle := flag.Duration("settle", 15*time.Second, "wait after the loads before a reading")
	flag.StringVar(&profileDir, "profile-dir", "", "write a heap profile of each reading here")
	flag.Func("serve-arg", "extra argument of every server, e.g. --memory-limit=128Mi (repeatable)", func(s string) error {
		serveArgs = append(serveArgs, s)
		return nil
	})
	flag.Parse()
	if err := run(*bin, *objects, *idle, *settle); err != nil {
		fmt.Fprintln(os.Stderr, "crdcost:", err)
		os.Exit(1)
	}
}

func run(bin string, objects int, idle, settle time.Duration) error {
	ctx := context.Background()
	for _, on := range []bool{false, true} {
		p, err := start(bin, fmt.Sprintf("--custom-resources=%v", on))
		if err != nil {
			return err
		}
		time.Sleep(idle)
		m, err := readMem(p.cmd.Process.Pid)
		if err != nil {
			p.stop()
			return err
		}
		heap, err := liveHeap(ctx, p.cfg, fmt.Sprintf("idle-custom-resources-%v", on))
		p.stop()
		if err != nil {
			return err
		}
		fmt.Printf("idle after %s, --custom-resources=%-5v  %s, %s\n", idle, on, m, heap)
	}

	p, err := start(bin)
	if err != nil {
		return err
	}
	defer p.stop()
	time.Sleep(idle)
	base, err := readMem(p.cmd.Process.Pid)
	if err != nil {
		return err
	}
	fmt.Printf("idle, fresh server                         %s\n", base)

	if err := createCRD(ctx, p.cfg); err != nil {
		return err
	}
	start := time.Now()
	if err := createDevices(ctx, p.cfg, objects); err != nil {
		return err
	}
	took := time.Since(start)
	if err := listAll(ctx, p.cfg, devices); err != nil {
		return err
	}
	time.Sleep(settle)
	withCRs, err := readMem(p.cmd.Process.Pid)
	if err != nil {
		return err
	}
	heap, err := liveHeap(ctx, p.cfg, "custom-objects")
	if err != nil {
		return err
	}
	fmt.Printf("%d custom objects of 1 KiB (%.0f creates/s) %s, %s\n", objects, float64(objects)/took.Seconds(), withCRs, heap)

	start = time.Now()
	if err := createConfigMaps(ctx, p.cfg, objects); err != nil {
		return err
	}
	took = time.Since(start)
	if err := listAll(ctx, p.cfg, corev1.SchemeGroupVersion.WithResource("configmaps")); err != nil {
		return err
	}
	time.Sleep(settle)
	withCMs, err := readMem(p.cmd.Process.Pid)
	if err != nil {
		return err
	}
	heap, err = liveHeap(ctx, p.cfg, "custom-objects-and-configmaps")
	if err != nil {
		return err
	}
	fmt.Printf("+ %d ConfigMaps of 1 KiB (%.0f creates/s)   %s, %s\n", objects, float64(objects)/took.Seconds(), withCMs, heap)
	fmt.Printf("per object: custom %.2f KiB RSS (%.2f KiB anon), ConfigMap %.2f KiB RSS (%.2f KiB anon)\n",
		float64(withCRs.rss-base.rss)/1024/float64(objects), float64(withCRs.anon-base.anon)/1024/float64(objects),
		float64(withCMs.rss-withCRs.rss)/1024/float64(objects), float64(withCMs.anon-withCRs.anon)/1024/float64(objects))
	return nil
}

var (
	profileDir string
	serveArgs  []string
)

// liveHeap forces a garbage collection and returns the heap left
// (runtime.MemStats.HeapAlloc), saving the heap profile as name when asked.
func liveHeap(ctx context.Context, cfg *rest.Config, name string) (string, error) {
	rc := kubernetes.NewForConfigOrDie(cfg).CoreV1().RESTClient()
	if profileDir != "" {
		prof, err := rc.Get().AbsPath("/debug/pprof/heap").Param("gc", "1").DoRaw(ctx)
		if err != nil {
			return "", err
		}
		if err := os.WriteFile(filepath.Join(profileDir, name+".pb.gz"), prof, 0o644); err != nil {
			return "", err
		}
	}
	text, err := rc.Get().AbsPath("/debug/pprof/heap").Param("gc", "1").Param("debug", "1").DoRaw(ctx)
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(text), "\n") {
		if v, ok := strings.CutPrefix(line, "# HeapAlloc = "); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return "", err
			}
			return fmt.Sprintf("live heap %6.1f MiB", float64(n)/(1<<20)), nil
		}
	}
	return "", fmt.Errorf("no HeapAlloc in the heap profile")
}

var devices = schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "devices"}

const namespace = "cost"

func createCRD(ctx context.Context, cfg *rest.Config) error {
	var s apiextensionsv1.JSONSchemaProps
	if err := json.Unmarshal([]byte(`{"type":"object","properties":{"spec":{"type":"object","properties":{
		"model":{"type":"string"},"payload":{"type":"string"}}}}}`), &s); err != nil {
		return err
	}
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "devices.example.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "example.com", Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "devices", Singular: "device", Kind: "Device", ListKind: "DeviceList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &s}}},
		},
	}
	if _, err := apiextensionsclient.NewForConfigOrDie(cfg).ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd, metav1.CreateOptions{}); err != nil {
		return err
	}
	if _, err := kubernetes.NewForConfigOrDie(cfg).CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	client := dynamic.NewForConfigOrDie(cfg).Resource(devices).Namespace(namespace)
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if _, err := client.List(ctx, metav1.ListOptions{Limit: 1}); err == nil {
			return nil
		}
	}
	return fmt.Errorf("devices not served within 30s")
}

// payload is 1 KiB of pseudo-random hex, different for each object.
func payload(i int) string {
	r := rand.New(rand.NewPCG(uint64(i), 7))
	const hex = "0123456789abcdef"
	b := make([]byte, 1024)
	for k := range b {
		b[k] = hex[r.IntN(16)]
	}
	return string(b)
}

// parallel runs create(i) for i in [0,n) on 8 workers.
func parallel(n int, create func(i int) error) error {
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	next := make(chan int)
	for range 8 {
		wg.Go(func() {
			for i := range next {
				if err := create(i); err != nil {
					select {
					case errs <- err:
					default:
					}
				}
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	select {
	case err := <-errs:
		return err
	default:
		return nil
	}
}

func createDevices(ctx context.Context, cfg *rest.Config, n int) error {
	client := dynamic.NewForConfigOrDie(cfg).Resource(devices).Namespace(namespace)
	return parallel(n, func(i int) error {
		obj := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "example.com/v1", "kind": "Device",
			"metadata": map[string]any{"name": fmt.Sprintf("device-%05d", i), "labels": map[string]any{"shard": strconv.Itoa(i % 10)}},
			"spec":     map[string]any{"model": "gw-100", "payload": payload(i)},
		}}
		_, err := client.Create(ctx, obj, metav1.CreateOptions{})
		return err
	})
}

func createConfigMaps(ctx context.Context, cfg *rest.Config, n int) error {
	client := kubernetes.NewForConfigOrDie(cfg).CoreV1().ConfigMaps(namespace)
	return parallel(n, func(i int) error {
		_, err := client.Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%05d", i), Labels: map[string]string{"shard": strconv.Itoa(i % 10)}},
			Data:       map[string]string{"payload": payload(i)},
		}, metav1.CreateOptions{})
		return err
	})
}

func listAll(ctx context.Context, cfg *rest.Config, gvr schema.GroupVersionResource) error {
	_, err := dynamic.NewForConfigOrDie(cfg).Resource(gvr).Namespace(namespace).List(ctx, metav1.ListOptions{})
	return err
}

type proc struct {
	cmd  *exec.Cmd
	dir  string
	cfg  *rest.Config
	done chan struct{}
}

func start(bin string, args ...string) (*proc, error) {
	dir, err := os.MkdirTemp("", "crdcost")
	if err != nil {
		return nil, err
	}
	args = append(append([]string{"--data-dir", dir, "--secure-port", "0", "--profiling"}, serveArgs...), args...)
	cmd := exec.Command(bin, args...)
	log, err := os.Create(filepath.Join(dir, "log"))
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &proc{cmd: cmd, dir: dir, done: make(chan struct{})}
	go func() { cmd.Wait(); log.Close(); close(p.done) }()
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	kubeconfig := filepath.Join(dir, "admin.kubeconfig")
	for deadline := time.Now().Add(120 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
		if err != nil {
			continue
		}
		resp, err := hc.Get(cfg.Host + "/readyz")
		if err != nil {
			continue
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			cfg.QPS, cfg.Burst = -1, 0
			p.cfg = cfg
			return p, nil
		}
	}
	p.stop()
	return nil, fmt.Errorf("kubestore not ready within 120s (log in %s)", dir)
}

func (p *proc) stop() {
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(40 * time.Second):
		p.cmd.Process.Kill()
		<-p.done
	}
	os.RemoveAll(p.dir)
}

type mem struct{ rss, anon, file int64 }

func (m mem) String() string {
	return fmt.Sprintf("RSS %6.1f MiB (anon %6.1f, file %5.1f)", float64(m.rss)/(1<<20), float64(m.anon)/(1<<20), float64(m.file)/(1<<20))
}

func readMem(pid int) (mem, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return mem{}, err
	}
	defer f.Close()
	var m mem
	fields := map[string]*int64{"VmRSS:": &m.rss, "RssAnon:": &m.anon, "RssFile:": &m.file}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		parts := strings.Fields(sc.Text())
		if len(parts) != 3 {
			continue
		}
		if p, ok := fields[parts[0]]; ok {
			n, err := strconv.ParseInt(parts[1], 10, 64)
			if err != nil {
				return mem{}, err
			}
			*p = n << 10
		}
	}
	return m, sc.Err()
}
