package sdk

import (
	"math"
	"time"
)

// Backoff returns initial * multiplier^attempt, capped at max (attempt is
// 0-based; no jitter). It is the schedule plugins use for their own retries
// (DynamoDB's UnprocessedItems: 100 ms, x2, cap 5 s) and the base of the
// daemon's retry policies.
func Backoff(attempt int, initial time.Duration, multiplier float64, max time.Duration) time.Duration {
	if attempt < 0 {
		attempt = 0
	}
	if multiplier < 1 {
		multiplier = 1
	}
	d := float64(initial) * math.Pow(multiplier, float64(attempt))
	if max > 0 && (d > float64(max) || math.IsInf(d, 0) || math.IsNaN(d)) {
		return max
	}
	return time.Duration(d)
}
