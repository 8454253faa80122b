package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/lifecycled/lifecycled/sdk"
)

// matchingTopics lists the broker's topics that match the pattern.
func (s *source) matchingTopics(ctx context.Context) ([]string, error) {
	s.mu.Lock()
	cfg, tr := s.cfg, s.tr
	s.mu.Unlock()
	client := &kafka.Client{Addr: kafka.TCP(cfg.Brokers...), Transport: tr, Timeout: 10 * time.Second}
	meta, err := client.Metadata(ctx, &kafka.MetadataRequest{})
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
	var out []string
	for _, t := range meta.Topics {
		if t.Error != nil || t.Internal {
			continue
		}
		if ok, _ := path.Match(cfg.TopicPattern, t.Name); ok {
			out = append(out, t.Name)
		}
	}
	sort.Strings(out)
	return out, nil
}

// currentReader returns the reader, recreating it when the set of matching
// topics changed (new DLQ topics are picked up without a restart).
func (s *source) currentReader(ctx context.Context) (*kafka.Reader, error) {
	s.mu.Lock()
	due := time.Now().After(s.nextScan)
	r := s.reader
	s.mu.Unlock()
	if !due && r != nil {
		return r, nil
	}
	topics, err := s.matchingTopics(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.nextScan = time.Now().Add(time.Second)
		if s.reader != nil {
			return s.reader, nil // keep consuming what we know
		}
		return nil, err
	}
	s.nextScan = time.Now().Add(s.refresh)
	if s.reader != nil && equal(topics, s.topics) {
		return s.reader, nil
	}
	if s.reader != nil {
		sdk.Logger().Info("dead-letter topics changed; rejoining the group", "topics", topics)
		_ = s.reader.Close()
		s.reader = nil
	}
	s.topics = topics
	if len(topics) == 0 {
		return nil, nil
	}
	start := kafka.FirstOffset
	if s.cfg.StartOffset == "latest" {
		start = kafka.LastOffset
	}
	s.reader = kafka.NewReader(kafka.ReaderConfig{
		Brokers:               s.cfg.Brokers,
		GroupID:               s.cfg.GroupID,
		GroupTopics:           topics,
		Dialer:                s.dialer,
		StartOffset:           start,
		CommitInterval:        0, // commit synchronously, and only when told
		MinBytes:              1,
		MaxBytes:              16 << 20,
		MaxWait:               250 * time.Millisecond,
		QueueCapacity:         10000,
		WatchPartitionChanges: true,
		HeartbeatInterval:     min(time.Second, s.session/3),
		SessionTimeout:        s.session,
		RebalanceTimeout:      s.session,
		// An offset past the end of a partition is reported, not waited
		// out (see offsets.go).
		OffsetOutOfRangeError: true,
		ErrorLogger:           s.outOfRange.logger(),
	})
	return s.reader, nil
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
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
