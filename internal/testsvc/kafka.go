package testsvc

import (
	"fmt"
	"time"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
)

// KafkaBroker is an in-process Kafka wire-protocol broker (kfake) on a fixed
// port, so that it can be stopped and started again with its data.
type KafkaBroker struct {
	Addr    string
	t       testing.TB
	port    int
	dataDir string
	parts   int
	mu      sync.Mutex
	cluster *kfake.Cluster
}

// Kafka starts a single-broker cluster that creates topics on first use
// with the given number of partitions (at least 1).
func Kafka(t testing.TB, partitions int) *KafkaBroker {
	t.Helper()
	if partitions < 1 {
		partitions = 1
	}
	k := &KafkaBroker{t: t, port: FreePort(t), dataDir: t.TempDir(), parts: partitions}
	k.Addr = fmt.Sprintf("127.0.0.1:%d", k.port)
	k.Start()
	t.Cleanup(k.Stop)
	return k
}

// Start starts the broker (again), with the data it had when stopped.
func (k *KafkaBroker) Start() {
	k.t.Helper()
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.cluster != nil {
		return
	}
	c, err := kfake.NewCluster(
		kfake.NumBrokers(1),
		kfake.Ports(k.port),
		kfake.AllowAutoTopicCreation(),
		kfake.DefaultNumPartitions(k.parts),
		kfake.DataDir(k.dataDir),
		kfake.SyncWrites(),
		// Tests kill consumers; let their sessions end quickly.
		kfake.GroupMinSessionTimeout(time.Second),
	)
	if err != nil {
		k.t.Fatalf("start kfake broker: %v", err)
	}
	k.cluster = c
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
