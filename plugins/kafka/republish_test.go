package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/lifecycled/lifecycled/internal/testsvc"
	"github.com/lifecycled/lifecycled/sdk"
	"github.com/lifecycled/lifecycled/sdk/plugintest"
)

func TestErrorClasses(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		err  error
		want errClass
	}{
		"unknown topic (stale metadata)":  {kerr.UnknownTopicOrPartition, classMetadata},
		"topic deleted and created again": {kerr.UnknownTopicID, classMetadata},
		"leader not available":            {kerr.LeaderNotAvailable, classMetadata},
		"not leader for partition":        {fmt.Errorf("write: %w", kerr.NotLeaderForPartition), classMetadata},
		"broker not available":            {kerr.BrokerNotAvailable, classMetadata},
		"fenced leader epoch":             {kerr.FencedLeaderEpoch, classMetadata},
		"no leader until the timeout":     {fmt.Errorf("%w, last err: %w", kgo.ErrRecordTimeout, kerr.LeaderNotAvailable), classMetadata},
		"message too large (broker)":      {kerr.MessageTooLarge, classTooLarge},
		"record list too large":           {kerr.RecordListTooLarge, classTooLarge},
		"message too large (franz-go)":    {fmt.Errorf("%w (uncompressed_bytes=%d)", kerr.MessageTooLarge, 2<<20), classTooLarge},
		"not enough replicas":             {kerr.NotEnoughReplicas, classRetryable},
		"request timed out":               {kerr.RequestTimedOut, classRetryable},
		"record timed out":                {kgo.ErrRecordTimeout, classRetryable},
		"topic authorization failed":      {kerr.TopicAuthorizationFailed, classPermanent},
		"invalid topic":                   {kerr.InvalidTopicException, classPermanent},
		"invalid record":                  {kerr.InvalidRecord, classPermanent},
		"connection refused":              {&net.OpError{Op: "dial", Err: errors.New("connection refused")}, classRetryable},
		"broker hung up":                  {io.ErrUnexpectedEOF, classRetryable},
		"cancelled":                       {context.Canceled, classRetryable},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			require.Equal(t, tc.want, classOf(tc.err), "%v", tc.err)
		})
	}
}

// After the metadata retries: a topic still unknown is the message's
// problem (counted), a partition still without a leader the broker's.
func TestRepublishErrorsAfterTheMetadataWait(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		err       error
		wantClass sdk.Class
		wantText  string
	}{
		"unknown topic":       {kerr.UnknownTopicOrPartition, sdk.ClassPermanent, "the broker does not know the topic"},
		"no leader":           {kerr.LeaderNotAvailable, sdk.ClassRetryable, "metadata refreshes"},
		"too large":           {kerr.MessageTooLarge, sdk.ClassPermanent, "too large"},
		"not authorised":      {kerr.TopicAuthorizationFailed, sdk.ClassPermanent, "TOPIC_AUTHORIZATION_FAILED"},
		"broker unreachable":  {io.EOF, sdk.ClassRetryable, "EOF"},
		"not enough replicas": {kerr.NotEnoughReplicas, sdk.ClassRetryable, "NOT_ENOUGH_REPLICAS"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := republishError("orders.events.v1", tc.err, 10*time.Second)
			require.Equal(t, tc.wantClass, sdk.ClassOf(err))
			require.ErrorContains(t, err, tc.wantText)
			require.ErrorContains(t, err, "orders.events.v1")
		})
	}
}

