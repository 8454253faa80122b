package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/lifecycled/lifecycled/sdk"
)

// publisher is a channel in confirm mode: every message published on it is
// confirmed (or nacked) by the broker, and one that no queue takes
// (mandatory) is returned first.
type publisher struct {
	ch      *amqp.Channel
	returns chan amqp.Return
}

// dialed is what the publishing side dials with, read from the config.
type dialed struct {
	url       string
	heartbeat time.Duration
	confirm   time.Duration
}

// publisherLocked opens the publishing connection and channel when there
// are none (pubMu held).
func (s *source) publisherLocked(d dialed) (*publisher, error) {
	if s.publish != nil && !s.publish.ch.IsClosed() {
		return s.publish, nil
	}
	if s.pubConn == nil || s.pubConn.IsClosed() {
		conn, err := amqp.DialConfig(d.url, amqp.Config{Heartbeat: d.heartbeat,
			Properties: amqp.Table{"connection_name": "lifecycled-plugin-rabbitmq (republish)"}})
		if err != nil {
			return nil, classify(fmt.Errorf("connect to RabbitMQ: %w", err))
		}
		s.pubConn = conn
	}
	ch, err := s.pubConn.Channel()
	if err == nil {
		err = ch.Confirm(false)
	}
	if err != nil {
		s.dropPublisherLocked()
		return nil, classify(fmt.Errorf("open the publishing channel: %w", err))
	}
	p := &publisher{ch: ch, returns: ch.NotifyReturn(make(chan amqp.Return, 1024))}
	s.publish = p
	return p, nil
}

// dropPublisherLocked closes the publishing connection (pubMu held).
func (s *source) dropPublisherLocked() {
	if s.pubConn != nil {
		_ = s.pubConn.Close()
	}
	s.pubConn, s.publish = nil, nil
}

// exchangeExists declares the exchange passively on a channel of its own:
// publishing to a missing exchange would close the publishing channel,
// failing the messages published with it.
func (s *source) exchangeExists(name string) (bool, error) {
	if name == "" {
		return true, nil
	}
	ch, err := s.pubConn.Channel()
	if err != nil {
		return false, classify(err)
	}
	defer ch.Close() // closed by the broker already when the exchange is missing
	err = ch.ExchangeDeclarePassive(name, "direct", false, false, false, false, nil)
	var ae *amqp.Error
	if errors.As(err, &ae) && ae.Code == amqp.NotFound {
		return false, nil
	}
	if err != nil {
		return false, classify(err)
	}
	return true, nil
}

// Republish sends each message to its destination's exchange with its
// routing key, mandatory, one at a time on the confirm channel: a message
// is Acked only when the broker confirmed it and no queue refused it
// (returned: permanent, nothing would ever take it). One at a time, so
// that a returned message is told apart without adding a header of ours.
func (s *source) Republish(ctx context.Context, req *sdk.RepublishRequest) (*sdk.RepublishResponse, error) {
	s.mu.Lock()
	d := dialed{url: s.cfg.URL, heartbeat: s.heartbeat, confirm: s.confirm}
	s.mu.Unlock()
	s.pubMu.Lock()
	defer s.pubMu.Unlock()
	resp := &sdk.RepublishResponse{Results: make([]sdk.RepublishResult, len(req.Messages))}
	exchanges := map[string]bool{}
	attempted := false
	var firstErr error
	for i, m := range req.Messages {
		resp.Results[i].ID = m.ID
		exchange, key, err := parseDestination(m.Topic)
		if err != nil {
			resp.Results[i].Err = sdk.Permanent(err)
			continue
		}
		msg, err := publishing(m)
		if err != nil {
			resp.Results[i].Err = sdk.Permanent(err)
			continue
		}
		p, err := s.publisherLocked(d)
		if err != nil {
			resp.Results[i].Err = err
			firstErr = err
			continue
		}
		ok, known := exchanges[exchange]
		if !known {
			if ok, err = s.exchangeExists(exchange); err != nil {
				resp.Results[i].Err = err
				continue
			}
			exchanges[exchange] = ok
		}
		if !ok {
			resp.Results[i].Err = sdk.Permanent(fmt.Errorf("no exchange %q in this vhost", exchange))
			continue
		}
		attempted = true
		resp.Results[i].Err = s.publishOne(ctx, p, d.confirm, exchange, key, msg)
		resp.Results[i].Acked = resp.Results[i].Err == nil
	}
	if !attempted && firstErr != nil {
		return nil, firstErr
	}
	return resp, nil
}

func (s *source) publishOne(ctx context.Context, p *publisher, confirm time.Duration, exchange, key string, msg amqp.Publishing) error {
	ctx, cancel := context.WithTimeout(ctx, confirm)
	defer cancel()
	dc, err := p.ch.PublishWithDeferredConfirmWithContext(ctx, exchange, key, true, false, msg)
	if err != nil {
		_ = p.ch.Close()
		s.publish = nil
		return classify(fmt.Errorf("publish to %s: %w", destination(exchange, key), err))
	}
	acked, err := dc.WaitContext(ctx)
	if err != nil {
		// A confirm may still come, for a message reported failed: it may
		// be delivered, and sent again by the next attempt (at least once).
		// The next message gets a channel of its own.
		_ = p.ch.Close()
		s.publish = nil
		return classify(fmt.Errorf("no confirm from the broker within %s: %w", confirm, err))
	}
	// A mandatory message no queue took is returned before it is
	// confirmed, so the return is here by now if there is one.
	select {
	case r := <-p.returns:
		return sdk.Permanent(fmt.Errorf("unroutable: %s routes %q to no queue (%d %s)", exchangeName(exchange), key, r.ReplyCode, r.ReplyText))
	default:
	}
	if !acked {
		return sdk.Retryable(fmt.Errorf("the broker refused the message (nack) on %s", destination(exchange, key)), time.Second)
	}
	return nil
}

func exchangeName(e string) string {
	if e == "" {
		return "the default exchange"
	}
	return "exchange " + e
}
