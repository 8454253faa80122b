package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/lifecycled/lifecycled/sdk"
)

// A truncated partition (an unclean leader election) ends before offsets
// that were read, and a DLQ topic deleted and created again starts its
// offsets at 0. The group's committed offset, or the consumer's own
// position, then lies past the end of the partition. Waiting there until
// the partition grows past it would skip every message before: dead
// letters lost. The source resets such partitions to their earliest offset
// instead, says so, and reads them again: what was stored already is known
// to the daemon by position and content, what is new is stored.
//
// With kafka-go the source had to listen to the reader's error log for
// "reading passed the last offset" to notice. franz-go reports it: the
// consumer is built with kgo.NoResetOffset, so an OFFSET_OUT_OF_RANGE comes
// back from PollRecords instead of being reset by the client to
// start_offset (which, with "latest", would skip what the partition holds).
// Two cases franz-go handles itself now: a truncation it can locate
// through the leader epochs (KIP-320) goes on from where the logs diverged
// and is only logged (kgo.ErrDataLoss); and a topic deleted and created
// again is seen by its new topic id at the next scan of the topics, where
// the group's offsets have gone with the old topic, so the new one is read
// from where start_offset says.

// partitionOffsets is where a partition starts and ends, and where the
// group stands on it (-1 when it committed nothing).
type partitionOffsets struct {
	first, last, committed int64
}

// outOfRangeOffsets lists the partitions of topics whose committed offset
// lies outside them, or that have no committed offset at all, with their
// offsets.
func (s *source) outOfRangeOffsets(ctx context.Context, topics []string) (map[string]map[int32]partitionOffsets, error) {
	s.mu.Lock()
	cfg, cl := s.cfg, s.producer
	s.mu.Unlock()
	adm := kadm.NewClient(cl)
	starts, err := adm.ListStartOffsets(ctx, topics...)
	if err != nil {
		return nil, fmt.Errorf("list offsets: %w", err)
	}
	ends, err := adm.ListEndOffsets(ctx, topics...)
	if err != nil {
		return nil, fmt.Errorf("list offsets: %w", err)
	}
	committed, err := adm.FetchOffsets(ctx, cfg.GroupID)
	if err == nil {
		err = committed.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("read the group's offsets: %w", err)
	}
	out := map[string]map[int32]partitionOffsets{}
	starts.Each(func(first kadm.ListedOffset) {
		last, ok := ends.Lookup(first.Topic, first.Partition)
		if first.Err != nil || !ok || last.Err != nil {
			return // deleted meanwhile: nothing to read there
		}
		c := int64(-1)
		if o, ok := committed.Lookup(first.Topic, first.Partition); ok && o.At >= 0 {
			c = o.At
		}
		if c >= first.Offset && c <= last.Offset {
			return
		}
		if out[first.Topic] == nil {
			out[first.Topic] = map[int32]partitionOffsets{}
		}
		out[first.Topic][first.Partition] = partitionOffsets{first: first.Offset, last: last.Offset, committed: c}
	})
	return out, nil
}

// resetOutOfRange moves the group's offsets of c's partitions that lie out
// of range (or are missing) to the earliest offset, in c's generation, and
// closes c: the next Fetch joins the group again and reads from there.
func (s *source) resetOutOfRange(ctx context.Context, c *kgo.Client, cause error) error {
	s.mu.Lock()
	topics := names(s.topics)
	s.mu.Unlock()
	parts, err := s.outOfRangeOffsets(ctx, topics)
	if err != nil {
		return classify(fmt.Errorf("offset out of range (%v), and the offsets to reset could not be read: %w", cause, err))
	}
	resets := map[string]map[int32]kgo.EpochOffset{}
	for topic, ps := range parts {
		for p, o := range ps {
			sdk.Logger().Warn("dead-letter partition read past its end (its topic was deleted and created again, or truncated): reading it again from its earliest offset",
				"topic", topic, "partition", p, "committed", o.committed, "earliest", o.first, "end", o.last, "cause", fmt.Sprint(cause))
			if resets[topic] == nil {
				resets[topic] = map[int32]kgo.EpochOffset{}
			}
			resets[topic][p] = kgo.EpochOffset{Epoch: -1, Offset: o.first}
		}
	}
	if len(resets) > 0 {
		if err := commit(ctx, c, resets); err != nil && !errors.Is(err, context.Canceled) {
			return classify(fmt.Errorf("reset offsets out of range to the earliest: %w", err))
		}
	}
	s.mu.Lock()
	if s.consumer == c {
		s.consumer, s.nextScan = nil, time.Time{}
	}
	s.mu.Unlock()
	c.Close()
	return nil
}
