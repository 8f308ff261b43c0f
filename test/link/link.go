// Package link is the network between an edge and its upstream in tests:
// a TCP proxy on loopback that a test cuts, hangs and restores. The
// end-to-end suites (test/e2e) and the in-process ones (server) share it.
package link

import (
	"fmt"
	"net"
	"sync"
	"testing"
	"time"
)

// Link is the network between the edge and the upstream: a TCP proxy on
// loopback. Cut closes its listener and every open connection, so the
// edge sees EOF at once and new connections are refused (a refused link);
// Hang keeps every connection open and accepts new ones, but moves no byte
// either way (a hung link: a dead router, a tunnel that stalls); Slow
// delays every chunk (a congested link); Restore ends any.
type Link struct {
	target string
	// Addr is where the edge connects.
	Addr string

	mu     sync.Mutex
	ln     net.Listener
	conns  map[net.Conn]struct{}
	hung   bool
	moving *sync.Cond // signalled when hung turns false
	// delay holds each chunk that long: a slow link (a congested
	// cellular uplink).
	delay time.Duration
}

// New starts a link to target (host:port); it is cut at the end of the
// test.
func New(t testing.TB, target string) *Link {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := &Link{target: target, Addr: ln.Addr().String(), ln: ln, conns: map[net.Conn]struct{}{}}
	l.moving = sync.NewCond(&l.mu)
	go l.accept(ln)
	t.Cleanup(l.Cut)
	return l
}

func (l *Link) accept(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go l.forward(ln, c)
	}
}

func (l *Link) forward(ln net.Listener, c net.Conn) {
	u, err := net.DialTimeout("tcp", l.target, 5*time.Second)
	if err != nil {
		c.Close()
		return
	}
	l.mu.Lock()
	if l.ln != ln {
		// Cut while dialling.
		l.mu.Unlock()
		c.Close()
		u.Close()
		return
	}
	l.conns[c], l.conns[u] = struct{}{}, struct{}{}
	l.mu.Unlock()
	done := make(chan struct{}, 2)
	go func() { l.copy(u, c); done <- struct{}{} }()
	go func() { l.copy(c, u); done <- struct{}{} }()
	<-done
	c.Close()
	u.Close()
	l.mu.Lock()
	delete(l.conns, c)
	delete(l.conns, u)
	l.mu.Unlock()
}

// copy moves bytes from src to dst, holding each read while the link
// hangs.
func (l *Link) copy(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			l.mu.Lock()
			for l.hung {
				l.moving.Wait()
			}
			delay := l.delay
			l.mu.Unlock()
			time.Sleep(delay)
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// Cut closes the listener and every connection: a refused link.
func (l *Link) Cut() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.hung, l.delay = false, 0
	l.moving.Broadcast()
	if l.ln != nil {
		l.ln.Close()
		l.ln = nil
	}
	for c := range l.conns {
		c.Close()
	}
	clear(l.conns)
}

// Hang stops moving bytes; Restore moves them again.
func (l *Link) Hang() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.hung = true
}

// Slow holds each chunk of data d before it moves on, both ways; Restore
// ends it.
func (l *Link) Slow(d time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.delay = d
}

func (l *Link) Restore() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.hung, l.delay = false, 0
	l.moving.Broadcast()
	if l.ln != nil {
		return
	}
	var ln net.Listener
	var err error
	for range 50 {
		if ln, err = net.Listen("tcp", l.Addr); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		panic(fmt.Sprintf("restoring the link on %s: %v", l.Addr, err))
	}
	l.ln = ln
	go l.accept(ln)
}
