// Package ports hands tests loopback TCP ports for listeners a test names by
// number (a gateway's API and peer ports, an etcd's client URL).
package ports

import (
	"net"
	"sync"
	"testing"
)

// handedOut are the ports Free has returned in this test binary. The kernel
// may hand a port out again as soon as it is closed, so two gateways of one
// site, each given a port of its own call, could get the same one (CI saw
// gw-b and gw-c both given 39887): a port is never returned twice.
var handedOut = struct {
	sync.Mutex
	ports map[int]bool
}{ports: map[int]bool{}}

// Free returns n loopback ports nothing listens on now, none of them
// returned before in this binary. Another process may still take one before
// the test listens on it; that is rare, and fails the test's start clearly.
func Free(t testing.TB, n int) []int {
	t.Helper()
	handedOut.Lock()
	defer handedOut.Unlock()
	var out []int
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	for len(out) < n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, ln)
		port := ln.Addr().(*net.TCPAddr).Port
		if handedOut.ports[port] {
			continue
		}
		handedOut.ports[port] = true
		out = append(out, port)
	}
	return out
}
