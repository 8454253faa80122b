package main

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/lifecycled/lifecycled/sdk"
)

// source reads one table. A row is handed out once per process until it
// is committed (taken, in the state table); a restarted process hands out
// again what was not.
type source struct {
	mu      sync.Mutex
	cfg     config
	q       *queries
	pool    *pgxpool.Pool
	poll    time.Duration
	http    *http.Client
	retryTo *url.URL // scheme and host every republish goes to
	// inFlight are the rows handed out and not committed: row id by
	// position id (a position id is the row id, or its hash when longer
	// than a position may be).
	inFlight map[string]string
}

func newSource() *source { return &source{inFlight: map[string]string{}} }

func (s *source) reconfigure(cfg config, q *queries, pool *pgxpool.Pool, poll, timeout time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pool != nil {
		s.pool.Close()
	}
	s.cfg, s.q, s.pool, s.poll = cfg, q, pool, poll
	// Redirects are not followed: Go's client turns a redirected POST into
	// a GET without the body, and an auth proxy's login page answering it
	// 200 would count as the job reprocessed (and resolve or delete it).
	s.http = &http.Client{Timeout: timeout, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	s.retryTo = nil
	if cfg.RetryURL != "" {
		s.retryTo, _ = url.Parse(placeholder.ReplaceAllString(cfg.RetryURL, "x"))
	}
	clear(s.inFlight)
}

func (s *source) state() (*queries, *pgxpool.Pool, time.Duration, []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ids := make([]string, 0, len(s.inFlight))
	for _, id := range s.inFlight {
		ids = append(ids, id)
	}
	return s.q, s.pool, s.poll, ids
}

// Fetch hands over up to req.Max rows not taken yet, oldest first, polling
// the table until req.Wait for the first.
func (s *source) Fetch(ctx context.Context, req *sdk.FetchRequest) (*sdk.FetchResponse, error) {
	deadline := time.Now().Add(req.Wait)
	for {
		q, pool, poll, inFlight := s.state()
		if q == nil {
			return nil, sdk.Permanent(errors.New("not configured"))
		}
		rows, err := q.rows(ctx, pool, inFlight, req.Max)
		if err != nil {
			return nil, classify("table", err)
		}
		if len(rows) > 0 || !time.Now().Before(deadline) {
			out := &sdk.FetchResponse{Messages: make([]sdk.DeadLetter, len(rows))}
			s.mu.Lock()
			for i, r := range rows {
				out.Messages[i] = s.deadLetter(r)
				s.inFlight[string(out.Messages[i].Position.ID)] = r.id
			}
			s.mu.Unlock()
			return out, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(min(poll, time.Until(deadline))):
		}
	}
}

// deadLetter is a row as the daemon keeps it: the row's id for position
// and key, its payload for value, its other columns for headers, its
// failure time for timestamp.
func (s *source) deadLetter(r row) sdk.DeadLetter {
	id := []byte(r.id)
	if len(id) > sdk.MaxPositionIDBytes {
		sum := sha256.Sum256(id)
		id = sum[:]
	}
	d := sdk.DeadLetter{
		Position:  sdk.Position{Topic: s.cfg.Table, ID: id, Display: "id " + r.id},
		Key:       []byte(r.id),
		Headers:   r.headers(),
		Timestamp: r.failedAt,
	}
	if !r.payloadNull {
		d.Value = []byte(r.payload)
	}
	o := &d.Origin
	o.DestinationConfigured = true
	if r.errText != nil {
		o.ErrorMessage = *r.errText
	}
	if r.class != nil {
		o.ErrorClass = *r.class
	}
	if r.attempts != nil {
		o.Attempts = *r.attempts
	}
	o.FirstFailedAt = r.failedAt
	if s.cfg.RetryTable != "" {
		o.Destination, o.DestinationFrom = tableDestination+s.cfg.RetryTable, "retry_table"
		return d
	}
	// The destination is the endpoint's template, the same for every row
	// (so that failures group by endpoint); Republish fills it in from the
	// row.
	o.Destination, o.DestinationFrom = s.cfg.RetryURL, "retry_url"
	if _, missing := fillURL(s.cfg.RetryURL, r.columns); missing != "" {
		o.Destination, o.DestinationProblem = "", fmt.Sprintf("retry_url needs the column %s, which is null in row %s", missing, r.id)
	}
	return d
}

// fillURL replaces each {column} of template with the row's value,
// path-escaped; missing names a column that is null.
func fillURL(template string, columns map[string]any) (filled, missing string) {
	filled = placeholder.ReplaceAllStringFunc(template, func(m string) string {
		name := m[1 : len(m)-1]
		v := columnText(columns[name])
		if v == nil {
			missing = name
		}
		return url.PathEscape(string(v))
	})
	return filled, missing
}

// tableDestination starts the destination of a retry into the queue table.
const tableDestination = "table:"

// Commit takes the rows: they are not handed out again, by this process
// or another.
func (s *source) Commit(ctx context.Context, req *sdk.CommitRequest) (*sdk.CommitResponse, error) {
	if len(req.Positions) == 0 {
		return &sdk.CommitResponse{}, nil
	}
	q, pool, _, _ := s.state()
	ids := make([]string, 0, len(req.Positions))
	s.mu.Lock()
	for _, p := range req.Positions {
		id, ok := s.inFlight[string(p.ID)]
		if !ok {
			id = string(p.ID) // handed out by an earlier process: the id itself
		}
		ids = append(ids, id)
	}
	s.mu.Unlock()
	if _, err := pool.Exec(ctx, q.take, q.cfg.Table, ids); err != nil {
		return nil, classify("state_table", err)
	}
	s.mu.Lock()
	for _, p := range req.Positions {
		delete(s.inFlight, string(p.ID))
	}
	s.mu.Unlock()
	return &sdk.CommitResponse{}, nil
}
