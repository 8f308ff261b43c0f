package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// The cgroup section (issue 39): kubestore, and kube-apiserver + etcd
// beside it, each inside a memory cgroup of a gateway's size, take the
// gateway set ×1 and then ×5 with a LIST of everything after each; a run
// fits when every request is answered within the normal timeout and
// nothing is OOM-killed. The cgroup counts everything a device would: the
// heap, the binary's pages and the page cache of the data.

// CgroupResult is every limit tried, for kubestore and for the peer.
type CgroupResult struct {
	Kubestore []CgroupRun `json:"kubestore"`
	Peer      []CgroupRun `json:"peer,omitempty"`
	// Skipped says why the section did not run (no memory cgroup).
	Skipped string `json:"skipped,omitempty"`
}

// CgroupRun is one limit: what each scale of the gateway set did in it.
type CgroupRun struct {
	LimitMiB int          `json:"limitMiB"`
	Ready    string       `json:"ready"` // "" once ready, else why not
	Steps    []CgroupStep `json:"steps"`
	// PeakBytes is the cgroup's own peak usage; OOMKills its OOM kills.
	PeakBytes int64 `json:"peakBytes"`
	OOMKills  int   `json:"oomKills"`
}

// CgroupStep is one scale of the gateway set loaded and listed.
type CgroupStep struct {
	Scale int `json:"scale"`
	// Kubectl marks the step after the first scale: kubectl's OpenAPI
	// reads, then one create and the LIST of everything (kubectlStep).
	Kubectl bool    `json:"kubectl,omitempty"`
	Outcome string  `json:"outcome"` // "fits", or what failed first
	LoadMs  float64 `json:"loadMs"`
	ListMs  float64 `json:"listMs"`
	// UsageBytes is the cgroup's usage after the step.
	UsageBytes int64 `json:"usageBytes"`
}

// fits reports whether the step met its target: every request answered.
func (s CgroupStep) fits() bool { return s.Outcome == "fits" }

// cgroupRequestTimeout is a request's normal timeout (kubectl's and
// client-go's default is none; kube-apiserver's is 60 s).
const cgroupRequestTimeout = 60 * time.Second

// memCgroup is a memory cgroup made for one run, v2 or v1.
type memCgroup struct {
	dir string
	v2  bool
}

// cgroupRoot is where memory cgroups are made: the unified hierarchy when
// it has the memory controller, else v1's memory hierarchy.
func cgroupRoot() (string, bool, error) {
	for _, root := range []string{"/sys/fs/cgroup", "/sys/fs/cgroup/unified"} {
		if data, err := os.ReadFile(filepath.Join(root, "cgroup.controllers")); err == nil && strings.Contains(" "+string(data)+" ", " memory ") {
			return root, true, nil
		}
	}
	if _, err := os.Stat("/sys/fs/cgroup/memory/memory.limit_in_bytes"); err == nil {
		return "/sys/fs/cgroup/memory", false, nil
	}
	return "", false, errors.New("no memory cgroup controller under /sys/fs/cgroup")
}

// newMemCgroup makes a cgroup limited to limit bytes, swap included.
func newMemCgroup(name string, limit int64) (*memCgroup, error) {
	root, v2, err := cgroupRoot()
	if err != nil {
		return nil, err
	}
	cg := &memCgroup{dir: filepath.Join(root, name), v2: v2}
	cg.remove()
	if err := os.Mkdir(cg.dir, 0o755); err != nil {
		return nil, fmt.Errorf("making cgroup %s: %w", cg.dir, err)
	}
	files := [][2]string{{"memory.limit_in_bytes", strconv.FormatInt(limit, 10)}}
	if v2 {
		files = [][2]string{{"memory.max", strconv.FormatInt(limit, 10)}, {"memory.swap.max", "0"}}
	}
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(cg.dir, f[0]), []byte(f[1]), 0o644); err != nil {
			cg.remove()
			return nil, fmt.Errorf("cgroup %s: %w", f[0], err)
		}
	}
	if !v2 {
		// Without swap accounting the file is absent: there is no swap to
		// limit then.
		os.WriteFile(filepath.Join(cg.dir, "memory.memsw.limit_in_bytes"), []byte(strconv.FormatInt(limit, 10)), 0o644) //nolint:errcheck
	}
	return cg, nil
}

// wrap is the command line that puts a process into the cgroup before it
// execs: the shell writes its own pid, then becomes the program.
func (cg *memCgroup) wrap() []string {
	return []string{"/bin/sh", "-c", `echo $$ > "$0" && exec "$@"`, filepath.Join(cg.dir, "cgroup.procs")}
}

func (cg *memCgroup) readInt(file string) int64 {
	data, err := os.ReadFile(filepath.Join(cg.dir, file))
	if err != nil {
		return 0
	}
	n, _ := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
	return n
}

