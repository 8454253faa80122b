package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/lifecycled/lifecycled/daemon/internal/derrors"
	"github.com/lifecycled/lifecycled/daemon/internal/dlq"
	"github.com/lifecycled/lifecycled/daemon/internal/store/sqlstore"
)

// pgLockPage reads a page's messages under row locks, in id order, and
// whether each may be claimed now ($2) by owner ($3): the claim's predicate
// of ClaimDLQIDs, evaluated on the locked row.
const pgLockPage = `SELECT ` + sqlstore.DLQColumns + `, ` + sqlstore.Retryable + ` AND (status = 'PENDING' OR (lease_expires_at < $2 AND lease_owner IS DISTINCT FROM $3))
	FROM dlq.dlq_messages WHERE id = ANY($1::uuid[]) ORDER BY id FOR UPDATE`

// lockedMessage is a message read by pgLockPage.
type lockedMessage struct {
	m         dlq.Message
	claimable bool
}

// withExtra scans the columns of a row that follow those a scan function
// reads into extra.
type withExtra struct {
	sqlstore.Scanner
	extra []any
}

func (w withExtra) Scan(dest ...any) error { return w.Scanner.Scan(append(dest, w.extra...)...) }

// RetryDLQPage implements sqlstore.Driver in one
// transaction: the page's messages are locked, the claimable ones sent
// while the locks hold, and their outcomes written as the one change of
// their rows, with the page's progress. The lock is the claim: every
// other writer of a message (a claim, a delete, the intake of a replay
// that came back) waits for the outcome, so a message is never sent twice
// at once, and a message costs one row version instead of a claim's and
// an outcome's. A daemon that dies during the send leaves the messages as
// they were (PENDING); the operation resumes after its lease and sends
// them again, as a claim whose lease ran out would be.
//
// When the transaction is rolled back after the send (a deadlock victim:
// the counters' rows are taken by other writers too), the messages went
// out all the same: what was sent is recorded in a transaction of its own
// (recordSentPage), for every message still as the page locked it, so that
// a send is not left unrecorded and sent again. The send is never
// repeated here.
func (p *driver) RetryDLQPage(ctx context.Context, page dlq.RetryPage) ([]dlq.Recorded, error) {
	ids := make([]string, len(page.Items))
	for i, it := range page.Items {
		ids[i] = it.ID.String()
	}
	owner, claimedAt := page.Claim.Owner, page.Claim.Now
	var (
		answer   []dlq.Recorded
		lost     error
		outcomes []dlq.Outcome
		progress func([]dlq.Recorded) *dlq.OperationProgress
		sent     bool
		asLocked = map[uuid.UUID]time.Time{} // updated_at of each message sent, as locked
	)
	// record writes the outcomes of the send for the messages of cur, and
	// the page's progress.
	record := func(q pgConn, cur map[uuid.UUID]dlq.Current) error {
		now := page.Now()
		rows, a, err := sqlstore.Finish(owner, now, outcomes, cur)
		if err != nil {
			return err
		}
		for i := range rows {
			rows[i].ClaimedAt = sqlstore.Microseconds(&claimedAt)
		}
		if len(rows) > 0 {
			if err := p.WriteOutcomes(ctx, q, sqlstore.WriteOutcomesParams{Now: now, Rows: rows}); err != nil {
				return fmt.Errorf("record retry outcomes: %w", err)
			}
		}
		answer = a
		if progress != nil {
			if pr := progress(a); pr != nil {
				lost = p.store.Advance(ctx, q, *pr)
				if errors.Is(lost, derrors.ErrLeaseLost) {
					return p.store.MarkAnswered(ctx, q, *pr)
				}
				return lost
			}
		}
		return nil
	}
	err := pgx.BeginTxFunc(ctx, p.pool, pgx.TxOptions{}, func(tx pgx.Tx) error {
		q := pgConn{q: tx}
		locked, err := p.lockPage(ctx, q, ids, claimedAt, owner)
		if err != nil {
			return err
		}
		// Read under the locks: a daemon that lost the operation wrote
		// its answers with the outcomes, before it let the messages go.
		answered, err := p.store.AnsweredItems(ctx, q, page.Operation, page.Items)
		if err != nil {
			return err
		}
		var (
			claimed []dlq.Message
			skipped []dlq.ItemResult
		)
		cur := make(map[uuid.UUID]dlq.Current, len(locked))
		for _, it := range page.Items {
			l, ok := locked[it.ID]
			r, done := answered[it.Seq]
			switch {
			case done:
				r.ID = it.ID
				skipped = append(skipped, r)
			case !ok:
				skipped = append(skipped, dlq.SkippedItem(it, nil))
			case !l.claimable:
				skipped = append(skipped, dlq.SkippedItem(it, &l.m))
			default:
				m := claimedAs(l.m, claimedAt)
				claimed = append(claimed, m)
				cur[m.ID] = dlq.Current{State: m.State(), LeaseOwner: owner, ClaimedAt: &claimedAt, Attempts: m.Attempts}
				asLocked[m.ID] = l.m.UpdatedAt
			}
		}
		outcomes, progress = page.Send(claimed, skipped)
		sent = true
		return record(q, cur)
	})
	if err != nil && sent && rolledBack(err) {
		// What was sent must be recorded: the recording can be a deadlock
		// victim too (it takes the messages again, racing the writer that
		// waited for them), and is tried again, as the pool's statements are.
		for attempt := 0; ; attempt++ {
			err = p.recordSentPage(ctx, ids, claimedAt, owner, asLocked, record)
			if err == nil || !rolledBack(err) || attempt == 4 {
				break
			}
		}
	}
	if err != nil {
		return nil, pgError(err)
	}
	return answer, lost
}

