package adminapi

import (
	"net"
	"sync"
)

// limitListener holds at most n accepted connections at once; the others
// wait in the kernel's backlog. It is golang.org/x/net/netutil's
// LimitListener with one difference that matters here: the accepted
// connection stays reachable (limitedConn.Conn), because the admin API
// reads the caller's SO_PEERCRED from the *net.UnixConn underneath, and
// netutil's wrapper hides it.
type limitListener struct {
	net.Listener
	sem       chan struct{}
	done      chan struct{}
	closeOnce sync.Once
}

func newLimitListener(l net.Listener, n int) *limitListener {
	return &limitListener{Listener: l, sem: make(chan struct{}, n), done: make(chan struct{})}
}

func (l *limitListener) Accept() (net.Conn, error) {
	select {
	case l.sem <- struct{}{}:
	case <-l.done:
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.sem
		return nil, err
	}
	return &limitedConn{Conn: c, release: func() { <-l.sem }}, nil
}

// Close also ends an Accept that waits for a free slot, so that a server
// shutting down with every slot taken does not wait forever.
func (l *limitListener) Close() error {
	l.closeOnce.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// limitedConn gives its slot back when closed (once).
type limitedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
