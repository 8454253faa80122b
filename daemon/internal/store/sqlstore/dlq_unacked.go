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
	// Confirm forgets a delivery the source acknowledged: (source, topic,
	// position).
	Confirm string
	// Expire forgets deliveries recorded before a time: (since).
	Expire string
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

// storedDelivery is one element of KeepStored's JSON array.
type storedDelivery struct {
	Source   string `json:"s"`
	Topic    string `json:"t"`
	Position string `json:"p"`
	Digest   string `json:"d"`
}

// keepDeliveries records the deliveries of per-delivery messages of a
// stored batch as unconfirmed.
func (s *Store) keepDeliveries(ctx context.Context, q Querier, batch []dlq.Incoming, now time.Time) error {
	var stored []storedDelivery
	for _, in := range batch {
		if in.PerDelivery {
			stored = append(stored, storedDelivery{in.Position.Source, in.Position.Topic, hex.EncodeToString(in.Position.ID),
				hex.EncodeToString(DigestOf(in))})
		}
	}
	if len(stored) == 0 {
		return nil
	}
	b, err := json.Marshal(stored)
	if err != nil {
		return err
	}
	if _, err := q.Exec(ctx, s.sql.DLQ.Unacked.KeepStored, string(b), now); err != nil {
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

// ConfirmDLQDeliveries implements dlq.Store; it also forgets the
// deliveries that expired (UnackedMaxAge), which no redelivery matches.
func (s *Store) ConfirmDLQDeliveries(ctx context.Context, source string, positions []dlq.Position, now time.Time) error {
	if len(positions) == 0 {
		return nil
	}
	return s.conn.Tx(ctx, func(q Querier) error {
		for _, p := range positions {
			if _, err := q.Exec(ctx, s.sql.DLQ.Unacked.Confirm, source, p.Topic, p.ID); err != nil {
				return fmt.Errorf("confirm a delivery: %w", err)
			}
		}
		if _, err := q.Exec(ctx, s.sql.DLQ.Unacked.Expire, now.Add(-UnackedMaxAge)); err != nil {
			return fmt.Errorf("forget expired deliveries: %w", err)
		}
		return nil
	})
}
