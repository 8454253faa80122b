package adminapi

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/google/uuid"

	"github.com/lifecycled/lifecycled/daemon/internal/dlq"
	"github.com/lifecycled/lifecycled/daemon/internal/dlq/bulk"
	"github.com/lifecycled/lifecycled/daemon/wire"
)

// DLQ is what the dead-letter routes need.
type DLQ interface {
	List(ctx context.Context, f dlq.ListFilter) ([]dlq.Message, int64, error)
	Get(ctx context.Context, id uuid.UUID) (*dlq.Message, error)
	DeleteAs(ctx context.Context, id uuid.UUID, uid uint32) error
	RetryAs(ctx context.Context, id uuid.UUID, uid uint32) (*dlq.Message, error)
	Revive(ctx context.Context, id uuid.UUID, uid uint32) (*dlq.Message, error)
	CountRetryable(ctx context.Context, topic string) (int64, error)
	Topics(ctx context.Context) ([]dlq.TopicSummary, error)
	TopicActivity(ctx context.Context) (dlq.TopicActivities, error)
	SourceConfigured(name string) bool
}

// RetryAller runs a retry-all: a bulk retry that the request runs itself.
type RetryAller interface {
	RetryAll(ctx context.Context, topic string) (bulk.RetryAllResult, error)
}

// DLQRoutes serves the dead-letter routes of DESIGN.md.
func DLQRoutes(svc DLQ, all RetryAller) func(*http.ServeMux) {
	return func(mux *http.ServeMux) {
		g := routeGroup{mux: mux, scope: ScopeDLQ}
		g.handle("GET /api/v1/dlq", func(r *http.Request) (any, error) {
			topics, err := svc.Topics(r.Context())
			if err != nil {
				return nil, err
			}
			activity, err := svc.TopicActivity(r.Context())
			if err != nil {
				return nil, err
			}
			out := make([]wire.Topic, 0, len(topics))
			for _, t := range topics {
				out = append(out, topicJSON(t, activity.Of(t.Topic)))
			}
			return wire.Topics{Topics: out}, nil
		})
		// {topic...} takes the rest of the path, so that a topic with a
		// slash is a 400 for a bad topic rather than a 404 for a bad route.
		// The exact routes beside it (messages, groups, operations and the
		// topics/ prefix) win over a topic of that name, which any source
		// may have: such a topic is listed under /api/v1/dlq/topics/, which
		// serves every name (the typed client always asks there).
		list := func(r *http.Request, name string) (any, error) {
			topic, err := parseTopic(name)
			if err != nil {
				return nil, err
			}
			q, err := parseListQuery(r.URL.Query())
			if err != nil {
				return nil, err
			}
			msgs, total, err := svc.List(r.Context(), dlq.ListFilter{Topic: topic, Status: q.Status, Page: q.Page, PageSize: q.PageSize})
			if err != nil {
				return nil, err
			}
			var note string
			var didYouMean []string
			if total == 0 {
				// An empty page of a topic nothing was ever stored for is
				// most likely a typo: say so, with the close matches (still
				// 200, so that a client waiting for a topic's first dead
				// letter keeps working).
				if note, didYouMean, err = unknownTopic(r.Context(), svc, topic, q.Status != ""); err != nil {
					return nil, err
				}
			}
			body := wire.MessageList{Messages: make([]wire.Message, len(msgs)), Pagination: wire.Pagination{
				TotalCount: total, Page: q.Page, PageSize: q.PageSize, HasNext: int64(q.Page)*int64(q.PageSize) < total,
			}, Note: note, DidYouMean: didYouMean}
			for i := range msgs {
				body.Messages[i] = messageJSON(&msgs[i], svc.SourceConfigured(msgs[i].Position.Source))
			}
			return body, nil
		}
		g.handle("GET /api/v1/dlq/{topic...}", func(r *http.Request) (any, error) { return list(r, r.PathValue("topic")) })
		g.handle("GET /api/v1/dlq/topics/{topic...}", func(r *http.Request) (any, error) { return list(r, r.PathValue("topic")) })
		// Without it, ServeMux would redirect to .../topics/ (its rule for a
		// pattern ending in a wildcard): a topic named topics is listed here
		// too.
		g.handle("GET /api/v1/dlq/topics", func(r *http.Request) (any, error) { return list(r, "topics") })
		g.handle("GET /api/v1/dlq/messages/{id}", func(r *http.Request) (any, error) {
			id, err := parseID(r.PathValue("id"))
			if err != nil {
				return nil, err
			}
			m, err := svc.Get(r.Context(), id)
			if err != nil {
				return nil, notFoundMessage(id, err)
			}
			return messageJSON(m, svc.SourceConfigured(m.Position.Source)), nil
		})
		g.handle("DELETE /api/v1/dlq/messages/{id}", func(r *http.Request) (any, error) {
			if err := strictRequest(r, noBody); err != nil {
				return nil, err
			}
			id, err := parseID(r.PathValue("id"))
			if err != nil {
				return nil, err
			}
			// The caller's uid goes into the message's history, which
			// outlives it.
			if err := svc.DeleteAs(r.Context(), id, Peer(r.Context()).UID); err != nil {
				return nil, notFoundMessage(id, err)
			}
			return wire.Deleted{Success: true, Message: fmt.Sprintf("message %s deleted", id)}, nil
		})
		g.handle("POST /api/v1/dlq/messages/{id}/retry", func(r *http.Request) (any, error) {
			if err := strictRequest(r, noBody); err != nil {
				return nil, err
			}
			id, err := parseID(r.PathValue("id"))
			if err != nil {
				return nil, err
			}
			m, err := svc.RetryAs(r.Context(), id, Peer(r.Context()).UID)
			if err != nil {
				return nil, notFoundMessage(id, err)
			}
			return wire.MessageChange{ID: m.ID.String(), Status: m.Status, Message: "message retry initiated"}, nil
		})
		// Revive: a DEAD message back to PENDING with its attempts reset. The
		// caller's uid goes into the message's history (and, like every
		// mutating request, into the audit log).
		g.handle("POST /api/v1/dlq/messages/{id}/revive", func(r *http.Request) (any, error) {
			if err := strictRequest(r, noBody); err != nil {
				return nil, err
			}
			id, err := parseID(r.PathValue("id"))
			if err != nil {
				return nil, err
			}
			m, err := svc.Revive(r.Context(), id, Peer(r.Context()).UID)
			if err != nil {
				return nil, notFoundMessage(id, err)
			}
			return wire.MessageChange{ID: m.ID.String(), Status: m.Status, RetryCount: &m.RetryCount,
				MaxRetries: &m.MaxRetries, Message: "message revived"}, nil
		})
		g.handle("POST /api/v1/dlq/{topic}/retry-all", func(r *http.Request) (any, error) {
			if err := strictRequest(r, bodyAllowed, "dry_run"); err != nil {
				return nil, err
			}
			topic, err := parseTopic(r.PathValue("topic"))
			if err != nil {
				return nil, err
			}
			dryRun, err := parseDryRun(r.URL.Query())
			if err != nil {
				return nil, err
			}
			// The documented options may come in the body too; anything
			// else in it is refused, never ignored (a dry run sent as a body
			// must not become a real replay).
			if bodyDryRun, given, err := parseRetryAllBody(r); err != nil {
				return nil, err
			} else if given {
				if _, inQuery := r.URL.Query()["dry_run"]; inQuery && bodyDryRun != dryRun {
					return nil, invalidField("dry_run", "the query says %v and the body says %v", dryRun, bodyDryRun)
				}
				dryRun = bodyDryRun
			}
			if dryRun {
				n, err := svc.CountRetryable(r.Context(), topic)
				if err != nil {
					return nil, err
				}
				return wire.RetryAllResult{DryRun: true, Retryable: &n,
					Message: fmt.Sprintf("%s would be retried in topic %s", countOf(n, "message"), topic)}, nil
			}
			res, err := all.RetryAll(r.Context(), topic)
			if err != nil {
				return nil, err
			}
			return wire.RetryAllResult{Retried: res.Retried, Failed: res.Failed, Unavailable: res.Unavailable, NotRecorded: res.NotRecorded,
				Message: fmt.Sprintf("%s retried in topic %s", countOf(int64(res.Retried), "message"), topic)}, nil
		})
	}
}