func configured(t *testing.T, addr string, extra map[string]any) sdk.DLQSource {
	t.Helper()
	p := plugintest.Launch(t, binary(t), sdk.KindDLQSource)
	s := p.Source(t)
	cfg := map[string]any{"brokers": []any{addr}, "group_id": "republish", "refresh_interval": "1s", "session_timeout": "2s"}
	for k, v := range extra {
		cfg[k] = v
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := s.Configure(ctx, &sdk.ConfigureRequest{Name: "kafka", Config: cfg})
	require.NoError(t, err)
	return s
}

// 20 messages went DEAD within a second of their original topic being
// created: the writer's metadata did not know it yet, and
// UnknownTopicOrPartition was permanent.
func TestRepublishToATopicCreatedMomentsAgoSucceeds(t *testing.T) {
	t.Parallel()
	broker := testsvc.Kafka(t, 1)
	f := newFixture(t, broker.Addr)
	s := configured(t, broker.Addr, nil)
	ctx := testsvc.Context(t, time.Minute)

	go func() {
		time.Sleep(1500 * time.Millisecond)
		_, _ = kadm.NewClient(f.c).CreateTopics(ctx, 1, 1, nil, "late.events.v1")
	}()
	var msgs []sdk.RepublishMessage
	for i := 0; i < 20; i++ {
		msgs = append(msgs, sdk.RepublishMessage{ID: fmt.Sprint(i), Topic: "late.events.v1", Value: []byte(fmt.Sprint(i))})
	}
	msgs = append(msgs, sdk.RepublishMessage{ID: "known", Topic: "orders.events.v1", Value: []byte("x")})
	resp, err := s.Republish(ctx, &sdk.RepublishRequest{Messages: msgs})
	require.NoError(t, err)
	for _, r := range resp.Results {
		require.True(t, r.Acked, "%s: %v", r.ID, r.Err)
	}
	require.Len(t, f.Consume(t, "late.events.v1", 20), 20)
}

func TestRepublishToATopicThatNeverExistsFailsAloneAfterTheWait(t *testing.T) {
	t.Parallel()
	broker := testsvc.Kafka(t, 1)
	f := newFixture(t, broker.Addr)
	s := configured(t, broker.Addr, map[string]any{"metadata_wait": "1s"})
	ctx := testsvc.Context(t, time.Minute)
	start := time.Now()
	resp, err := s.Republish(ctx, &sdk.RepublishRequest{Messages: []sdk.RepublishMessage{
		{ID: "lost", Topic: "nowhere.events.v1", Value: []byte("x")},
		{ID: "fine", Topic: "orders.events.v1", Value: []byte("y")},
	}})
	require.NoError(t, err)
	require.GreaterOrEqual(t, time.Since(start), time.Second, "retried for metadata_wait")
	require.False(t, resp.Results[0].Acked)
	require.Equal(t, sdk.ClassPermanent, sdk.ClassOf(resp.Results[0].Err), "counted: the topic is wrong")
	require.ErrorContains(t, resp.Results[0].Err, "does not know the topic")
	require.True(t, resp.Results[1].Acked, "another topic's message is not held up: %v", resp.Results[1].Err)
	require.Len(t, f.Consume(t, "orders.events.v1", 1), 1)
}

// A batch of messages that together exceed the broker's limit (1 MB), each
// well under it, goes through; one message over the limit fails alone.
func TestRepublishKeepsBatchesUnderTheBrokerLimitAndFailsAnOversizedMessageAlone(t *testing.T) {
	t.Parallel()
	broker := testsvc.Kafka(t, 1)
	f := newFixture(t, broker.Addr)
	s := configured(t, broker.Addr, nil)
	ctx := testsvc.Context(t, time.Minute)
	var msgs []sdk.RepublishMessage
	for i := 0; i < 30; i++ {
		msgs = append(msgs, sdk.RepublishMessage{ID: fmt.Sprint(i), Topic: "orders.events.v1", Key: []byte("same-partition"),
			Value: bytes.Repeat([]byte{byte(i)}, 50<<10)})
	}
	msgs = append(msgs, sdk.RepublishMessage{ID: "big", Topic: "orders.events.v1", Value: bytes.Repeat([]byte("B"), 1200<<10)})
	resp, err := s.Republish(ctx, &sdk.RepublishRequest{Messages: msgs})
	require.NoError(t, err)
	for _, r := range resp.Results[:30] {
		require.True(t, r.Acked, "%s: %v", r.ID, r.Err)
	}
	big := resp.Results[30]
	require.False(t, big.Acked)
	require.Equal(t, sdk.ClassPermanent, sdk.ClassOf(big.Err))
	require.ErrorContains(t, big.Err, "too large")
	require.ErrorContains(t, big.Err, "max_message_bytes")
	require.Len(t, f.Consume(t, "orders.events.v1", 30), 30)
}
