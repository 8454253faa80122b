package plugintest

import (
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// Proxy forwards TCP connections to a store and can cut them, so that a
// fixture can take the store away from the plugin without stopping it:
// point the plugin's config at Addr, and implement StoreOutage with Stop
// and Start (and FailureInjector with Stop, returning Start).
type Proxy struct {
	target string
	addr   string

	mu      sync.Mutex
	ln      net.Listener
	conns   map[net.Conn]bool
	stopped bool
}

// NewProxy listens on a free port of 127.0.0.1 and forwards every
// connection to target (host:port). It is closed at cleanup.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("proxy: %v", err)
	}
	p := &Proxy{target: target, addr: ln.Addr().String(), conns: map[net.Conn]bool{}}
	p.serve(ln)
	t.Cleanup(p.Stop)
	return p
}

// Addr is the proxy's host:port, for the plugin's config.
func (p *Proxy) Addr() string { return p.addr }

// Stop closes the listener and every connection through the proxy: the
// plugin's connections break and new ones are refused, as when the store's
// server goes down.
func (p *Proxy) Stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		return
	}
	p.stopped = true
	_ = p.ln.Close()
	for c := range p.conns {
		_ = c.Close()
	}
	p.conns = map[net.Conn]bool{}
}

// Start listens again on the same address.
func (p *Proxy) Start(t testing.TB) {
	t.Helper()
	p.mu.Lock()
	if !p.stopped {
		p.mu.Unlock()
		return
	}
	p.mu.Unlock()
	var ln net.Listener
	var err error
	for i := 0; i < 100; i++ { // the port may linger for a moment
		if ln, err = net.Listen("tcp", p.addr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("proxy: listen again on %s: %v", p.addr, err)
	}
	p.mu.Lock()
	p.stopped = false
	p.mu.Unlock()
	p.serve(ln)
}

func (p *Proxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.forward(c)
		}
	}()
}

func (p *Proxy) forward(c net.Conn) {
	up, err := net.DialTimeout("tcp", p.target, 10*time.Second)
	if err != nil {
		_ = c.Close()
		return
	}
	p.mu.Lock()
	if p.stopped {
		p.mu.Unlock()
		_ = c.Close()
		_ = up.Close()
		return
	}
	p.conns[c], p.conns[up] = true, true
	p.mu.Unlock()
	var once sync.Once
	closeBoth := func() {
		once.Do(func() {
			_ = c.Close()
			_ = up.Close()
			p.mu.Lock()
			delete(p.conns, c)
			delete(p.conns, up)
			p.mu.Unlock()
		})
	}
	go func() {
		_, _ = io.Copy(up, c)
		closeBoth()
	}()
	_, _ = io.Copy(c, up)
	closeBoth()
}
