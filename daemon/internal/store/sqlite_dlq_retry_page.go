package store

import (
	"context"
	"errors"

	"github.com/google/uuid"
	"github.com/lifecycled/lifecycled/daemon/internal/derrors"
	"github.com/lifecycled/lifecycled/daemon/internal/dlq"
)

// RetryDLQPage implements dlq.OperationStore on SQLite with the claim
// written before the send and the outcomes after it: two row versions per
// message. SQLite has one writer, and a transaction held over the send
// would keep every other writer (the intake first) waiting for the broker.
func (s *SQLite) RetryDLQPage(ctx context.Context, p dlq.RetryPage) ([]dlq.Recorded, error) {
	got, err := s.claimDLQIDs(ctx, p.Items, p.Operation, p.Claim)
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
			continue
		}
		r, err := s.skippedItem(ctx, it)
		if err != nil {
			return nil, err
		}
		skipped = append(skipped, r)
	}
	if len(skipped) > 0 {
		// Read after the messages: a daemon that lost the operation wrote
		// its answers with the outcomes that ended its claims, so a
		// message read as no longer under its claim has its answer here.
		answered, err := s.answeredItems(ctx, s.db, p.Operation, p.Items)
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
	release := func() {}
	if p.Hold != nil {
		release = p.Hold(claimed)
	}
	outcomes, progress := p.Send(claimed, skipped)
	release()
	if len(outcomes) == 0 {
		// Nothing was sent: the page's progress is all there is to record.
		if progress == nil {
			return nil, nil
		}
		if pr := progress(nil); pr != nil {
			return nil, s.AdvanceDLQOperation(ctx, *pr)
		}
		return nil, nil
	}
	var lost error
	answer, err := s.finishDLQ(ctx, p.Claim.Owner, p.Now(), outcomes, s.writeOutcomes(ctx, p.Now()), func(q querier, answer []dlq.Recorded) error {
		lost = nil
		if progress == nil {
			return nil
		}
		if pr := progress(answer); pr != nil {
			lost = s.advance(ctx, q, *pr)
			if errors.Is(lost, derrors.ErrLeaseLost) {
				return s.markAnswered(ctx, q, *pr)
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
