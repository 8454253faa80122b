package adminapi

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/lifecycled/lifecycled/daemon/internal/dlq"
	"github.com/lifecycled/lifecycled/daemon/internal/dlq/bulk"
	"github.com/lifecycled/lifecycled/daemon/internal/enum"
	"github.com/lifecycled/lifecycled/daemon/wire"
)

// DLQOperations is what the bulk-operation routes need.
type DLQOperations interface {
	DryRunOperation(ctx context.Context, req bulk.Request, sample int) (int64, []dlq.Message, error)
	StartOperation(ctx context.Context, req bulk.Request) (*dlq.Operation, error)
	Operation(ctx context.Context, id uuid.UUID) (*dlq.Operation, error)
	OperationFailures(ctx context.Context, id uuid.UUID, limit int) ([]dlq.ItemResult, error)
	Operations(ctx context.Context, limit int, runningOnly bool) ([]dlq.Operation, error)
	CancelOperation(ctx context.Context, id uuid.UUID, uid *uint32) (*dlq.Operation, error)
}

// Sources says whether a dead letter's source is configured, as a
// message's JSON shows it.
type Sources interface {
	SourceConfigured(name string) bool
}

// operationSample is how many messages a dry run shows.
const operationSample = 10

// operationFailures is how many failed items GET of one operation shows.
const operationFailures = 50

// DLQOperationRoutes serves bulk operations (issue 13, item 3). Like every
// POST, they take an Idempotency-Key; the audit log has the caller's uid.
func DLQOperationRoutes(svc DLQOperations, sources Sources) func(*http.ServeMux) {
	return func(mux *http.ServeMux) {
		g := routeGroup{mux: mux, scope: ScopeDLQ}
		g.handle("POST /api/v1/dlq/operations", func(r *http.Request) (any, error) {
			if err := strictRequest(r, bodyAllowed); err != nil {
				return nil, err
			}
			req, dryRun, err := parseOperationBody(r)
			if err != nil {
				return nil, err
			}
			if p := Peer(r.Context()); p.Known {
				uid := p.UID
				req.UID = &uid
			}
			if dryRun {
				n, sample, err := svc.DryRunOperation(r.Context(), req, operationSample)
				if err != nil {
					return nil, err
				}
				body := wire.OperationDryRun{DryRun: true, Matched: n, Sample: make([]wire.Message, len(sample))}
				for i := range sample {
					body.Sample[i] = messageJSON(&sample[i], sources.SourceConfigured(sample[i].Position.Source))
				}
				return body, nil
			}
			op, err := svc.StartOperation(r.Context(), req)
			if err != nil {
				return nil, err
			}
			return accepted(operationJSON(op, time.Now()), "Location", "/api/v1/dlq/operations/"+op.ID.String()), nil
		})
		g.handle("GET /api/v1/dlq/operations", func(r *http.Request) (any, error) {
			q := r.URL.Query()
			if err := onlyParams(q, "limit", "state"); err != nil {
				return nil, err
			}
			limit := 100
			v, _, err := single(q, "limit")
			if err != nil {
				return nil, err
			}
			if v != "" {
				n, err := strconv.Atoi(v)
				if err != nil || n < 1 || n > 1000 {
					return nil, invalidField("limit", "%q: must be a number from 1 to 1000", truncate(v))
				}
				limit = n
			}
			running := false
			s, _, err := single(q, "state")
			if err != nil {
				return nil, err
			}
			switch s {
			case "":
			case string(dlq.OperationRunning):
				running = true
			default:
				return nil, invalidField("state", "%q: only %s can be asked for (or leave it out for every state)", truncate(s), dlq.OperationRunning)
			}
			ops, err := svc.Operations(r.Context(), limit, running)
			if err != nil {
				return nil, err
			}
			body := wire.Operations{Operations: make([]wire.Operation, len(ops))}
			now := time.Now()
			for i := range ops {
				body.Operations[i] = operationJSON(&ops[i], now)
			}
			return body, nil
		})
		g.handle("GET /api/v1/dlq/operations/{id}", func(r *http.Request) (any, error) {
			id, err := parseID(r.PathValue("id"))
			if err != nil {
				return nil, err
			}
			op, err := svc.Operation(r.Context(), id)
			if err != nil {
				return nil, err
			}
			body := operationJSON(op, time.Now())
			if op.Failed > 0 {
				failures, err := svc.OperationFailures(r.Context(), id, operationFailures)
				if err != nil {
					return nil, err
				}
				for _, f := range failures {
					body.Failures = append(body.Failures, wire.OperationFailure{ID: f.ID.String(), Outcome: f.Outcome, Error: f.Error})
				}
			}
			return body, nil
		})
		g.handle("POST /api/v1/dlq/operations/{id}/cancel", func(r *http.Request) (any, error) {
			if err := strictRequest(r, noBody); err != nil {
				return nil, err
			}
			id, err := parseID(r.PathValue("id"))
			if err != nil {
				return nil, err
			}
			var uid *uint32
			if p := Peer(r.Context()); p.Known {
				u := p.UID
				uid = &u
			}
			op, err := svc.CancelOperation(r.Context(), id, uid)
			if err != nil {
				return nil, err
			}
			return accepted(operationJSON(op, time.Now())), nil
		})
	}
}

