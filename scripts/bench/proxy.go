package main

import (
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// linkProxy is the TCP link between the edge and its upstream, which the
// benchmark cuts and restores: cut closes the listener and every
// connection, as a lost uplink does; restore listens again on the same
// port, so the edge's kubeconfig stays valid.
type linkProxy struct {
	addr   string // 127.0.0.1:port, fixed by the first listen
	target string

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
		io.Copy(u, c)
		u.Close()
		close(done)
	}()
	io.Copy(c, u)
	c.Close()
	<-done
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, u)
	p.mu.Unlock()
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
