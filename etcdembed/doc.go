// Package etcdembed is kubestore's one home for etcd: it runs the etcd
// member inside the process, in <data-dir>/etcd, its clients reaching it
// only on unix sockets in that 0700 directory: etcd.sock for gRPC clients,
// http.sock for etcd's HTTP endpoints. A gateway alone is a member of its
// own; a site's member (--peer-advertise-address) also listens on the
// peer port, TCP with mutual TLS between members only (site.go). It is
// tuned for small memory and few flash writes; it owns the member's
// identity (Start and Restore give it the same) and the configuration of
// every client, to the embedded member or to an external cluster
// (--etcd-servers).
//
//	srv, err := etcdembed.Start(ctx, cfg) // waits for ready, at most --etcd-start-timeout
//	if err != nil { ... }
//	defer srv.Close()
//	client, err := etcdembed.Dial(srv.Endpoints(), cfg.Etcd, cfg.Log, srv.WriteGuards())
//
// With --etcd-servers kubestore does not start it: Endpoints names the
// external cluster and Dial (ClientConfig) adds its TLS files.
package etcdembed
