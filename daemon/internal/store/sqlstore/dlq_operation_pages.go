package sqlstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/lifecycled/lifecycled/daemon/internal/derrors"
	"github.com/lifecycled/lifecycled/daemon/internal/dlq"
	"github.com/lifecycled/lifecycled/daemon/internal/enum"
)

// A bulk operation's pages: the messages of a page claimed or changed,
// each item's answer recorded once, the outcome counters and the position
// moved with them in one transaction (see dlq_operations.go for the
// operation's own rows and lease).

// ClaimDLQIDs claims the retryable messages of items like ClaimDLQ (a
// RETRYING one only once its lease ran out), but for items of bulk retry
// op with an answer recorded, and returns them.
func (s *Store) ClaimDLQIDs(ctx context.Context, items []dlq.OperationItem, op uuid.UUID, c dlq.Claim) ([]dlq.Message, error) {
	ids := make([]uuid.UUID, len(items))
	seqs := make([]int64, len(items))
	for i, it := range items {
		ids[i], seqs[i] = it.ID, it.Seq
	}
	seqJSON, _ := json.Marshal(seqs) // numbers always encode
	msgs, err := QueryAll(ctx, s.conn, ScanMessage, s.sql.Ops.ClaimIDs, s.sql.DLQ.List(idStrings(ids)), c.Now, c.Owner, c.LeaseUntil,
		op.String(), string(seqJSON), time.Now())
	if err != nil {
		return nil, fmt.Errorf("claim dead letters: %w", err)
	}
	return msgs, nil
}

// scanAnswer reads an item's answer: seq, outcome, error.
func scanAnswer(sc Scanner) (r dlq.ItemResult, err error) {
	err = sc.Scan(&r.Seq, &r.Outcome, &r.Error)
	return r, err
}

// AnsweredItems reads the answers recorded for items of a page of bulk
// retry op (see MarkAnswered), by seq.
func (s *Store) AnsweredItems(ctx context.Context, q Querier, op uuid.UUID, items []dlq.OperationItem) (map[int64]dlq.ItemResult, error) {
	seqs := make([]int64, len(items))
	for i, it := range items {
		seqs[i] = it.Seq
	}
	seqJSON, _ := json.Marshal(seqs) // numbers always encode
	rows, err := QueryAll(ctx, q, scanAnswer, s.sql.Ops.Answered, op, string(seqJSON))
	if err != nil {
		return nil, fmt.Errorf("read the answers recorded for a page: %w", err)
	}
	out := make(map[int64]dlq.ItemResult, len(rows))
	for _, r := range rows {
		out[r.Seq] = r
	}
	return out, nil
}

// MarkAnswered records, in q's transaction, what the broker answered for
// each item of a page whose progress could not be recorded because the
// operation was lost: the daemon that holds it now counts those items from
// it and does not send their messages again. A message's attempt history
// cannot say it: it keeps only the newest entries.
func (s *Store) MarkAnswered(ctx context.Context, q Querier, p dlq.OperationProgress) error {
	for _, r := range p.Results {
		if !dlq.Answered(r.Outcome) {
			continue
		}
		if _, err := q.Exec(ctx, s.sql.Ops.MarkAnswered, p.Operation, r.Seq, r.Outcome, dlq.ItemErrorText(r.Error)); err != nil {
			return fmt.Errorf("record what the broker answered for an item: %w", err)
		}
	}
	return nil
}

// Advance records a page's progress in q's transaction; the operation
// must be held by p.Owner (or have ended, for a page that p.Sent), and the
// page's items not be done already (a page is counted once). Pages are recorded in any order. It checks both
// before it writes anything, and returns derrors.ErrLeaseLost when one
// fails: RetryDLQPage then commits the page's outcomes without the
// progress (the broker has the messages; that they are RESOLVED keeps the
// daemon that took the operation over from sending them again).
func (s *Store) Advance(ctx context.Context, q Querier, p dlq.OperationProgress) error {
	var (
		pos              int64
		outcomes, ranges []byte
		owner, state     string
	)
	err := q.QueryRow(ctx, s.sql.Ops.LockProgress, p.Operation).Scan(&pos, &outcomes, &ranges, &owner, &state)
	if errors.Is(err, derrors.ErrNotFound) {
		return notHeld(p.Operation, p.Owner)
	}
	if err != nil {
		return fmt.Errorf("read bulk operation: %w", err)
	}
	how := p.CountOf(dlq.OperationState(state), owner)
	if how == dlq.CountRefused {
		return notHeld(p.Operation, p.Owner)
	}
	prog, err := readProgress(p.Operation, pos, outcomes, ranges)
	if err != nil {
		return err
	}
	results := p.Results
	if how == dlq.CountItems {
		// The daemon that held the operation last may have counted some
		// of the page's items (a skipped one): count the others.
		results = prog.recordEach(p.Results)
	} else {
		for _, r := range p.Ranges() {
			if prog.position, prog.done, err = dlq.RecordRange(prog.position, prog.done, r); err != nil {
				return fmt.Errorf("%w: bulk operation %s: %v", derrors.ErrLeaseLost, p.Operation, err)
			}
		}
	}
	return s.count(ctx, q, prog, results, p.Now)
}

