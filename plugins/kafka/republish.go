package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"path"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/sasl"

	"github.com/lifecycled/lifecycled/sdk"
)

// defaultMaxMessageBytes stays below Kafka's default max.message.bytes
// (1048588), which limits a whole record batch, with room for its header.
const defaultMaxMessageBytes = 1_000_000

func newTransport(mech sasl.Mechanism, tlsCfg *tls.Config, metadataTTL time.Duration) *kafka.Transport {
	return &kafka.Transport{SASL: mech, TLS: tlsCfg, DialTimeout: 10 * time.Second, ClientID: "lifecycled", MetadataTTL: metadataTTL}
}

func newWriter(cfg config, tr *kafka.Transport) *kafka.Writer {
	return &kafka.Writer{
		Addr:         kafka.TCP(cfg.Brokers...),
		Transport:    tr,
		RequiredAcks: kafka.RequireAll,
		// Same partition for the same key as Java producers.
		Balancer:     &kafka.Murmur2Balancer{},
		BatchTimeout: time.Millisecond,
		BatchSize:    1000,
		// A record batch larger than the broker's max.message.bytes is
		// refused whole, good messages and all.
		BatchBytes:   int64(cfg.MaxMessageBytes),
		MaxAttempts:  3,
		WriteTimeout: 30 * time.Second,
		ReadTimeout:  30 * time.Second,
	}
}

// recordSize is a message's size in a record batch, as kafka-go counts it
// against BatchBytes, plus the varint lengths it leaves out.
func recordSize(m kafka.Message) int {
	n := 4 + 1 + 1 + 8 + 4 + len(m.Key) + 4 + len(m.Value) + 5
	for _, h := range m.Headers {
		n += 10 + len(h.Key) + len(h.Value)
	}
	return n
}

// Republish writes every message with acks=all and reports, per message,
// whether the broker acknowledged it. Each message's fate is its own:
//
//   - a message larger than max_message_bytes is not sent and fails
//     permanently, saying so;
//   - messages are written per topic, so that a topic the broker does not
//     know fails only its own messages;
//   - stale metadata (a topic created a moment ago, a partition without a
//     leader) is retried with fresh metadata for up to metadata_wait;
//   - a batch the broker refuses as too large is tried message by message.
//
// The call as a whole fails only when the broker could not be reached for
// any message.
func (s *source) Republish(ctx context.Context, req *sdk.RepublishRequest) (*sdk.RepublishResponse, error) {
	s.mu.Lock()
	w, cfg, wait := s.writer, s.cfg, s.metadataWait
	s.mu.Unlock()
	if w == nil {
		return nil, sdk.Unavailable(errors.New("not configured"))
	}
	resp := &sdk.RepublishResponse{Results: make([]sdk.RepublishResult, len(req.Messages))}
	byTopic := map[string][]int{}
	var topics []string
	for i, m := range req.Messages {
		resp.Results[i] = sdk.RepublishResult{ID: m.ID, Acked: true}
		msg := toKafka(m)
		if err := validTopic(m.Topic); err != nil {
			resp.Results[i] = sdk.RepublishResult{ID: m.ID, Err: sdk.Permanent(err)}
			continue
		}
		if ok, _ := path.Match(cfg.TopicPattern, m.Topic); ok {
			// The daemon never sends a message to its own DLQ topic, nor to
			// one it read dead letters from; a DLQ topic it has not seen yet
			// is refused here: the message would only come back.
			resp.Results[i] = sdk.RepublishResult{ID: m.ID, Err: sdk.Permanent(fmt.Errorf(
				"republish to %s refused: it matches topic_pattern %q, so it is a dead-letter topic this source reads", m.Topic, cfg.TopicPattern))}
			continue
		}
		if n := recordSize(msg); n > cfg.MaxMessageBytes {
			resp.Results[i] = sdk.RepublishResult{ID: m.ID, Err: sdk.Permanent(fmt.Errorf(
				"republish to %s: message too large: %d bytes, over max_message_bytes = %d (the broker's max.message.bytes)", m.Topic, n, cfg.MaxMessageBytes))}
			continue
		}
		if byTopic[m.Topic] == nil {
			topics = append(topics, m.Topic)
		}
		byTopic[m.Topic] = append(byTopic[m.Topic], i)
	}
	var wg sync.WaitGroup
	errs := make([]error, len(req.Messages))
	for _, topic := range topics {
		idx := byTopic[topic]
		wg.Add(1)
		go func() {
			defer wg.Done()
			msgs := make([]kafka.Message, len(idx))
			for j, i := range idx {
				msgs[j] = toKafka(req.Messages[i])
			}
			for j, err := range s.writeTopic(ctx, w, cfg, wait, topic, msgs) {
				errs[idx[j]] = err
			}
		}()
	}
	wg.Wait()
	sent, unreachable := 0, 0
	var firstErr error
	for _, idx := range byTopic {
		for _, i := range idx {
			sent++
			if errs[i] == nil {
				continue
			}
			resp.Results[i] = sdk.RepublishResult{ID: req.Messages[i].ID, Err: errs[i]}
			var kerr kafka.Error
			if !errors.As(errs[i], &kerr) && sdk.ClassOf(errs[i]) == sdk.ClassRetryable {
				unreachable++
				if firstErr == nil {
					firstErr = errs[i]
				}
			}
		}
	}
	if sent > 0 && unreachable == sent && len(req.Messages) == sent {
		return nil, sdk.Retryable(fmt.Errorf("republish: broker unreachable: %w", firstErr), 0)
	}
	return resp, nil
}

