// Command dirsource is a dead-letter source over a dirbroker directory,
// for the kit's own tests. With map_headers it hands headers over as a
// broker client that decodes them into a map does (amqp091-go's Table):
// every header, each key once, sorted by key, whatever order they were
// written in.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"sync"
	"time"

	"github.com/lifecycled/lifecycled/sdk"
	"github.com/lifecycled/lifecycled/sdk/plugintest/internal/testplugins/dirbroker"
)

type config struct {
	Dir        string `json:"dir"`
	Topic      string `json:"topic"`
	MapHeaders bool   `json:"map_headers"`
	// ClaimOrderKept declares HeaderOrderKept even with map headers: a
	// source that says more than it does, for the kit to catch.
	ClaimOrderKept bool `json:"claim_order_kept"`
	// Password is unused; LeakPassword writes it to stderr, past the SDK's
	// scrubbing, for the kit to catch.
	Password     string `json:"password"`
	LeakPassword bool   `json:"leak_password"`
}

type source struct {
	mu      sync.Mutex
	cfg     config
	broker  dirbroker.Broker
	fetched int64 // the last sequence number handed out
}

func (s *source) Configure(_ context.Context, req *sdk.ConfigureRequest) (*sdk.ConfigureResponse, error) {
	raw, err := json.Marshal(req.Config)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var c config
	if err := dec.Decode(&c); err != nil {
		return nil, sdk.InvalidConfig(sdk.FieldError{Field: "config", Problem: err.Error()})
	}
	var problems []sdk.FieldError
	if c.Dir == "" {
		problems = append(problems, sdk.FieldError{Field: "dir", Problem: "required"})
	}
	if c.Topic == "" {
		problems = append(problems, sdk.FieldError{Field: "topic", Problem: "required"})
	}
	if len(problems) > 0 {
		return nil, sdk.InvalidConfig(problems...)
	}
	b := dirbroker.Broker{Dir: c.Dir}
	committed, err := b.Committed(c.Topic)
	if err != nil {
		return nil, sdk.Retryable(fmt.Errorf("read the committed position of %s: %w", c.Topic, err), time.Second)
	}
	s.mu.Lock()
	s.cfg, s.broker, s.fetched = c, b, committed
	s.mu.Unlock()
	if c.LeakPassword {
		// File descriptor 2 itself: go-plugin has put a pipe in os.Stderr,
		// but a library that logs to the descriptor reaches the daemon's log.
		fmt.Fprintln(os.NewFile(2, "stderr"), "configured with password", c.Password)
	}
	return &sdk.ConfigureResponse{Source: sdk.SourceTraits{Acks: sdk.AcksCumulative, Positions: sdk.PositionsStable, HeaderOrderKept: !c.MapHeaders || c.ClaimOrderKept}}, nil
}

func (s *source) Fetch(ctx context.Context, req *sdk.FetchRequest) (*sdk.FetchResponse, error) {
	deadline := time.Now().Add(req.Wait)
	for {
		s.mu.Lock()
		msgs, err := s.broker.Read(s.cfg.Topic, s.fetched, req.Max)
		if err == nil && len(msgs) > 0 {
			s.fetched = msgs[len(msgs)-1].Seq
		}
		cfg := s.cfg
		s.mu.Unlock()
		if err != nil {
			return nil, sdk.Retryable(err, time.Second)
		}
		if len(msgs) > 0 || time.Now().After(deadline) {
			out := &sdk.FetchResponse{}
			for _, m := range msgs {
				out.Messages = append(out.Messages, sdk.DeadLetter{
					Position: sdk.LogPosition(cfg.Topic, 0, m.Seq),
					Key:      m.Key, Value: m.Value, Headers: s.headers(m.Headers),
				})
			}
			return out, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// headers are hs as this source's broker client hands them over.
func (s *source) headers(hs []dirbroker.Header) []sdk.Header {
	if !s.cfg.MapHeaders {
		out := make([]sdk.Header, len(hs))
		for i, h := range hs {
			out[i] = sdk.Header{Key: h.Key, Value: h.Value}
		}
		return out
	}
	table := map[string][]byte{}
	for _, h := range hs {
		table[string(h.Key)] = h.Value
	}
	keys := make([]string, 0, len(table))
	for k := range table {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]sdk.Header, len(keys))
	for i, k := range keys {
		out[i] = sdk.Header{Key: []byte(k), Value: table[k]}
	}
	return out
}

func (s *source) Commit(_ context.Context, req *sdk.CommitRequest) (*sdk.CommitResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range req.Positions {
		_, seq, ok := sdk.ParseLogPosition(p.ID)
		if !ok {
			return nil, sdk.Permanent(fmt.Errorf("position %x is not one of this source's", p.ID))
		}
		if err := s.broker.Commit(p.Topic, seq); err != nil {
			return nil, sdk.Retryable(err, time.Second)
		}
	}
	return &sdk.CommitResponse{}, nil
}

func (s *source) Republish(_ context.Context, req *sdk.RepublishRequest) (*sdk.RepublishResponse, error) {
	s.mu.Lock()
	b := s.broker
	s.mu.Unlock()
	resp := &sdk.RepublishResponse{Results: make([]sdk.RepublishResult, len(req.Messages))}
	for i, m := range req.Messages {
		var hs []dirbroker.Header
		for _, h := range s.headers(toBroker(m.Headers)) {
			hs = append(hs, dirbroker.Header{Key: h.Key, Value: h.Value})
		}
		_, err := b.Append(m.Topic, dirbroker.Message{Key: m.Key, Value: m.Value, Headers: hs})
		switch {
		case errors.Is(err, dirbroker.ErrNoTopic):
			resp.Results[i] = sdk.RepublishResult{ID: m.ID, Err: sdk.Permanent(err)}
		case err != nil:
			resp.Results[i] = sdk.RepublishResult{ID: m.ID, Err: sdk.Retryable(err, time.Second)}
		default:
			resp.Results[i] = sdk.RepublishResult{ID: m.ID, Acked: true}
		}
	}
	return resp, nil
}

func toBroker(hs []sdk.Header) []dirbroker.Header {
	out := make([]dirbroker.Header, len(hs))
	for i, h := range hs {
		out[i] = dirbroker.Header{Key: h.Key, Value: h.Value}
	}
	return out
}

func main() { sdk.ServeDLQSource(&source{}) }
