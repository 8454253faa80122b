package dlq

import (
	"context"
	"fmt"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/lifecycled/lifecycled/daemon/internal/derrors"
)

// retryWorkers is how many pages of a bulk retry are with the broker at
// once: a page waits on acknowledgements (acks=all) and its claim and
// record wait on the store, and neither is busy all the time.
const retryWorkers = 4

// retryPipeline runs a bulk retry from position pos in three stages:
// pages are read and claimed in order (at the rate, if any), sent by up to
// retryWorkers at once, and recorded in order, each with the operation's
// progress in its transaction, so the position only ever moves past pages
// whose outcomes are stored. When run ends, no new page is claimed; the
// pages in flight are sent and recorded. It reports whether every page
// was recorded to the end of the set.
func (s *Service) retryPipeline(run context.Context, op *Operation, pos int64, size int, limiter *rate.Limiter) (bool, error) {
	type page struct {
		items   []OperationItem
		claimed []Message
		skipped []ItemResult
		turn    <-chan struct{} // closed once the page before is recorded
		done    chan struct{}   // closed once this one is
	}
	work := context.WithoutCancel(run)
	reading, stopReading := context.WithCancel(run)
	defer stopReading()
	var (
		mu       sync.Mutex
		firstErr error
		atEnd    bool
	)
	fail := func(err error) {
		mu.Lock()
		if firstErr == nil {
			firstErr = err
		}
		mu.Unlock()
		stopReading()
	}
	failed := func() bool {
		mu.Lock()
		defer mu.Unlock()
		return firstErr != nil
	}
	pages := make(chan *page)
	go func() {
		defer close(pages)
		prev := make(chan struct{})
		close(prev)
		for reading.Err() == nil {
			items, err := s.store.DLQOperationItems(work, op.ID, pos, size)
			if err != nil {
				fail(err)
				return
			}
			if len(items) == 0 {
				mu.Lock()
				atEnd = true
				mu.Unlock()
				return
			}
			if limiter != nil && limiter.WaitN(reading, len(items)) != nil {
				return
			}
			p := &page{items: items, turn: prev, done: make(chan struct{})}
			if p.claimed, p.skipped, err = s.claimPage(work, items); err != nil {
				fail(err)
				return
			}
			prev, pos = p.done, items[len(items)-1].Seq
			pages <- p
		}
	}()
	var wg sync.WaitGroup
	for w := 0; w < retryWorkers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for p := range pages {
				var (
					outcomes []Outcome
					down     error
				)
				if failed() {
					// A page claimed before a failure is not sent: its
					// claims are handed back and a resumed run takes it.
					s.handBack(work, p.claimed)
					<-p.turn
					close(p.done)
					continue
				}
				if len(p.claimed) > 0 {
					outcomes, down = s.send(work, p.claimed, TriggerBulk, op.RequestedByUID, &op.ID)
				}
				<-p.turn
				switch {
				case down != nil || failed():
					// No source could try (a broker outage is not the
					// messages' failure: nothing is counted against them),
					// or an earlier page was not recorded: record what the
					// broker said of each message, but not the page's
					// progress, which must follow the pages before it. The
					// operation stops and resumes from its last recorded
					// page after its lease.
					if _, err := s.recordOutcomes(work, outcomes, TriggerBulk, func(ctx context.Context, o []Outcome) ([]Recorded, error) {
						return s.store.FinishDLQ(ctx, s.owner, s.now(), o)
					}); err != nil {
						s.log.Warn("record a bulk retry page whose progress cannot be recorded", "error", err)
					}
					if down != nil {
						fail(fmt.Errorf("%w: %v", derrors.ErrUnavailable, down))
					}
				default:
					if err := s.recordRetryPage(work, op, p.items, p.skipped, outcomes); err != nil {
						fail(err)
					}
				}
				close(p.done)
			}
		}()
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	return atEnd && firstErr == nil, firstErr
}

// handBack returns claimed messages to PENDING without an attempt: they
// were not sent.
func (s *Service) handBack(ctx context.Context, msgs []Message) {
	if len(msgs) == 0 {
		return
	}
	outs := make([]Outcome, len(msgs))
	for i, m := range msgs {
		outs[i] = Finish(m, EventReleased)
		outs[i].NextRetryAt = s.retryAfter(s.policy().For(m.Position.Topic))
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := s.store.FinishDLQ(wctx, s.owner, s.now(), outs); err != nil {
		s.log.Warn("hand back claimed dead letters; their lease returns them", "error", err)
	}
}
