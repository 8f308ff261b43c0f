package main

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// SiteResult is the site section: the same creates (-configmaps
// ConfigMaps of 1 KiB, -clients clients) against one kubestore alone and
// against a site of three on this machine (the clients spread over the
// three gateways' APIs), the memory of each, and a fourth gateway joining
// the site with the ConfigMaps present.
type SiteResult struct {
	ConfigMaps int          `json:"configMaps"`
	Clients    int          `json:"clients"`
	Single     SiteWriteRun `json:"single"`
	Site       SiteWriteRun `json:"site"`
	// JoinReadyMs is a fourth gateway's exec to ready (joined, caught up,
	// promoted) with the ConfigMaps in the site.
	JoinReadyMs float64 `json:"joinReadyMs"`
}

// SiteWriteRun is one run of the creates.
type SiteWriteRun struct {
	CreatesPerSec float64 `json:"createsPerSec"`
	P50Ms         float64 `json:"p50Ms"`
	P99Ms         float64 `json:"p99Ms"`
	// Mem is each member's memory after the creates.
	Mem []Mem `json:"mem"`
}

// site measures a site of three gateways against one kubestore.
func (b *bench) site(ctx context.Context) error {
	r := &SiteResult{ConfigMaps: b.o.ConfigMaps, Clients: b.o.Clients}
	b.res.Site = r
	single, _, err := b.startOn(ctx, filepath.Join(b.root, "site-single"), "site-single")
	if err != nil {
		return err
	}
	err = b.siteWrites(ctx, "single", []*server{single}, &r.Single)
	single.kill()
	if err != nil {
		return err
	}

	ports, err := freePorts(8)
	if err != nil {
		return err
	}
	member := func(i int, join, token string) []string {
		args := []string{"--secure-port", strconv.Itoa(ports[2*i]), "--member-name", fmt.Sprintf("gw-%d", i),
			"--peer-advertise-address", "127.0.0.1", "--peer-bind-address", "127.0.0.1", "--peer-port", strconv.Itoa(ports[2*i+1])}
		if join != "" {
			args = append(args, "--join", join, "--join-token", token)
		}
		return args
	}
	dir := func(i int) string { return filepath.Join(b.root, fmt.Sprintf("site-%d", i)) }
	var members []*server
	defer func() {
		for _, m := range members {
			m.kill()
		}
	}()
	first, _, err := b.startOn(ctx, dir(0), "site-0", member(0, "", "")...)
	if err != nil {
		return err
	}
	members = append(members, first)
	out, err := exec.CommandContext(ctx, b.o.Bin, "member", "token", "--data-dir", dir(0), "--peer-advertise-address", "127.0.0.1").CombinedOutput()
	if err != nil {
		return fmt.Errorf("kubestore member token: %v\n%s", err, out)
	}
	token, join := strings.TrimSpace(string(out)), first.url
	for i := 1; i < 3; i++ {
		m, _, err := b.startOn(ctx, dir(i), fmt.Sprintf("site-%d", i), member(i, join, token)...)
		if err != nil {
			return err
		}
		members = append(members, m)
	}
	if err := b.siteWrites(ctx, "site of three", members, &r.Site); err != nil {
		return err
	}
	joiner, ready, err := b.startOn(ctx, dir(3), "site-3", member(3, join, token)...)
	if err != nil {
		return err
	}
	members = append(members, joiner)
	r.JoinReadyMs = ms(ready)
	b.logf("site: a fourth gateway joined with %d ConfigMaps present, ready in %v", r.ConfigMaps, ready.Round(time.Millisecond))
	return nil
}

// siteWrites creates the ConfigMaps through servers, the clients spread
// over them, and records the rate, the latencies and each one's memory.
func (b *bench) siteWrites(ctx context.Context, what string, servers []*server, run *SiteWriteRun) error {
	clients := make([]*kubernetes.Clientset, b.o.Clients)
	for i := range clients {
		clients[i] = clientFor(servers[i%len(servers)], true)
	}
	var mu sync.Mutex
	lat := make([]time.Duration, 0, b.o.ConfigMaps)
	elapsed, err := parallel(ctx, b.o.Clients, b.o.ConfigMaps, func(ctx context.Context, w, i int) error {
		cm := configMap(i)
		cm.Namespace = "default"
		start := time.Now()
		_, err := clients[w].CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{})
		d := time.Since(start)
		mu.Lock()
		lat = append(lat, d)
		mu.Unlock()
		return err
	})
	if err != nil {
		return err
	}
	run.CreatesPerSec = float64(b.o.ConfigMaps) / elapsed.Seconds()
	run.P50Ms, run.P99Ms = ms(percentile(lat, 50)), ms(percentile(lat, 99))
	for i, s := range servers {
		m, err := b.memOf(s, fmt.Sprintf("%s, member %d", what, i))
		if err != nil {
			return err
		}
		run.Mem = append(run.Mem, m)
	}
	b.logf("site: %s: %.0f creates/s, p50 %.1f ms, p99 %.1f ms", what, run.CreatesPerSec, run.P50Ms, run.P99Ms)
	return nil
}

func siteRows(row func(figure, value string, t target), r *Result) {
	s := r.Site
	mems := func(run SiteWriteRun) string {
		var out []string
		for _, m := range run.Mem {
			out = append(out, mib(m.VmRSS))
		}
		return strings.Join(out, ", ")
	}
	for _, c := range []struct {
		name string
		run  SiteWriteRun
	}{{"one kubestore", s.Single}, {"a site of three", s.Site}} {
		row(fmt.Sprintf("site: %d creates of 1 KiB, %d clients, %s", s.ConfigMaps, s.Clients, c.name),
			fmt.Sprintf("%.0f/s, p50 %.1f ms, p99 %.1f ms; RSS %s", c.run.CreatesPerSec, c.run.P50Ms, c.run.P99Ms, mems(c.run)), target{})
	}
	if s.Single.CreatesPerSec > 0 {
		row("site: a site of three against one kubestore, creates/s", fmt.Sprintf("%.2f×", s.Site.CreatesPerSec/s.Single.CreatesPerSec), target{})
	}
	row(fmt.Sprintf("site: a fourth gateway joins with %d ConfigMaps present, exec to ready", s.ConfigMaps), fmt.Sprintf("%.0f ms", s.JoinReadyMs), target{})
}