// lockPage locks a page's messages (pgLockPage), by id.
func (p *driver) lockPage(ctx context.Context, q pgConn, ids []string, claimedAt time.Time, owner string) (map[uuid.UUID]lockedMessage, error) {
	locked, err := sqlstore.QueryAll(ctx, q, func(sc sqlstore.Scanner) (l lockedMessage, err error) {
		l.m, err = sqlstore.ScanMessage(withExtra{Scanner: sc, extra: []any{&l.claimable}})
		return l, err
	}, pgLockPage, ids, claimedAt, owner)
	if err != nil {
		return nil, fmt.Errorf("lock a page of dead letters: %w", err)
	}
	byID := make(map[uuid.UUID]lockedMessage, len(locked))
	for _, l := range locked {
		byID[l.m.ID] = l
	}
	return byID, nil
}

// claimedAs is m as the claim at claimedAt would have left it.
func claimedAs(m dlq.Message, claimedAt time.Time) dlq.Message {
	m.Status, m.LastRetryAt = dlq.StatusRetrying, &claimedAt
	return m
}

// recordSentPage records, in a transaction of its own, the outcomes of a
// page whose transaction was rolled back after its messages were sent:
// for each message still as the page locked it (nobody wrote it since),
// the outcome applies as it would have; one that changed meanwhile keeps
// its change, and its outcome is answered as not recorded.
func (p *driver) recordSentPage(ctx context.Context, ids []string, claimedAt time.Time, owner string,
	asLocked map[uuid.UUID]time.Time, record func(pgConn, map[uuid.UUID]dlq.Current) error) error {
	return pgx.BeginTxFunc(ctx, p.pool, pgx.TxOptions{}, func(tx pgx.Tx) error {
		q := pgConn{q: tx}
		locked, err := p.lockPage(ctx, q, ids, claimedAt, owner)
		if err != nil {
			return err
		}
		cur := map[uuid.UUID]dlq.Current{}
		for id, at := range asLocked {
			l, ok := locked[id]
			if !ok || !l.claimable || !l.m.UpdatedAt.Equal(at) {
				continue
			}
			m := claimedAs(l.m, claimedAt)
			cur[id] = dlq.Current{State: m.State(), LeaseOwner: owner, ClaimedAt: &claimedAt, Attempts: m.Attempts}
		}
		return record(q, cur)
	})
}
