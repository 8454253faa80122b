package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/sasl"

	"github.com/lifecycled/lifecycled/sdk"
)

// source is the Kafka DLQSource: a consumer-group reader over every topic
// matching the pattern (recreated when the matching set changes) and an
// acks=all writer for republishing.
type source struct {
	mu       sync.Mutex
	cfg      config
	refresh  time.Duration
	session  time.Duration
	dialer   *kafka.Dialer
	tr       *kafka.Transport
	reader   *kafka.Reader
	topics   []string
	writer   *kafka.Writer
	nextScan time.Time
	// For fresh writers on stale metadata (see Republish).
	mech         sasl.Mechanism
	tlsCfg       *tls.Config
	metadataWait time.Duration
	fetchMu      sync.Mutex // one Fetch at a time: the reader is not shared
	outOfRange   outOfRange // a partition reader is past its partition's end
}

// Fetch waits up to req.Wait for a first message, then takes what is
// already buffered, up to req.Max.
func (s *source) Fetch(ctx context.Context, req *sdk.FetchRequest) (*sdk.FetchResponse, error) {
	s.fetchMu.Lock()
	defer s.fetchMu.Unlock()
	r, err := s.currentReader(ctx)
	if err != nil {
		return nil, err
	}
	resp := &sdk.FetchResponse{}
	if r == nil {
		// No matching topic yet: wait, then report nothing.
		t := time.NewTimer(req.Wait)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
		}
		return resp, nil
	}
	if s.outOfRange.seen.Swap(false) {
		if err := s.resetOutOfRange(ctx, r, errors.New(outOfRangeMessage)); err != nil {
			return nil, err
		}
		return resp, nil
	}
	wait := req.Wait
	for len(resp.Messages) < req.Max {
		fctx, cancel := context.WithTimeout(ctx, wait)
		m, err := r.FetchMessage(fctx)
		cancel()
		if err != nil {
			if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
				break
			}
			if errors.Is(err, kafka.OffsetOutOfRange) {
				if len(resp.Messages) > 0 {
					s.outOfRange.seen.Store(true) // after these are handed over
					break
				}
				if err := s.resetOutOfRange(ctx, r, err); err != nil {
					return nil, err
				}
				return resp, nil
			}
			if len(resp.Messages) > 0 {
				break
			}
			return nil, classify(fmt.Errorf("fetch: %w", err))
		}
		resp.Messages = append(resp.Messages, toDeadLetter(m, s.originalTopic(m.Topic)))
		// After the first message, only take what is already there.
		wait = 2 * time.Millisecond
	}
	return resp, nil
}

func toDeadLetter(m kafka.Message, original string) sdk.DeadLetter {
	hs := make([]sdk.Header, len(m.Headers))
	for i, h := range m.Headers {
		hs[i] = sdk.Header{Key: []byte(h.Key), Value: h.Value}
	}
	return sdk.DeadLetter{
		Position:      sdk.Position{Topic: m.Topic, Partition: int32(m.Partition), Offset: m.Offset},
		Key:           m.Key,
		Headers:       hs,
		Value:         m.Value,
		Timestamp:     m.Time,
		OriginalTopic: original,
	}
}

// Commit commits the consumer group's offsets past these positions.
func (s *source) Commit(ctx context.Context, req *sdk.CommitRequest) (*sdk.CommitResponse, error) {
	s.mu.Lock()
	r := s.reader
	s.mu.Unlock()
	if r == nil || len(req.Positions) == 0 {
		return &sdk.CommitResponse{}, nil
	}
	msgs := make([]kafka.Message, len(req.Positions))
	for i, p := range req.Positions {
		msgs[i] = kafka.Message{Topic: p.Topic, Partition: int(p.Partition), Offset: p.Offset}
	}
	if err := r.CommitMessages(ctx, msgs...); err != nil {
		return nil, classify(fmt.Errorf("commit offsets: %w", err))
	}
	return &sdk.CommitResponse{}, nil
}
