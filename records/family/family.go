// Package family declares every family of kubestore's own records (package
// records) once, as a value: its name, its shape, who owns it and what it
// holds. A record's name is built from its family (family.ClusterIPs.For(ip),
// family.MirrorTokens.For(node, hash)), never spelled, so that no two
// families, and no two nodes of one family, can read each other's records.
// Like etcd's schema buckets (server/storage/schema/bucket.go), they are
// all here, in one file.
//
// It is a leaf, apart from package records and its etcd client, so that
// the packages owning a family (the registry, access, serviceaccount)
// name it without importing a store.
package family

import "strings"

// Family is one family of records: every record whose name starts with
// Start.
type Family struct {
	name  string
	shape shape
}

type shape int

const (
	// one record, named the family's name.
	one shape = iota
	// a directory: <name>/<key>[/…].
	directory
	// one record per node: <name>@<node>.
	perNode
	// a directory per node: <name>@<node>/<key>[/…]; <name>/… is the
	// family's directory of a release before it kept one per node.
	nodeDirectory
)

// The families, by the name their records start with; the package that
// owns each family writes it only through a records.Store, or, for the
// update's and the CA rotation's protocols, through a records.Record.
var (
	// mirror/<rule>/<ns>, mirror: a stream's last upstream resourceVersion (checkpoint).
	Checkpoints = Family{"mirror", directory}
	// mirror-rules/<rule>, mirror: the resource of each rule run, to find a removed rule's copies.
	MirrorRules = Family{"mirror-rules", directory}
	// mirror-configured@<node>, mirror: the shared rules a gateway of a site runs.
	MirrorConfigured = Family{"mirror-configured", perNode}
	// mirror-pending@<node>/…, mirror: the node's offline writes, until reconciled.
	MirrorPending = Family{"mirror-pending", nodeDirectory}
	// mirror-events@<node>/…, mirror: the node's agents' Events, queued for the upstream.
	MirrorEvents = Family{"mirror-events", nodeDirectory}
	// mirror-deleted/<uid>, mirror: uids deleted through the edge, not to be mirrored back.
	MirrorDeleted = Family{"mirror-deleted", directory}
	// mirror-decisions@<node>/<hash>, mirror: the cluster's RBAC decisions on its
	// ServiceAccounts' requests, kept for offline.
	MirrorDecisions = Family{"mirror-decisions", nodeDirectory}
	// mirror-tokens@<node>/<hash>, mirror: the cluster's tokens relayed for the node's
	// pods, given again offline until they expire.
	MirrorTokens = Family{"mirror-tokens", nodeDirectory}
	// clusterip-range, registry: the Service CIDR.
	ClusterIPRange = Family{"clusterip-range", one}
	// clusterip/<ip>, registry: each allocated ClusterIP.
	ClusterIPs = Family{"clusterip", directory}
	// serviceaccount-keys/<kid>, serviceaccount: each member's token-signing public key.
	ServiceAccountKeys = Family{"serviceaccount-keys", directory}
	// ca-bundle/<hash>, serviceaccount: each CA certificate the site trusts.
	CABundle = Family{"ca-bundle", directory}
	// trusted-issuer, serviceaccount: the mirrored cluster's token issuer: its
	// name, API audiences and JWKS.
	TrustedIssuer = Family{"trusted-issuer", one}
	// ca-rotation/<hash>[/members/<member>], access and maintenance: a CA
	// rotation and each member's progress (site holds joins while it stands).
	CARotations = Family{"ca-rotation", directory}
	// site-peer-restart, maintenance: whose turn it is to restart its peer port.
	PeerRestart = Family{"site-peer-restart", one}
	// site-releases/<member>, maintenance: the release each member runs and
	// the format it reads.
	Releases = Family{"site-releases", directory}
	// data-format, maintenance: the format the data is in (an update's commit).
	DataFormat = Family{"data-format", one}
	// update-commit, maintenance: a commit request and its answer.
	CommitRequest = Family{"update-commit", one}
	// elections/<name>, records (Store.Lead): an election's candidates
	// (concurrency.Election).
	Elections = Family{"elections", directory}
)

// All is every family.
var All = []Family{
	Checkpoints, MirrorRules, MirrorConfigured, MirrorPending, MirrorEvents, MirrorDeleted, MirrorDecisions, MirrorTokens,
	ClusterIPRange, ClusterIPs, ServiceAccountKeys, CABundle, TrustedIssuer,
	CARotations, PeerRestart, Releases, DataFormat, CommitRequest, Elections,
}

// Name is the family's name; of a family of one record, the record's.
func (f Family) Name() string { return f.name }

// Start is what the name of each of the family's records starts with:
// the record's name, <name>/ or <name>@. (Of a directory per node, a
// release's before it kept one per node also start with <name>/.)
func (f Family) Start() string {
	switch f.shape {
	case directory:
		return f.name + "/"
	case perNode, nodeDirectory:
		return f.name + "@"
	}
	return f.name
}

// For names the family's record of key's parts: <name>/<parts…> of a
// directory; <name>@<node> and <name>@<node>/<parts…> of the families per
// node, the node first; the record's name of a family of one.
func (f Family) For(parts ...string) string {
	switch f.shape {
	case directory:
		return f.name + "/" + strings.Join(parts, "/")
	case perNode, nodeDirectory:
		if len(parts) == 1 {
			return f.name + "@" + parts[0]
		}
		return f.name + "@" + parts[0] + "/" + strings.Join(parts[1:], "/")
	}
	return f.name
}

// Dir is the family's directory, for records.Store.ListState, which puts
// the "/" after it; of a directory per node, a release's before it kept
// one per node.
func (f Family) Dir() string { return f.name }

// NodeDir is node's directory of a family kept per node, for
// records.Store.ListState, which puts the "/" after it: edge-1's never
// lists edge-10's.
func (f Family) NodeDir(node string) string { return f.name + "@" + node }

// Key is what follows Start in name, a record of the family, and whether
// name is one.
func (f Family) Key(name string) (string, bool) { return strings.CutPrefix(name, f.Start()) }
