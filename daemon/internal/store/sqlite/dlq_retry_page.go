package sqlite

import (
	"context"
	"errors"

	"github.com/google/uuid"
	"github.com/lifecycled/lifecycled/daemon/internal/derrors"
	"github.com/lifecycled/lifecycled/daemon/internal/dlq"
	"github.com/lifecycled/lifecycled/daemon/internal/store/sqlstore"
)

// RetryDLQPage implements sqlstore.Driver with the claim
// written before the send and the outcomes after it: two row versions per
// message. SQLite has one writer, and a transaction held over the send
// would keep every other writer (the intake first) waiting for the broker.
func (s *driver) RetryDLQPage(ctx context.Context, p dlq.RetryPage) ([]dlq.Recorded, error) {
	got, err := s.store.ClaimDLQIDs(ctx, p.Items, p.Operation, p.Claim)
	if err != nil {
		return nil, err
	}
	byID := make(map[uuid.UUID]dlq.Message, len(got))
	for _, m := range got {
		byID[m.ID] = m
	}
	var (
		claimed []dlq.Message
		skipped []dlq.ItemResult
	)
	for _, it := range p.Items {
		if m, ok := byID[it.ID]; ok {
			claimed = append(claimed, m)
		}
	}
	// Held from the claim on, before any other round trip to the store,
	// until the outcomes are recorded (FinishOutcomes below), not only
	// sent. Reading the skipped items takes a statement each, and on a
	// busy store they took longer than the lease: the release of expired
	// leases then gave the claimed messages back to PENDING before the
	// hold counted them as being sent, the automatic retries took them,
	// and both sent attempt 1. Held, a recording that waits past the lease
	// cannot let this daemon take them over either.
	if p.Hold != nil {
		defer p.Hold(claimed)()
	}
	for _, it := range p.Items {
		if _, ok := byID[it.ID]; ok {
			continue
		}
		r, err := s.store.SkippedItem(ctx, it)
		if err != nil {
			return nil, err
		}
		skipped = append(skipped, r)
	}
	if len(skipped) > 0 {
		// Read after the messages: a daemon that lost the operation wrote
		// its answers with the outcomes that ended its claims, so a
		// message read as no longer under its claim has its answer here.
		answered, err := s.store.AnsweredItems(ctx, s.conn, p.Operation, p.Items)
		if err != nil {
			return nil, err
		}
		for i, r := range skipped {
			if a, ok := answered[r.Seq]; ok {
				a.ID = r.ID
				skipped[i] = a
			}
		}
	}
	outcomes, progress := p.Send(claimed, skipped)
	if len(outcomes) == 0 {
		// Nothing was sent: the page's progress is all there is to record.
		if progress == nil {
			return nil, nil
		}
		if pr := progress(nil); pr != nil {
			return nil, s.store.AdvanceDLQOperation(ctx, *pr)
		}
		return nil, nil
	}
	var lost error
	answer, err := s.store.FinishOutcomes(ctx, p.Claim.Owner, p.Now(), outcomes, s.store.WriteOutcomes(ctx, p.Now()), func(q sqlstore.Querier, answer []dlq.Recorded) error {
		lost = nil
		if progress == nil {
			return nil
		}
		if pr := progress(answer); pr != nil {
			lost = s.store.Advance(ctx, q, *pr)
			if errors.Is(lost, derrors.ErrLeaseLost) {
				return s.store.MarkAnswered(ctx, q, *pr)
			}
			return lost
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return answer, lost
}
