// Package ports hands tests and the bench loopback TCP ports for listeners
// they name by number (a gateway's API and peer ports, an etcd's client URL,
// a hollow kubelet's ports).
package ports

import (
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"sync"
	"testing"
)

// handedOut are the ports Pick has returned in this process. The kernel
// may hand a port out again as soon as it is closed, so two gateways of one
// site, each given a port of its own call, could get the same one (CI saw
// gw-b and gw-c both given 39887): a port is never returned twice.
var handedOut = struct {
	sync.Mutex
	ports map[int]bool
}{ports: map[int]bool{}}

// The ports Pick hands out: above the registered ports most services use,
// below Linux's default ephemeral range (net.ipv4.ip_local_port_range,
// 32768-60999). A port in the ephemeral range that a listener was given
// and closed again can be taken by any outgoing connection before its new
// owner binds it (the bench's 30 gateways and kubelets open many: a hollow
// kubelet failed with "address already in use"); a port below it only by a
// listener that asks for that number.
const (
	Low  = 20000
	High = 32768
)

// Pick returns n loopback ports in [Low, High) nothing listens on now,
// none of them returned before in this process. Another process may still
// bind one before its user does; that is rare, and fails that start
// clearly.
func Pick(n int) ([]int, error) {
	handedOut.Lock()
	defer handedOut.Unlock()
	var out []int
	for tries := 0; len(out) < n; tries++ {
		if tries == 100*(High-Low) {
			return nil, fmt.Errorf("no free loopback port left in [%d, %d)", Low, High)
		}
		port := Low + rand.IntN(High-Low)
		if handedOut.ports[port] {
			continue
		}
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			continue
		}
		ln.Close()
		handedOut.ports[port] = true
		out = append(out, port)
	}
	return out, nil
}

// Free is Pick for a test, which it fails when no port is left.
func Free(t testing.TB, n int) []int {
	t.Helper()
	out, err := Pick(n)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
