package dlq

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/lifecycled/lifecycled/daemon/internal/derrors"
	"github.com/lifecycled/lifecycled/daemon/internal/retry"
	"github.com/lifecycled/lifecycled/sdk"
)

// Headers a replay adds: which record it replays and its own id, so that a
// replay that fails and lands on a DLQ again is traced back to the record
// it came from (its history has the replay, with this id).
const (
	HeaderReplayOf = sdk.HeaderReplayOf
	HeaderReplayID = sdk.HeaderReplayID
)

// ReplayRequest is an edit-and-replay: each field left nil (or "") is
// taken from the stored message.
type ReplayRequest struct {
	Payload []byte
	Key     []byte
	KeySet  bool // Key was given (an empty key is a key)
	// Headers sets (a value) or removes (nil) headers by name: every stored
	// header of that name is replaced. Others are kept as stored.
	Headers map[string]*string
	Topic   string
	DryRun  bool
	// Operation is the bulk replay_to operation making this replay, for
	// the history.
	Operation *uuid.UUID
	// TargetChecked: the caller checked that Topic is no DLQ topic (a
	// bulk replay checks it once, not once per message). The API never
	// sets it.
	TargetChecked bool
}

// Replay is what a replay sent (or, on a dry run, would send).
type Replay struct {
	ID      uuid.UUID
	Topic   string
	Key     []byte
	Headers []Header
	Payload []byte
	DryRun  bool
	// Original is the stored message, unchanged by the replay.
	Original *Message
	// Operation is the bulk operation that made the replay, if one did.
	Operation *uuid.UUID
}

// Replay republishes a stored message, edited or not, through its source,
// and records the replay in its history with uid; the stored message does
// not change. A dry run checks and builds the same message and sends
// nothing. It returns derrors.ErrNotFound, derrors.ErrInvalid (a bad
// edit), derrors.ErrConflict (nothing to send or nowhere to send it),
// derrors.ErrUnavailable (no source can send it now, 503) or
// ErrRepublishFailed (the broker refused it).
func (s *Service) Replay(ctx context.Context, id uuid.UUID, req ReplayRequest, uid uint32) (*Replay, error) {
	m, err := s.store.GetDLQ(ctx, id)
	if err != nil {
		return nil, err
	}
	r := &Replay{ID: newReplayID(), Original: m, DryRun: req.DryRun, Payload: m.Payload, Key: m.Key, Topic: m.OriginalTopic, Operation: req.Operation}
	if req.Payload != nil {
		r.Payload = req.Payload
	}
	if req.KeySet {
		r.Key = req.Key
	}
	if req.Topic != "" {
		if err := ValidTopic(req.Topic); err != nil {
			return nil, err
		}
		r.Topic = req.Topic
	} else if why := outsideTargets(m, ReplayTargetsOf(s.policy(), m.Position.Topic)); why != "" {
		// Without a topic the message's own header would choose it.
		return nil, fmt.Errorf("%w: %s", derrors.ErrConflict, why)
	}
	if req.TargetChecked && r.Topic == m.Position.Topic {
		return nil, fmt.Errorf("%w: topic %s is the DLQ topic the message was read from: a replay there would only come back", derrors.ErrInvalid, r.Topic)
	} else if !req.TargetChecked {
		if err := s.replayTarget(ctx, m, r.Topic); err != nil {
			return nil, err
		}
	}
	if m.Truncated && req.Payload == nil {
		return nil, fmt.Errorf("%w: the message was too large to take in whole and its value was not kept: give a payload to replay", derrors.ErrConflict)
	}
	if r.Headers, err = replayHeaders(m, req.Headers, r.ID); err != nil {
		return nil, err
	}
	if req.DryRun {
		return r, nil
	}
	src, err := s.source(m.Position.Source)
	if err != nil {
		return nil, err
	}
	resp, err := src.Republish(ctx, &sdk.RepublishRequest{Messages: []sdk.RepublishMessage{{ID: r.ID.String(), Topic: r.Topic, Key: r.Key,
		Headers: sdkHeaders(r.Headers), Value: r.Payload}}})
	if err == nil && len(resp.Results) != 1 {
		err = fmt.Errorf("source %s answered %d results for 1 message", m.Position.Source, len(resp.Results))
	}
	outcome, sendErr := OutcomeResolved, error(nil)
	switch {
	case err != nil:
		// The source could not try: nothing was sent, nothing recorded.
		return nil, fmt.Errorf("%w: %v", derrors.ErrUnavailable, err)
	case resp.Results[0].Acked:
	case retry.Classify(resp.Results[0].Err).Retry:
		outcome, sendErr = OutcomeUnavailable, fmt.Errorf("%w: %v", derrors.ErrUnavailable, resp.Results[0].Err)
	default:
		outcome, sendErr = OutcomeFailed, fmt.Errorf("%w: %v", ErrRepublishFailed, resp.Results[0].Err)
	}
	detail := replayDetail(r, outcome, sendErr)
	// Record with a context of its own: the broker has answered, and the
	// history must say so even if the caller went away.
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if err := s.store.RecordDLQEvent(wctx, id, HistoryEvent{At: s.now(), Kind: KindReplayed, Detail: detail, UID: &uid}); err != nil {
		s.log.Error("record a replay in the message's history", "id", id.String(), "replay_id", r.ID.String(), "error", err)
	}
	s.metrics.replays.WithLabelValues(m.Position.Source, outcome).Inc()
	s.log.Info("replayed a dead letter", "id", id.String(), "replay_id", r.ID.String(), "topic", r.Topic, "outcome", outcome, "uid", uid)
	if sendErr != nil {
		return nil, sendErr
	}
	return r, nil
}

