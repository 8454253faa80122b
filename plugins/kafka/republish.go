package main

import (
	"context"
	"errors"
	"fmt"
	"path"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/lifecycled/lifecycled/sdk"
)

// defaultMaxMessageBytes stays below Kafka's default max.message.bytes
// (1048588), which limits a whole record batch, with room for its header.
const defaultMaxMessageBytes = 1_000_000

// recordBatchOverhead is the header of a record batch (magic v2), which
// franz-go counts against ProducerBatchMaxBytes with the records.
const recordBatchOverhead = 61

// recordSize is the size of a record batch holding m alone, as franz-go
// counts it against max_message_bytes (sink.go, recordNumbersAt).
func recordSize(m sdk.RepublishMessage) int {
	n := 1 + 1 + 1 + // attributes, timestamp and offset deltas (0: first)
		kbin.VarintLen(int32(len(m.Key))) + len(m.Key) +
		kbin.VarintLen(int32(len(m.Value))) + len(m.Value) +
		kbin.VarintLen(int32(len(m.Headers)))
	for _, h := range m.Headers {
		n += kbin.VarintLen(int32(len(h.Key))) + len(h.Key) + kbin.VarintLen(int32(len(h.Value))) + len(h.Value)
	}
	return recordBatchOverhead + kbin.VarintLen(int32(n)) + n
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
	cl, cfg, wait := s.producer, s.cfg, s.metadataWait
	s.mu.Unlock()
	if cl == nil {
		return nil, sdk.Unavailable(errors.New("not configured"))
	}
	resp := &sdk.RepublishResponse{Results: make([]sdk.RepublishResult, len(req.Messages))}
	byTopic := map[string][]int{}
	var topics []string
	for i, m := range req.Messages {
		resp.Results[i] = sdk.RepublishResult{ID: m.ID, Acked: true}
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
		if n := recordSize(m); n > cfg.MaxMessageBytes {
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
			recs := make([]*kgo.Record, len(idx))
			for j, i := range idx {
				recs[j] = toRecord(req.Messages[i])
			}
			for j, err := range writeTopic(ctx, cl, wait, topic, recs) {
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
			var ke *kerr.Error
			if !errors.As(errs[i], &ke) && sdk.ClassOf(errs[i]) == sdk.ClassRetryable {
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

// toRecord sends the message as given: a nil key, value or header value as
// null (a tombstone stays one), an empty one as empty, headers in order
// with duplicates.
func toRecord(m sdk.RepublishMessage) *kgo.Record {
	var hs []kgo.RecordHeader
	if len(m.Headers) > 0 {
		hs = make([]kgo.RecordHeader, len(m.Headers))
		for j, h := range m.Headers {
			// A Go string holds any bytes: the key goes out as it came in.
			hs[j] = kgo.RecordHeader{Key: string(h.Key), Value: h.Value}
		}
	}
	return &kgo.Record{Topic: m.Topic, Key: m.Key, Value: m.Value, Headers: hs}
}

// writeTopic writes one topic's records and returns each one's final error
// (nil when acknowledged).
//
// franz-go retries a partition without a leader by itself, with fresh
// metadata, until the record's delivery timeout (metadata_wait); but it
// gives up on a topic it cannot find after a few metadata loads, however
// recent the topic, and it cannot be asked how long to look. So the topic
// is looked up here first, in metadata of the broker's own (not franz-go's
// cache), every 250 ms backing off to 2 s for up to metadata_wait, and
// records that fail for want of metadata all the same are tried again
// within that time.
func writeTopic(ctx context.Context, cl *kgo.Client, wait time.Duration, topic string, recs []*kgo.Record) []error {
	errs := make([]error, len(recs))
	pending := make([]int, len(recs))
	for i := range pending {
		pending[i] = i
	}
	start := time.Now()
	backoff := 250 * time.Millisecond
	for {
		err := topicKnown(ctx, cl, topic)
		if err == nil {
			retry := make([]*kgo.Record, len(pending))
			for j, i := range pending {
				retry[j] = recs[i]
			}
			for j, err := range produce(ctx, cl, retry) {
				errs[pending[j]] = err
			}
		} else {
			for _, i := range pending {
				errs[i] = err
			}
		}
		pending = failedWith(errs, classMetadata)
		if len(pending) == 0 || time.Since(start) >= wait || !sleep(ctx, min(backoff, wait-time.Since(start))) {
			break
		}
		backoff = min(2*backoff, 2*time.Second)
		for _, i := range pending {
			if errors.Is(errs[i], kerr.UnknownTopicID) || errors.Is(errs[i], kerr.UnknownTopicOrPartition) {
				// franz-go holds on to a topic it could not load, and to
				// the id of one deleted since (it fails it for good with
				// UNKNOWN_TOPIC_ID): forgotten, it is loaded afresh.
				cl.PurgeTopicsFromProducing(topic)
				break
			}
		}
	}

	// Too large: the batch may have been, the record alone may not be.
	if tooLarge := failedWith(errs, classTooLarge); len(recs) > 1 {
		for _, i := range tooLarge {
			errs[i] = produce(ctx, cl, recs[i:i+1])[0]
		}
	}

	waited := time.Since(start)
	out := make([]error, len(recs))
	for i, err := range errs {
		if err != nil {
			out[i] = republishError(topic, err, waited)
		}
	}
	return out
}

// topicKnown asks the broker whether it has the topic: nil when it does,
// the topic's error when it does not (UNKNOWN_TOPIC_OR_PARTITION, or
// LEADER_NOT_AVAILABLE while it is being created), or the request's.
func topicKnown(ctx context.Context, cl *kgo.Client, topic string) error {
	req := kmsg.NewPtrMetadataRequest()
	t := kmsg.NewMetadataRequestTopic()
	t.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, t)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return err
	}
	for _, t := range resp.Topics {
		if t.Topic == nil || *t.Topic != topic {
			continue
		}
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
			return err
		}
		if len(t.Partitions) == 0 {
			return kerr.LeaderNotAvailable
		}
		return nil
	}
	return kerr.UnknownTopicOrPartition
}

// produce is one synchronous produce with each record's error (nil when
// acknowledged), in the order of recs.
func produce(ctx context.Context, cl *kgo.Client, recs []*kgo.Record) []error {
	at := make(map[*kgo.Record]int, len(recs))
	for i, r := range recs {
		at[r] = i
		// A record failed before is a record again: franz-go set its
		// partition, offset and timestamp.
		*r = kgo.Record{Topic: r.Topic, Key: r.Key, Value: r.Value, Headers: r.Headers}
	}
	errs := make([]error, len(recs))
	for _, res := range cl.ProduceSync(ctx, recs...) {
		errs[at[res.Record]] = res.Err
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
