// Package etcdembed runs kubestore's single-member etcd server inside the
// process, in <data-dir>/etcd, reachable only on a unix socket in that 0700
// directory (no TCP port), tuned for small memory and few flash writes.
//
//	srv, err := etcdembed.Start(ctx, cfg) // waits for ready, at most --etcd-start-timeout
//	if err != nil { ... }
//	defer srv.Close()
//	client, err := clientv3.New(clientv3.Config{Endpoints: srv.Endpoints()})
//
// With --etcd-servers kubestore does not start it and talks to an external
// etcd cluster instead (see package cacher).
package etcdembed
