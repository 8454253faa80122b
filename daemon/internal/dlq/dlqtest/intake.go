package dlqtest

import (
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/lifecycled/lifecycled/daemon/internal/dlq"
	"github.com/lifecycled/lifecycled/daemon/internal/dlq/intake"
	"github.com/lifecycled/lifecycled/daemon/internal/periodic"
	"github.com/lifecycled/lifecycled/internal/testsvc"
	"github.com/stretchr/testify/require"
)

// StartIntake starts an intake of f's sources into st, on f's clock,
// with rnd as its jitter (nil: math/rand); it stops when the test ends.
func (f *Fixture) StartIntake(t *testing.T, st dlq.Store, rnd func() float64) *intake.Pipeline {
	in := intake.New(st, f.Sources, func() dlq.Policy { return f.Policy },
		intake.Config{BatchSize: 100, Wait: 20 * time.Millisecond, Now: f.Clock.Now, Jitter: rnd}, hclog.NewNullLogger(), intake.NewMetrics(nil, periodic.New(nil)))
	require.NoError(t, in.Start(testsvc.Context(t, time.Minute)))
	t.Cleanup(func() { _ = in.Stop(testsvc.Context(t, time.Minute)) })
	return in
}

// StoredByOffset is topic's messages (up to 1000) by offset.
func (f *Fixture) StoredByOffset(t *testing.T, topic string) map[int64]dlq.Message {
	t.Helper()
	msgs, _, err := f.Store.ListDLQ(testsvc.Context(t, 30*time.Second), dlq.ListFilter{Topic: topic, Page: 1, PageSize: 1000})
	require.NoError(t, err)
	out := map[int64]dlq.Message{}
	for _, m := range msgs {
		out[m.Position.Offset()] = m
	}
	return out
}
