package config

import (
	"fmt"
	"path"
	"strings"
	"time"
)

// DLQ holds per-topic dead-letter policy: the auto-pause defaults and the
// [[dlq.topic]] blocks.
type DLQ struct {
	// AutoPauseReturns: a DLQ topic whose replays came back (x-dlq-id) this
	// many times within AutoPauseWindow is paused; 0 never pauses.
	AutoPauseReturns int      `toml:"auto_pause_returns"`
	AutoPauseWindow  Duration `toml:"auto_pause_window"`
	// Topics are matched against a message's DLQ topic in order; the first
	// block whose glob matches applies.
	Topics []DLQTopic `toml:"topic"`
}

// DLQTopic is a [[dlq.topic]] block: what it leaves out comes from [retry]
// and [dlq].
type DLQTopic struct {
	Match            string   `toml:"match"` // glob (path.Match) on the DLQ topic
	Enabled          *bool    `toml:"enabled,omitempty"`
	MaxRetries       *int     `toml:"max_retries,omitempty"`
	InitialDelay     Duration `toml:"initial_delay,omitempty"`
	Multiplier       *float64 `toml:"multiplier,omitempty"`
	MaxDelay         Duration `toml:"max_delay,omitempty"`
	Jitter           string   `toml:"jitter,omitempty"`
	AutoPauseReturns *int     `toml:"auto_pause_returns,omitempty"`
	AutoPauseWindow  Duration `toml:"auto_pause_window,omitempty"`
	// ReplayTargets are globs on the topics the block's DLQ topics may
	// return messages to; without it they follow from the DLQ topic's
	// name (dlq.DefaultReplayTargets). An empty list allows none.
	ReplayTargets *[]string `toml:"replay_targets,omitempty"`
}

// DLQTopicPolicy is the policy of one DLQ topic, all fields resolved.
type DLQTopicPolicy struct {
	Retry            Retry
	AutoPauseReturns int
	AutoPauseWindow  time.Duration
	// ReplayTargets is nil when no block sets it (the name decides), and
	// never nil when one does, even empty.
	ReplayTargets []string
}

// DLQTopicRule returns the first [[dlq.topic]] block matching a DLQ topic,
// or nil.
func (c *Config) DLQTopicRule(topic string) *DLQTopic {
	for i := range c.DLQ.Topics {
		if ok, _ := path.Match(c.DLQ.Topics[i].Match, topic); ok {
			return &c.DLQ.Topics[i]
		}
	}
	return nil
}

// DLQTopicPolicy resolves the policy of a DLQ topic: [retry] and [dlq] with
// its first matching [[dlq.topic]] block applied. The topic "" is none:
// its policy is [retry] and [dlq] alone.
func (c *Config) DLQTopicPolicy(topic string) DLQTopicPolicy {
	if topic == "" {
		return c.policyWith(nil)
	}
	return c.policyWith(c.DLQTopicRule(topic))
}

// policyWith is [retry] and [dlq] with block b applied (nil: none).
func (c *Config) policyWith(b *DLQTopic) DLQTopicPolicy {
	p := DLQTopicPolicy{Retry: c.Retry, AutoPauseReturns: c.DLQ.AutoPauseReturns, AutoPauseWindow: c.DLQ.AutoPauseWindow.Duration}
	if b == nil {
		return p
	}
	if b.Enabled != nil {
		p.Retry.Enabled = c.Retry.Enabled && *b.Enabled
	}
	if b.MaxRetries != nil {
		p.Retry.MaxRetries = *b.MaxRetries
	}
	if b.InitialDelay.set {
		p.Retry.InitialDelay = b.InitialDelay
	}
	if b.Multiplier != nil {
		p.Retry.Multiplier = *b.Multiplier
	}
	if b.MaxDelay.set {
		p.Retry.MaxDelay = b.MaxDelay
	}
	if b.Jitter != "" {
		p.Retry.Jitter = b.Jitter
	}
	if b.AutoPauseReturns != nil {
		p.AutoPauseReturns = *b.AutoPauseReturns
	}
	if b.AutoPauseWindow.set {
		p.AutoPauseWindow = b.AutoPauseWindow.Duration
	}
	if b.ReplayTargets != nil {
		p.ReplayTargets = append([]string{}, *b.ReplayTargets...)
	}
	return p
}

// validateDLQ checks [dlq] and every [[dlq.topic]] block, and the policy
// each block resolves to (a max_delay below the initial_delay it inherits
// is as wrong as one written in the block).
func (c *Config) validateDLQ(r *reporter) {
	if c.DLQ.AutoPauseReturns < 0 || c.DLQ.AutoPauseReturns > 1_000_000 {
		r.at("dlq.auto_pause_returns", "must be between 0 (never pause) and 1000000; got %d", c.DLQ.AutoPauseReturns)
	}
	positive(r, "dlq.auto_pause_window", c.DLQ.AutoPauseWindow)
	seen := map[string]int{}
	for i, b := range c.DLQ.Topics {
		key := fmt.Sprintf("dlq.topic.%d", i)
		switch {
		case b.Match == "":
			r.at(key+".match", "must be a glob on the DLQ topic, such as \"orders.*.dlq.v1\"")
		default:
			if _, err := path.Match(b.Match, ""); err != nil {
				r.at(key+".match", "invalid glob %q: %v", b.Match, err)
			}
			if prev, ok := seen[b.Match]; ok {
				r.at(key+".match", "%q is matched by dlq.topic.%d first: this block would never apply", b.Match, prev)
			} else {
				seen[b.Match] = i
			}
		}
		if b.MaxRetries != nil && (*b.MaxRetries < 0 || *b.MaxRetries > 1000) {
			r.at(key+".max_retries", "must be between 0 and 1000; got %d", *b.MaxRetries)
		}
		if b.InitialDelay.set {
			positive(r, key+".initial_delay", b.InitialDelay)
		}
		if b.MaxDelay.set {
			positive(r, key+".max_delay", b.MaxDelay)
		}
		if b.Multiplier != nil && *b.Multiplier < 1 {
			r.at(key+".multiplier", "must be at least 1.0; got %v", *b.Multiplier)
		}
		switch b.Jitter {
		case "", "none", "full", "equal":
		default:
			r.at(key+".jitter", `must be "none", "full" or "equal"; got %q`, b.Jitter)
		}
		if b.ReplayTargets != nil {
			for j, g := range *b.ReplayTargets {
				if _, err := path.Match(g, ""); err != nil || strings.TrimSpace(g) == "" {
					r.at(fmt.Sprintf("%s.replay_targets.%d", key, j), "must be a glob on a topic, such as \"orders.*\"; got %q", g)
				}
			}
		}
		if b.AutoPauseReturns != nil && (*b.AutoPauseReturns < 0 || *b.AutoPauseReturns > 1_000_000) {
			r.at(key+".auto_pause_returns", "must be between 0 (never pause) and 1000000; got %d", *b.AutoPauseReturns)
		}
		if b.AutoPauseWindow.set {
			positive(r, key+".auto_pause_window", b.AutoPauseWindow)
		}
		{
			p := c.policyWith(&c.DLQ.Topics[i])
			if p.Retry.MaxDelay.Duration > 0 && p.Retry.MaxDelay.Duration < p.Retry.InitialDelay.Duration {
				r.at(key+".max_delay", "must not be below initial_delay (%s here, with what the block inherits from [retry]); got %s",
					p.Retry.InitialDelay.Duration, p.Retry.MaxDelay.Duration)
			}
		}
	}
}
