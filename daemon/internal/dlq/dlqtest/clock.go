package dlqtest

import (
	"sync"
	"time"
)

// T0 is the fixtures' start time.
var T0 = time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)

// Clock is a settable now. It can pace a daemon's lease renewals
// (dlq.SetClaimPace(svc, c.Ticks, c.Renewed)): Set hands the new time to
// each renewal loop and waits until each renewed its lease at it, so that
// a lease is renewed as often as the clock moves, however fast or slow the
// machine is, and never outrun by the test.
type Clock struct {
	mu   sync.Mutex
	t    time.Time
	subs map[*tickSub]struct{}
	acks chan struct{}
}

type tickSub struct {
	ch   chan time.Time
	gone chan struct{}
}

// clockWait bounds how long Set waits for a renewal loop (a renewal that
// failed never reports back).
const clockWait = 10 * time.Second

func (c *Clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }

func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	c.t = t
	subs := make([]*tickSub, 0, len(c.subs))
	for s := range c.subs {
		subs = append(subs, s)
	}
	acks := c.acks
	c.mu.Unlock()
	handed := 0
	for _, s := range subs {
		select {
		case s.ch <- t:
			handed++
		case <-s.gone:
		case <-time.After(clockWait):
		}
	}
	for ; handed > 0; handed-- {
		select {
		case <-acks:
		case <-time.After(clockWait):
			return
		}
	}
}

// Ticks is a renewal loop's pace: a tick each time the clock moves.
func (c *Clock) Ticks() (<-chan time.Time, func()) {
	s := &tickSub{ch: make(chan time.Time), gone: make(chan struct{})}
	c.mu.Lock()
	if c.subs == nil {
		c.subs, c.acks = map[*tickSub]struct{}{}, make(chan struct{}, 64)
	}
	c.subs[s] = struct{}{}
	c.mu.Unlock()
	return s.ch, func() {
		c.mu.Lock()
		delete(c.subs, s)
		c.mu.Unlock()
		close(s.gone)
	}
}

// Renewed reports a renewal done (after a tick of ticks).
func (c *Clock) Renewed() {
	c.mu.Lock()
	acks := c.acks
	c.mu.Unlock()
	select {
	case acks <- struct{}{}:
	default:
	}
}

// NewClock is a clock at t.
func NewClock(t time.Time) *Clock { return &Clock{t: t} }

// Stall moves the clock by d without a tick for the renewal loops it
// paces: a daemon stalled that long (a GC pause) renews no claim
// meanwhile, and they run out.
func (c *Clock) Stall(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}
