package testsvc

import (
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// RabbitMQ is a virtual host of its own on the machine's RabbitMQ server
// (127.0.0.1:5672, guest/guest, as `make test-deps` starts it), deleted
// after the test: queues and exchanges of one test never meet another's.
// Tests drive the server with rabbitmqctl, as an operator would.
type RabbitMQ struct {
	t     testing.TB
	VHost string
	// URL is the AMQP URI of the virtual host.
	URL string
}

// NewRabbitMQ creates the virtual host.
func NewRabbitMQ(t testing.TB) *RabbitMQ {
	t.Helper()
	conn, err := net.DialTimeout("tcp", "127.0.0.1:5672", 5*time.Second)
	if err != nil {
		t.Fatalf("RabbitMQ is needed on 127.0.0.1:5672 (`make test-deps` installs and starts rabbitmq-server): %v", err)
	}
	conn.Close()
	Tool(t, "rabbitmqctl", "rabbitmq-server")
	r := &RabbitMQ{t: t, VHost: "lifecycled-test-" + randomSuffix()}
	r.URL = "amqp://guest:guest@127.0.0.1:5672/" + r.VHost
	r.Ctl("add_vhost", r.VHost)
	t.Cleanup(func() { _, _ = exec.Command("rabbitmqctl", "-q", "delete_vhost", r.VHost).CombinedOutput() })
	r.Ctl("set_permissions", "-p", r.VHost, "guest", ".*", ".*", ".*")
	return r
}

// Ctl runs rabbitmqctl with args and returns what it printed.
func (r *RabbitMQ) Ctl(args ...string) string {
	r.t.Helper()
	out, err := exec.Command("rabbitmqctl", append([]string{"-q"}, args...)...).CombinedOutput()
	if err != nil {
		r.t.Fatalf("rabbitmqctl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// CloseConnections closes every client connection to the virtual host, as
// a broker restart or a network cut does.
func (r *RabbitMQ) CloseConnections() {
	r.t.Helper()
	r.Ctl("close_all_connections", "-p", r.VHost, "test: connection cut")
}

// CloseConnectionsNamed closes the virtual host's client connections whose
// client properties hold name (a connection_name, say), and returns how
// many it closed.
func (r *RabbitMQ) CloseConnectionsNamed(name string) int {
	r.t.Helper()
	closed := 0
	// The table, not JSON: close_connection takes the pid as the table
	// prints it (<rabbit@host.1.2.3>), not as JSON does (#PID<1.2.3>).
	for _, line := range strings.Split(r.Ctl("-s", "list_connections", "vhost", "pid", "client_properties"), "\n") {
		f := strings.SplitN(line, "\t", 3)
		if len(f) == 3 && f[0] == r.VHost && strings.Contains(f[2], name) {
			r.Ctl("close_connection", f[1], "test: connection cut")
			closed++
		}
	}
	return closed
}
