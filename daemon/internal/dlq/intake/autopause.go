package intake

import (
	"context"
	"fmt"

	"github.com/lifecycled/lifecycled/daemon/internal/dlq"
)

// autoPause pauses topic when its replays came back at least
// AutoPauseReturns times within AutoPauseWindow; it is called after intake
// counted returns on the topic. Returns are counted from the store's
// history, so every daemon sharing the store sees the same count.
func (in *Pipeline) autoPause(ctx context.Context, topic string) {
	pol := in.policy().For(topic)
	if pol.AutoPauseReturns <= 0 || pol.AutoPauseWindow <= 0 {
		return
	}
	now := in.cfg.Now()
	n, err := in.store.CountReturnsDLQ(ctx, topic, now.Add(-pol.AutoPauseWindow))
	if err != nil {
		in.log.Warn("count returned replays for auto-pause", "topic", topic, "error", err)
		return
	}
	if n < int64(pol.AutoPauseReturns) {
		return
	}
	reason := fmt.Sprintf("auto-paused: %d replays came back within %s (threshold %d)", n, pol.AutoPauseWindow, pol.AutoPauseReturns)
	_, created, err := in.store.PauseDLQTopic(ctx, dlq.TopicPause{Topic: topic, PausedAt: now, Reason: reason, Auto: true})
	if err != nil {
		in.log.Warn("auto-pause a DLQ topic", "topic", topic, "error", err)
		return
	}
	if created {
		in.metrics.autoPauses.Inc()
		in.log.Warn("paused automatic retries of a DLQ topic: its replays keep coming back; resume with `lifecycled dlq resume "+topic+"`",
			"topic", topic, "returns", n, "window", pol.AutoPauseWindow.String())
	}
}
