//go:build linux

package e2e

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSitePowerCutOneMember cuts the power of one gateway of a site of
// three, on the power-cut file system, again and again: while it joins the
// site (a fresh disk), right after it joined as a learner (its catch-up
// and promotion), under writes, and while the site removes it. Writes go
// through all three gateways all along. After each cut the gateway starts
// again as it would on the device (with --join), and must come back with
// every write the site acknowledged, its own included (issue 26).
func TestSitePowerCutOneMember(t *testing.T) {
	n := releaseCuts(t, "KUBESTORE_SITE_CUTS", "times a site's member")
	pc, base := newPowerCuts(t, honestTears)
	rng := pc.rng
	a, b, c := newGateway(t, "gw-a"), newGateway(t, "gw-b"), newGateway(t, "gw-c")
	c.dir = pc.dir
	disks := 0
	freshDisk := func() {
		disks++
		pc.mount(filepath.Join(base, fmt.Sprintf("r%d", disks)))
	}
	freshDisk()
	token := foundSite(t, a, b, c)
	w := startSiteWriters(t, a, b, c)
	defer w.stop()

	phases := []string{"join", "promotion", "writes", "removal"}
	for cycle := 1; cycle <= n; cycle++ {
		phase := phases[(cycle-1)%len(phases)]
		switch phase {
		case "join", "promotion":
			// The gateway is replaced by one with a fresh disk, under the
			// same name and address: its join replaces the old entry.
			pc.cut(c.p, "stop before a fresh join")
			freshDisk()
			c.launch(t, a.url(), token)
			if phase == "join" {
				time.Sleep(time.Duration(rng.Int64N(int64(3 * time.Second))))
			} else if !eventually(60*time.Second, func() bool { return strings.Contains(c.p.logs(), "Joined the site as a learner") }) {
				t.Fatalf("cycle %d: gw-c did not join\n%s", cycle, c.p.logs())
			} else {
				time.Sleep(time.Duration(rng.Int64N(int64(time.Second))))
			}
		case "writes":
			time.Sleep(time.Second + time.Duration(rng.Int64N(int64(2*time.Second))))
		case "removal":
			// etcd refuses a removal until the members have reached each
			// other for 5 s (gw-c has just started again).
			var out string
			if !eventually(30*time.Second, func() bool {
				var err error
				out, err = a.kubestore(t, "member", "remove", c.name)
				return err == nil
			}) {
				t.Fatalf("cycle %d: member remove: %s", cycle, out)
			}
			time.Sleep(time.Duration(rng.Int64N(int64(500 * time.Millisecond))))
		}
		pc.cut(c.p, phase)
		pc.checkFiles()
		pc.mount(pc.real)
		c.start(t, a.url(), token)
		acked := w.snapshot()
		if !eventually(30*time.Second, func() bool { return len(missing(t, c, acked)) == 0 }) {
			m := missing(t, c, acked)
			t.Fatalf("cycle %d (%s): %d acknowledged writes missing on gw-c: %v", cycle, phase, len(m), m[:min(5, len(m))])
		}
		if !eventually(60*time.Second, func() bool { return voters(a.memberList(t), "gw-a", "gw-b", "gw-c") }) {
			t.Fatalf("cycle %d (%s): the site is not three voters again:\n%s", cycle, phase, a.memberList(t))
		}
	}
	acked := w.stop()
	for _, g := range []*siteGateway{a, b, c} {
		if m := missing(t, g, acked); len(m) > 0 {
			t.Fatalf("%d acknowledged writes missing on %s: %v", len(m), g.name, m[:min(5, len(m))])
		}
	}
	summary := fmt.Sprintf("site power cuts of gw-c: %s; %d writes acknowledged, %d failed", pc.tally(), len(acked), w.failed)
	fmt.Println(summary)
	t.Log(summary)
}
