package sqlstore

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/lifecycled/lifecycled/daemon/internal/derrors"
	"github.com/lifecycled/lifecycled/daemon/internal/dlq"
)

// UnackedSQL keeps the deliveries of sources with per-delivery positions
// whose acknowledgement is not confirmed (dlq_unacked; see
// migrations/postgres/024_dlq_opaque_positions.up.sql).
type UnackedSQL struct {
	// Take removes one unconfirmed delivery of this content recorded since
	// a time, and returns its message id: (source, topic, digest, since);
	// no row when there is none.
	Take string
	// Keep records a delivery of a message: (source, topic, position,
	// digest, message id, now); nothing when the position is recorded.
	Keep string
	// KeepStored records the deliveries at positions intake stored, in one
	// statement: (JSON array of {"s": source, "t": topic, "p": position in
	// hex, "d": digest in hex}, now).
	KeepStored string
	// Confirm forgets the deliveries the source acknowledged: (JSON array
	// of {"s", "t", "p"} as KeepStored's).
	Confirm string
	// Mark sets whether a Commit of the deliveries is under way with an
	// outcome not known: (JSON array as Confirm's, committing).
	Mark string
	// Expire forgets deliveries recorded before a time: (since).
	Expire string
	// Arrays: KeepStored, Confirm and Mark take the deliveries as arrays
	// (sources, topics, positions, digests) in place of the JSON array, for
	// PostgreSQL, whose planner joins typed arrays on the indexes.
	Arrays bool
}

// UnackedMaxAge is how long a delivery whose acknowledgement was never
// confirmed is kept to match a redelivery with. Its broker redelivers
// within seconds of the channel closing (or when the daemon reconnects);
// one kept longer is most likely an acknowledgement that did go through
// although Commit failed, and would take a later identical message for a
// redelivery of it. Past this age a redelivery is stored again: a
// duplicate, never a loss.
const UnackedMaxAge = 24 * time.Hour

// takeRedeliveries removes from batch the redeliveries of per-delivery
// messages that match a stored, unconfirmed delivery (one for one), and
// records their new positions for the same message, so that the Commit
// that follows confirms them.
func (s *Store) takeRedeliveries(ctx context.Context, q Querier, batch []dlq.Incoming, now time.Time, res *dlq.IngestResult) ([]dlq.Incoming, error) {
	sql := s.sql.DLQ.Unacked
	var rest []dlq.Incoming
	for i, in := range batch {
		if !in.Redelivered {
			if rest != nil {
				rest = append(rest, in)
			}
			continue
		}
		var id uuid.UUID
		err := q.QueryRow(ctx, sql.Take, in.Position.Source, in.Position.Topic, DigestOf(in), now.Add(-UnackedMaxAge)).Scan(&id)
		if errors.Is(err, derrors.ErrNotFound) {
			if rest != nil {
				rest = append(rest, in)
			}
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("match a redelivery: %w", err)
		}
		if rest == nil {
			rest = append(make([]dlq.Incoming, 0, len(batch)), batch[:i]...)
		}
		if _, err := q.Exec(ctx, sql.Keep, in.Position.Source, in.Position.Topic, in.Position.ID, DigestOf(in), id, now); err != nil {
			return nil, fmt.Errorf("record a redelivery: %w", err)
		}
		res.Duplicates++
	}
	if rest == nil {
		return batch, nil
	}
	return rest, nil
}

// delivery names a delivery of a per-delivery source (digest: only for
// KeepStored).
type delivery struct {
	source, topic    string
	position, digest []byte
}

// jsonDelivery is one element of the JSON array of KeepStored, Confirm and
// Mark, bytes in hex.
type jsonDelivery struct {
	Source   string `json:"s"`
	Topic    string `json:"t"`
	Position string `json:"p"`
	Digest   string `json:"d,omitempty"`
}

// deliveryArgs are the parameters that name deliveries: one JSON array,
// or (Arrays) the arrays of sources, topics, positions and digests.
func (s *Store) deliveryArgs(ds []delivery) []any {
	if !s.sql.DLQ.Unacked.Arrays {
		js := make([]jsonDelivery, len(ds))
		for i, d := range ds {
			js[i] = jsonDelivery{d.source, d.topic, hex.EncodeToString(d.position), hex.EncodeToString(d.digest)}
		}
		b, _ := json.Marshal(js)
		return []any{string(b)}
	}
	sources, topics := make([]string, len(ds)), make([]string, len(ds))
	positions, digests := make([][]byte, len(ds)), make([][]byte, len(ds))
	for i, d := range ds {
		sources[i], topics[i], positions[i], digests[i] = d.source, d.topic, d.position, d.digest
	}
	return []any{sources, topics, positions, digests}
}

// keepDeliveries records the deliveries of per-delivery messages of a
// stored batch as unconfirmed.
func (s *Store) keepDeliveries(ctx context.Context, q Querier, batch []dlq.Incoming, now time.Time) error {
	var stored []delivery
	for _, in := range batch {
		if in.PerDelivery {
			stored = append(stored, delivery{in.Position.Source, in.Position.Topic, in.Position.ID, DigestOf(in)})
		}
	}
	if len(stored) == 0 {
		return nil
	}
	if _, err := q.Exec(ctx, s.sql.DLQ.Unacked.KeepStored, append(s.deliveryArgs(stored), now)...); err != nil {
		return fmt.Errorf("record deliveries: %w", err)
	}
	for _, in := range batch {
		if !in.PerDelivery || in.FeedbackOf == nil {
			continue
		}
		// A returning replay applied to its record, not stored: its
		// redelivery must find it too, or it would be applied again (its
		// new position is not among the returns recorded).
		if _, err := q.Exec(ctx, s.sql.DLQ.Unacked.Keep, in.Position.Source, in.Position.Topic, in.Position.ID,
			DigestOf(in), *in.FeedbackOf, now); err != nil {
			return fmt.Errorf("record a delivery: %w", err)
		}
	}
	return nil
}

// MarkDLQDeliveries implements dlq.Store. Confirmed forgets the deliveries
// (and those that expired, which no redelivery matches); Committing makes
// them match no redelivery until the Commit's outcome is known;
// NotCommitted makes them match again.
func (s *Store) MarkDLQDeliveries(ctx context.Context, source string, positions []dlq.Position, state dlq.DeliveryState, now time.Time) error {
	if len(positions) == 0 {
		return nil
	}
	ps := make([]delivery, len(positions))
	for i, p := range positions {
		ps[i] = delivery{source: source, topic: p.Topic, position: p.ID}
	}
	args := s.deliveryArgs(ps)
	return s.conn.Tx(ctx, func(q Querier) error {
		switch state {
		case dlq.DeliveriesConfirmed:
			if _, err := q.Exec(ctx, s.sql.DLQ.Unacked.Confirm, args...); err != nil {
				return fmt.Errorf("confirm deliveries: %w", err)
			}
			if _, err := q.Exec(ctx, s.sql.DLQ.Unacked.Expire, now.Add(-UnackedMaxAge)); err != nil {
				return fmt.Errorf("forget expired deliveries: %w", err)
			}
		case dlq.DeliveriesCommitting, dlq.DeliveriesNotCommitted:
			if _, err := q.Exec(ctx, s.sql.DLQ.Unacked.Mark, append(args, state == dlq.DeliveriesCommitting)...); err != nil {
				return fmt.Errorf("mark deliveries: %w", err)
			}
		default:
			return fmt.Errorf("mark deliveries: unknown state %d", state)
		}
		return nil
	})
}
