package main

import (
	"context"
	"fmt"
	"net/url"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/lifecycled/lifecycled/sdk"
)

const version = "1.0.0"

// config is the [dlq_source.config] table (docs/plugins.md).
type config struct {
	// URL is the AMQP URI, vhost included (amqp://user:pass@host:5672/vhost).
	URL string `json:"url"`
	// Queues are the dead-letter queues to read.
	Queues []string `json:"queues"`
	// Prefetch is how many messages the broker hands over before the
	// first of them is acknowledged (per queue).
	Prefetch int `json:"prefetch"`
	// ConfirmTimeout bounds the wait for a publisher confirm.
	ConfirmTimeout string `json:"confirm_timeout"`
	// Heartbeat is the AMQP heartbeat: a dead connection is noticed after
	// about twice this.
	Heartbeat string `json:"heartbeat"`
}

// maxQueueName is AMQP's limit on a queue name (a shortstr).
const maxQueueName = 255

func (s *source) Configure(ctx context.Context, req *sdk.ConfigureRequest) (*sdk.ConfigureResponse, error) {
	cfg := config{Prefetch: 2000, ConfirmTimeout: "30s", Heartbeat: "10s"}
	if err := sdk.DecodeConfig(req.Config, &cfg); err != nil {
		return nil, err
	}
	var problems []sdk.FieldError
	uri, err := amqp.ParseURI(cfg.URL)
	if cfg.URL == "" || err != nil {
		problems = append(problems, sdk.FieldError{Field: "url", Problem: `must be an AMQP URI such as "amqp://user:password@host:5672/vhost"`})
	} else if uri.Scheme != "amqp" && uri.Scheme != "amqps" {
		problems = append(problems, sdk.FieldError{Field: "url", Problem: "must be amqp:// or amqps://"})
	}
	if u, err := url.Parse(cfg.URL); err == nil && u.User != nil {
		if p, ok := u.User.Password(); ok {
			sdk.AddSecret(p)
		}
	}
	if len(cfg.Queues) == 0 {
		problems = append(problems, sdk.FieldError{Field: "queues", Problem: `required: the dead-letter queues to read, e.g. ["orders:dlq"]`})
	}
	seen := map[string]bool{}
	for i, q := range cfg.Queues {
		switch {
		case q == "" || len(q) > maxQueueName:
			problems = append(problems, sdk.FieldError{Field: fmt.Sprintf("queues[%d]", i), Problem: "must be a queue name of 1 to 255 bytes"})
		case seen[q]:
			problems = append(problems, sdk.FieldError{Field: fmt.Sprintf("queues[%d]", i), Problem: "named twice"})
		}
		seen[q] = true
	}
	if cfg.Prefetch < 1 || cfg.Prefetch > 65535 {
		problems = append(problems, sdk.FieldError{Field: "prefetch", Problem: "must be between 1 and 65535"})
	}
	confirm, err := time.ParseDuration(cfg.ConfirmTimeout)
	if err != nil || confirm < time.Second || confirm > 10*time.Minute {
		problems = append(problems, sdk.FieldError{Field: "confirm_timeout", Problem: "must be a duration between 1s and 10m"})
	}
	heartbeat, err := time.ParseDuration(cfg.Heartbeat)
	if err != nil || heartbeat < time.Second || heartbeat > 10*time.Minute {
		problems = append(problems, sdk.FieldError{Field: "heartbeat", Problem: "must be a duration between 1s and 10m"})
	}
	if len(problems) > 0 {
		return nil, sdk.InvalidConfig(problems...)
	}
	s.reconfigure(cfg, confirm, heartbeat)
	// Reachability and the queues: fail here, naming what is wrong, rather
	// than at the first Fetch.
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	// No stable message ids: a position names one delivery; a delivery is
	// acknowledged on its own; headers are an AMQP table (a map, typed).
	return &sdk.ConfigureResponse{PluginVersion: version, Source: sdk.SourceTraits{
		Acks: sdk.AcksPerMessage, Positions: sdk.PositionsPerDelivery, HeaderOrderKept: false, TypedHeaders: true}}, nil
}
