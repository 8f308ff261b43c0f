package e2e

import (
	"crypto/tls"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubestore/kubestore/test/link"
)

// faultProxy is the upstream as a sick server or middlebox shows it: an
// HTTPS reverse proxy that passes requests, holds each for two seconds,
// answers 500 to every one, or answers bytes that are not HTTP. It counts
// the requests it gets.
type faultProxy struct {
	srv      *httptest.Server
	mode     atomic.Value // faultPass, faultSlow, faultError, faultGarbage
	requests atomic.Int64
}

const (
	faultPass    = "pass"
	faultSlow    = "slow"
	faultError   = "500"
	faultGarbage = "garbage"
)

func newFaultProxy(t *testing.T, upstream string) *faultProxy {
	t.Helper()
	target, err := url.Parse(upstream)
	must(t, err)
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.Transport = &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, ForceAttemptHTTP2: true} //nolint:gosec // a loopback test upstream
	rp.FlushInterval = -1
	rp.ErrorLog = nil
	f := &faultProxy{}
	f.mode.Store(faultPass)
	f.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.requests.Add(1)
		switch f.mode.Load() {
		case faultSlow:
			time.Sleep(2 * time.Second)
		case faultError:
			http.Error(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"sick","reason":"InternalError","code":500}`, http.StatusInternalServerError)
			return
		case faultGarbage:
			if hj, ok := w.(http.Hijacker); ok {
				if c, buf, err := hj.Hijack(); err == nil {
					garbage := make([]byte, 512)
					for i := range garbage {
						garbage[i] = byte(rand.N(256))
					}
					buf.Write(garbage) //nolint:errcheck // garbage
					buf.Flush()        //nolint:errcheck
					c.Close()
					return
				}
			}
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte("\x00\x01not json at all\xff")) //nolint:errcheck
			return
		}
		rp.ServeHTTP(w, r)
	}))
	f.srv.EnableHTTP2 = true
	f.srv.StartTLS()
	t.Cleanup(f.srv.Close)
	return f
}

// rssKiB and cpuTime read a process's resident memory and the CPU it has
// used.
func rssKiB(t *testing.T, pid int) int64 {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	must(t, err)
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			n, err := strconv.ParseInt(strings.Fields(v)[0], 10, 64)
			must(t, err)
			return n
		}
	}
	t.Fatalf("no VmRSS for %d", pid)
	return 0
}

func cpuTime(t *testing.T, pid int) time.Duration {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	must(t, err)
	// Fields after the command's closing parenthesis; utime and stime are
	// the 14th and 15th of the whole line, in clock ticks (100 a second).
	fields := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+2:]))
	u, _ := strconv.ParseInt(fields[11], 10, 64)
	s, _ := strconv.ParseInt(fields[12], 10, 64)
	return time.Duration(u+s) * 10 * time.Millisecond
}

// An edge whose upstream hangs, answers slowly, answers 500 or garbage,
// or comes and goes every second for minutes: the hang is found within
// seconds and the link's return within seconds more; forwarded writes get
// their answer or a 503 within a few seconds, never minutes; the node's own
// writes are applied locally and reconciled; nothing diverges; the mirror
// does not spin (its request rate and CPU stay low) and its memory stays
// flat.
func TestMirrorUnderFaults(t *testing.T) {
	t.Parallel()
	dir := shortTempDir(t)
	const token = "faults-admin-token-0123456789"
	tokens := filepath.Join(dir, "tokens.csv")
	must(t, os.WriteFile(tokens, []byte(token+",admin,admin-uid,system:masters\n"), 0o600))
	up := start(t, filepath.Join(dir, "up"), "--token-auth-file", tokens)
	upCS := up.clientset()
	const node, ns = "edge-faults", "faults"
	ctx := t.Context()
	_, err := upCS.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	must(t, err)
	_, err = upCS.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, metav1.CreateOptions{})
	must(t, err)
	_, err = upCS.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings"}, Data: map[string]string{"v": "0"}}, metav1.CreateOptions{})
	must(t, err)
	p := pod(ns, "agent", node)
	p.Spec.Volumes = []corev1.Volume{{Name: "s", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}}}}}
	_, err = upCS.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
	must(t, err)

	proxy := newFaultProxy(t, up.server())
	l := link.New(t, strings.TrimPrefix(proxy.srv.URL, "https://"))
	upstream := filepath.Join(dir, "upstream.kubeconfig")
	writeTokenKubeconfig(t, "https://"+l.Addr, token, upstream)
	ed := start(t, filepath.Join(dir, "edge"), flagUpstreamKubeconfig, upstream, flagNodeName, node)
	edCS := ed.clientset()
	pid := ed.cmd.Process.Pid
	mirrorz := func() (int, string) {
		code, _, body := doRequest(t, ed.restConfig(), http.MethodGet, mirrorzPath, "", "")
		return code, body
	}
	connected := func() bool { code, _ := mirrorz(); return code == http.StatusOK }
	waitFor := func(what string, within time.Duration, cond func() bool) time.Duration {
		t.Helper()
		began := time.Now()
		if !eventually(within, cond) {
			code, body := mirrorz()
			t.Fatalf("%s: not within %s; /mirrorz %d %s", what, within, code, body)
		}
		return time.Since(began)
	}
	waitFor("in sync at the start", mirrorConverge, func() bool {
		_, err := edCS.CoreV1().ConfigMaps(ns).Get(ctx, "settings", metav1.GetOptions{})
		return err == nil && connected()
	})
	// inSync is how the edge and the upstream differ in the ConfigMap and
	// the pod's status, "" when they agree.
	inSync := func() string {
		var diffs []string
		u, err1 := upCS.CoreV1().ConfigMaps(ns).Get(ctx, "settings", metav1.GetOptions{})
		e, err2 := edCS.CoreV1().ConfigMaps(ns).Get(ctx, "settings", metav1.GetOptions{})
		if err1 != nil || err2 != nil || u.Data["v"] != e.Data["v"] {
			diffs = append(diffs, fmt.Sprintf("configmap: upstream %v %v, edge %v %v", err1, u.Data, err2, e.Data))
		}
		up, err1 := upCS.CoreV1().Pods(ns).Get(ctx, "agent", metav1.GetOptions{})
		ep, err2 := edCS.CoreV1().Pods(ns).Get(ctx, "agent", metav1.GetOptions{})
		if err1 != nil || err2 != nil || up.Status.Message != ep.Status.Message {
			diffs = append(diffs, fmt.Sprintf("pod status: upstream %v %q, edge %v %q", err1, up.Status.Message, err2, ep.Status.Message))
		}
		return strings.Join(diffs, "; ")
	}
	statusN := 0
	// nodeWrite is the node's agent reporting its pod: applied, online or
	// not, within a few seconds.
	nodeWrite := func(what string) {
		t.Helper()
		statusN++
		start := time.Now()
		_, err := edCS.CoreV1().Pods(ns).Patch(ctx, "agent", types.MergePatchType,
			[]byte(fmt.Sprintf(`{"status":{"message":"report %d"}}`, statusN)), metav1.PatchOptions{}, "status")
		if took := time.Since(start); err != nil || took > 7*time.Second {
			t.Errorf("%s: the node's pod status write: %v after %s, want it applied within 7 s", what, err, took)
		}
	}
	upWrite := func(v string) {
		t.Helper()
		_, err := upCS.CoreV1().ConfigMaps(ns).Patch(ctx, "settings", types.MergePatchType, []byte(`{"data":{"v":"`+v+`"}}`), metav1.PatchOptions{})
		must(t, err)
	}
	// otherWrite is a write to a mirrored object that is not the node's:
	// it must get an answer (the upstream's, or a 503) within a few
	// seconds.
	otherWrite := func(what string) error {
		t.Helper()
		start := time.Now()
		_, err := edCS.CoreV1().ConfigMaps(ns).Patch(ctx, "settings", types.MergePatchType, []byte(`{"metadata":{"labels":{"touched":"yes"}}}`), metav1.PatchOptions{})
		if took := time.Since(start); took > 7*time.Second {
			t.Errorf("%s: a write to a mirrored ConfigMap answered after %s (%v), want within 7 s", what, took, err)
		}
		return err
	}
	converged := func(what string) {
		t.Helper()
		var diff string
		began := time.Now()
		if !eventually(10*time.Second, func() bool { diff = inSync(); return diff == "" && connected() }) {
			_, _, body := doRequest(t, ed.restConfig(), http.MethodGet, mirrorzPath+"?verbose", "", "")
			t.Fatalf("%s: not in sync 10 s after the upstream was well again: %s\n/mirrorz?verbose:\n%s", what, diff, body)
		}
		t.Logf("%s: in sync %s after the upstream was well again", what, time.Since(began).Round(100*time.Millisecond))
	}

	t.Run("hung", func(t *testing.T) {
		l.Hang()
		began := time.Now()
		// The first write after the hang waits for its deadline at most.
		err := otherWrite("hung, first write")
		waitFor("the hung link found", 20*time.Second, func() bool { return !connected() })
		t.Logf("hung link found down %s after it hung (the first write then: %v)", time.Since(began).Round(100*time.Millisecond), err)
		start := time.Now()
		if err := otherWrite("hung, link down"); !apierrors.IsServiceUnavailable(err) || time.Since(start) > time.Second {
			t.Errorf("a write to a mirrored ConfigMap with the link known down: %v after %s, want 503 within a second", err, time.Since(start))
		}
		nodeWrite("hung")
		upWrite("hung")
		time.Sleep(3 * time.Second)
		l.Restore()
		converged("hung")
	})
	t.Run("slow", func(t *testing.T) {
		proxy.mode.Store(faultSlow)
		upWrite("slow")
		if err := otherWrite("slow"); err != nil {
			t.Errorf("a write to a mirrored ConfigMap through a slow upstream: %v", err)
		}
		nodeWrite("slow")
		var diff string
		if !eventually(30*time.Second, func() bool { diff = inSync(); return diff == "" }) {
			t.Errorf("with an upstream taking 2 s a request: not in sync in 30 s: %s", diff)
		}
		proxy.mode.Store(faultPass)
		converged("slow")
	})
	for _, mode := range []string{faultError, faultGarbage} {
		t.Run(mode, func(t *testing.T) {
			before, cpuBefore := proxy.requests.Load(), cpuTime(t, pid)
			proxy.mode.Store(mode)
			began := time.Now()
			l.Cut() // every open stream goes through the sick proxy again
			l.Restore()
			nodeWrite(mode)
			upWrite(mode)
			if err := otherWrite(mode); err == nil {
				t.Errorf("a write to a mirrored ConfigMap through an upstream answering %s succeeded", mode)
			}
			time.Sleep(30 * time.Second)
			n, cpu, took := proxy.requests.Load()-before, cpuTime(t, pid)-cpuBefore, time.Since(began)
			t.Logf("upstream answering %s for %s: %d requests (%.1f/s), edge CPU %s (%.1f %%)", mode, took.Round(time.Second), n,
				float64(n)/took.Seconds(), cpu, 100*cpu.Seconds()/took.Seconds())
			if rate := float64(n) / took.Seconds(); rate > 5 {
				t.Errorf("upstream answering %s: the edge sent %.1f requests/s, want a back-off (<= 5/s)", mode, rate)
			}
			if share := cpu.Seconds() / took.Seconds(); share > 0.25 {
				t.Errorf("upstream answering %s: the edge used %.0f %% of a core, want no hot loop (<= 25 %%)", mode, 100*share)
			}
			proxy.mode.Store(faultPass)
			converged(mode)
		})
	}
	t.Run("flapping", func(t *testing.T) {
		// A minute in make test; make release-check flaps for five.
		flapFor := time.Minute
		if s := os.Getenv("KUBESTORE_MIRROR_FLAP"); s != "" {
			d, err := time.ParseDuration(s)
			if err != nil || d <= 0 {
				t.Fatalf("KUBESTORE_MIRROR_FLAP=%q: want a positive duration", s)
			}
			flapFor = d
		}
		rssBefore, cpuBefore, began := rssKiB(t, pid), cpuTime(t, pid), time.Now()
		var wg sync.WaitGroup
		stop := make(chan struct{})
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				case <-time.After(time.Second):
				}
				if i%2 == 0 {
					l.Cut()
				} else {
					l.Restore()
				}
			}
		})
		for i := 0; time.Since(began) < flapFor; i++ {
			upWrite(fmt.Sprintf("flap-%d", i))
			nodeWrite("flapping")
			time.Sleep(2 * time.Second)
		}
		close(stop)
		wg.Wait()
		l.Restore()
		cpu, took := cpuTime(t, pid)-cpuBefore, time.Since(began)
		converged("flapping")
		// The heap settles after the garbage collector's next cycles.
		time.Sleep(10 * time.Second)
		rssAfter := rssKiB(t, pid)
		t.Logf("link flapping every second for %s: edge RSS %d -> %d MiB, CPU %.1f %% of a core", took.Round(time.Second),
			rssBefore>>10, rssAfter>>10, 100*cpu.Seconds()/took.Seconds())
		if grew := rssAfter - rssBefore; grew > 40<<10 {
			t.Errorf("the edge's RSS grew by %d MiB while the link flapped, want flat (<= 40 MiB)", grew>>10)
		}
		if share := cpu.Seconds() / took.Seconds(); share > 0.5 {
			t.Errorf("the edge used %.0f %% of a core while the link flapped, want no hot loop (<= 50 %%)", 100*share)
		}
	})
}
