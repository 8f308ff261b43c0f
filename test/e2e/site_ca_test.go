package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSiteCARotation rotates the CA of a site of three (kubestore ca
// rotate, then ca finish): the members take the new CA while their etcd,
// which reads its trusted CAs only at its start, still trusts the
// previous one alone; peer links, writes and an admin kubeconfig of the
// previous CA keep working during the rotation and across a member's
// restart; the finish names the clients of the previous CA and is refused
// until forced; then the previous CA's client certificate is refused on
// every member, kube-root-ca.crt holds the new CA alone, the join token
// printed by the rotation is the only one that joins, and a member
// restarted on the new trust alone rejoins the site (k3s#8952).
func TestSiteCARotation(t *testing.T) {
	// Parallel: it waits more than it computes (leases, elections, polls),
	// with windows of tens of seconds (make test runs the waiting suites
	// side by side).
	t.Parallel()
	requireKubectl(t)
	a, b, c := newGateway(t, "gw-a"), newGateway(t, "gw-b"), newGateway(t, "gw-c")
	token := foundSite(t, a, b, c)
	oldKubeconfig := filepath.Join(t.TempDir(), "old.kubeconfig")
	data, err := os.ReadFile(b.p.kubeconfig)
	must(t, err)
	must(t, os.WriteFile(oldKubeconfig, data, 0o600))
	kubectlOld := func(g *siteGateway) (string, error) {
		out, err := exec.Command("kubectl", "--kubeconfig", oldKubeconfig, "--server", g.url(), "get", "namespace", "default", "--request-timeout=10s").CombinedOutput()
		return string(out), err
	}
	ca := func(g *siteGateway, args ...string) (string, error) {
		return g.kubestore(t, append([]string{"ca"}, args...)...)
	}

	out, err := ca(a, "rotate")
	if err != nil {
		t.Fatalf("ca rotate: %v\n%s", err, out)
	}
	if newToken := a.token(t); newToken == token || !strings.Contains(out, newToken) {
		t.Fatalf("ca rotate did not print the site's new join token %q:\n%s", newToken, out)
	}
	if !eventually(60*time.Second, func() bool {
		out, _ := ca(a, "status")
		return strings.Count(out, ": both,") == 3
	}) {
		out, _ := ca(a, "status")
		t.Fatalf("the members did not all take the new CA:\n%s", out)
	}
	for i, g := range []*siteGateway{a, b, c} {
		g.p.mustKubectl("create", "configmap", fmt.Sprintf("during-%d", i))
		if out, err := kubectlOld(g); err != nil {
			t.Errorf("the previous CA's admin kubeconfig fails on %s during the rotation: %v\n%s", g.name, err, out)
		}
	}
	// b's etcd starts again trusting both CAs, with its peers' etcd still
	// trusting the previous one alone.
	must(t, b.p.stop(30*time.Second))
	b.start(t, a.url(), token)
	c.p.mustKubectl("create", "configmap", "after-restart")
	b.p.mustKubectl("get", "configmap", "after-restart")
	if !eventually(30*time.Second, func() bool { return voters(a.memberList(t), "gw-a", "gw-b", "gw-c") }) {
		t.Fatalf("the site is not three reachable voters during the rotation:\n%s", a.memberList(t))
	}

	// b recorded the previous CA's client before its restart: it still
	// names it.
	out, err = ca(a, "finish")
	if err == nil || !strings.Contains(out, "kubestore-admin (on gw-b") {
		t.Fatalf("ca finish with a client of the previous CA: %v, want a refusal naming kubestore-admin on gw-b\n%s", err, out)
	}
	out, err = ca(a, "finish", "--force")
	if err != nil {
		t.Fatalf("ca finish --force: %v\n%s", err, out)
	}
	if !strings.Contains(out, "gw-a, gw-b, gw-c trust it until their next start") {
		t.Errorf("ca finish does not name the members whose etcd peer port still trusts the previous CA:\n%s", out)
	}
	for _, g := range []*siteGateway{a, b, c} {
		if !eventually(30*time.Second, func() bool {
			out, err := kubectlOld(g)
			return err != nil && strings.Contains(out, "Unauthorized")
		}) {
			out, err := kubectlOld(g)
			t.Errorf("the previous CA's client certificate is not refused on %s after the finish: %v\n%s", g.name, err, out)
		}
		g.p.mustKubectl("create", "configmap", "finished-"+g.name)
	}
	caPEM, err := os.ReadFile(filepath.Join(a.dir, "pki", "ca.crt"))
	must(t, err)
	if strings.Count(string(caPEM), "BEGIN CERTIFICATE") != 1 {
		t.Fatalf("ca.crt holds %d certificates after the finish, want the new CA alone", strings.Count(string(caPEM), "BEGIN CERTIFICATE"))
	}
	if !eventually(30*time.Second, func() bool {
		out, err := c.p.kubectl("get", "configmap", "kube-root-ca.crt", "-o", `jsonpath={.data.ca\.crt}`)
		return err == nil && strings.TrimSpace(out) == strings.TrimSpace(string(caPEM))
	}) {
		out, _ := c.p.kubectl("get", "configmap", "kube-root-ca.crt", "-o", `jsonpath={.data.ca\.crt}`)
		t.Errorf("kube-root-ca.crt is not the new CA alone:\n%s", out)
	}
	// The previous join secret admits no one, even with the new CA's hash.
	newToken := a.token(t)
	forged := newToken[:strings.Index(newToken, "::")+2] + token[strings.Index(token, "::")+2:]
	d := newGateway(t, "gw-d")
	d.launch(t, a.url(), forged)
	if err := d.p.wait(90 * time.Second); err == nil {
		t.Errorf("a gateway joined with the join secret of before the rotation\n%s", d.p.logs())
	}
	if r := row(a.memberList(t), "gw-d"); r != "" {
		t.Errorf("the site lists the refused joiner: %s", r)
	}
	// c's etcd starts again trusting the new CA alone.
	must(t, c.p.stop(30*time.Second))
	c.start(t, a.url(), newToken)
	c.p.mustKubectl("create", "configmap", "after-finish")
	a.p.mustKubectl("get", "configmap", "after-finish")
	if !eventually(30*time.Second, func() bool { return voters(a.memberList(t), "gw-a", "gw-b", "gw-c") }) {
		t.Fatalf("the site is not three reachable voters after the rotation:\n%s", a.memberList(t))
	}
}
