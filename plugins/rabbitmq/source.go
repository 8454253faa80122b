package main

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/lifecycled/lifecycled/sdk"
)

// source reads the configured queues on one connection, a consuming
// channel whose deliveries wait, unacknowledged, until the daemon commits
// them, and republishes on another, a channel in confirm mode. Two
// connections, because RabbitMQ blocks a connection that publishes while a
// memory or disk alarm lasts (it stops reading its socket): the
// acknowledgements of messages already stored must not wait behind it.
type source struct {
	mu        sync.Mutex
	cfg       config
	confirm   time.Duration
	heartbeat time.Duration

	conn    *amqp.Connection
	consume *amqp.Channel
	gen     uint64 // which connection a delivery came on; a new one per dial
	// deliveries are the consumers' deliveries, merged; a closed
	// connection's stop coming, and those still here are dropped by gen.
	deliveries chan delivery
	// done is closed when the connection is dropped, so that its
	// consumers' forwarders stop.
	done chan struct{}
	// pending are the deliveries handed out and not yet acknowledged, by
	// position id.
	pending map[string]pendingDelivery

	// pubMu guards the publishing side; it is never held while taking mu.
	pubMu   sync.Mutex
	pubConn *amqp.Connection
	publish *publisher
}

type delivery struct {
	gen   uint64
	queue string
	amqp.Delivery
}

type pendingDelivery struct {
	gen   uint64
	tag   uint64
	queue string
}

func newSource() *source { return &source{pending: map[string]pendingDelivery{}} }

// reconfigure takes a new config: the old connection is closed, which
// makes the broker deliver again whatever it had handed out unacknowledged.
func (s *source) reconfigure(cfg config, confirm, heartbeat time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dropLocked()
	s.cfg, s.confirm, s.heartbeat = cfg, confirm, heartbeat
	s.pubMu.Lock()
	defer s.pubMu.Unlock()
	s.dropPublisherLocked()
}

// dropLocked closes the connection; deliveries not acknowledged go back to
// their queues, and are delivered again, flagged redelivered.
func (s *source) dropLocked() {
	if s.conn != nil {
		_ = s.conn.Close()
	}
	if s.done != nil {
		close(s.done)
	}
	s.conn, s.consume, s.done = nil, nil, nil
	clear(s.pending)
}

// dropGen drops the connection of generation gen, if it is still the one.
func (s *source) dropGen(gen uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gen == gen && s.conn != nil {
		s.dropLocked()
	}
}

// check dials and starts the consumers: a queue that does not exist is a
// config error, not something to wait for.
func (s *source) check(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.connectLocked(); err != nil {
		return err
	}
	return ctx.Err()
}

// connectLocked dials when there is no live connection, and starts the
// consumers.
func (s *source) connectLocked() error {
	if s.conn != nil && !s.conn.IsClosed() {
		return nil
	}
	s.dropLocked()
	conn, err := amqp.DialConfig(s.cfg.URL, amqp.Config{Heartbeat: s.heartbeat, Properties: amqp.Table{"connection_name": "lifecycled-plugin-rabbitmq"}})
	if err != nil {
		return classify(fmt.Errorf("connect to RabbitMQ: %w", err))
	}
	ch, err := conn.Channel()
	if err == nil {
		err = ch.Qos(s.cfg.Prefetch, 0, false)
	}
	if err != nil {
		_ = conn.Close()
		return classify(fmt.Errorf("open the consuming channel: %w", err))
	}
	s.gen++
	s.conn, s.consume, s.done = conn, ch, make(chan struct{})
	s.deliveries = make(chan delivery, s.cfg.Prefetch*len(s.cfg.Queues))
	var consumers sync.WaitGroup
	for _, q := range s.cfg.Queues {
		msgs, err := ch.Consume(q, "", false, false, false, false, nil)
		if err != nil {
			s.dropLocked()
			var ae *amqp.Error
			if errors.As(err, &ae) && ae.Code == amqp.NotFound {
				return sdk.InvalidConfig(sdk.FieldError{Field: "queues", Problem: fmt.Sprintf("no queue %q in this vhost", q)})
			}
			return classify(fmt.Errorf("consume %q: %w", q, err))
		}
		consumers.Add(1)
		go func(gen uint64, queue string, out chan<- delivery, done <-chan struct{}) {
			defer consumers.Done()
			for d := range msgs {
				select {
				case out <- delivery{gen: gen, queue: queue, Delivery: d}:
				case <-done:
					return
				}
			}
			select {
			case <-done:
			default:
				// The broker ended this consumer while the connection
				// lives (the queue was deleted: basic.cancel), or the
				// channel closed: start over on a new connection, so that
				// every queue is consumed again.
				sdk.Logger().Warn("the broker ended the consumer of a dead-letter queue; reconnecting", "queue", queue)
				s.dropGen(gen)
			}
		}(s.gen, q, s.deliveries, s.done)
	}
	go func(out chan delivery) {
		consumers.Wait()
		close(out)
	}(s.deliveries)
	return nil
}

// fetchLinger is how long a batch waits for the next delivery.
const fetchLinger = 2 * time.Millisecond

