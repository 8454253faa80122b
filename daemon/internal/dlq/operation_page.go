package dlq

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"

	"github.com/lifecycled/lifecycled/daemon/internal/derrors"
)

// operationPage does op's action to one page of its items and records
// what became of each with the operation's progress. run is the run's
// context: a replay page stops between two messages when it ends; the
// other actions finish the page (one transaction, or one republish).
func (s *Service) operationPage(ctx, run context.Context, op *Operation, items []OperationItem) error {
	last := items[len(items)-1].Seq
	progress := OperationProgress{Operation: op.ID, Owner: s.owner, Now: s.now(), After: items[0].Seq - 1, Position: last}
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

// retryPage retries one page of a bulk retry whose items follow after:
// the store claims its retryable messages, they are sent, and their
// outcomes are recorded with the page's progress. A broker outage is not
// the messages' failure: what the broker said of each is recorded, the
// page is not counted, and the run stops with derrors.ErrUnavailable.
func (s *Service) retryPage(ctx context.Context, op *Operation, after int64, items []OperationItem) error {
	var (
		outcomes []Outcome
		down     error
	)
	now := s.now()
	claim := Claim{Owner: s.owner, Now: now, LeaseUntil: now.Add(s.policy().Lease)}
	recorded, err := s.store.RetryDLQPage(ctx, RetryPage{
		Claim: claim,
		Items: items,
		Now:   s.now,
		Hold:  func(claimed []Message) func() { return s.holdClaims(ctx, claimed, claim) },
		Send: func(claimed []Message, skipped []ItemResult) ([]Outcome, func([]Recorded) *OperationProgress) {
			if len(claimed) > 0 {
				outcomes, down = s.send(ctx, claimed, TriggerBulk, op.RequestedByUID, &op.ID)
			}
			if down != nil {
				return outcomes, nil
			}
			return outcomes, func(rec []Recorded) *OperationProgress {
				p := &OperationProgress{Operation: op.ID, Owner: s.owner, Now: s.now(), After: after, Position: items[len(items)-1].Seq}
				p.Results = append([]ItemResult(nil), skipped...)
				seqOf := make(map[uuid.UUID]int64, len(items))
				for _, it := range items {
					seqOf[it.ID] = it.Seq
				}
				for i, o := range outcomes {
					r := ItemResult{Seq: seqOf[o.ID], ID: o.ID, Outcome: retryItemOutcome(o, rec[i])}
					if !ItemSucceeded(r.Outcome) {
						r.Error = o.Error
					}
					p.Results = append(p.Results, r)
				}
				return p
			}
		},
	})
	if err != nil {
		return err
	}
	s.countOutcomes(outcomes, recorded, TriggerBulk)
	if down != nil {
		return fmt.Errorf("%w: %v", derrors.ErrUnavailable, down)
	}
	return nil
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
			r.Outcome, r.Error = ItemSkipped, ItemGone
		case errors.Is(err, derrors.ErrUnavailable):
			// No source can send now: stop here, the operation resumes
			// with this message after its lease.
			return err
		case errors.Is(err, ErrRepublishFailed):
			r.Outcome, r.Error = ItemRefused, err.Error()
		default:
			r.Outcome, r.Error = ItemFailed, err.Error()
		}
		p := OperationProgress{Operation: op.ID, Owner: s.owner, Now: s.now(), After: it.Seq - 1, Position: it.Seq, Results: []ItemResult{r}}
		if err := s.store.AdvanceDLQOperation(ctx, p); err != nil {
			return err
		}
	}
	return nil
}
