package main

import (
	"context"
	"errors"
	"fmt"
	"net"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/lifecycled/lifecycled/sdk"
)

// Health implements sdk.HealthChecker: a connection of its own, opened and
// closed, to the configured vhost, and each queue declared passively on
// it. A connection of its own: the consumers' may be busy or blocked, and
// taking their lock could wait behind a Fetch.
func (s *source) Health(ctx context.Context) error {
	s.mu.Lock()
	cfg, heartbeat := s.cfg, s.heartbeat
	s.mu.Unlock()
	if cfg.URL == "" {
		return sdk.Unavailable(errors.New("not configured"))
	}
	conn, err := amqp.DialConfig(cfg.URL, amqp.Config{Heartbeat: heartbeat,
		Properties: amqp.Table{"connection_name": "lifecycled-plugin-rabbitmq (health)"},
		Dial: func(network, addr string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		}})
	if err != nil {
		return sdk.Unavailable(fmt.Errorf("connect to RabbitMQ: %w", err))
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		return sdk.Unavailable(fmt.Errorf("open a channel: %w", err))
	}
	for _, q := range cfg.Queues {
		if _, err := ch.QueueDeclarePassive(q, false, false, false, false, nil); err != nil {
			return sdk.Unavailable(fmt.Errorf("queue %q: %w", q, err))
		}
	}
	return nil
}
