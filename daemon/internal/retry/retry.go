// Package retry holds the daemon's one backoff policy and one retry
// classification. Delays are exponential with a cap and a jitter mode; the
// pure functions are tested exactly (DynamoDB's UnprocessedItems schedule:
// attempt 0 -> 100 ms, 1 -> 200 ms, 4 -> 1600 ms, 10 -> 5 s).
package retry

import (
	"errors"
	"math/rand/v2"
	"net"
	"time"

	"github.com/lifecycled/lifecycled/sdk"
)

// Jitter spreads retries of many clients apart.
type Jitter string

// Jitter modes (AWS architecture blog, "Exponential Backoff And Jitter").
const (
	JitterNone  Jitter = "none"  // exactly the backoff
	JitterFull  Jitter = "full"  // uniform in [0, backoff]
	JitterEqual Jitter = "equal" // backoff/2 + uniform in [0, backoff/2]
)

// Policy is exponential backoff with a cap.
type Policy struct {
	Initial    time.Duration
	Multiplier float64
	Max        time.Duration
	Jitter     Jitter
}

// Backoff is the delay before retry number attempt (0-based), without
// jitter: min(Initial * Multiplier^attempt, Max).
func (p Policy) Backoff(attempt int) time.Duration {
	return sdk.Backoff(attempt, p.Initial, p.Multiplier, p.Max)
}

// Delay is Backoff with the policy's jitter applied.
func (p Policy) Delay(attempt int) time.Duration {
	return p.DelayRand(attempt, rand.Float64)
}

// DelayRand is Delay with the jitter drawn from rnd (uniform in [0,1)).
// Call it once per message: one draw shared by a batch would give every
// message of it the same, possibly near-zero, delay.
func (p Policy) DelayRand(attempt int, rnd func() float64) time.Duration {
	return ApplyJitter(p.Backoff(attempt), p.Jitter, rnd)
}

// ApplyJitter spreads d by mode using rnd (uniform in [0,1)).
func ApplyJitter(d time.Duration, mode Jitter, rnd func() float64) time.Duration {
	switch mode {
	case JitterFull:
		return time.Duration(rnd() * float64(d))
	case JitterEqual:
		return d/2 + time.Duration(rnd()*float64(d/2))
	default:
		return d
	}
}

// Decision says whether and when to retry a failure.
type Decision struct {
	Retry bool
	// After is a lower bound on the wait (a Retry-After hint); 0 when none.
	After time.Duration
}

// Classify decides whether err is worth retrying: network errors, timeouts
// and errors a plugin classed retryable (5xx, 408, 429 with their
// Retry-After) are; invalid input, authentication, not-found and other
// permanent errors are not.
func Classify(err error) Decision {
	if err == nil {
		return Decision{}
	}
	var nerr net.Error
	if errors.As(err, &nerr) {
		return Decision{Retry: true}
	}
	switch sdk.ClassOf(err) {
	case sdk.ClassPermanent:
		return Decision{}
	default:
		return Decision{Retry: true, After: sdk.RetryAfterOf(err)}
	}
}

// Next returns when to try again after attempt failed with err at now:
// the policy's delay, but never earlier than a Retry-After hint.
func (p Policy) Next(now time.Time, attempt int, err error) time.Time {
	d := p.Delay(attempt)
	if after := Classify(err).After; after > d {
		d = after
	}
	return now.Add(d)
}