func (cg *memCgroup) usage() int64 {
	if cg.v2 {
		return cg.readInt("memory.current")
	}
	return cg.readInt("memory.usage_in_bytes")
}

// peak is the cgroup's peak usage (v2's memory.peak needs Linux 5.19).
func (cg *memCgroup) peak() int64 {
	if cg.v2 {
		return cg.readInt("memory.peak")
	}
	return cg.readInt("memory.max_usage_in_bytes")
}

// oomKills counts the processes the kernel killed for the limit.
func (cg *memCgroup) oomKills() int {
	file := "memory.oom_control"
	if cg.v2 {
		file = "memory.events"
	}
	data, _ := os.ReadFile(filepath.Join(cg.dir, file))
	for _, line := range strings.Split(string(data), "\n") {
		if n, ok := strings.CutPrefix(line, "oom_kill "); ok {
			k, _ := strconv.Atoi(strings.TrimSpace(n))
			return k
		}
	}
	return 0
}

// remove kills what is left in the cgroup and removes it.
func (cg *memCgroup) remove() {
	if data, err := os.ReadFile(filepath.Join(cg.dir, "cgroup.procs")); err == nil {
		for _, f := range strings.Fields(string(data)) {
			if pid, err := strconv.Atoi(f); err == nil {
				if p, err := os.FindProcess(pid); err == nil {
					p.Kill() //nolint:errcheck
				}
			}
		}
	}
	for range 50 {
		if err := os.Remove(cg.dir); err == nil || os.IsNotExist(err) {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// cgroup runs every -cgroup-kubestore limit, then every -cgroup-peer limit
// when the upstream binaries are built.
func (b *bench) cgroup(ctx context.Context) error {
	r := &CgroupResult{}
	b.res.Cgroup = r
	if _, _, err := cgroupRoot(); err != nil {
		r.Skipped = err.Error()
		b.logf("cgroup: skipped: %v", err)
		return nil
	}
	args := b.o.ServeArgs
	if b.o.ProfileDir != "" {
		args = append(append([]string{}, args...), "--profiling")
	}
	for _, limit := range b.o.CgroupKubestore {
		var srv *server
		run, err := b.cgroupRun(ctx, "kubestore", limit, func(cg *memCgroup, dir string) (*rest.Config, func(), error) {
			var err error
			srv, _, err = startServerWrapped(ctx, cg.wrap(), b.o.Bin, dir, filepath.Join(b.root, fmt.Sprintf("cgroup-kubestore-%d.log", limit)), args)
			if err != nil {
				return nil, nil, err
			}
			return srv.cfg, func() { stopServer(srv) }, nil //nolint:errcheck // the figures are taken
		}, func(scale int) error {
			// With -profile-dir, what the heap holds after each step,
			// refused or not: where the limit's room went.
			return b.heapProfileOf(ctx, srv, fmt.Sprintf("cgroup-%d-x%d", limit, scale))
		})
		if err != nil {
			return err
		}
		r.Kubestore = append(r.Kubestore, run)
	}
	etcdBin, apiserverBin := filepath.Join(b.o.PeerBinDir, "etcd"), filepath.Join(b.o.PeerBinDir, "kube-apiserver")
	if _, err := os.Stat(apiserverBin); err != nil {
		b.logf("cgroup: the peer is skipped: %v (make upstream-bins)", err)
		return nil
	}
	for _, limit := range b.o.CgroupPeer {
		run, err := b.cgroupRun(ctx, "peer", limit, func(cg *memCgroup, dir string) (*rest.Config, func(), error) {
			p, err := b.startPeerWrapped(ctx, cg.wrap(), dir, etcdBin, apiserverBin)
			if err != nil {
				return nil, nil, err
			}
			return p.cfg, p.stop, nil
		}, nil)
		if err != nil {
			return err
		}
		r.Peer = append(r.Peer, run)
	}
	return nil
}

// cgroupRun starts one store inside a cgroup of limitMiB and loads and
// lists each scale until one does not fit; after, if not nil, runs after
// each step.
func (b *bench) cgroupRun(ctx context.Context, who string, limitMiB int, start func(cg *memCgroup, dir string) (*rest.Config, func(), error), after func(scale int) error) (CgroupRun, error) {
	run := CgroupRun{LimitMiB: limitMiB}
	cg, err := newMemCgroup(fmt.Sprintf("kubestore-bench-%s-%d", who, limitMiB), int64(limitMiB)<<20)
	if err != nil {
		return run, err
	}
	defer cg.remove()
	dir := filepath.Join(b.root, fmt.Sprintf("cgroup-%s-%d", who, limitMiB))
	defer os.RemoveAll(dir)
	cfg, stop, err := start(cg, dir)
	if err != nil {
		run.Ready = firstLine(err.Error())
		run.PeakBytes, run.OOMKills = cg.peak(), cg.oomKills()
		b.logf("cgroup %s %d MiB: not ready: %s", who, limitMiB, run.Ready)
		return run, nil
	}
	defer stop()
	cfg = rest.CopyConfig(cfg)
	cfg.Timeout = cgroupRequestTimeout
	cfg.QPS, cfg.Burst = -1, 0
	loaded, tried := 0, 0
	for i, scale := range b.o.CgroupScales {
		tried++
		step := CgroupStep{Scale: scale, Outcome: "fits"}
		begin := time.Now()
		if err := b.gatewayLoadCopies(ctx, cfg, loaded, scale); err != nil {
			step.Outcome = "load: " + cgroupFailure(err)
		}
		step.LoadMs = ms(time.Since(begin))
		loaded = scale
		if step.fits() {
			begin = time.Now()
			if err := listEverything(ctx, cfg); err != nil {
				step.Outcome = "LIST: " + cgroupFailure(err)
			}
			step.ListMs = ms(time.Since(begin))
		}
		if k := cg.oomKills(); k > 0 {
			step.Outcome = fmt.Sprintf("OOM-killed (%d) after: %s", k, step.Outcome)
		}
		step.UsageBytes = cg.usage()
		run.Steps = append(run.Steps, step)
		b.logf("cgroup %s %d MiB: gateway ×%d: %s; loaded in %.0f ms, listed in %.0f ms; usage %s, peak %s",
			who, limitMiB, scale, step.Outcome, step.LoadMs, step.ListMs, mib(step.UsageBytes), mib(cg.peak()))
		if after != nil {
			if err := after(scale); err != nil {
				return run, err
			}
		}
		if !step.fits() {
			break
		}
		if i == 0 {
			step := b.kubectlStep(ctx, cfg, cg)
			run.Steps = append(run.Steps, step)
			b.logf("cgroup %s %d MiB: gateway ×%d, then kubectl's OpenAPI reads: %s; usage %s, peak %s",
				who, limitMiB, step.Scale, step.Outcome, mib(step.UsageBytes), mib(cg.peak()))
			if !step.fits() {
				break
			}
		}
	}
	for _, scale := range b.o.CgroupScales[tried:] {
		run.Steps = append(run.Steps, CgroupStep{Scale: scale, Outcome: "not tried: a smaller scale did not fit"})
	}
	run.PeakBytes, run.OOMKills = cg.peak(), cg.oomKills()
	return run, nil
}

// kubectlSettle is how long after kubectl's OpenAPI reads the
// kubectlStep's create comes by default: an operator's next command, and
// time for the server to see its heap grow (memory.Pressure looks every
// second, at the live heap of the last collection).
const kubectlSettle = 15 * time.Second

// kubectlStep is what an operator's kubectl adds on a gateway that holds
// the first scale of the set: kubectl explain and kubectl apply read
// /openapi/v3 and the document of the kind's group version (client-go's
// OpenAPI v3 client, as kubectl does), which makes a server build its
// OpenAPI documents; kubectlSettle later, one create and the LIST of
// everything must still be answered.
func (b *bench) kubectlStep(ctx context.Context, cfg *rest.Config, cg *memCgroup) CgroupStep {
	step := CgroupStep{Scale: b.o.CgroupScales[0], Kubectl: true, Outcome: "fits"}
	begin := time.Now()
	err := readOpenAPIAsKubectl(cfg)
	step.LoadMs = ms(time.Since(begin))
	settle := b.o.KubectlSettle
	if settle == 0 {
		settle = kubectlSettle
	}
	if err == nil {
		err = sleep(ctx, settle)
	}
	if err == nil {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "after-kubectl", Namespace: gatewayNamespace(0)}}
		_, err = kubernetes.NewForConfigOrDie(cfg).CoreV1().ConfigMaps(cm.Namespace).Create(ctx, cm, metav1.CreateOptions{})
	}
	if err == nil {
		begin = time.Now()
		err = listEverything(ctx, cfg)
		step.ListMs = ms(time.Since(begin))
	}
	if err != nil {
		step.Outcome = cgroupFailure(err)
	}
	if k := cg.oomKills(); k > 0 {
		step.Outcome = fmt.Sprintf("OOM-killed (%d) after: %s", k, step.Outcome)
	}
	step.UsageBytes = cg.usage()
	return step
}

// readOpenAPIAsKubectl reads what kubectl explain pods reads: the
// /openapi/v3 index, then api/v1's document.
func readOpenAPIAsKubectl(cfg *rest.Config) error {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return err
	}
	paths, err := dc.OpenAPIV3().Paths()
	if err != nil {
		return fmt.Errorf("reading /openapi/v3: %w", err)
	}
	gv, ok := paths["api/v1"]
	if !ok {
		return fmt.Errorf("/openapi/v3 lists no api/v1")
	}
	if _, err := gv.Schema(runtime.ContentTypeJSON); err != nil {
		return fmt.Errorf("reading /openapi/v3/api/v1: %w", err)
	}
	return nil
}

