package app

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/internal/config"
)

// The DLQ policy is read from the config at every use: a reload that adds,
// changes or removes [[dlq.topic]] blocks applies to the next message.
func TestDLQPolicyFollowsAReload(t *testing.T) {
	t.Parallel()
	load := func(body string) *config.Config {
		p := filepath.Join(t.TempDir(), "config.toml")
		require.NoError(t, os.WriteFile(p, []byte("version = 1\n[daemon]\nstate = \"sqlite://./x.db\"\nplugin_dir = \".\"\n"+body), 0o600))
		c, err := config.Load(p)
		require.NoError(t, err)
		return c
	}
	holder := config.NewHolder(load(""))
	policy := dlqPolicy(holder)
	require.Nil(t, policy().ForTopic, "no blocks: one policy")
	require.Equal(t, 3, policy().For("payments.dlq.v1").MaxRetries)
	require.Equal(t, 100, policy().AutoPauseReturns)

	holder.Set(load(`
[dlq]
auto_pause_returns = 5
[[dlq.topic]]
match = "payments.*"
max_retries = 9
initial_delay = "5s"
enabled = false
auto_pause_window = "1m"
`))
	p := policy().For("payments.dlq.v1")
	require.Equal(t, 9, p.MaxRetries)
	require.False(t, p.AutoRetry)
	require.Equal(t, 5*time.Second, p.Backoff.Initial)
	require.Equal(t, 5, p.AutoPauseReturns)
	require.Equal(t, time.Minute, p.AutoPauseWindow)
	o := policy().For("orders.dlq.v1")
	require.Equal(t, 3, o.MaxRetries)
	require.True(t, o.AutoRetry)
	require.Equal(t, 10*time.Minute, o.AutoPauseWindow)

	holder.Set(load(""))
	require.Equal(t, 3, policy().For("payments.dlq.v1").MaxRetries, "the block is gone after the next reload")
}
