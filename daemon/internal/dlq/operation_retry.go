package dlq

import (
	"context"
	"sync"

	"github.com/google/uuid"

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
func (s *Service) retryPipeline(run context.Context, op *Operation, pos int64, size int, limiter *rate.Limiter) (bool, error) {
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
	pages := make(chan []OperationItem)
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

// SkippedItem is the result of the item it of bulk retry op whose message
// m (nil when it is gone) was not claimed. A message this operation sent
// already counts as what the broker said then (SentBy), not as skipped:
// a daemon that lost the operation's lease while the broker had its page
// recorded the outcomes without the page's progress, and the page is the
// daemon's that took the operation over. A message that could be retried
// but was not claimed (another claim held it, or ended a moment ago) is to
// be tried again (UnderClaim).
func SkippedItem(it OperationItem, m *Message, op uuid.UUID) ItemResult {
	r := ItemResult{Seq: it.Seq, ID: it.ID, Outcome: ItemSkipped}
	if m == nil {
		r.Error = ItemGone
		return r
	}
	if a := SentBy(m, op); a != nil {
		if a.Outcome == OutcomeResolved {
			r.Outcome = ItemRetried
		} else {
			r.Outcome, r.Error = ItemRefused, a.Error
		}
		return r
	}
	r.Error, r.UnderClaim = NotRetryable(m).Reason, m.IsRetryable() && (m.Status == StatusRetrying || m.Status == StatusPending)
	return r
}

// SentBy is the latest attempt of bulk operation op on m whose outcome was
// the broker's answer (resolved, or refused: failed or dead), or nil. A
// bulk retry sends a message once: a message with such an attempt is not
// claimed by the operation again (the attempt made it RESOLVED, or counted
// against its retries), whatever it became since (a replay that came back).
func SentBy(m *Message, op uuid.UUID) *Attempt {
	for i := len(m.Attempts) - 1; i >= 0; i-- {
		a := &m.Attempts[i]
		if a.Operation == nil || *a.Operation != op {
			continue
		}
		switch a.Outcome {
		case OutcomeResolved, OutcomeFailed, OutcomeDead:
			return a
		}
	}
	return nil
}

// SentOutcomes are the attempt outcomes SentBy counts, for a store's query.
var SentOutcomes = []string{OutcomeResolved, OutcomeFailed, OutcomeDead}
