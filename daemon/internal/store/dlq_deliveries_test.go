package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/internal/dlq"
	"github.com/lifecycled/lifecycled/daemon/internal/store"
	"github.com/lifecycled/lifecycled/daemon/internal/store/storetest"
	"github.com/lifecycled/lifecycled/sdk"
)

// amqpTraits are those of a broker without stable message ids (AMQP):
// every delivery has a position of its own.
var amqpTraits = sdk.SourceTraits{Acks: sdk.AcksPerMessage, Positions: sdk.PositionsPerDelivery, TypedHeaders: true}

// delivery is what a per-delivery source hands over: delivery tag n of
// queue orders:dlq, with value v.
func delivery(n byte, redelivered bool, v string) dlq.Incoming {
	return dlq.Interpret("rabbitmq", amqpTraits, sdk.DeadLetter{
		Position:    sdk.Position{Topic: "orders:dlq", ID: []byte{0xd, n}, Display: "delivery " + string('0'+n)},
		Value:       []byte(v),
		Headers:     []sdk.Header{{Key: []byte("x-death-count"), Value: []byte("1"), Type: "long"}},
		Origin:      sdk.Origin{Destination: "orders", DestinationFrom: "x-death", ErrorMessage: "rejected"},
		Redelivered: redelivered,
	}, t0, nil)
}

// A broker without message ids redelivers what was stored but whose
// acknowledgement did not complete, flagged redelivered. Each such
// redelivery takes one stored, unconfirmed delivery with the same content
// instead of being stored again, so two identical messages stay two and
// nothing is stored twice; once the Commit is confirmed, an identical
// message is a new one. Nothing else changes.
func TestPerDeliveryRedeliveriesAreMatchedOneForOne(t *testing.T) {
	storetest.Each(t, func(t *testing.T, ctx context.Context, s store.Store) {
		bystander := incoming("orders.dlq.v1", 1, `{"other":true}`)
		ingest(t, s, t0, bystander)
		before := stored(t, s, "orders.dlq.v1")
		rows := func() int {
			return count(t, s, `SELECT count(*) FROM dlq.dlq_messages WHERE dlq_topic = 'orders:dlq'`,
				`SELECT count(*) FROM dlq_messages WHERE dlq_topic = 'orders:dlq'`)
		}
		unconfirmed := func() int {
			return count(t, s, `SELECT count(*) FROM dlq.dlq_unacked`, `SELECT count(*) FROM dlq_unacked`)
		}

		// Two identical messages, first deliveries: two dead letters.
		require.Equal(t, dlq.IngestResult{Inserted: 2}, ingest(t, s, t0, delivery(1, false, "twin"), delivery(2, false, "twin")))
		// The SDK hands the same batch back (the daemon never received it):
		// the same positions, stored once.
		require.Equal(t, dlq.IngestResult{Duplicates: 2}, ingest(t, s, t0, delivery(1, false, "twin"), delivery(2, false, "twin")))
		// The acknowledgement failed; the broker redelivers both, and their
		// new deliveries are the unconfirmed ones now.
		require.Equal(t, dlq.IngestResult{Duplicates: 2}, ingest(t, s, t0, delivery(3, true, "twin"), delivery(4, true, "twin")))
		require.Equal(t, 2, rows())
		require.Equal(t, 2, unconfirmed())
		// Their acknowledgement failed too: one comes again.
		require.Equal(t, dlq.IngestResult{Duplicates: 1}, ingest(t, s, t0, delivery(5, true, "twin")))
		require.Equal(t, 2, rows())

		// Confirmed: the deliveries are forgotten, and an identical
		// redelivered message (one another consumer gave back) is a new
		// dead letter; another content is never matched.
		// A Commit under way whose outcome is not known: they may be
		// acknowledged, so no redelivery takes them (stored again: a
		// duplicate, never an identical message lost); when the source
		// says none was acknowledged, they are taken again.
		pending := []dlq.Position{delivery(4, true, "twin").Position, delivery(5, true, "twin").Position}
		require.NoError(t, s.MarkDLQDeliveries(ctx, "rabbitmq", pending, dlq.DeliveriesCommitting, t0))
		res, err := s.IngestDLQ(ctx, []dlq.Incoming{delivery(9, true, "twin")}, dlq.IngestOptions{Now: t0, MaxRetries: 3})
		require.NoError(t, err)
		require.Equal(t, dlq.IngestResult{Inserted: 1}, res, "committing: not taken")
		require.NoError(t, s.MarkDLQDeliveries(ctx, "rabbitmq", pending, dlq.DeliveriesNotCommitted, t0))
		require.Equal(t, dlq.IngestResult{Duplicates: 1}, ingest(t, s, t0, delivery(10, true, "twin")), "not committed: taken")
		require.Equal(t, 3, rows())
		pending = nil
		for _, n := range []byte{4, 5, 9, 10} {
			pending = append(pending, delivery(n, true, "twin").Position)
		}
		require.NoError(t, s.MarkDLQDeliveries(ctx, "rabbitmq", pending, dlq.DeliveriesConfirmed, t0))
		require.Zero(t, unconfirmed())
		require.Equal(t, dlq.IngestResult{Inserted: 1}, ingest(t, s, t0, delivery(6, true, "twin")))
		require.Equal(t, dlq.IngestResult{Inserted: 1}, ingest(t, s, t0, delivery(7, true, "other")))
		require.Equal(t, 5, rows())
		require.Equal(t, 2, unconfirmed())

		// An unconfirmed delivery older than UnackedMaxAge matches nothing
		// (the acknowledgement most likely went through): stored again, a
		// duplicate rather than a loss.
		later := t0.Add(25 * time.Hour)
		res, err = s.IngestDLQ(ctx, []dlq.Incoming{delivery(8, true, "twin")}, dlq.IngestOptions{Now: later, MaxRetries: 3})
		require.NoError(t, err)
		require.Equal(t, dlq.IngestResult{Inserted: 1}, res)
		require.Equal(t, 6, rows())
		// A confirmation forgets the expired ones too.
		require.NoError(t, s.MarkDLQDeliveries(ctx, "rabbitmq", []dlq.Position{delivery(8, true, "twin").Position}, dlq.DeliveriesConfirmed, later))
		require.Zero(t, unconfirmed())

		require.Equal(t, before, stored(t, s, "orders.dlq.v1"), "the other topic's message is untouched")
	})
}
