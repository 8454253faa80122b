package dlq

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/lifecycled/lifecycled/daemon/internal/derrors"
)

// RetryAllResult is what POST /api/v1/dlq/{topic}/retry-all reports.
type RetryAllResult struct {
	Retried     int // acknowledged by the broker: RESOLVED
	Failed      int // refused by the broker: counted
	Unavailable int // not attempted: source unavailable; still PENDING
	// NotRecorded were acknowledged by the broker, but their claim had run
	// out by then: not RESOLVED, whatever state they are in now.
	NotRecorded int
}

// retryAllPage is the seed's page size; pages are claimed ahead while
// earlier ones are being republished by retryAllWorkers workers.
const (
	retryAllPage    = 100
	retryAllWorkers = 4
)

// RetryAll walks a topic in creation order, 100 messages at a time, and
// republishes every retryable one. Messages that are not retryable are
// skipped; a failed one is not retried again within the same call.
func (s *Service) RetryAll(ctx context.Context, topic string) (RetryAllResult, error) {
	var res RetryAllResult
	pol := s.policy()
	type page struct {
		msgs []Message
		err  error
	}
	pages := make(chan page, retryAllWorkers)
	claimCtx, stopClaiming := context.WithCancel(ctx)
	defer stopClaiming()
	go func() {
		defer close(pages)
		var cursor *Cursor
		for {
			now := s.now()
			msgs, err := s.store.ClaimDLQTopic(claimCtx, topic, cursor, retryAllPage, Claim{Owner: s.owner, Now: now, LeaseUntil: now.Add(pol.Lease)})
			if err != nil || len(msgs) == 0 {
				if err != nil && claimCtx.Err() == nil {
					pages <- page{err: err}
				}
				return
			}
			last := msgs[len(msgs)-1]
			cursor = &Cursor{CreatedAt: last.CreatedAt, ID: last.ID}
			select {
			case pages <- page{msgs: msgs}:
			case <-claimCtx.Done():
				// Claimed but not handed on: give them back at once.
				s.release(msgs)
				return
			}
		}
	}()
	// Several pages are republished at once: each waits on the broker's
	// acknowledgements and on the store, and neither is busy all the time.
	var (
		mu       sync.Mutex
		firstErr error
		wg       sync.WaitGroup
	)
	for w := 0; w < retryAllWorkers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for p := range pages {
				mu.Lock()
				failed := firstErr != nil
				mu.Unlock()
				if p.err != nil || failed {
					if p.err != nil {
						mu.Lock()
						if firstErr == nil {
							firstErr = p.err
						}
						mu.Unlock()
						stopClaiming()
					}
					s.release(p.msgs)
					continue
				}
				results, err := s.republish(ctx, p.msgs, TriggerRetryAll, nil)
				mu.Lock()
				if err != nil {
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					stopClaiming()
					continue
				}
				for _, r := range results {
					switch {
					case r.Outcome.Event == EventAcked && r.Applied:
						res.Retried++
					case r.Outcome.Event == EventAcked:
						res.NotRecorded++
					case r.Outcome.Event == EventRefused:
						res.Failed++
					default:
						res.Unavailable++
					}
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return res, firstErr
	}
	if res.Retried == 0 && res.Unavailable > 0 {
		return res, fmt.Errorf("%w: no source could republish the %d retryable messages of %s; they stay PENDING",
			derrors.ErrUnavailable, res.Unavailable, topic)
	}
	return res, ctx.Err()
}

// release hands claimed messages back without counting an attempt.
func (s *Service) release(msgs []Message) {
	if len(msgs) == 0 {
		return
	}
	outs := make([]Outcome, len(msgs))
	for i, m := range msgs {
		outs[i] = Finish(m, EventReleased)
		outs[i].NextRetryAt = s.retryAfter(s.policy().For(m.Position.Topic))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := s.store.FinishDLQ(ctx, s.owner, s.now(), outs); err != nil {
		s.log.Error("release claimed messages", "error", err)
	}
}
