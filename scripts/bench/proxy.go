package main

import (
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// linkProxy is the TCP link between the edge and its upstream, which the
// benchmark cuts and restores: cut closes the listener and every
// connection, as a lost uplink does; restore listens again on the same
// port, so the edge's kubeconfig stays valid. It counts the bytes it
// forwards each way, as they go: a watch's connection may stay open for
// the whole measurement.
type linkProxy struct {
	addr   string // 127.0.0.1:port, fixed by the first listen
	target string
	// sent went to the target (upstream), received came from it.
	sent, received atomic.Int64

	mu    sync.Mutex
	ln    net.Listener
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

// newLinkProxy listens on a free loopback port and forwards to target.
func newLinkProxy(target string) (*linkProxy, error) {
	p := &linkProxy{addr: "127.0.0.1:0", target: target, conns: map[net.Conn]struct{}{}}
	if err := p.restore(); err != nil {
		return nil, err
	}
	p.addr = p.ln.Addr().String()
	return p, nil
}

// restore listens again (Go sets SO_REUSEADDR, so the port is free at once).
func (p *linkProxy) restore() error {
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		return fmt.Errorf("proxy listening on %s: %w", p.addr, err)
	}
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	p.wg.Add(1)
	go p.accept(ln)
	return nil
}

func (p *linkProxy) accept(ln net.Listener) {
	defer p.wg.Done()
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		p.wg.Add(1)
		go p.forward(c)
	}
}

func (p *linkProxy) forward(c net.Conn) {
	defer p.wg.Done()
	u, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil {
		c.Close()
		return
	}
	if !p.track(c, u) {
		c.Close()
		u.Close()
		return
	}
	done := make(chan struct{})
	go func() {
		io.Copy(countedWriter{u, &p.sent}, c)
		u.Close()
		close(done)
	}()
	io.Copy(countedWriter{c, &p.received}, u)
	c.Close()
	<-done
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, u)
	p.mu.Unlock()
}

// bytes are the bytes forwarded so far to the target and from it.
func (p *linkProxy) bytes() (sent, received int64) {
	return p.sent.Load(), p.received.Load()
}

// countedWriter adds what it writes to n; it hides the connection's
// ReadFrom, so io.Copy counts every chunk instead of splicing.
type countedWriter struct {
	w io.Writer
	n *atomic.Int64
}

func (c countedWriter) Write(b []byte) (int, error) {
	k, err := c.w.Write(b)
	c.n.Add(int64(k))
	return k, err
}

// track records a connection pair unless the link was cut meanwhile.
func (p *linkProxy) track(c, u net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln == nil {
		return false
	}
	p.conns[c], p.conns[u] = struct{}{}, struct{}{}
	return true
}

// cut closes the listener and every connection, and waits for the
// forwarding goroutines to end.
func (p *linkProxy) cut() {
	p.mu.Lock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}
