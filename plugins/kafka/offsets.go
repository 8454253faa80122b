package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/lifecycled/lifecycled/sdk"
)

// A DLQ topic deleted and created again starts its offsets at 0, and a
// truncated partition (an unclean leader election) ends before offsets
// that were read. The group's committed offset, or the reader's own
// position, then lies past the end of the partition. kafka-go waits there
// until the partition grows past it and goes on from there, silently
// skipping every message before: dead letters lost. The source resets such
// partitions to their earliest offset instead, says so, and reads them
// again: what was stored already is known to the daemon by position and
// content, what is new is stored.

// outOfRangeMessage starts what kafka-go logs when a partition reader's
// position is past the end of its partition (reader.go, v0.4.51); it keeps
// retrying there without telling the caller, so the source listens for it.
const outOfRangeMessage = "the kafka reader is reading passed the last offset"

// outOfRange is set when a partition reader reported an offset past the end
// of its partition; the next Fetch resets the group's offsets.
type outOfRange struct{ seen atomic.Bool }

// logger is the reader's error logger: kafka-go's messages go to the
// plugin's log, and one that means an offset out of range is noted.
func (o *outOfRange) logger() kafka.Logger {
	return kafka.LoggerFunc(func(msg string, args ...any) {
		if strings.HasPrefix(msg, outOfRangeMessage) {
			o.seen.Store(true)
		}
		sdk.Logger().Warn(fmt.Sprintf(msg, args...))
	})
}

// partitionOffsets is where a partition starts and ends, and where the
// group stands on it (-1 when it committed nothing).
type partitionOffsets struct {
	first, last, committed int64
}

// outOfRangeOffsets lists the partitions of topics whose committed offset
// lies outside them, or that have no committed offset at all (the group's
// offsets went with a deleted topic, while the reader remembers the old
// position), with their offsets.
func (s *source) outOfRangeOffsets(ctx context.Context, topics []string) (map[string]map[int]partitionOffsets, error) {
	s.mu.Lock()
	cfg, tr := s.cfg, s.tr
	s.mu.Unlock()
	client := &kafka.Client{Addr: kafka.TCP(cfg.Brokers...), Transport: tr, Timeout: 10 * time.Second}
	meta, err := client.Metadata(ctx, &kafka.MetadataRequest{Topics: topics})
	if err != nil {
		return nil, fmt.Errorf("read partitions: %w", err)
	}
	list := &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{}}
	fetch := &kafka.OffsetFetchRequest{GroupID: cfg.GroupID, Topics: map[string][]int{}}
	for _, t := range meta.Topics {
		if t.Error != nil {
			continue // deleted meanwhile: nothing to read there
		}
		for _, p := range t.Partitions {
			list.Topics[t.Name] = append(list.Topics[t.Name], kafka.FirstOffsetOf(p.ID), kafka.LastOffsetOf(p.ID))
			fetch.Topics[t.Name] = append(fetch.Topics[t.Name], p.ID)
		}
	}
	if len(list.Topics) == 0 {
		return nil, nil
	}
	ends, err := client.ListOffsets(ctx, list)
	if err != nil {
		return nil, fmt.Errorf("list offsets: %w", err)
	}
	committed, err := client.OffsetFetch(ctx, fetch)
	if err == nil {
		err = committed.Error
	}
	if err != nil {
		return nil, fmt.Errorf("read the group's offsets: %w", err)
	}
	at := map[string]map[int]int64{}
	for topic, ps := range committed.Topics {
		at[topic] = map[int]int64{}
		for _, p := range ps {
			if p.Error == nil {
				at[topic][p.Partition] = p.CommittedOffset
			}
		}
	}
	out := map[string]map[int]partitionOffsets{}
	for topic, ps := range ends.Topics {
		for _, p := range ps {
			if p.Error != nil {
				continue
			}
			c, ok := at[topic][p.Partition]
			if !ok {
				c = -1
			}
			if c >= p.FirstOffset && c <= p.LastOffset {
				continue
			}
			if out[topic] == nil {
				out[topic] = map[int]partitionOffsets{}
			}
			out[topic][p.Partition] = partitionOffsets{first: p.FirstOffset, last: p.LastOffset, committed: c}
		}
	}
	return out, nil
}

// resetOutOfRange moves the group's offsets of r's partitions that lie out
// of range (or are missing) to the earliest offset, in r's generation, and
// closes r: the next Fetch joins the group again and reads from there.
func (s *source) resetOutOfRange(ctx context.Context, r *kafka.Reader, cause error) error {
	s.mu.Lock()
	topics := append([]string(nil), s.topics...)
	s.mu.Unlock()
	parts, err := s.outOfRangeOffsets(ctx, topics)
	if err != nil {
		return classify(fmt.Errorf("offset out of range (%v), and the offsets to reset could not be read: %w", cause, err))
	}
	var resets []kafka.Message
	for topic, ps := range parts {
		for p, o := range ps {
			sdk.Logger().Warn("dead-letter partition read past its end (its topic was deleted and created again, or truncated): reading it again from its earliest offset",
				"topic", topic, "partition", p, "committed", o.committed, "earliest", o.first, "end", o.last, "cause", fmt.Sprint(cause))
			// CommitMessages commits the offset after the message's.
			resets = append(resets, kafka.Message{Topic: topic, Partition: p, Offset: o.first - 1})
		}
	}
	if len(resets) > 0 {
		if err := r.CommitMessages(ctx, resets...); err != nil && !errors.Is(err, context.Canceled) {
			return classify(fmt.Errorf("reset offsets out of range to the earliest: %w", err))
		}
	}
	s.mu.Lock()
	if s.reader == r {
		s.reader, s.nextScan = nil, time.Time{}
	}
	s.mu.Unlock()
	_ = r.Close()
	return nil
}
