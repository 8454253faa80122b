package dlq

import (
	"context"
	"sync"
	"time"

	"github.com/google/uuid"
)

// HoldClaims renews the lease of messages claimed by c every third of the
// lease until the returned release is called: a broker that takes longer
// than the lease to answer (large messages, a loaded cluster) must not see
// the release of expired leases return its messages to PENDING, its
// acknowledgement go unrecorded and the messages go out again. A daemon
// that dies stops renewing, so the lease still hands its messages back.
//
// The hold lasts until the outcomes are recorded, not only sent: until
// release, this daemon counts the messages as being sent (Sending), so a
// recording that waits past the lease does not let it take them over and
// send them again. A renewal that fails is logged and tried at the next
// tick; a message whose claim was lost meanwhile is simply not renewed,
// and its outcome is not recorded (FinishDLQ).
func (s *Service) HoldClaims(ctx context.Context, msgs []Message, c Claim) (release func()) {
	lease := c.LeaseUntil.Sub(c.Now)
	if len(msgs) == 0 || lease <= 0 {
		return func() {}
	}
	ids := make([]uuid.UUID, len(msgs))
	for i, m := range msgs {
		ids[i] = m.ID
	}
	s.markSending(ids, +1)
	pace := s.claimPace
	if pace == nil {
		pace = thirdOfTheLease
	}
	// The renewals outlive a cancelled request: the send it started is
	// still under way until release.
	ctx = context.WithoutCancel(ctx)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		ticks, stop := pace(lease)
		defer stop()
		for {
			select {
			case <-done:
				return
			case <-ticks:
			}
			renew := c
			renew.LeaseUntil = s.now().Add(lease)
			rctx, cancel := context.WithTimeout(ctx, lease)
			n, err := s.store.RenewDLQClaims(rctx, ids, renew)
			cancel()
			switch {
			case err != nil:
				s.log.Warn("could not renew the lease of messages being sent; trying again", "count", len(ids), "error", err)
			case n < int64(len(ids)):
				// Their outcomes were recorded already (the hold lasts until
				// then), or another claim took them: recording says which.
				s.log.Debug("some messages held are no longer under this claim", "count", int64(len(ids))-n)
			}
			if s.claimRenewed != nil && err == nil {
				s.claimRenewed()
			}
		}
	}()
	return func() {
		close(done)
		wg.Wait()
		s.markSending(ids, -1)
	}
}

// markSending adds (+1) or removes (-1) messages from what this daemon is
// sending (Sending). A message can be under two holds of this daemon at
// once only when one of them lost it; it counts until both end.
func (s *Service) markSending(ids []uuid.UUID, delta int) {
	s.sendingMu.Lock()
	defer s.sendingMu.Unlock()
	if s.inFlight == nil {
		s.inFlight = map[uuid.UUID]int{}
	}
	for _, id := range ids {
		if s.inFlight[id] += delta; s.inFlight[id] <= 0 {
			delete(s.inFlight, id)
		}
	}
}

// sending is what this daemon is sending now.
func (s *Service) sending() Sending {
	s.sendingMu.Lock()
	defer s.sendingMu.Unlock()
	out := Sending{Owner: s.owner, IDs: make([]uuid.UUID, 0, len(s.inFlight))}
	for id := range s.inFlight {
		out.IDs = append(out.IDs, id)
	}
	return out
}

// thirdOfTheLease renews a lease twice before it could run out.
func thirdOfTheLease(lease time.Duration) (<-chan time.Time, func()) {
	t := time.NewTicker(lease / 3)
	return t.C, t.Stop
}
