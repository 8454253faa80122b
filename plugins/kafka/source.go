package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/lifecycled/lifecycled/sdk"
	"github.com/lifecycled/lifecycled/sdk/kafkaconv"
)

// source is the Kafka DLQSource: a consumer group member over every topic
// matching the pattern (made anew when the matching set changes) and an
// acks=all producer for republishing, which also lists topics and offsets.
type source struct {
	mu           sync.Mutex
	cfg          config
	refresh      time.Duration
	session      time.Duration
	metadataWait time.Duration
	conn         []kgo.Opt // how every client reaches the brokers
	producer     *kgo.Client
	consumer     *kgo.Client
	topics       []dlqTopic // what consumer consumes
	nextScan     time.Time

	fetchMu sync.Mutex // one Fetch at a time: polling is not shared
	// outOfRange is a partition's offset past its end, seen by a Fetch that
	// had messages to hand over first; the next Fetch resets it. Guarded
	// by fetchMu.
	outOfRange error
}

// Fetch waits up to req.Wait for a first message, then takes what is
// already buffered, up to req.Max.
func (s *source) Fetch(ctx context.Context, req *sdk.FetchRequest) (*sdk.FetchResponse, error) {
	s.fetchMu.Lock()
	defer s.fetchMu.Unlock()
	c, err := s.currentConsumer(ctx)
	if err != nil {
		return nil, err
	}
	resp := &sdk.FetchResponse{}
	if c == nil {
		// No matching topic yet: wait, then report nothing.
		sleep(ctx, req.Wait)
		return resp, nil
	}
	if cause := s.outOfRange; cause != nil {
		s.outOfRange = nil
		return resp, s.resetOutOfRange(ctx, c, cause)
	}
	if req.Max <= 0 {
		return resp, nil
	}
	pctx, cancel := context.WithTimeout(ctx, req.Wait)
	fetches := c.PollRecords(pctx, req.Max)
	cancel()
	fetches.EachRecord(func(r *kgo.Record) {
		resp.Messages = append(resp.Messages, toDeadLetter(r, s.originalTopic(r.Topic)))
	})
	var failed error
	for _, fe := range fetches.Errors() {
		var dataLoss *kgo.ErrDataLoss
		switch {
		case errors.Is(fe.Err, context.DeadlineExceeded), errors.Is(fe.Err, context.Canceled), errors.Is(fe.Err, kgo.ErrClientClosed):
			// The wait is over, or Configure replaced the consumer.
		case errors.Is(fe.Err, kerr.OffsetOutOfRange):
			s.outOfRange = fmt.Errorf("%s[%d]: %w", fe.Topic, fe.Partition, fe.Err)
		case errors.As(fe.Err, &dataLoss):
			// franz-go found where a truncated partition's log diverged
			// from what was read, and reads on from there: nothing is
			// skipped that the partition still has.
			sdk.Logger().Warn("dead-letter partition truncated (unclean leader election?): reading on from where its log diverged",
				"topic", fe.Topic, "partition", fe.Partition, "cause", dataLoss.Error())
		case errors.Is(fe.Err, kerr.UnknownTopicOrPartition), errors.Is(fe.Err, kerr.UnknownTopicID):
			// Deleted, or deleted and created again: the next scan of the
			// topics sees it and makes the consumer anew.
			s.rescanSoon()
		case failed == nil:
			failed = fmt.Errorf("fetch %s[%d]: %w", fe.Topic, fe.Partition, fe.Err)
		}
	}
	if cause := s.outOfRange; cause != nil && len(resp.Messages) == 0 {
		s.outOfRange = nil
		return resp, s.resetOutOfRange(ctx, c, cause)
	}
	if failed != nil {
		if len(resp.Messages) == 0 {
			return nil, classify(failed)
		}
		sdk.Logger().Warn("a dead-letter partition failed; handing over the messages of the others", "error", failed.Error())
	}
	return resp, nil
}

// toDeadLetter keeps null apart from empty: franz-go decodes a null key,
// value or header value as nil and an empty one as an empty slice
// (kbin.Reader.VarintBytes), and so does the SDK for the key.
func toDeadLetter(r *kgo.Record, original string) sdk.DeadLetter {
	hs := make([]sdk.Header, len(r.Headers))
	for i, h := range r.Headers {
		hs[i] = sdk.Header{Key: []byte(h.Key), Value: h.Value}
	}
	return sdk.DeadLetter{
		Position:  sdk.LogPosition(r.Topic, r.Partition, r.Offset),
		Key:       r.Key,
		Headers:   hs,
		Value:     r.Value,
		Timestamp: r.Timestamp,
		Origin:    kafkaconv.Origin(hs, original),
	}
}

// Commit commits the consumer group's offsets past these positions.
func (s *source) Commit(ctx context.Context, req *sdk.CommitRequest) (*sdk.CommitResponse, error) {
	s.mu.Lock()
	c := s.consumer
	s.mu.Unlock()
	if c == nil || len(req.Positions) == 0 {
		return &sdk.CommitResponse{}, nil
	}
	offsets := map[string]map[int32]kgo.EpochOffset{}
	for _, p := range req.Positions {
		partition, offset, ok := sdk.ParseLogPosition(p.ID)
		if !ok {
			return nil, sdk.Permanent(fmt.Errorf("commit %s: %x is not a position this plugin reported", p.Topic, p.ID))
		}
		if offsets[p.Topic] == nil {
			offsets[p.Topic] = map[int32]kgo.EpochOffset{}
		}
		if o, ok := offsets[p.Topic][partition]; !ok || offset+1 > o.Offset {
			offsets[p.Topic][partition] = kgo.EpochOffset{Epoch: -1, Offset: offset + 1}
		}
	}
	if err := commit(ctx, c, offsets); err != nil {
		return nil, classify(fmt.Errorf("commit offsets: %w", err))
	}
	return &sdk.CommitResponse{}, nil
}

// commit commits offsets in c's group generation and returns the request's
// error or the first partition's.
func commit(ctx context.Context, c *kgo.Client, offsets map[string]map[int32]kgo.EpochOffset) error {
	var first error
	c.CommitOffsetsSync(ctx, offsets, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		if err != nil {
			first = err
			return
		}
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if err := kerr.ErrorForCode(p.ErrorCode); err != nil && first == nil {
					first = fmt.Errorf("%s[%d]: %w", t.Topic, p.Partition, err)
				}
			}
		}
	})
	return first
}
