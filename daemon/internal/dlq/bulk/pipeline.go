package bulk

import (
	"context"
	"sync"

	"github.com/lifecycled/lifecycled/daemon/internal/dlq"
	"golang.org/x/time/rate"
)

// retryWorkers is how many pages of bulk retries are under way at once on
// a daemon (Service.retryPages), and for one operation: a page waits on
// the broker's acknowledgements (acks=all) and on the store, and neither
// is busy all the time.
const retryWorkers = 4

// retryPipeline runs a bulk retry from position pos: pages are read in
// order (at the rate, if any) and each is claimed, sent and recorded with
// its progress by one of retryWorkers, in whatever order their brokers
// answer; the operation keeps the pages recorded beyond its position, so
// a resumed run does each page once. When run ends, no new page is read;
// the pages under way are sent and recorded. It reports whether every
// page was recorded to the end of the set.
func (s *Service) retryPipeline(run context.Context, op *dlq.Operation, pos int64, size int, limiter *rate.Limiter) (bool, error) {
	work := context.WithoutCancel(run)
	reading, stopReading := context.WithCancel(run)
	defer stopReading()
	var (
		mu       sync.Mutex
		firstErr error
		atEnd    bool
		leftOver bool // a page left items for a resumed run
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
	pages := make(chan []dlq.OperationItem)
	go func() {
		defer close(pages)
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
			page, next := undone(items, op.DoneRanges)
			if len(page) > 0 {
				if limiter != nil && limiter.WaitN(reading, len(page)) != nil {
					return
				}
				select {
				case pages <- page:
				case <-reading.Done():
					return
				}
			}
			pos = next
		}
	}()
	var wg sync.WaitGroup
	for w := 0; w < retryWorkers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for p := range pages {
				// A page read before a failure is not sent: a resumed
				// run takes it.
				if failed() {
					continue
				}
				s.retryPages <- struct{}{}
				done, err := s.retryPage(work, run, op, p)
				<-s.retryPages
				if err != nil {
					fail(err)
				} else if !done {
					mu.Lock()
					leftOver = true
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	return atEnd && !leftOver && firstErr == nil, firstErr
}
