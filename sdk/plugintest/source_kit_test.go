package plugintest_test

import (
	"os"
	"os/exec"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/sdk"
	"github.com/lifecycled/lifecycled/sdk/plugintest"
	"github.com/lifecycled/lifecycled/sdk/plugintest/internal/testplugins/dirbroker"
)

// dirFixture is the directory broker behind the dirsource test plugin,
// driven as the broker's own tools would. Its topics have names no Kafka
// topic can have.
type dirFixture struct {
	b              dirbroker.Broker
	mapHeaders     bool
	claimOrderKept bool
	leak           bool
}

func newDirFixture(t testing.TB, mapHeaders, claimOrderKept bool) *dirFixture {
	f := &dirFixture{b: dirbroker.Broker{Dir: t.TempDir()}, mapHeaders: mapHeaders, claimOrderKept: claimOrderKept}
	require.NoError(t, f.b.CreateTopic(f.DLQTopic()))
	require.NoError(t, f.b.CreateTopic(f.RepublishTopic()))
	return f
}

func (f *dirFixture) Config(testing.TB) map[string]any {
	return map[string]any{"dir": f.b.Dir, "topic": f.DLQTopic(), "map_headers": f.mapHeaders, "claim_order_kept": f.claimOrderKept,
		"password": "s3cret-dir-pw", "leak_password": f.leak}
}

func (f *dirFixture) DLQTopic() string       { return "orders:dlq" }
func (f *dirFixture) RepublishTopic() string { return "orders/order.created" }

func (f *dirFixture) Produce(t testing.TB, msgs []plugintest.Produced) {
	out := make([]dirbroker.Message, len(msgs))
	for i, m := range msgs {
		out[i] = dirbroker.Message{Key: m.Key, Value: m.Value}
		for _, h := range m.Headers {
			out[i].Headers = append(out[i].Headers, dirbroker.Header{Key: h.Key, Value: h.Value})
		}
	}
	_, err := f.b.Append(f.DLQTopic(), out...)
	require.NoError(t, err)
}

func (f *dirFixture) Consume(t testing.TB, topic string, n int) []plugintest.Produced {
	stored, err := f.b.Read(topic, 0, n)
	require.NoError(t, err)
	out := make([]plugintest.Produced, len(stored))
	for i, m := range stored {
		out[i] = plugintest.Produced{Key: m.Key, Value: m.Value}
		for _, h := range m.Headers {
			out[i].Headers = append(out[i].Headers, sdk.Header{Key: h.Key, Value: h.Value})
		}
	}
	return out
}

// runSourceKit runs the source kit against dirsource, its headers kept in
// order or through a map, declared as headers.
func runSourceKit(t *testing.T, binary string, mapHeaders, claimOrderKept bool) {
	f := newDirFixture(t, mapHeaders, claimOrderKept)
	plugintest.RunDLQSource(t, plugintest.SourceOptions{
		Binary:  binary,
		Fixture: f,
		BadConfigs: map[string]map[string]any{
			"missing dir": {"topic": f.DLQTopic()},
			"unknown key": {"dir": f.b.Dir, "topic": f.DLQTopic(), "topics": "x"},
		},
	})
}

// TestSourceKitPassesSourcesAsTheyDeclareTheirHeaders: a source that keeps
// headers in order passes declaring them kept; one whose broker client hands
// them over as a map (and sorts them) passes declaring them not kept, as a
// RabbitMQ source on amqp091-go must (issue 29: the kit demanded an order
// no such plugin can keep).
func TestSourceKitPassesSourcesAsTheyDeclareTheirHeaders(t *testing.T) {
	t.Parallel()
	bin := testPlugin(t, "dirsource")
	t.Run("in order, declared kept", func(t *testing.T) { runSourceKit(t, bin, false, false) })
	t.Run("through a map, declared not kept", func(t *testing.T) { runSourceKit(t, bin, true, false) })
}

// TestSourceKitHelper runs the source kit against dirsource with map
// headers declared exact; TestSourceKitFailsAMapSourceDeclaredExact starts
// it.
func TestSourceKitHelper(t *testing.T) {
	bin := os.Getenv("PLUGINTEST_SOURCE_KIT_PLUGIN")
	if bin == "" {
		t.Skip("run by TestSourceKitFailsAMapSourceDeclaredExact and TestSourceKitFailsASourceThatLeaksItsPassword")
	}
	if os.Getenv("PLUGINTEST_SOURCE_KIT_LEAK") != "" {
		f := newDirFixture(t, false, false)
		f.leak = true
		plugintest.RunDLQSource(t, plugintest.SourceOptions{Binary: bin, Fixture: f,
			BadConfigs: map[string]map[string]any{"missing dir": {"topic": f.DLQTopic()}}})
		return
	}
	runSourceKit(t, bin, true, true)
}

// TestSourceKitFailsASourceThatLeaksItsPassword: a source that writes a
// secret of its config to stderr fails, and the failure says where.
func TestSourceKitFailsASourceThatLeaksItsPassword(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(os.Args[0], "-test.run=^TestSourceKitHelper$", "-test.v", "-test.count=1", "-test.timeout=5m")
	cmd.Env = append(os.Environ(), "PLUGINTEST_SOURCE_KIT_PLUGIN="+testPlugin(t, "dirsource"), "PLUGINTEST_SOURCE_KIT_LEAK=1")
	out, err := cmd.CombinedOutput()
	require.Error(t, err, "the kit passed a source that leaks its password:\n%s", out)
	require.Contains(t, string(out), "hold the secret from Config.password")
	require.NotContains(t, string(out), "s3cret-dir-pw", "the kit masks what it found")
}

// TestSourceKitFailsAMapSourceDeclaredExact: the order check is not lost
// for the sources that declare it; the failure says what to do.
func TestSourceKitFailsAMapSourceDeclaredExact(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(os.Args[0], "-test.run=^TestSourceKitHelper$", "-test.v", "-test.count=1", "-test.timeout=5m")
	cmd.Env = append(os.Environ(), "PLUGINTEST_SOURCE_KIT_PLUGIN="+testPlugin(t, "dirsource"))
	out, err := cmd.CombinedOutput()
	require.Error(t, err, "the kit passed a source that reorders headers, declared exact:\n%s", out)
	require.Contains(t, string(out), "in this order: keep the broker's order")
	require.Contains(t, string(out), "declare SourceTraits.HeaderOrderKept = false")
}
