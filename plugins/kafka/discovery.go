package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/lifecycled/lifecycled/sdk"
)

// dlqTopic is a dead-letter topic as the broker knows it now. A topic
// deleted and created again keeps its name and gets a new id, and franz-go
// never takes up the new id of a topic it consumes (it fails the topic with
// UNKNOWN_TOPIC_ID), so the consumer is made anew when an id changes.
type dlqTopic struct {
	name string
	id   [16]byte
}

// matchingTopics lists the broker's topics that match the pattern, by name.
func (s *source) matchingTopics(ctx context.Context) ([]dlqTopic, error) {
	s.mu.Lock()
	cfg, cl := s.cfg, s.producer
	s.mu.Unlock()
	// A request of its own: kadm answers from franz-go's metadata cache,
	// which may be seconds old.
	resp, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	if err != nil {
		err = fmt.Errorf("list topics on %s: %w", strings.Join(cfg.Brokers, ","), err)
		if cfg.SASL != nil && (errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)) {
			// Brokers that refuse credentials may just hang up instead of
			// answering SASL_AUTHENTICATION_FAILED; say what it likely means.
			err = fmt.Errorf("%w (the broker closed the connection during SASL %s authentication: check sasl.username, the password and sasl.mechanism)",
				err, cfg.SASL.Mechanism)
		}
		return nil, classify(err)
	}
	var out []dlqTopic
	for _, t := range resp.Topics {
		if t.ErrorCode != 0 || t.IsInternal || t.Topic == nil {
			continue
		}
		if ok, _ := path.Match(cfg.TopicPattern, *t.Topic); ok {
			out = append(out, dlqTopic{name: *t.Topic, id: t.TopicID})
		}
	}
	slices.SortFunc(out, func(a, b dlqTopic) int { return strings.Compare(a.name, b.name) })
	return out, nil
}

func names(topics []dlqTopic) []string {
	out := make([]string, len(topics))
	for i, t := range topics {
		out[i] = t.name
	}
	return out
}

// currentConsumer returns the consumer, making it anew when the set of
// matching topics changed (new DLQ topics are picked up without a restart).
func (s *source) currentConsumer(ctx context.Context) (*kgo.Client, error) {
	s.mu.Lock()
	due := time.Now().After(s.nextScan)
	c := s.consumer
	s.mu.Unlock()
	if !due && c != nil {
		return c, nil
	}
	topics, err := s.matchingTopics(ctx)
	s.mu.Lock()
	if err != nil {
		s.nextScan = time.Now().Add(time.Second)
		c := s.consumer
		s.mu.Unlock()
		if c != nil {
			return c, nil // keep consuming what we know
		}
		return nil, err
	}
	s.nextScan = time.Now().Add(s.refresh)
	if s.consumer != nil && slices.Equal(topics, s.topics) {
		c := s.consumer
		s.mu.Unlock()
		return c, nil
	}
	old := s.consumer
	s.consumer, s.topics = nil, topics
	conn, cfg, refresh, session := s.conn, s.cfg, s.refresh, s.session
	s.mu.Unlock()
	if old != nil {
		sdk.Logger().Info("dead-letter topics changed; rejoining the group", "topics", names(topics))
		old.Close()
	}
	if len(topics) == 0 {
		return nil, nil
	}
	c, err = newConsumer(conn, cfg, names(topics), refresh, session)
	if err != nil {
		return nil, sdk.Permanent(fmt.Errorf("consumer: %w", err))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.consumer != nil || !slices.Equal(s.topics, topics) {
		// Configure ran meanwhile: its state wins.
		c.Close()
		return s.consumer, nil
	}
	s.consumer = c
	return c, nil
}

// rescanSoon makes the next Fetch look at the broker's topics again.
func (s *source) rescanSoon() {
	s.mu.Lock()
	s.nextScan = time.Time{}
	s.mu.Unlock()
}

func (s *source) originalTopic(dlqTopic string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t, ok := s.cfg.OriginalTopics[dlqTopic]; ok {
		return t
	}
	if s.cfg.DLQSuffix != "" && strings.HasSuffix(dlqTopic, s.cfg.DLQSuffix) {
		return strings.TrimSuffix(dlqTopic, s.cfg.DLQSuffix) + s.cfg.OriginalSuffix
	}
	return ""
}