// minOperationRate is the lowest rate a bulk operation takes, in messages
// per second.
const minOperationRate = 0.01

var operationShape = `{"action": "` + strings.Join(enum.Strings(dlq.OperationActions), "|") + `", "filter": {...} or "ids": [...], "rate": N, "dry_run": bool, "target_topic": "..."}`

// parseOperationBody checks a bulk operation request before anything runs.
func parseOperationBody(r *http.Request) (bulk.Request, bool, error) {
	var (
		b   wire.OperationRequest
		req bulk.Request
	)
	given, err := decodeBody(r, &b, operationShape, fieldsIn("filter"))
	if err != nil {
		return req, false, err
	}
	if !given {
		return req, false, invalid("the body must be %s", operationShape)
	}
	if b.Action == "" {
		return req, false, invalidField("action", "required: %s", enum.Sentence(dlq.OperationActions, "or"))
	}
	if req.Action, err = dlq.ParseOperationAction(b.Action); err != nil {
		return req, false, invalidField("action", "%q: must be %s", truncate(b.Action), enum.Sentence(dlq.OperationActions, "or"))
	}
	if b.Rate != nil {
		// At least one message every 100 s: a rate near zero would run
		// for ever, and its time left is too large to write.
		if *b.Rate < minOperationRate || *b.Rate > 1e6 {
			return req, false, invalidField("rate", "%v: messages per second, from %v to 1000000 (leave it out for no limit)", *b.Rate, minOperationRate)
		}
		req.Rate = *b.Rate
	}
	// Given at all (even empty) on another action, it is refused: the
	// request says something the action would not do.
	if b.TargetTopic != nil && req.Action != dlq.ActionReplayTo {
		return req, false, invalidField("target_topic", "only replay_to takes a target topic")
	}
	if req.Action == dlq.ActionReplayTo {
		if b.TargetTopic == nil || *b.TargetTopic == "" {
			return req, false, invalidField("target_topic", "required for replay_to")
		}
		if err := dlq.ValidTopic(*b.TargetTopic); err != nil {
			return req, false, invalidField("target_topic", "%v", err)
		}
		req.TargetTopic = *b.TargetTopic
	}
	hasFilter := len(b.Filter) > 0 && string(b.Filter) != "null"
	switch {
	case hasFilter && b.IDs != nil:
		return req, false, invalidField("ids", "give a filter or ids, not both")
	case b.IDs != nil:
		if len(b.IDs) == 0 || len(b.IDs) > bulk.MaxIDs {
			return req, false, invalidField("ids", "from 1 to %d message ids", bulk.MaxIDs)
		}
		seen := map[uuid.UUID]bool{}
		for _, s := range b.IDs {
			// The 36-character form only, as in a path: uuid.Parse also
			// takes urn:uuid:, braces and bare hex, which the stored
			// filter would then keep in a form the API refuses elsewhere.
			id, err := uuid.Parse(s)
			if err != nil || len(s) != 36 {
				return req, false, invalidField("ids", "%q is not a message id (want the 36-character form)", truncate(s))
			}
			if !seen[id] {
				seen[id] = true
				req.Filter.IDs = append(req.Filter.IDs, id)
			}
		}
		req.FilterJSON, _ = json.Marshal(map[string][]string{"ids": b.IDs}) // strings always encode
	case hasFilter:
		var fb wire.OperationFilter
		dec := json.NewDecoder(bytes.NewReader(b.Filter))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&fb); err != nil {
			return req, false, invalidField("filter", "must be an object of search filters (topic, status, error, group, error_group, key, header, q, since, until): %v", err)
		}
		if fb.Status != nil && len(fb.Status) == 0 {
			return req, false, invalidField("status", "an empty list: name the statuses, or leave status out for every one")
		}
		// One status a member: the search's query parameter also takes
		// "DEAD,PENDING" in one value, which a list does not need.
		for _, st := range fb.Status {
			if strings.ContainsAny(st, ", \t\r\n") {
				return req, false, invalidField("status", "%q: one status a member (%s)", truncate(st), enum.Sentence(dlq.Statuses, "or"))
			}
		}
		if fb.Header != nil && len(fb.Header) == 0 {
			return req, false, invalidField("header", "an empty list: name the headers, or leave header out")
		}
		v := fb.Values()
		// The filter is stored with the operation, and PostgreSQL keeps no
		// NUL in its JSON: refused on both stores alike, before anything
		// runs. A search takes it.
		for name, vals := range v {
			for _, s := range vals {
				if strings.ContainsRune(s, 0) {
					return req, false, invalidField(name, "holds a NUL byte, which a bulk operation's stored filter cannot keep (GET /api/v1/dlq/messages searches for it)")
				}
			}
		}
		if len(v) == 0 {
			return req, false, invalidField("filter", "give at least one filter; to act on every message, name the statuses (\"status\": [\"PENDING\", \"DEAD\"])")
		}
		if req.Filter.Search, err = parseSearchQuery(v); err != nil {
			return req, false, err
		}
		req.Filter.Search.Limit = 0
		req.FilterJSON = b.Filter
	default:
		return req, false, invalidField("filter", "required: a filter or ids")
	}
	return req, b.DryRun, nil
}