// progress is an operation's progress as advance and foldAnswers change it.
type progress struct {
	id       uuid.UUID
	position int64
	done     []dlq.SeqRange
	counts   map[string]int64
}

func readProgress(id uuid.UUID, pos int64, outcomes, ranges []byte) (*progress, error) {
	p := &progress{id: id, position: pos, counts: map[string]int64{}}
	if err := json.Unmarshal(ranges, &p.done); err != nil {
		return nil, fmt.Errorf("read the ranges done of bulk operation %s: %w", id, err)
	}
	if err := json.Unmarshal(outcomes, &p.counts); err != nil {
		return nil, fmt.Errorf("read outcomes of bulk operation %s: %w", id, err)
	}
	return p, nil
}

// recordEach records the items of results that are not done yet, one by
// one, and returns them.
func (p *progress) recordEach(results []dlq.ItemResult) []dlq.ItemResult {
	var out []dlq.ItemResult
	for _, r := range results {
		pos, done, err := dlq.RecordRange(p.position, p.done, dlq.SeqRange{After: r.Seq - 1, Upto: r.Seq})
		if err != nil {
			continue // done already
		}
		p.position, p.done = pos, done
		out = append(out, r)
	}
	return out
}

// count adds results to the operation's counters and writes its progress.
func (s *Store) count(ctx context.Context, q Querier, p *progress, results []dlq.ItemResult, now time.Time) error {
	var ok, failed int64
	for _, r := range results {
		p.counts[r.Outcome]++
		if dlq.ItemSucceeded(r.Outcome) {
			ok++
			continue
		}
		failed++
		if _, err := q.Exec(ctx, s.sql.Ops.ItemFailed, p.id, r.Seq, r.Outcome, dlq.ItemErrorText(r.Error)); err != nil {
			return fmt.Errorf("record a failed item: %w", err)
		}
	}
	b, _ := json.Marshal(p.counts) // a map of strings to numbers always encodes
	if p.done == nil {
		p.done = []dlq.SeqRange{}
	}
	r, _ := json.Marshal(p.done) // pairs of numbers always encode
	if _, err := q.Exec(ctx, s.sql.Ops.Advance, p.id, p.position, int64(len(results)), ok, failed, string(b), now, string(r)); err != nil {
		return fmt.Errorf("record bulk operation progress: %w", err)
	}
	return nil
}

// foldAnswers counts, in q's transaction, the answers recorded for items
// of operation id by daemons that had lost it (MarkAnswered) that are not
// done yet: the operation ends (is finished or cancelled) before the
// daemon that held it last reached those items, and would not count
// messages it sent.
func (s *Store) foldAnswers(ctx context.Context, q Querier, id uuid.UUID, now time.Time) error {
	answers, err := QueryAll(ctx, q, scanAnswer, s.sql.Ops.AllAnswered, id)
	if err != nil {
		return fmt.Errorf("read the answers recorded for bulk operation %s: %w", id, err)
	}
	if len(answers) == 0 {
		return nil
	}
	var (
		pos                      int64
		outcomes, ranges         []byte
		ignoreOwner, ignoreState string
	)
	if err := q.QueryRow(ctx, s.sql.Ops.LockProgress, id).Scan(&pos, &outcomes, &ranges, &ignoreOwner, &ignoreState); err != nil {
		return fmt.Errorf("read bulk operation: %w", err)
	}
	prog, err := readProgress(id, pos, outcomes, ranges)
	if err != nil {
		return err
	}
	if results := prog.recordEach(answers); len(results) > 0 {
		return s.count(ctx, q, prog, results, now)
	}
	return nil
}

// AdvanceDLQOperation implements dlq.OperationStore.
func (s *Store) AdvanceDLQOperation(ctx context.Context, p dlq.OperationProgress) error {
	return s.conn.Tx(ctx, func(q Querier) error { return s.Advance(ctx, q, p) })
}

