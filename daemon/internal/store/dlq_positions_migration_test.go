package store_test

import (
	"database/sql"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/internal/dlq"
	"github.com/lifecycled/lifecycled/daemon/internal/store"
	"github.com/lifecycled/lifecycled/migrations"
	"github.com/lifecycled/lifecycled/sdk"
	"github.com/lifecycled/lifecycled/sdk/kafkaconv"
)

// kafkaDelivery is the Kafka record at partition p, offset o of t as the
// daemon takes it in from the kafka plugin (or a protocol 2 source).
func kafkaDelivery(topic string, p int32, o int64, value string) dlq.Incoming {
	hs := []sdk.Header{{Key: []byte("kafka_dlt-original-topic"), Value: []byte("orders.events.v1")},
		{Key: []byte("kafka_dlt-exception-fqcn"), Value: []byte("java.lang.IllegalStateException")}}
	return dlq.Interpret("kafka", sdk.Protocol2Traits, sdk.DeadLetter{Position: sdk.LogPosition(topic, p, o), Headers: hs,
		Value: []byte(value), Origin: kafkaconv.Origin(hs, "")}, t0, nil)
}

// Migration 024 (opaque positions) keeps what Kafka rows mean: down to
// partition and offset and up again, every message is the same, with the
// same position and updated_at, and a redelivery of a message stored
// before it is still recognised, live or archived. Down is refused while a
// position that is not a Kafka offset is stored: protocol 2 cannot hold
// it, and nothing changes.
func TestOpaquePositionsMigrationKeepsWhatKafkaRowsMeant(t *testing.T) {
	eachEmpty(t, func(t *testing.T, d migrations.Dialect, dsn string) {
		s, err := store.Open(ctx(t), d, dsn)
		require.NoError(t, err)
		live := kafkaDelivery("orders.dlq.v1", 2, 1041, `{"live":1}`)
		old := kafkaDelivery("orders.dlq.v1", 0, 7, `{"archived":1}`)
		ingest(t, s, t0, live, old)
		archived := onlyAt(t, s, "orders.dlq.v1", 7)
		resolve(t, s, archived.ID, t0)
		n, err := s.ArchiveDLQBatch(ctx(t), t0.Add(1e9), 100)
		require.NoError(t, err)
		require.EqualValues(t, 1, n)
		before := onlyMessage(t, s, "orders.dlq.v1")
		require.Equal(t, "p2@1041", before.Position.Display)
		require.NoError(t, s.Close())

		db, err := sql.Open(driverOf(d), dsn)
		require.NoError(t, err)
		defer db.Close()
		steps := stepsThrough(t, d, "dlq_opaque_positions")
		require.NoError(t, migrations.Steps(d, db, -steps))
		require.NoError(t, migrations.Steps(d, db, steps))

		s, err = store.Open(ctx(t), d, dsn)
		require.NoError(t, err)
		defer s.Close()
		after, err := s.GetDLQ(ctx(t), before.ID)
		require.NoError(t, err)
		// What the source said of the origin is not in protocol 2's schema:
		// after down and up it is read from the headers again, as it was
		// then (the replay rules' legacy path).
		before.Origin = dlq.Origin{}
		require.Equal(t, before, *after, "the same message, position and updated_at")
		require.Equal(t, dlq.IngestResult{Duplicates: 2}, ingest(t, s, t0, live, old), "redeliveries, live and archived")
		require.Equal(t, dlq.IngestResult{Inserted: 1}, ingest(t, s, t0, kafkaDelivery("orders.dlq.v1", 2, 1041, `{"another":1}`)),
			"the same position with other content: the topic was created again")

		// A per-delivery source's message: down is refused, nothing changes.
		ingest(t, s, t0, delivery(1, false, "amqp"))
		err = migrations.Steps(d, db, -steps)
		require.Error(t, err)
		require.Regexp(t, `protocol.2.cannot.hold`, err.Error(), "the guard says what it refuses")
		require.Equal(t, 3, count(t, s, `SELECT count(*) FROM dlq.dlq_messages`, `SELECT count(*) FROM dlq_messages`))
	})
}

// onlyAt is the one live message of topic at offset.
func onlyAt(t *testing.T, s store.Store, topic string, offset int64) dlq.Message {
	t.Helper()
	msgs, _, err := s.ListDLQ(ctx(t), dlq.ListFilter{Topic: topic, Page: 1, PageSize: 100})
	require.NoError(t, err)
	for _, m := range msgs {
		if m.Position.Offset() == offset {
			return m
		}
	}
	t.Fatalf("no message of %s at offset %d", topic, offset)
	return dlq.Message{}
}