// Fetch hands over up to req.Max deliveries, waiting up to req.Wait for
// the first.
func (s *source) Fetch(ctx context.Context, req *sdk.FetchRequest) (*sdk.FetchResponse, error) {
	s.mu.Lock()
	err := s.connectLocked()
	in, gen := s.deliveries, s.gen
	s.mu.Unlock()
	if err != nil {
		return nil, err
	}
	timer := time.NewTimer(req.Wait)
	defer timer.Stop()
	// After the first delivery, a batch takes what follows within linger of
	// the one before: the consumer hands deliveries over one at a time, and
	// a batch cut at the first gap is a transaction and a commit per few
	// messages.
	linger := time.NewTimer(0)
	defer linger.Stop()
	var got []delivery
	for len(got) < req.Max {
		var (
			d  delivery
			ok bool
		)
		if len(got) == 0 {
			select {
			case d, ok = <-in:
			case <-timer.C:
				return &sdk.FetchResponse{}, nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		} else {
			if !linger.Stop() {
				select {
				case <-linger.C:
				default:
				}
			}
			linger.Reset(fetchLinger)
			select {
			case d, ok = <-in:
			case <-linger.C:
				ok, in = false, nil
			}
		}
		if !ok {
			if len(got) == 0 && in != nil {
				// The consumers ended: the connection is gone or going.
				s.dropGen(gen)
				return nil, sdk.Retryable(errors.New("the broker ended the consumers (a queue deleted, the connection closed); reconnecting"), time.Second)
			}
			break
		}
		if d.gen == gen {
			got = append(got, d)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gen != gen {
		// The connection closed meanwhile: these go back to their queues.
		return &sdk.FetchResponse{}, nil
	}
	out := &sdk.FetchResponse{Messages: make([]sdk.DeadLetter, 0, len(got))}
	for _, d := range got {
		dl := deadLetter(d.queue, d.Delivery)
		s.pending[string(dl.Position.ID)] = pendingDelivery{gen: gen, tag: d.DeliveryTag, queue: dl.Position.Topic}
		out.Messages = append(out.Messages, dl)
	}
	return out, nil
}

// deadLetter is a delivery from queue as the daemon keeps it.
func deadLetter(queue string, d amqp.Delivery) sdk.DeadLetter {
	return sdk.DeadLetter{
		Position:    sdk.Position{Topic: queue, ID: newPositionID(), Display: display(d)},
		Key:         keyOf(d),
		Headers:     headersOf(d),
		Value:       d.Body,
		Timestamp:   d.Timestamp,
		Origin:      originOf(d.Headers),
		Redelivered: d.Redelivered,
	}
}

// keyOf is the message id, which stands for the key AMQP does not have;
// nil when it has none.
func keyOf(d amqp.Delivery) []byte {
	if d.MessageId == "" {
		return nil
	}
	return []byte(d.MessageId)
}

// newPositionID is a delivery's position: the time it was taken (so ids
// sort in arrival order) and 8 random bytes.
func newPositionID() []byte {
	id := make([]byte, 16)
	binary.BigEndian.PutUint64(id, uint64(time.Now().UnixNano()))
	_, _ = rand.Read(id[8:])
	return id
}

// display is how operators see a delivery: its message id when it has one.
func display(d amqp.Delivery) string {
	if d.MessageId != "" {
		return cut("message-id "+d.MessageId, sdk.MaxPositionDisplayBytes)
	}
	return fmt.Sprintf("delivery %d at %s", d.DeliveryTag, time.Now().UTC().Format("2006-01-02T15:04:05.000Z"))
}

// Commit acknowledges the deliveries, then waits for a reply on the same
// channel: the broker handles a channel's methods in order, so once it
// answers, every acknowledgement before was applied. A delivery of a
// connection that closed cannot be acknowledged: the broker has put it
// back, and delivers it again, flagged.
func (s *source) Commit(ctx context.Context, req *sdk.CommitRequest) (*sdk.CommitResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	stale := 0
	var acked []string
	for _, p := range req.Positions {
		pd, ok := s.pending[string(p.ID)]
		if !ok || pd.gen != s.gen || s.consume == nil {
			stale++
			continue
		}
		if err := s.consume.Ack(pd.tag, false); err != nil {
			s.dropLocked()
			return nil, classify(fmt.Errorf("acknowledge: %w (the connection is closed: the broker delivers them again)", err))
		}
		acked = append(acked, string(p.ID))
	}
	if len(acked) > 0 {
		if _, err := s.consume.QueueDeclarePassive(s.pending[acked[0]].queue, false, false, false, false, nil); err != nil {
			s.dropLocked()
			return nil, classify(fmt.Errorf("confirm the acknowledgements: %w (the connection is closed: the broker delivers them again)", err))
		}
	}
	for _, id := range acked {
		delete(s.pending, id)
	}
	if stale > 0 && len(acked) == 0 {
		return nil, sdk.NotCommitted(fmt.Errorf("the %d deliveries came on a connection that closed: none was acknowledged, and the broker delivers them again", stale))
	}
	if stale > 0 {
		return nil, sdk.Retryable(fmt.Errorf("%d of %d deliveries came on a connection that closed: the broker delivers them again", stale, len(req.Positions)), 0)
	}
	return &sdk.CommitResponse{}, nil
}