// cgroupFailure names a failed request's cause in a few words.
func cgroupFailure(err error) string {
	var status apierrors.APIStatus
	switch {
	case errors.As(err, &status) && apierrors.IsForbidden(err) && strings.Contains(err.Error(), "heap"):
		return "creates refused by the heap guard (" + firstLine(status.Status().Message) + ")"
	case errors.Is(err, context.DeadlineExceeded) || apierrors.IsTimeout(err) || apierrors.IsServerTimeout(err) || strings.Contains(err.Error(), "Client.Timeout"):
		return "timed out (" + firstLine(err.Error()) + ")"
	}
	return firstLine(err.Error())
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

// gatewayLoadCopies creates copies from..to-1 of the gateway set.
func (b *bench) gatewayLoadCopies(ctx context.Context, cfg *rest.Config, from, to int) error {
	cs := make([]*kubernetes.Clientset, b.o.Clients)
	for i := range cs {
		cs[i] = kubernetes.NewForConfigOrDie(cfg)
	}
	for k := from; k < to; k++ {
		if _, err := b.gatewayLoadCopy(ctx, cs, k); err != nil {
			return err
		}
	}
	return nil
}

// listEverything lists each resource of the gateway set across every
// namespace, as an agent's informers do at their start.
func listEverything(ctx context.Context, cfg *rest.Config) error {
	c := kubernetes.NewForConfigOrDie(cfg)
	all := metav1.NamespaceAll
	lists := []struct {
		what string
		fn   func() error
	}{
		{"pods", func() error { _, err := c.CoreV1().Pods(all).List(ctx, metav1.ListOptions{}); return err }},
		{"configmaps", func() error { _, err := c.CoreV1().ConfigMaps(all).List(ctx, metav1.ListOptions{}); return err }},
		{"secrets", func() error { _, err := c.CoreV1().Secrets(all).List(ctx, metav1.ListOptions{}); return err }},
		{"services", func() error { _, err := c.CoreV1().Services(all).List(ctx, metav1.ListOptions{}); return err }},
		{"endpointslices", func() error {
			_, err := c.DiscoveryV1().EndpointSlices(all).List(ctx, metav1.ListOptions{})
			return err
		}},
		{"leases", func() error { _, err := c.CoordinationV1().Leases(all).List(ctx, metav1.ListOptions{}); return err }},
	}
	for _, l := range lists {
		if err := l.fn(); err != nil {
			return fmt.Errorf("%s: %w", l.what, err)
		}
	}
	return nil
}

// cgroupRows are the section's rows: one per limit and scale, with the
// issue's targets (kubestore: ×1 fits in 64 MiB, ×5 in 96 MiB).
func cgroupRows(row func(figure, value string, t target), r *Result) {
	c := r.Cgroup
	if c.Skipped != "" {
		row("cgroup", "skipped: "+c.Skipped, target{})
		return
	}
	for _, who := range []struct {
		name string
		runs []CgroupRun
	}{{"kubestore", c.Kubestore}, {"kube-apiserver + etcd", c.Peer}} {
		for _, run := range who.runs {
			figure := fmt.Sprintf("cgroup %d MiB: %s", run.LimitMiB, who.name)
			peak := fmt.Sprintf("peak %s, OOM kills %d", mib(run.PeakBytes), run.OOMKills)
			if run.Ready != "" {
				row(figure, "not ready: "+run.Ready+"; "+peak, cgroupTarget(who.name, run.LimitMiB, 1, false))
				continue
			}
			for _, s := range run.Steps {
				what := fmt.Sprintf("%s, gateway ×%d", figure, s.Scale)
				if s.Kubectl {
					what += ", then kubectl's OpenAPI reads, a create"
				}
				row(what,
					fmt.Sprintf("%s; load %.0f ms, LIST of everything %.0f ms; usage after %s; %s", s.Outcome, s.LoadMs, s.ListMs, mib(s.UsageBytes), peak),
					cgroupTarget(who.name, run.LimitMiB, s.Scale, s.fits()))
			}
		}
	}
}

// cgroupTarget is the target for kubestore at a limit and scale:
// ×1 in 64 MiB, ×5 in 96 MiB.
func cgroupTarget(who string, limitMiB, scale int, fits bool) target {
	if who != "kubestore" || !(limitMiB == 64 && scale == 1 || limitMiB == 96 && scale == 5) {
		return target{}
	}
	return target{fmt.Sprintf("×%d fits in %d MiB", scale, limitMiB), fits}
}
