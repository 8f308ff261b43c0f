// Package tunnel carries the cloud's connections to a gateway's kubelet
// (kubectl logs, exec, attach, port-forward and the node proxy, as the
// cluster's kube-apiserver makes them) through a connection the gateway
// opens itself, so that a gateway behind NAT or a cellular link is reached
// without accepting any connection.
//
// Two ends, one binary:
//   - the gateway (Client) dials the tunnel endpoint over TLS, as its node
//     (the node's client certificate, or the bearer token of its mirror's
//     credentials), and answers through it only connections to its own
//     node's kubelet: the addresses and the kubelet port its Node reports;
//   - the endpoint (Endpoint, `kubestore tunnel-endpoint`, run beside
//     kube-apiserver) takes kube-apiserver's HTTP CONNECT requests (its
//     egress selector's `cluster` egress over a unix socket or TCP), finds
//     the node whose Node object owns the destination address, and opens a
//     stream to that node's gateway: gateway A never receives node B's
//     traffic, and an address no node or two nodes claim is refused.
//
// The connection is an HTTP/1.1 upgrade to Protocol, then one
// hashicorp/yamux session in which the endpoint opens a stream per
// connection. A stream starts with the destination ("host:port\n") and the
// gateway's answer ("OK\n", or "ERR reason\n"); the bytes of the
// connection follow. rancher/remotedialer, which k3s runs for the same
// purpose, is not usable on this tree's Go (its served releases need a
// newer toolchain); yamux is the multiplexer Consul, Nomad and Vault run.
//
// Upstream's own answer is konnectivity (KEP-1281), whose server and agent
// are not available as modules here; kube-apiserver's side is the same
// egress selector either way
// (k8s.io/apiserver/pkg/server/egressselector).
package tunnel

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/yamux"
)

// Protocol is the name of the upgrade a gateway asks for.
const Protocol = "kubestore-tunnel/1"

// Path is where an endpoint takes a gateway's tunnel.
const Path = "/connect"

// maxLine bounds a stream's header line.
const maxLine = 512

// dialTimeout bounds a dial: the gateway's of the endpoint and of its
// kubelet, and the cluster's reviews of a gateway.
const dialTimeout = 10 * time.Second

// answerTimeout bounds the endpoint's wait for a gateway's answer to a
// stream's destination (the gateway's dial of its own kubelet is local):
// over a tunnel whose link hangs, kube-apiserver's connection fails
// within it, and the keepalive ends the tunnel within 25 s.
const answerTimeout = 5 * time.Second

// yamuxConfig is the session's configuration on both ends: a keepalive
// every 15 s, so that a link that went away without a FIN is noticed
// within 30 s (yamux's default write timeout 10 s on top), and yamux's
// own logging off (errors are returned and logged by the caller).
func yamuxConfig() *yamux.Config {
	c := yamux.DefaultConfig()
	c.KeepAliveInterval = 15 * time.Second
	c.LogOutput = io.Discard
	return c
}

// readLine reads one header line of a stream, byte by byte: what follows
// it is the connection's, not the reader's.
func readLine(r io.Reader) (string, error) {
	var b strings.Builder
	var one [1]byte
	for b.Len() < maxLine {
		if _, err := io.ReadFull(r, one[:]); err != nil {
			return "", err
		}
		if one[0] == '\n' {
			return b.String(), nil
		}
		b.WriteByte(one[0])
	}
	return "", fmt.Errorf("a tunnel header line longer than %d bytes", maxLine)
}

// answer is the gateway's reply to a stream's destination: nil for OK.
func answer(w io.Writer, refused error) error {
	line := "OK\n"
	if refused != nil {
		line = "ERR " + oneLine(refused.Error()) + "\n"
	}
	_, err := io.WriteString(w, line)
	return err
}

// readAnswer reads the gateway's answer: nil for OK, the gateway's
// reason otherwise.
func readAnswer(r io.Reader) error {
	line, err := readLine(r)
	if err != nil {
		return err
	}
	if line == "OK" {
		return nil
	}
	return errors.New(strings.TrimPrefix(line, "ERR "))
}

// oneLine makes s fit a header line and an HTTP reason phrase.
func oneLine(s string) string {
	s = strings.Map(func(r rune) rune {
		if r == '\r' || r == '\n' {
			return ' '
		}
		return r
	}, s)
	if len(s) > maxLine-8 {
		s = s[:maxLine-8]
	}
	return s
}

// splice copies both ways between a and b until either side ends, then
// closes both.
func splice(a, b net.Conn) {
	var once sync.Once
	done := func() {
		once.Do(func() {
			a.Close()
			b.Close()
		})
	}
	go func() {
		io.Copy(a, b)
		done()
	}()
	io.Copy(b, a)
	done()
}

// bufferedConn is a connection whose first bytes a bufio.Reader may
// already hold (read with the upgrade's response).
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c bufferedConn) Read(p []byte) (int, error) { return c.r.Read(p) }