// unknownTopic returns a note (and close matches) when nothing was ever
// stored for topic, as a DLQ topic or an original topic; "" when it is
// known. filtered: the empty answer came from a status filter, so look
// again without it.
func unknownTopic(ctx context.Context, svc DLQ, topic string, filtered bool) (string, []string, error) {
	if filtered {
		if _, total, err := svc.List(ctx, dlq.ListFilter{Topic: topic, Page: 1, PageSize: 1}); err != nil || total > 0 {
			return "", nil, err
		}
	}
	topics, err := svc.Topics(ctx)
	if err != nil {
		return "", nil, err
	}
	var names []string
	for _, t := range topics {
		if t.Topic == topic {
			return "", nil, nil
		}
		names = append(names, t.Topic)
	}
	note := fmt.Sprintf("no dead letter is stored for topic %s (as DLQ topic or original topic)", topic)
	close := closeMatches(topic, names)
	if len(close) > 0 {
		note += "; did you mean " + strings.Join(close, " or ") + "?"
	} else if len(names) > 0 {
		note += fmt.Sprintf("; `lifecycled dlq topics` lists the %s there are", countOf(int64(len(names)), "topic"))
	}
	return note, close, nil
}

// parseRetryAllBody reads {"dry_run": bool} from a retry-all body. An empty
// body is none; anything else is a 400 naming what is wrong.
func parseRetryAllBody(r *http.Request) (dryRun, given bool, err error) {
	data, err := readBody(r)
	if err != nil || data == nil {
		return false, false, err
	}
	var body struct {
		DryRun *bool `json:"dry_run"`
	}
	if err := strictJSON(data, &body, `empty or {"dry_run": true|false}`); err != nil {
		return false, false, err
	}
	if body.DryRun == nil {
		return false, false, nil
	}
	return *body.DryRun, true, nil
}

// countOf spells a count with its noun: "1 message", "2 messages".
func countOf(n int64, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// notFoundMessage gives 404s the seed's wording.
func notFoundMessage(id uuid.UUID, err error) error {
	if ae := classify(err, ScopeDLQ); ae.kind == "NOT_FOUND" {
		return notFound("dlq message not found: %s", id)
	}
	return err
}
