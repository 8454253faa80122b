package dlq

import (
	"context"
	"errors"

	"github.com/google/uuid"

	"github.com/lifecycled/lifecycled/daemon/internal/derrors"
)

// operationPage does op's action to one page of its items and records
// what became of each with the operation's progress. run is the run's
// context: a replay page stops between two messages when it ends; the
// other actions finish the page (one transaction, or one republish).
func (s *Service) operationPage(ctx, run context.Context, op *Operation, items []OperationItem) error {
	last := items[len(items)-1].Seq
	progress := OperationProgress{Operation: op.ID, Owner: s.owner, Now: s.now(), Position: last}
	switch op.Action {
	case ActionReplayTo:
		return s.replayPage(ctx, run, op, items)
	default:
		a := PageAction{Action: op.Action, Items: items, UID: op.RequestedByUID, Operation: op.ID, Now: s.now(),
			ReviveFor: func(topic string) Revive { return s.reviveFor(topic, op.RequestedByUID, &op.ID) }}
		_, err := s.store.ApplyDLQOperationPage(ctx, a, progress)
		return err
	}
}

// claimPage claims the page's retryable messages; the others are skipped,
// each with why.
func (s *Service) claimPage(ctx context.Context, items []OperationItem) ([]Message, []ItemResult, error) {
	ids := make([]uuid.UUID, len(items))
	for i, it := range items {
		ids[i] = it.ID
	}
	now := s.now()
	claimed, err := s.store.ClaimDLQIDs(ctx, ids, Claim{Owner: s.owner, Now: now, LeaseUntil: now.Add(s.policy().Lease)})
	if err != nil {
		return nil, nil, err
	}
	got := make(map[uuid.UUID]bool, len(claimed))
	for _, m := range claimed {
		got[m.ID] = true
	}
	var skipped []ItemResult
	for _, it := range items {
		if !got[it.ID] {
			skipped = append(skipped, ItemResult{Seq: it.Seq, ID: it.ID, Outcome: ItemSkipped, Error: s.whyNotRetried(ctx, it.ID)})
		}
	}
	return claimed, skipped, nil
}

// recordRetryPage records a page of a bulk retry: the outcomes of what
// was sent and the page's progress, in one transaction.
func (s *Service) recordRetryPage(ctx context.Context, op *Operation, items []OperationItem, skipped []ItemResult, outcomes []Outcome) error {
	progress := OperationProgress{Operation: op.ID, Owner: s.owner, Now: s.now(), Position: items[len(items)-1].Seq}
	if len(outcomes) == 0 {
		progress.Results = skipped
		return s.store.AdvanceDLQOperation(ctx, progress)
	}
	seqOf := make(map[uuid.UUID]int64, len(items))
	for _, it := range items {
		seqOf[it.ID] = it.Seq
	}
	_, err := s.recordOutcomes(ctx, outcomes, TriggerBulk, func(ctx context.Context, outcomes []Outcome) ([]Recorded, error) {
		return s.store.FinishDLQOperationPage(ctx, s.owner, s.now(), outcomes, func(rec []Recorded) OperationProgress {
			p := progress
			p.Results = append([]ItemResult(nil), skipped...)
			for i, o := range outcomes {
				r := ItemResult{Seq: seqOf[o.ID], ID: o.ID, Outcome: retryItemOutcome(o, rec[i])}
				if !ItemSucceeded(r.Outcome) {
					r.Error = o.Error
				}
				p.Results = append(p.Results, r)
			}
			return p
		})
	})
	return err
}

// retryItemOutcome names what a retry did to one message.
func retryItemOutcome(o Outcome, r Recorded) string {
	switch {
	case o.Event == EventAcked && r.Applied:
		return ItemRetried
	case o.Event == EventAcked:
		return ItemNotRecorded
	case o.Event == EventRefused:
		return ItemRefused
	default:
		return ItemUnavailable
	}
}

// whyNotRetried says why a message of the set was not claimed.
func (s *Service) whyNotRetried(ctx context.Context, id uuid.UUID) string {
	m, err := s.store.GetDLQ(ctx, id)
	switch {
	case errors.Is(err, derrors.ErrNotFound):
		return "the message was deleted or archived"
	case err != nil:
		return "not retryable when its turn came"
	default:
		return NotRetryable(m).Reason
	}
}

// replayPage replays each message of the page unchanged to the target
// topic, recording each one's outcome as it goes.
func (s *Service) replayPage(ctx, run context.Context, op *Operation, items []OperationItem) error {
	var uid uint32
	if op.RequestedByUID != nil {
		uid = *op.RequestedByUID
	}
	for _, it := range items {
		if run.Err() != nil {
			return nil
		}
		r := ItemResult{Seq: it.Seq, ID: it.ID, Outcome: ItemReplayed}
		_, err := s.Replay(ctx, it.ID, ReplayRequest{Topic: op.TargetTopic, Operation: &op.ID, targetChecked: true}, uid)
		switch {
		case err == nil:
		case errors.Is(err, derrors.ErrNotFound):
			r.Outcome, r.Error = ItemSkipped, "the message was deleted or archived"
		case errors.Is(err, derrors.ErrUnavailable):
			// No source can send now: stop here, the operation resumes
			// with this message after its lease.
			return err
		case errors.Is(err, ErrRepublishFailed):
			r.Outcome, r.Error = ItemRefused, err.Error()
		default:
			r.Outcome, r.Error = ItemFailed, err.Error()
		}
		p := OperationProgress{Operation: op.ID, Owner: s.owner, Now: s.now(), Position: it.Seq, Results: []ItemResult{r}}
		if err := s.store.AdvanceDLQOperation(ctx, p); err != nil {
			return err
		}
	}
	return nil
}
