package mirror

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"sync"
)

// SetElector makes every rule's streams run only while this process leads
// the rule's election: among the processes sharing the etcd, one streams a
// rule from the upstream and every one serves the result. Without an
// elector (a store of its own) every rule streams here. Rules that select
// by this node (its Node, its pods and what they reference) differ by
// node, so each gateway leads its own.
func (m *Mirror) SetElector(e Elector) { m.elect = e }

// electionKey names the election of r: the rule's name and what it selects,
// so only gateways streaming the same objects compete.
func (r *rule) electionKey() string {
	sum := sha256.Sum256([]byte(strings.Join([]string{r.gr.String(), r.label, r.field, strings.Join(r.cfg.Namespaces, ","), r.object}, "\x00")))
	return "mirror-" + r.name + "-" + hex.EncodeToString(sum[:8])
}

// runRule runs r's streams until ctx ends: at once without an elector,
// else for each term this process leads. A stream that ends with its term
// is dropped, so /mirrorz and the metrics show only what streams here.
func (m *Mirror) runRule(ctx context.Context, r *rule) {
	namespaces := r.cfg.Namespaces
	if len(namespaces) == 0 {
		namespaces = []string{""}
	}
	streams := func(ctx context.Context) {
		var wg sync.WaitGroup
		for _, ns := range namespaces {
			s := m.newStream(r, ns, r.object)
			wg.Go(func() {
				s.run(ctx)
				if m.elect != nil {
					m.dropStream(s)
				}
			})
		}
		wg.Wait()
	}
	if m.elect == nil {
		streams(ctx)
		return
	}
	m.elect(ctx, r.electionKey(), streams)
}