// ApplyDLQOperationPage implements dlq.OperationStore: each message of the
// page changes (or is skipped, saying why) and the progress is recorded,
// all in one transaction.
func (s *Store) ApplyDLQOperationPage(ctx context.Context, a dlq.PageAction, p dlq.OperationProgress) (dlq.OperationProgress, error) {
	err := s.conn.Tx(ctx, func(q Querier) error {
		if s.sql.Ops.LockPage != "" {
			ids := make([]uuid.UUID, len(a.Items))
			for i, it := range a.Items {
				ids[i] = it.ID
			}
			if _, err := q.Exec(ctx, s.sql.Ops.LockPage, s.sql.DLQ.List(idStrings(ids))); err != nil {
				return fmt.Errorf("lock a page of dead letters: %w", err)
			}
		}
		p.Results = p.Results[:0]
		for _, it := range a.Items {
			r, err := s.applyOne(ctx, q, a, it)
			if err != nil {
				return err
			}
			p.Results = append(p.Results, r)
		}
		return s.Advance(ctx, q, p)
	})
	return p, err
}

// applyOne does a store-only action to one message in q's transaction.
func (s *Store) applyOne(ctx context.Context, q Querier, a dlq.PageAction, it dlq.OperationItem) (dlq.ItemResult, error) {
	r := dlq.ItemResult{Seq: it.Seq, ID: it.ID}
	current := func() (*dlq.Message, error) {
		m, err := oneMessage(q.QueryRow(ctx, s.sql.DLQ.Get, it.ID))
		if errors.Is(err, derrors.ErrNotFound) {
			r.Outcome, r.Error = dlq.ItemSkipped, dlq.ItemGone
			return nil, nil
		}
		return m, err
	}
	detail := func(action string) []byte {
		b, _ := json.Marshal(map[string]string{"action": action, "operation": a.Operation.String()}) // strings always encode
		return b
	}
	switch a.Action {
	case dlq.ActionRevive:
		var topic string
		if err := q.QueryRow(ctx, s.sql.Ops.TopicOf, it.ID).Scan(&topic); errors.Is(err, derrors.ErrNotFound) {
			r.Outcome, r.Error = dlq.ItemSkipped, dlq.ItemGone
			return r, nil
		} else if err != nil {
			return r, fmt.Errorf("read dead letter: %w", err)
		}
		rv := a.ReviveFor(topic)
		_, err := oneMessage(q.QueryRow(ctx, s.sql.DLQ.Revive, it.ID, rv.To.MaxRetries, rv.NextRetryAt, rv.Now, attemptJSON(&rv.Attempt),
			string(rv.To.Status), rv.To.RetryCount, string(rv.From)))
		if err == nil {
			r.Outcome = dlq.ItemRevived
			return r, nil
		}
		if !errors.Is(err, derrors.ErrNotFound) {
			return r, fmt.Errorf("revive dead letter: %w", err)
		}
		m, err := current()
		if m != nil {
			r.Outcome, r.Error = dlq.ItemSkipped, dlq.NotRevivable(m).Reason
		}
		return r, err
	case dlq.ActionDelete:
		if _, err := q.Exec(ctx, s.sql.History.KeepIntake, it.ID); err != nil {
			return r, fmt.Errorf("keep the intake of a deleted dead letter: %w", err)
		}
		n, err := q.Exec(ctx, s.sql.DLQ.Delete, it.ID)
		if err != nil {
			return r, fmt.Errorf("delete dead letter: %w", err)
		}
		if n == 0 {
			r.Outcome, r.Error = dlq.ItemSkipped, dlq.ItemGone
			return r, nil
		}
		if _, err := q.Exec(ctx, s.sql.History.InsertAny, eventArgs(it.ID, dlq.HistoryEvent{At: a.Now, Kind: dlq.KindDeleted,
			Detail: detail("delete"), UID: a.UID})...); err != nil {
			return r, fmt.Errorf("record the deletion: %w", err)
		}
		r.Outcome = dlq.ItemDeleted
		return r, nil
	case dlq.ActionDead:
		change := dlq.MarkDead()
		n, err := q.Exec(ctx, s.sql.Ops.SetStatusIf, it.ID, a.Now, string(change.To), s.sql.DLQ.List(change.FromStrings()))
		if err != nil {
			return r, fmt.Errorf("mark dead letter DEAD: %w", err)
		}
		if n == 0 {
			m, err := current()
			if m != nil {
				r.Outcome, r.Error = dlq.ItemSkipped, fmt.Sprintf("only a %s message is marked DEAD: status=%s",
					enum.Sentence(change.From, "or"), m.Status)
			}
			return r, err
		}
		if _, err := q.Exec(ctx, s.sql.History.InsertAny, eventArgs(it.ID, dlq.HistoryEvent{At: a.Now, Kind: dlq.KindMarkedDead,
			Detail: detail("dead"), UID: a.UID})...); err != nil {
			return r, fmt.Errorf("record the change: %w", err)
		}
		r.Outcome = dlq.ItemMarkedDead
		return r, nil
	}
	return r, fmt.Errorf("%w: action %s does not change the store alone", derrors.ErrInvalid, a.Action)
}
