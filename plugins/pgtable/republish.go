package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/lifecycled/lifecycled/sdk"
)

// Republish retries each message where its destination says: a POST of
// its value to the reprocess endpoint, or an insert into the queue table.
// A message whose retry succeeded has its row resolved. A destination
// that is neither (a URL of another host, another table) is refused: a
// replay to an arbitrary address would make the daemon a proxy.
func (s *source) Republish(ctx context.Context, req *sdk.RepublishRequest) (*sdk.RepublishResponse, error) {
	s.mu.Lock()
	q, pool, client, retryTo := s.q, s.pool, s.http, s.retryTo
	s.mu.Unlock()
	resp := &sdk.RepublishResponse{Results: make([]sdk.RepublishResult, len(req.Messages))}
	for i, m := range req.Messages {
		resp.Results[i].ID = m.ID
		var err error
		switch {
		case q.insert != "" && m.Topic == tableDestination+q.cfg.RetryTable:
			_, err = pool.Exec(ctx, q.insert, string(m.Value))
			if err != nil {
				err = classify("retry_table", err)
			}
		case retryTo != nil && m.Topic == q.cfg.RetryURL:
			var target string
			if target, err = s.endpointOf(ctx, m); err == nil {
				err = s.post(ctx, client, retryTo, target, m)
			}
		case retryTo != nil:
			err = s.post(ctx, client, retryTo, m.Topic, m)
		default:
			err = sdk.Permanent(fmt.Errorf("destination %q is not this source's retry_table", m.Topic))
		}
		if err != nil {
			resp.Results[i].Err = err
			continue
		}
		resp.Results[i].Acked = true
		// A replay (edit-and-replay, replay_to) is a copy sent on, not the
		// job retried: the daemon keeps the dead letter as it was, and so
		// does the table.
		if m.Key != nil && !isReplay(m) {
			if err := s.resolve(ctx, string(m.Key)); err != nil {
				// The retry happened: reporting it failed would retry it
				// again. The row stays unresolved, and says so in the log.
				sdk.Logger().Warn("mark a retried row resolved", "row", string(m.Key), "error", err.Error())
			}
		}
	}
	return resp, nil
}

// endpointOf is retry_url filled in from the message's row, read again.
func (s *source) endpointOf(ctx context.Context, m sdk.RepublishMessage) (string, error) {
	q, pool, _, _ := s.state()
	if m.Key == nil {
		return "", sdk.Permanent(errors.New("retry_url needs the message's row, and the message has no row id (key)"))
	}
	cols, err := q.rowColumns(ctx, pool, string(m.Key))
	if errors.Is(err, pgx.ErrNoRows) {
		return "", sdk.Permanent(fmt.Errorf("row %s of %s no longer exists: retry_url cannot be filled in", m.Key, q.cfg.Table))
	}
	if err != nil {
		return "", classify("table", err)
	}
	target, missing := fillURL(q.cfg.RetryURL, cols)
	if missing != "" {
		return "", sdk.Permanent(fmt.Errorf("retry_url needs the column %s, which is null in row %s", missing, m.Key))
	}
	return target, nil
}

// resolve marks the row (and deletes it when the config says so).
func (s *source) resolve(ctx context.Context, id string) error {
	q, pool, _, _ := s.state()
	if _, err := pool.Exec(ctx, q.resolveState, q.cfg.Table, id); err != nil {
		return err
	}
	for _, stmt := range q.resolveRow {
		if _, err := pool.Exec(ctx, stmt, id); err != nil {
			return err
		}
	}
	return nil
}

// post sends the value to the reprocess endpoint with an Idempotency-Key
// of this attempt (the daemon's x-dlq-id and x-dlq-retry-count), and
// classes the answer as the source design does: 2xx done; 5xx, 408 and
// 429 (with Retry-After) and network errors retryable; any other 4xx
// permanent.
func (s *source) post(ctx context.Context, client *http.Client, retryTo *url.URL, target string, m sdk.RepublishMessage) error {
	u, err := url.Parse(target)
	if err != nil || u.Scheme != retryTo.Scheme || u.Host != retryTo.Host {
		return sdk.Permanent(fmt.Errorf("destination %q is not on the host of retry_url (%s://%s)", target, retryTo.Scheme, retryTo.Host))
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(m.Value))
	if err != nil {
		return sdk.Permanent(err)
	}
	req.Header.Set("Content-Type", "application/octet-stream")
	if json.Valid(m.Value) {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Idempotency-Key", idempotencyKey(m))
	res, err := client.Do(req)
	if err != nil {
		return sdk.Retryable(fmt.Errorf("POST %s: %w", u.Redacted(), err), time.Second)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(res.Body, 512))
	switch {
	case res.StatusCode >= 200 && res.StatusCode < 300:
		return nil
	case res.StatusCode >= 300 && res.StatusCode < 400:
		return sdk.Permanent(fmt.Errorf("POST %s: %s: redirected to %s, which is not followed (an auth proxy's login page, a moved endpoint): "+
			"the job was not reprocessed; point retry_url at the endpoint itself", u.Redacted(), res.Status, res.Header.Get("Location")))
	case res.StatusCode >= 500 || res.StatusCode == http.StatusRequestTimeout || res.StatusCode == http.StatusTooManyRequests:
		return sdk.Retryable(fmt.Errorf("POST %s: %s: %s", u.Redacted(), res.Status, strings.TrimSpace(string(body))), retryAfter(res.Header.Get("Retry-After")))
	}
	return sdk.Permanent(fmt.Errorf("POST %s: %s: %s", u.Redacted(), res.Status, strings.TrimSpace(string(body))))
}

// idempotencyKey is one attempt's key: the same retry sent twice (a lost
// answer) is done once by the endpoint, a later attempt is another.
func idempotencyKey(m sdk.RepublishMessage) string {
	var id, n string
	for _, h := range m.Headers {
		switch string(h.Key) {
		case sdk.HeaderDLQID:
			id = string(h.Value)
		case sdk.HeaderRetryCount:
			n = string(h.Value)
		}
	}
	if id == "" {
		return m.ID
	}
	return id + "-" + n
}

// isReplay reports whether m is a replay: the daemon marks one with
// sdk.HeaderReplayOf, a retry with sdk.HeaderDLQID.
func isReplay(m sdk.RepublishMessage) bool {
	for _, h := range m.Headers {
		if string(h.Key) == sdk.HeaderReplayOf {
			return true
		}
	}
	return false
}

// retryAfter reads a Retry-After header: seconds, or an HTTP date.
func retryAfter(v string) time.Duration {
	if v == "" {
		return 0
	}
	if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && n >= 0 {
		return time.Duration(n) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(time.Until(t), 0)
	}
	return 0
}
