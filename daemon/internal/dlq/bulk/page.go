package bulk

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/lifecycled/lifecycled/daemon/internal/derrors"
	"github.com/lifecycled/lifecycled/daemon/internal/dlq"
)

// operationPage does op's action to one page of its items and records
// what became of each with the operation's progress. run is the run's
// context: a replay page stops between two messages when it ends; the
// other actions finish the page (one transaction, or one republish).
func (s *Service) operationPage(ctx, run context.Context, op *dlq.Operation, items []dlq.OperationItem) error {
	last := items[len(items)-1].Seq
	progress := dlq.OperationProgress{Operation: op.ID, Owner: s.mgr.Owner(), Now: s.mgr.Now(), After: items[0].Seq - 1, Position: last}
	switch op.Action {
	case dlq.ActionReplayTo:
		return s.replayPage(ctx, run, op, items)
	default:
		a := dlq.PageAction{Action: op.Action, Items: items, UID: op.RequestedByUID, Operation: op.ID, Now: s.mgr.Now(),
			ReviveFor: func(topic string) dlq.Revive { return s.mgr.ReviveFor(topic, op.RequestedByUID, &op.ID) }}
		_, err := s.store.ApplyDLQOperationPage(ctx, a, progress)
		return err
	}
}

// retryPage retries one page of a bulk retry, and reports whether every
// item of it was done. Messages under another claim (being retried
// elsewhere, or left claimed by a daemon that died) are not skipped: the
// page tries them again, a while later, until that claim has ended or the
// run does (they are left for a resumed run).
func (s *Service) retryPage(ctx, run context.Context, op *dlq.Operation, items []dlq.OperationItem) (done bool, err error) {
	lease := s.mgr.Policy().Lease
	giveUp := time.Now().Add(3 * lease)
	for n := 1; ; n++ {
		try := PageTry{Operation: op.ID, First: items[0].Seq, Try: n}
		s.signals.PageStarted.Signal(try)
		later, err := s.retryItems(ctx, op, items)
		try.Later, try.Err = len(later), err
		s.signals.PageTried.Signal(try)
		if err != nil || len(later) == 0 {
			return err == nil, err
		}
		if time.Now().After(giveUp) {
			// Not counted: the run stops as for an outage and resumes
			// with these items after its own lease.
			return false, fmt.Errorf("%w: %d messages were still under another claim after three leases (%s)",
				derrors.ErrUnavailable, len(later), 3*lease)
		}
		// A claim ends when its outcome is recorded, or when its lease
		// runs out (a send in flight renews it).
		select {
		case <-run.Done():
			return false, nil
		case <-time.After(min(max(lease/10, 50*time.Millisecond), time.Second)):
		}
		items = later
	}
}

// retryItems retries items of a bulk retry: the store claims their
// retryable messages, they are sent, and their outcomes are recorded with
// the progress of the items whose outcome is final. It returns the items
// under another claim, to try again later. A broker outage is not the
// messages' failure: what the broker said of each is recorded, the items
// of the sources that could not try are left for later, and the run
// stops with derrors.ErrUnavailable.
func (s *Service) retryItems(ctx context.Context, op *dlq.Operation, items []dlq.OperationItem) ([]dlq.OperationItem, error) {
	var (
		outcomes []dlq.Outcome
		claimed  []dlq.Message
		down     map[string]error
		later    []dlq.OperationItem
	)
	now := s.mgr.Now()
	claim := dlq.Claim{Owner: s.mgr.Owner(), Now: now, LeaseUntil: now.Add(s.mgr.Policy().Lease)}
	recorded, err := s.store.RetryDLQPage(ctx, dlq.RetryPage{
		Operation: op.ID,
		Claim:     claim,
		Items:     items,
		Now:       s.mgr.Now,
		Hold:      func(claimed []dlq.Message) func() { return s.mgr.HoldClaims(ctx, claimed, claim) },
		Send: func(c []dlq.Message, skipped []dlq.ItemResult) ([]dlq.Outcome, func([]dlq.Recorded) *dlq.OperationProgress) {
			claimed = c
			if len(claimed) > 0 {
				outcomes, down = s.mgr.Send(ctx, claimed, dlq.TriggerBulk, op.RequestedByUID, &op.ID)
			}
			return outcomes, func(rec []dlq.Recorded) *dlq.OperationProgress {
				later = nil
				p := &dlq.OperationProgress{Operation: op.ID, Owner: s.mgr.Owner(), Now: s.mgr.Now(), Sent: true}
				seqOf := make(map[uuid.UUID]int64, len(items))
				for _, it := range items {
					seqOf[it.ID] = it.Seq
				}
				for _, r := range skipped {
					if r.UnderClaim {
						later = append(later, dlq.OperationItem{Seq: r.Seq, ID: r.ID})
						continue
					}
					p.Results = append(p.Results, r)
				}
				for i, o := range outcomes {
					if _, untried := down[claimed[i].Position.Source]; untried {
						later = append(later, dlq.OperationItem{Seq: seqOf[o.ID], ID: o.ID})
						continue
					}
					r := dlq.ItemResult{Seq: seqOf[o.ID], ID: o.ID, Outcome: retryItemOutcome(o, rec[i])}
					if !dlq.ItemSucceeded(r.Outcome) {
						r.Error = o.Error
					}
					p.Results = append(p.Results, r)
				}
				if len(p.Results) == 0 {
					return nil
				}
				p.Done = doneRanges(p.Results)
				return p
			}
		},
	})
	if recorded != nil {
		// Recorded even when the operation was lost meanwhile.
		s.mgr.CountOutcomes(outcomes, recorded, dlq.TriggerBulk)
	}
	if err != nil {
		return nil, err
	}
	for _, err := range down {
		return nil, fmt.Errorf("%w: %v", derrors.ErrUnavailable, err)
	}
	slices.SortFunc(later, func(a, b dlq.OperationItem) int { return cmp.Compare(a.Seq, b.Seq) })
	return later, nil
}

