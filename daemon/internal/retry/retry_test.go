package retry

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/sdk"
)

func TestDynamoDBUnprocessedItemsSchedule(t *testing.T) {
	// Seed 000: 100 ms initial, x2, capped at 5 s, no jitter.
	p := Policy{Initial: 100 * time.Millisecond, Multiplier: 2, Max: 5 * time.Second, Jitter: JitterNone}
	tests := map[string]struct {
		attempt int
		want    time.Duration
	}{
		"attempt 0":         {0, 100 * time.Millisecond},
		"attempt 1":         {1, 200 * time.Millisecond},
		"attempt 4":         {4, 1600 * time.Millisecond},
		"attempt 10 capped": {10, 5 * time.Second},
		"attempt 1000":      {1000, 5 * time.Second},
		"negative is 0":     {-3, 100 * time.Millisecond},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			require.Equal(t, tc.want, p.Backoff(tc.attempt))
			require.Equal(t, tc.want, p.Delay(tc.attempt), "no jitter: delay equals backoff")
		})
	}
}

func TestRetryConfigDefaults(t *testing.T) {
	// [retry] defaults: 1m, x2, cap 1h.
	p := Policy{Initial: time.Minute, Multiplier: 2, Max: time.Hour}
	require.Equal(t, []time.Duration{time.Minute, 2 * time.Minute, 4 * time.Minute, 8 * time.Minute, 16 * time.Minute, 32 * time.Minute, time.Hour},
		[]time.Duration{p.Backoff(0), p.Backoff(1), p.Backoff(2), p.Backoff(3), p.Backoff(4), p.Backoff(5), p.Backoff(6)})
}

func TestJitter(t *testing.T) {
	d := 8 * time.Second
	tests := map[string]struct {
		mode Jitter
		rnd  float64
		want time.Duration
	}{
		"none ignores rnd": {JitterNone, 0.7, 8 * time.Second},
		"full low":         {JitterFull, 0, 0},
		"full mid":         {JitterFull, 0.25, 2 * time.Second},
		"full high":        {JitterFull, 0.999999, time.Duration(0.999999 * float64(d))},
		"equal low":        {JitterEqual, 0, 4 * time.Second},
		"equal mid":        {JitterEqual, 0.5, 6 * time.Second},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			require.Equal(t, tc.want, ApplyJitter(d, tc.mode, func() float64 { return tc.rnd }))
		})
	}
	// Real randomness stays within bounds.
	p := Policy{Initial: time.Second, Multiplier: 2, Max: time.Minute, Jitter: JitterFull}
	for i := 0; i < 1000; i++ {
		got := p.Delay(3)
		require.GreaterOrEqual(t, got, time.Duration(0))
		require.LessOrEqual(t, got, 8*time.Second)
	}
}

func TestClassify(t *testing.T) {
	tests := map[string]struct {
		err   error
		retry bool
		after time.Duration
	}{
		"nil":                  {nil, false, 0},
		"network":              {&net.OpError{Op: "dial", Err: errors.New("connection refused")}, true, 0},
		"timeout":              {context.DeadlineExceeded, true, 0},
		"plugin retryable 429": {sdk.Retryable(errors.New("429 too many requests"), 3*time.Second), true, 3 * time.Second},
		"plugin permanent":     {sdk.Permanent(errors.New("403 forbidden")), false, 0},
		"invalid config":       {sdk.InvalidConfig(sdk.FieldError{Field: "x", Problem: "y"}), false, 0},
		"wrapped permanent":    {fmt.Errorf("deleter x: %w", sdk.Permanent(errors.New("auth"))), false, 0},
		"unclassed":            {errors.New("something"), true, 0},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			d := Classify(tc.err)
			require.Equal(t, tc.retry, d.Retry)
			require.Equal(t, tc.after, d.After)
		})
	}
}

func TestNextHonoursRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	p := Policy{Initial: time.Second, Multiplier: 2, Max: time.Minute, Jitter: JitterNone}
	require.Equal(t, now.Add(2*time.Second), p.Next(now, 1, errors.New("x")))
	require.Equal(t, now.Add(30*time.Second), p.Next(now, 1, sdk.Retryable(errors.New("429"), 30*time.Second)))
}

func TestDelayRandDrawsFromTheGivenSource(t *testing.T) {
	p := Policy{Initial: time.Minute, Multiplier: 2, Max: time.Hour, Jitter: JitterFull}
	draws := []float64{0.25, 0.5, 0.001}
	i := 0
	rnd := func() float64 { v := draws[i]; i++; return v }
	require.Equal(t, 15*time.Second, p.DelayRand(0, rnd))
	require.Equal(t, time.Minute, p.DelayRand(1, rnd), "attempt 1 backs off 2m")
	require.Equal(t, 60*time.Millisecond, p.DelayRand(0, rnd))
	p.Jitter = JitterEqual
	i = 0
	require.Equal(t, 30*time.Second+7500*time.Millisecond, p.DelayRand(0, rnd))
}
