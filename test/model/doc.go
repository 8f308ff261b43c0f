// Package model is the judge of the mirror and the site (issue 48): a
// seeded generator of schedules (which writer does what, when, while the
// schedule refuses, hangs and slows the gateways' uplinks and kills
// gateways), the record of what each writer was acknowledged (History),
// and the invariants the final state must hold against it (Check). The
// end-to-end driver (test/e2e/model_test.go) runs a schedule against the
// real binaries and hands this package what it saw; a failing schedule is
// printed with its seed and shrunk to the shortest failing prefix
// (Shrink).
//
// Each invariant says the promise it stands for, as README.md ("The
// node's own writes") and docs/RELIABILITY.md ("The mirror, judged by a
// model") word it:
//
//   - Lost: nothing the node wrote and was acknowledged is lost: each
//     node-owned field ends as the node's latest acknowledged write (or a
//     later one whose answer was lost), unless the cluster deleted the
//     object; the kubelet's final delete lands after its terminal status.
//   - Reverted: nothing the cluster's writers wrote is reverted by an
//     edge: each cluster-owned field ends as their latest write.
//   - Phantom: nothing appears upstream that no writer wrote; Zombie:
//     nothing the cluster or the node deleted comes back, upstream or on
//     any gateway.
//   - Foreign: no gateway takes, changes or reconciles another node's
//     objects or records: every copy of a node's object names that node's
//     rule, and every pending record is under its own node's name.
//   - Agree: every side agrees within 10 s of the links' return (15 s
//     after a hang): each gateway's copies are the upstream's objects.
//   - History: each local watcher sees one true history: resourceVersions
//     only grow, no event repeats an unchanged object, and no relist
//     (410) happens but after a restart of the gateway it watches.
package model