// doneRanges is the runs of consecutive items among results.
func doneRanges(results []dlq.ItemResult) []dlq.SeqRange {
	seqs := make([]int64, len(results))
	for i, r := range results {
		seqs[i] = r.Seq
	}
	slices.Sort(seqs)
	var out []dlq.SeqRange
	for _, q := range seqs {
		if n := len(out); n > 0 && out[n-1].Upto == q-1 {
			out[n-1].Upto = q
			continue
		}
		out = append(out, dlq.SeqRange{After: q - 1, Upto: q})
	}
	return out
}

// retryItemOutcome names what a retry did to one message.
func retryItemOutcome(o dlq.Outcome, r dlq.Recorded) string {
	switch {
	case o.Event == dlq.EventAcked && r.Applied:
		return dlq.ItemRetried
	case o.Event == dlq.EventAcked:
		return dlq.ItemNotRecorded
	case o.Event == dlq.EventRefused:
		return dlq.ItemRefused
	default:
		return dlq.ItemUnavailable
	}
}

// replayPage replays each message of the page unchanged to the target
// topic, recording each one's outcome as it goes.
func (s *Service) replayPage(ctx, run context.Context, op *dlq.Operation, items []dlq.OperationItem) error {
	var uid uint32
	if op.RequestedByUID != nil {
		uid = *op.RequestedByUID
	}
	for _, it := range items {
		if run.Err() != nil {
			return nil
		}
		r := dlq.ItemResult{Seq: it.Seq, ID: it.ID, Outcome: dlq.ItemReplayed}
		_, err := s.mgr.Replay(ctx, it.ID, dlq.ReplayRequest{Topic: op.TargetTopic, Operation: &op.ID, TargetChecked: true}, uid)
		switch {
		case err == nil:
		case errors.Is(err, derrors.ErrNotFound):
			r.Outcome, r.Error = dlq.ItemSkipped, dlq.ItemGone
		case errors.Is(err, derrors.ErrUnavailable):
			// No source can send now: stop here, the operation resumes
			// with this message after its lease.
			return err
		case errors.Is(err, dlq.ErrRepublishFailed):
			r.Outcome, r.Error = dlq.ItemRefused, err.Error()
		default:
			r.Outcome, r.Error = dlq.ItemFailed, err.Error()
		}
		p := dlq.OperationProgress{Operation: op.ID, Owner: s.mgr.Owner(), Now: s.mgr.Now(), After: it.Seq - 1, Position: it.Seq, Results: []dlq.ItemResult{r},
			Sent: r.Outcome != dlq.ItemSkipped && r.Outcome != dlq.ItemFailed}
		if err := s.store.AdvanceDLQOperation(ctx, p); err != nil {
			return err
		}
	}
	return nil
}
