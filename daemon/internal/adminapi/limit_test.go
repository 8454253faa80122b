package adminapi

import (
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestLimitListenerHoldsAtMostNAndKeepsTheUnixConn(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.sock")
	inner, err := net.Listen("unix", path)
	require.NoError(t, err)
	l := newLimitListener(inner, 2)
	for i := 0; i < 4; i++ {
		c, err := net.Dial("unix", path)
		require.NoError(t, err)
		defer c.Close()
	}
	accepted := make(chan net.Conn, 3)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				close(accepted)
				return
			}
			accepted <- c
		}
	}()
	first, second := <-accepted, <-accepted
	_, ok := first.(*limitedConn).Conn.(*net.UnixConn)
	require.True(t, ok, "the Unix connection underneath stays reachable for SO_PEERCRED")
	select {
	case <-accepted:
		t.Fatal("a third connection was accepted while two were held")
	case <-time.After(200 * time.Millisecond):
	}
	require.NoError(t, first.Close())
	_ = first.Close() // a second Close must not give the slot back again
	third := <-accepted
	require.NotNil(t, third)
	select {
	case <-accepted:
		t.Fatal("a double Close freed two slots")
	case <-time.After(200 * time.Millisecond):
	}
	// Every slot taken: Close must end the Accept waiting for one.
	require.NoError(t, l.Close())
	select {
	case _, open := <-accepted:
		require.False(t, open, "Accept returned after Close")
	case <-time.After(5 * time.Second):
		t.Fatal("Accept still waits after Close")
	}
	second.Close()
	third.Close()
}
