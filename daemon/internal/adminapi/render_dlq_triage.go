package adminapi

import (
	"encoding/json"

	"github.com/lifecycled/lifecycled/daemon/internal/dlq"
	"github.com/lifecycled/lifecycled/daemon/wire"
)

func historyJSON(events []dlq.HistoryEvent) wire.History {
	out := wire.History{Events: make([]wire.Event, len(events))}
	for i, e := range events {
		d := json.RawMessage(e.Detail)
		if !json.Valid(d) {
			d = json.RawMessage("{}")
		}
		out.Events[i] = wire.Event{At: formatTime(e.At), Kind: e.Kind, Detail: d, UID: e.UID}
	}
	return out
}

func replayJSON(r *dlq.Replay, sourceConfigured bool) wire.ReplayResult {
	out := wire.ReplayResult{Original: messageJSON(r.Original, sourceConfigured), DryRun: r.DryRun, Changed: replayChanges(r)}
	rj := wire.Replayed{ID: r.ID.String(), Topic: r.Topic, Headers: make([]wire.Header, 0, len(r.Headers))}
	rj.Key, rj.KeyBase64 = textOrBase64(r.Key)
	for _, h := range r.Headers {
		rj.Headers = append(rj.Headers, headerJSON(h))
	}
	if len(r.Payload) > 0 && json.Valid(r.Payload) {
		rj.Payload = json.RawMessage(r.Payload)
	} else {
		rj.PayloadBase64 = base64Of(r.Payload)
	}
	out.Replayed = rj
	return out
}

func replayChanges(r *dlq.Replay) []string {
	return append([]string{}, dlq.ReplayChanges(r)...)
}

func pauseJSON(p *dlq.TopicPause) *wire.Pause {
	if p == nil {
		return nil
	}
	return &wire.Pause{PausedAt: formatTime(p.PausedAt), Reason: p.Reason, Auto: p.Auto, UID: p.UID}
}