func toKafka(m sdk.RepublishMessage) kafka.Message {
	hs := make([]kafka.Header, len(m.Headers))
	for j, h := range m.Headers {
		// A Go string holds any bytes: the key goes out as it came in.
		hs[j] = kafka.Header{Key: string(h.Key), Value: h.Value}
	}
	return kafka.Message{Topic: m.Topic, Key: m.Key, Value: m.Value, Headers: hs}
}

// writeTopic writes one topic's messages and returns each one's final
// error (nil when acknowledged).
func (s *source) writeTopic(ctx context.Context, w *kafka.Writer, cfg config, wait time.Duration, topic string, msgs []kafka.Message) []error {
	errs := write(ctx, w, msgs)

	// Stale metadata: a fresh transport (an empty metadata cache refreshed
	// every 250 ms) for every round, until the messages go through or the
	// wait is over.
	start := time.Now()
	backoff := 250 * time.Millisecond
	for pending := failedWith(errs, classMetadata); len(pending) > 0 && time.Since(start) < wait && ctx.Err() == nil; pending = failedWith(errs, classMetadata) {
		if !sleep(ctx, min(backoff, wait-time.Since(start))) {
			break
		}
		backoff = min(2*backoff, 2*time.Second)
		s.mu.Lock()
		tr := newTransport(s.mech, s.tlsCfg, 250*time.Millisecond)
		s.mu.Unlock()
		fresh := newWriter(cfg, tr)
		retry := make([]kafka.Message, len(pending))
		for j, i := range pending {
			retry[j] = msgs[i]
		}
		for j, err := range write(ctx, fresh, retry) {
			errs[pending[j]] = err
		}
		_ = fresh.Close()
		tr.CloseIdleConnections()
	}

	// Too large: the batch may have been, the message alone may not be.
	if tooLarge := failedWith(errs, classTooLarge); len(msgs) > 1 {
		for _, i := range tooLarge {
			errs[i] = write(ctx, w, msgs[i:i+1])[0]
		}
	}

	waited := time.Since(start)
	out := make([]error, len(msgs))
	for i, err := range errs {
		if err != nil {
			out[i] = republishError(topic, err, waited)
		}
	}
	return out
}

// write is one WriteMessages call with its error spread over the messages.
func write(ctx context.Context, w *kafka.Writer, msgs []kafka.Message) []error {
	errs := make([]error, len(msgs))
	err := w.WriteMessages(ctx, msgs...)
	var (
		werrs    kafka.WriteErrors
		tooLarge kafka.MessageTooLargeError
	)
	switch {
	case err == nil:
	case errors.As(err, &werrs) && len(werrs) == len(msgs):
		copy(errs, werrs)
	case errors.As(err, &tooLarge) && len(msgs) > 1:
		// kafka-go checks sizes before sending anything: write each alone.
		for i := range msgs {
			errs[i] = write(ctx, w, msgs[i:i+1])[0]
		}
	default:
		// Nothing was sent (no metadata for the topic, broker unreachable).
		for i := range errs {
			errs[i] = err
		}
	}
	return errs
}

func failedWith(errs []error, c errClass) []int {
	var out []int
	for i, err := range errs {
		if err != nil && classOf(err) == c {
			out = append(out, i)
		}
	}
	return out
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

func validTopic(t string) error {
	if t == "" || t == "." || t == ".." || len(t) > 249 {
		return fmt.Errorf("invalid topic name %q", t)
	}
	for _, r := range t {
		if !(r == '.' || r == '_' || r == '-' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9')) {
			return fmt.Errorf("invalid topic name %q", t)
		}
	}
	return nil
}
