// Package site makes several gateways' kubestores one site: their embedded
// etcd members form one etcd cluster (etcd's raft, nothing home-made), and
// every member serves the API from its own watch cache.
//
// A member founds a site when it starts with --peer-advertise-address and
// no etcd data. Another gateway joins with --join (the https:// URL of any
// member's API) and --join-token (kubestore member token on a member):
//
//   - Prepare, before the joiner's etcd starts, fetches the site's CA from
//     --join and refuses it unless its SHA-256 is the one the token pins (no
//     trust on first use), then asks the member, over TLS verified with that
//     CA and with the token's secret, to add it. It receives the site's
//     shared secrets (access.SiteSecrets) and etcd's initial cluster, which
//     etcdembed.Start uses; the member is a learner until it has caught up
//     (etcdembed promotes it).
//   - WithJoin is the member's side: it checks the secret, removes a stale
//     entry of the joiner (a gateway that was wiped or removed rejoins with
//     nothing to clean up by hand), adds the joiner as a learner, and
//     answers whether a member that already has data is still one (a
//     member the site removed joins again at its next start).
//
// Peer traffic is mutual TLS from the site's CA on --peer-port; each
// member's peer certificate is its own (access.PKI.Peer).
package site
