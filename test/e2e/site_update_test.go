package e2e

import (
	"strings"
	"testing"
	"time"
)

// A rolling update of a site of three to a release of a newer data format
// (the simulated format 2), as README "A site of several gateways" shows
// it: each member restarted on the newer release in turn, on trial (the
// data stays readable by the older one); a commit while one member still
// runs the older release is refused, naming it; once every member runs
// the newer release, one commit converts the site's data, every member's
// trial ends with it, and a member started on the older release again
// refuses the data in one line (issue 37).
func TestSiteRollingUpdate(t *testing.T) {
	t.Parallel()
	requireKubectl(t)
	newer := newerBinary(t)
	a, b, c := newGateway(t, "gw-a"), newGateway(t, "gw-b"), newGateway(t, "gw-c")
	token := foundSite(t, a, b, c)
	a.p.mustKubectl("create", "configmap", "before")
	update := func(g, join *siteGateway) {
		t.Helper()
		must(t, g.p.stop(30*time.Second))
		g.bin = newer
		g.start(t, join.url(), token)
		if out, err := g.kubestore(t, "update", "status"); err != nil || !strings.Contains(out, "on trial") {
			t.Fatalf("update status on %s after its update: %v\n%s", g.name, err, out)
		}
		g.p.mustKubectl("create", "configmap", "trial-"+g.name)
	}
	update(a, b)
	update(b, c)

	out, err := a.kubestore(t, "update", "commit")
	if err == nil || !strings.Contains(out, "gw-c (kubestore") || !strings.Contains(out, "reads format 1") {
		t.Fatalf("update commit with gw-c on the older release: %v, want a refusal naming gw-c\n%s", err, out)
	}
	c.p.mustKubectl("get", "configmap", "trial-gw-a", "trial-gw-b")

	update(c, a)
	if out, err := a.kubestore(t, "update", "commit"); err != nil {
		t.Fatalf("update commit with every member on the newer release: %v\n%s", err, out)
	}
	for _, g := range []*siteGateway{a, b, c} {
		if !eventually(30*time.Second, func() bool {
			out, err := g.kubestore(t, "update", "status")
			return err == nil && strings.Contains(out, "data format 2,") && strings.Contains(out, "committed at")
		}) {
			out, _ := g.kubestore(t, "update", "status")
			t.Errorf("%s's trial did not end with the site's commit:\n%s", g.name, out)
		}
		g.p.mustKubectl("get", "configmap", "before", "trial-gw-a", "trial-gw-b", "trial-gw-c")
	}

	// The older release refuses the committed data in one line.
	must(t, c.p.stop(30*time.Second))
	c.bin = ""
	c.launch(t, a.url(), token)
	if err := c.p.wait(90 * time.Second); err == nil {
		t.Fatalf("the older release started on the site's committed data\n%s", c.p.logs())
	}
	if logs := c.p.logs(); !strings.Contains(logs, "format 2") {
		t.Errorf("the older release's refusal does not name the format:\n%s", tail(logs, 2000))
	}
	c.bin = newer
	c.start(t, a.url(), token)
	if !eventually(30*time.Second, func() bool { return voters(a.memberList(t), "gw-a", "gw-b", "gw-c") }) {
		t.Fatalf("the site is not three reachable voters after the update:\n%s", a.memberList(t))
	}
}