// newReplayID is a time-ordered id for a replay.
func newReplayID() uuid.UUID { return uuid.Must(uuid.NewV7()) }

// replayTarget refuses a topic a replay cannot go to: none, or a DLQ topic
// (the message would only be taken in again).
func (s *Service) replayTarget(ctx context.Context, m *Message, topic string) error {
	if topic == "" {
		return fmt.Errorf("%w: the message has no original topic to replay to: give a topic", derrors.ErrConflict)
	}
	if topic == m.Position.Topic {
		return fmt.Errorf("%w: topic %s is the DLQ topic the message was read from: a replay there would only come back", derrors.ErrInvalid, topic)
	}
	return s.NotADLQTopic(ctx, topic)
}

// NotADLQTopic refuses a topic dead letters were taken in from: a replay
// there would be taken in again as a new dead letter.
func (s *Service) NotADLQTopic(ctx context.Context, topic string) error {
	topics, err := s.store.DLQTopics(ctx)
	if err != nil {
		return err
	}
	for _, t := range topics {
		if t.Topic == topic {
			return fmt.Errorf("%w: topic %s is a DLQ topic: a replay there would be taken in as a new dead letter", derrors.ErrInvalid, topic)
		}
	}
	return nil
}

// replayHeaders are the stored headers without x-dlq-* ones, with the
// edits applied (in name order, each replacing every header of its name,
// with the type of the first of them: an edited AMQP int32 stays one),
// then the replay's own x-dlq-replay-of and x-dlq-replay-id.
func replayHeaders(m *Message, edits map[string]*string, replayID uuid.UUID) ([]Header, error) {
	names := make([]string, 0, len(edits))
	for name := range edits {
		if name == "" {
			return nil, fmt.Errorf("%w: headers: a header name must not be empty", derrors.ErrInvalid)
		}
		if strings.HasPrefix(strings.ToLower(name), "x-dlq-") {
			return nil, fmt.Errorf("%w: headers: %s is reserved: lifecycled sets the x-dlq-* headers itself", derrors.ErrInvalid, name)
		}
		names = append(names, name)
	}
	sort.Strings(names)
	out := make([]Header, 0, len(m.Headers)+len(edits)+2)
	types := map[string]string{}
	for _, h := range m.Headers {
		if bytes.HasPrefix(bytes.ToLower(h.Key), []byte("x-dlq-")) {
			continue
		}
		if _, edited := edits[string(h.Key)]; edited {
			if _, seen := types[string(h.Key)]; !seen {
				types[string(h.Key)] = h.Type
			}
			continue
		}
		out = append(out, h)
	}
	for _, name := range names {
		if v := edits[name]; v != nil {
			out = append(out, Header{Key: []byte(name), Value: []byte(*v), Type: types[name]})
		}
	}
	return append(out,
		Header{Key: []byte(HeaderReplayOf), Value: []byte(m.ID.String())},
		Header{Key: []byte(HeaderReplayID), Value: []byte(replayID.String())},
	), nil
}

// replayDetail is the history entry of a replay: its id and target, what
// differs from the stored message, a digest of what was sent, the outcome.
func replayDetail(r *Replay, outcome string, sendErr error) []byte {
	sum := sha256.Sum256(r.Payload)
	changed := ReplayChanges(r)
	if changed == nil {
		changed = []string{}
	}
	d := map[string]any{
		"replay_id":      r.ID.String(),
		"topic":          r.Topic,
		"outcome":        outcome,
		"changed":        changed,
		"payload_sha256": hex.EncodeToString(sum[:]),
	}
	if sendErr != nil {
		d["error"] = sanitize(sendErr.Error(), maxErrorLength)
	}
	if r.Operation != nil {
		d["operation"] = r.Operation.String()
	}
	b, _ := json.Marshal(d) // strings and bools always encode
	return b
}

func withoutDLQHeaders(hs []Header) []Header {
	var out []Header
	for _, h := range hs {
		if !bytes.HasPrefix(bytes.ToLower(h.Key), []byte("x-dlq-")) {
			out = append(out, h)
		}
	}
	return out
}

func sameHeaders(a, b []Header) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !bytes.Equal(a[i].Key, b[i].Key) || !bytes.Equal(a[i].Value, b[i].Value) || (a[i].Value == nil) != (b[i].Value == nil) ||
			a[i].Type != b[i].Type {
			return false
		}
	}
	return true
}

// ReplayChanges names what a replay changes from the stored message, in
// a fixed order: "payload", "key", "headers", "topic".
func ReplayChanges(r *Replay) []string {
	m := r.Original
	var out []string
	if !bytes.Equal(m.Payload, r.Payload) || (m.Payload == nil) != (r.Payload == nil) {
		out = append(out, "payload")
	}
	if !bytes.Equal(m.Key, r.Key) || (m.Key == nil) != (r.Key == nil) {
		out = append(out, "key")
	}
	if !sameHeaders(withoutDLQHeaders(m.Headers), withoutDLQHeaders(r.Headers)) {
		out = append(out, "headers")
	}
	if r.Topic != m.OriginalTopic {
		out = append(out, "topic")
	}
	return out
}
