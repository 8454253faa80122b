package testsvc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// KafkaBroker is an in-process Kafka wire-protocol broker (kfake) on a fixed
// port, so that it can be stopped and started again with its data.
type KafkaBroker struct {
	Addr    string
	t       testing.TB
	port    int
	dataDir string
	parts   int
	extra   []kfake.Opt
	auth    []kgo.Opt // what a client needs to get in
	mu      sync.Mutex
	cluster *kfake.Cluster
}

// Kafka starts a single-broker cluster that creates topics on first use
// with the given number of partitions (at least 1).
func Kafka(t testing.TB, partitions int) *KafkaBroker {
	t.Helper()
	return kafka(t, partitions)
}

// KafkaSASL starts a single-broker cluster that only lets in clients that
// authenticate as user with password over mechanism (PLAIN, SCRAM-SHA-256
// or SCRAM-SHA-512).
func KafkaSASL(t testing.TB, mechanism, user, password string) *KafkaBroker {
	t.Helper()
	var mech sasl.Mechanism
	switch mechanism {
	case "PLAIN":
		mech = plain.Auth{User: user, Pass: password}.AsMechanism()
	case "SCRAM-SHA-256":
		mech = scram.Auth{User: user, Pass: password}.AsSha256Mechanism()
	case "SCRAM-SHA-512":
		mech = scram.Auth{User: user, Pass: password}.AsSha512Mechanism()
	default:
		t.Fatalf("unknown SASL mechanism %q", mechanism)
	}
	k := kafka(t, 1, kfake.EnableSASL(), kfake.Superuser(mechanism, user, password))
	k.auth = []kgo.Opt{kgo.SASL(mech)}
	return k
}

func kafka(t testing.TB, partitions int, extra ...kfake.Opt) *KafkaBroker {
	if partitions < 1 {
		partitions = 1
	}
	k := &KafkaBroker{t: t, dataDir: t.TempDir(), parts: partitions, extra: extra}
	// FreePort's port is free when it answers; another test process may
	// bind it before the broker does (CI saw "address already in use"):
	// then another port, since nobody knows this one yet.
	for try := 0; ; try++ {
		k.port = FreePort(t)
		k.Addr = fmt.Sprintf("127.0.0.1:%d", k.port)
		err := k.start()
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EADDRINUSE) || try == 20 {
			t.Fatalf("start kfake broker: %v", err)
		}
	}
	t.Cleanup(k.Stop)
	return k
}

// Start starts the broker (again), with the data it had when stopped.
func (k *KafkaBroker) Start() {
	k.t.Helper()
	if err := k.start(); err != nil {
		k.t.Fatalf("start kfake broker: %v", err)
	}
}

func (k *KafkaBroker) start() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.cluster != nil {
		return nil
	}
	c, err := kfake.NewCluster(append([]kfake.Opt{
		kfake.NumBrokers(1),
		kfake.Ports(k.port),
		kfake.AllowAutoTopicCreation(),
		kfake.DefaultNumPartitions(k.parts),
		kfake.DataDir(k.dataDir),
		kfake.SyncWrites(),
		// Tests kill consumers; let their sessions end quickly.
		kfake.GroupMinSessionTimeout(time.Second),
	}, k.extra...)...)
	if err != nil {
		return err
	}
	k.cluster = c
	return nil
}

// SlowProduce makes the running broker answer every produce request d
// late (after it is written), so that a sender has its messages in flight
// most of the time; other requests are not held up.
func (k *KafkaBroker) SlowProduce(d time.Duration) {
	k.mu.Lock()
	defer k.mu.Unlock()
	c := k.cluster
	if c == nil {
		k.t.Fatal("SlowProduce: the broker is stopped")
	}
	c.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.SleepControl(func() { time.Sleep(d) })
		return nil, nil, false // the broker handles it as usual
	})
}

// Stop closes the broker; Start brings it back with its data.
func (k *KafkaBroker) Stop() {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.cluster == nil {
		return
	}
	k.cluster.Close()
	k.cluster = nil
}

// Kcat runs kcat (a third-party Kafka client) against the broker with the
// given stdin and returns its stdout.
func (k *KafkaBroker) Kcat(t testing.TB, stdin string, args ...string) string {
	t.Helper()
	if _, err := exec.LookPath("kcat"); err != nil {
		t.Fatal("kcat is needed (Debian package kcat; make test-deps installs it)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "kcat", append([]string{"-b", k.Addr}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("kcat %v: %v\n%s", args, err, errOut.String())
	}
	return out.String()
}

// CreateTopics creates topics with the given partition count.
func (k *KafkaBroker) CreateTopics(t testing.TB, partitions int32, topics ...string) {
	t.Helper()
	c, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(k.Addr)}, k.auth...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resps, err := kadm.NewClient(c).CreateTopics(ctx, partitions, 1, nil, topics...)
	if err != nil {
		t.Fatalf("create topics: %v", err)
	}
	for _, r := range resps {
		if r.Err != nil && !strings.Contains(r.Err.Error(), "TOPIC_ALREADY_EXISTS") {
			t.Fatalf("create topic %s: %v", r.Topic, r.Err)
		}
	}
}

// Client returns a franz-go client for the broker (authenticated when the
// broker wants it), closed at cleanup.
func (k *KafkaBroker) Client(t testing.TB, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	c, err := kgo.NewClient(append(append([]kgo.Opt{kgo.SeedBrokers(k.Addr)}, k.auth...), opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// Cluster is the running kfake cluster (for control functions in tests).
func (k *KafkaBroker) Cluster() *kfake.Cluster {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.cluster
}

// Records is how many records a topic holds: the sum of its partitions'
// end offsets (what was ever produced, on a topic nothing compacts).
func (k *KafkaBroker) Records(t testing.TB, topic string) int64 {
	t.Helper()
	ends, err := kadm.NewClient(k.Client(t)).ListEndOffsets(Context(t, time.Minute), topic)
	if err != nil {
		t.Fatalf("end offsets of %s: %v", topic, err)
	}
	var n int64
	ends.Each(func(o kadm.ListedOffset) { n += o.Offset })
	return n
}
