package dlq

import (
	"context"
	"sync"

	"golang.org/x/time/rate"
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
				var outcomes []Outcome
				if len(p.claimed) > 0 {
					outcomes = s.send(work, p.claimed, TriggerBulk, op.RequestedByUID, &op.ID)
				}
				<-p.turn
				// After a failure the later pages are not recorded: their
				// claims run out and a resumed run takes them again.
				if !failed() {
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
