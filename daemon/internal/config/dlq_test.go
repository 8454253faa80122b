package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func loadTOML(t *testing.T, body string) (*Config, error) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "config.toml")
	require.NoError(t, os.WriteFile(p, []byte("version = 1\n[daemon]\nstate = \"sqlite://./x.db\"\nplugin_dir = \".\"\n"+body), 0o600))
	return Load(p)
}

// [[dlq.topic]] blocks apply by glob, first match wins, and what a block
// leaves out comes from [retry] and [dlq].
func TestDLQTopicBlocksResolveByGlob(t *testing.T) {
	c, err := loadTOML(t, `
[retry]
max_retries = 3
initial_delay = "1m"
[dlq]
auto_pause_returns = 40
[[dlq.topic]]
match = "payments.*.dlq.v1"
max_retries = 10
initial_delay = "30s"
auto_pause_window = "5m"
[[dlq.topic]]
match = "*.dlq.v1"
enabled = false
`)
	require.NoError(t, err)
	p := c.DLQTopicPolicy("payments.card.dlq.v1")
	require.Equal(t, 10, p.Retry.MaxRetries)
	require.Equal(t, 30*time.Second, p.Retry.InitialDelay.Duration)
	require.Equal(t, time.Hour, p.Retry.MaxDelay.Duration, "inherited from [retry]")
	require.True(t, p.Retry.Enabled)
	require.Equal(t, 40, p.AutoPauseReturns)
	require.Equal(t, 5*time.Minute, p.AutoPauseWindow)
	o := c.DLQTopicPolicy("orders.dlq.v1")
	require.False(t, o.Retry.Enabled)
	require.Equal(t, 3, o.Retry.MaxRetries)
	require.Equal(t, 10*time.Minute, o.AutoPauseWindow)
	base := c.DLQTopicPolicy("other.topic")
	require.True(t, base.Retry.Enabled)
	require.Equal(t, c.DLQTopicPolicy(""), base)
}

// Every bad block is reported at once, naming the key.
func TestDLQTopicBlocksValidated(t *testing.T) {
	_, err := loadTOML(t, `
[dlq]
auto_pause_returns = -1
auto_pause_window = "0s"
[[dlq.topic]]
match = "a[.dlq"
max_retries = 5000
multiplier = 0.5
jitter = "some"
[[dlq.topic]]
max_delay = "1s"
[[dlq.topic]]
match = "b.*"
initial_delay = "2h"
[[dlq.topic]]
match = "b.*"
auto_pause_returns = -3
`)
	require.Error(t, err)
	msg := err.Error()
	for _, want := range []string{"dlq.auto_pause_returns", "dlq.auto_pause_window", "dlq.topic.0.match", "invalid glob",
		"dlq.topic.0.max_retries", "dlq.topic.0.multiplier", "dlq.topic.0.jitter", "dlq.topic.1.match",
		"dlq.topic.2.max_delay", "dlq.topic.3.match", "never apply", "dlq.topic.3.auto_pause_returns"} {
		require.True(t, strings.Contains(msg, want), "want %q in:\n%s", want, msg)
	}
	_, err = loadTOML(t, "[[dlq.topic]]\nmatch = \"a.*\"\nmax_retry = 3\n")
	require.ErrorContains(t, err, "max_retry")
}

// replay_targets: absent leaves the name to decide (nil), an empty list
// allows no target, and each entry must be a glob.
func TestReplayTargetsAbsentEmptyAndInvalid(t *testing.T) {
	c, err := loadTOML(t, `
[[dlq.topic]]
match = "legacy.*"
replay_targets = ["billing.*", "invoices"]
[[dlq.topic]]
match = "closed.*"
replay_targets = []
[[dlq.topic]]
match = "*.dlq.v1"
max_retries = 5
`)
	require.NoError(t, err)
	require.Equal(t, []string{"billing.*", "invoices"}, c.DLQTopicPolicy("legacy.dead").ReplayTargets)
	closed := c.DLQTopicPolicy("closed.dlq.v1").ReplayTargets
	require.NotNil(t, closed, "an empty list is a policy: nowhere")
	require.Empty(t, closed)
	require.Nil(t, c.DLQTopicPolicy("orders.dlq.v1").ReplayTargets, "a block without the key leaves it to the name")
	require.Nil(t, c.DLQTopicPolicy("").ReplayTargets)

	_, err = loadTOML(t, "[[dlq.topic]]\nmatch = \"a.*\"\nreplay_targets = [\"ok.*\", \"\", \"bad[\"]\n")
	require.ErrorContains(t, err, "dlq.topic.0.replay_targets.1")
	require.ErrorContains(t, err, "dlq.topic.0.replay_targets.2")
}

// A queue's name may hold "/" (RabbitMQ): a block's glob matches it as
// docs/reference.md says (Per-topic policy and pause), "*" stopping at "/".
func TestDLQTopicGlobsStopAtASlash(t *testing.T) {
	c, err := loadTOML(t, "[[dlq.topic]]\nmatch = \"orders/*\"\nmax_retries = 7\n[[dlq.topic]]\nmatch = \"orders*\"\nmax_retries = 2\n")
	require.NoError(t, err)
	require.Equal(t, 7, *c.DLQTopicRule("orders/order.created").MaxRetries)
	require.Equal(t, 2, *c.DLQTopicRule("orders:dlq").MaxRetries)
	require.Nil(t, c.DLQTopicRule("orders/order/created"), "* does not cross a second /")
}
