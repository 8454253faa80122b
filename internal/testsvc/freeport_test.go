package testsvc

import (
	"fmt"
	"net"
	"testing"
)

// TestFreePortIsOutsideTheEphemeralRange: the port is one no outgoing
// connection can be holding, and it can be listened on.
func TestFreePortIsOutsideTheEphemeralRange(t *testing.T) {
	low, _ := ephemeralRange()
	for i := 0; i < 20; i++ {
		port := FreePort(t)
		if port < freePortFloor || port >= low {
			t.Fatalf("port %d is not in [%d, %d)", port, freePortFloor, low)
		}
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			t.Fatalf("listen on the free port: %v", err)
		}
		l.Close()
	}
}
