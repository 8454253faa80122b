package main

import (
	"crypto/tls"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
)

// connection is what every client of the source needs to reach the brokers.
func connection(cfg config, mech sasl.Mechanism, tlsCfg *tls.Config) []kgo.Opt {
	opts := []kgo.Opt{
		kgo.SeedBrokers(cfg.Brokers...),
		kgo.ClientID("lifecycled"),
		kgo.DialTimeout(10 * time.Second),
		kgo.WithLogger(clientLogger{}),
	}
	if tlsCfg != nil {
		opts = append(opts, kgo.DialTLSConfig(tlsCfg))
	}
	if mech != nil {
		opts = append(opts, kgo.SASL(mech))
	}
	return opts
}

// newProducer is the client that republishes and that lists topics and
// offsets: acks=all, one record batch at most max_message_bytes.
//
// A record that has waited metadata_wait for the broker fails, retryable:
// franz-go retries a partition without a leader with fresh metadata until
// then, and a Republish answers before the daemon's call timeout instead
// of leaving it to guess which messages went out. franz-go never fails a
// record whose request is in flight: a slow acknowledgement is waited for.
//
// Its partitioner is franz-go's default: a record with a key goes where a
// Java producer puts it (murmur2 of the key), one without a key to any
// partition. franz-go sends a nil key, value or header value as null and an
// empty one as empty (kbin.AppendVarintBytes).
func newProducer(conn []kgo.Opt, cfg config, metadataWait time.Duration) (*kgo.Client, error) {
	return kgo.NewClient(slices.Concat(conn, []kgo.Opt{
		// A listing or an offset request gives up after this long, as
		// the kafka-go client's timeout did: Configure and Fetch answer.
		kgo.RetryTimeout(10 * time.Second),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerBatchMaxBytes(int32(cfg.MaxMessageBytes)),
		kgo.BrokerMaxWriteBytes(brokerMaxWriteBytes(cfg.MaxMessageBytes)),
		// Sizes are checked against max_message_bytes uncompressed, as
		// before; a compressed batch could also pass a broker that
		// refuses it, or not, depending on the codec.
		kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.ProducerLinger(time.Millisecond),
		// 0 would be no limit, and franz-go takes none under 1 s.
		kgo.RecordDeliveryTimeout(max(time.Second, metadataWait)),
	})...)
}

// brokerMaxWriteBytes is franz-go's limit of a whole produce request: at
// least its default (Kafka's socket.request.max.bytes), room for one full
// batch above it, and never over franz-go's own limit of 1 GiB.
func brokerMaxWriteBytes(maxMessageBytes int) int32 {
	return int32(min(1<<30, max(100<<20, maxMessageBytes+1<<20)))
}

// newConsumer is a consumer group member over topics that commits only
// when told (Commit), reads only committed transactions and reports an
// offset out of range instead of resetting it (see offsets.go).
func newConsumer(conn []kgo.Opt, cfg config, topics []string, refresh, session time.Duration) (*kgo.Client, error) {
	start := kgo.NoResetOffset().AtStart()
	if cfg.StartOffset == "latest" {
		start = kgo.NoResetOffset().AtEnd()
	}
	// New partitions of a topic are seen at a metadata refresh; franz-go
	// allows at most an hour between two.
	metadataAge := min(refresh, time.Hour)
	return kgo.NewClient(slices.Concat(conn, []kgo.Opt{
		kgo.ConsumerGroup(cfg.GroupID),
		kgo.ConsumeTopics(topics...),
		// kafka-go's balancers: a daemon still on the kafka-go plugin and
		// one on this one share a group during a rolling upgrade (a
		// group's members must have a balancer in common).
		kgo.Balancers(kgo.RangeBalancer(), kgo.RoundRobinBalancer()),
		kgo.DisableAutoCommit(),
		// Records of aborted transactions and transaction markers are not
		// dead letters; reading stops at the last stable offset.
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(start),
		kgo.SessionTimeout(session),
		kgo.RebalanceTimeout(session),
		kgo.HeartbeatInterval(min(time.Second, session/3)),
		kgo.FetchMaxWait(250 * time.Millisecond),
		kgo.FetchMaxBytes(16 << 20),
		kgo.MetadataMaxAge(metadataAge),
		kgo.MetadataMinAge(min(5*time.Second, metadataAge)),
	})...)
}
