package adminapi

import (
	"context"
	"fmt"
	"net/http"

	"github.com/google/uuid"

	"github.com/lifecycled/lifecycled/daemon/internal/dlq"
)

// DLQ is what the dead-letter routes need.
type DLQ interface {
	List(ctx context.Context, f dlq.ListFilter) ([]dlq.Message, int64, error)
	Get(ctx context.Context, id uuid.UUID) (*dlq.Message, error)
	Delete(ctx context.Context, id uuid.UUID) error
	Retry(ctx context.Context, id uuid.UUID) (*dlq.Message, error)
	Revive(ctx context.Context, id uuid.UUID, uid uint32) (*dlq.Message, error)
	RetryAll(ctx context.Context, topic string) (dlq.RetryAllResult, error)
	CountRetryable(ctx context.Context, topic string) (int64, error)
	Topics(ctx context.Context) ([]dlq.TopicSummary, error)
}

// ListBody is GET /api/v1/dlq/{topic}.
type ListBody struct {
	Messages   []dlq.JSON `json:"messages"`
	Pagination Pagination `json:"pagination"`
}

// Pagination describes a page.
type Pagination struct {
	TotalCount int64 `json:"total_count"`
	Page       int   `json:"page"`
	PageSize   int   `json:"page_size"`
	HasNext    bool  `json:"has_next"`
}

// TopicJSON is one entry of GET /api/v1/dlq.
type TopicJSON struct {
	Topic           string           `json:"topic"`
	Counts          map[string]int64 `json:"counts"`
	OldestPendingAt *string          `json:"oldest_pending_at"`
}

// RetryAllBody is POST /api/v1/dlq/{topic}/retry-all.
type RetryAllBody struct {
	Retried     int    `json:"retried"`
	Failed      int    `json:"failed"`
	Unavailable int    `json:"unavailable"`
	Message     string `json:"message"`
	// With ?dry_run=true: nothing was republished; Retryable is how many
	// messages a real call would republish now.
	DryRun    bool   `json:"dry_run,omitempty"`
	Retryable *int64 `json:"retryable,omitempty"`
}

// DLQRoutes serves the dead-letter routes of DESIGN.md.
func DLQRoutes(svc DLQ) func(*http.ServeMux) {
	return func(mux *http.ServeMux) {
		mux.HandleFunc("GET /api/v1/dlq", func(w http.ResponseWriter, r *http.Request) {
			topics, err := svc.Topics(r.Context())
			if err != nil {
				writeError(w, r, ScopeDLQ, err)
				return
			}
			out := make([]TopicJSON, 0, len(topics))
			for _, t := range topics {
				tj := TopicJSON{Topic: t.Topic, Counts: map[string]int64{}}
				for _, s := range dlq.Statuses {
					tj.Counts[string(s)] = t.Counts[s]
				}
				if t.OldestPendingAt != nil {
					s := t.OldestPendingAt.UTC().Format(dlq.TimeFormat)
					tj.OldestPendingAt = &s
				}
				out = append(out, tj)
			}
			writeJSON(w, http.StatusOK, map[string]any{"topics": out})
		})
		// {topic...} takes the rest of the path, so that a topic with a
		// slash is a 400 for a bad topic rather than a 404 for a bad route.
		mux.HandleFunc("GET /api/v1/dlq/{topic...}", func(w http.ResponseWriter, r *http.Request) {
			topic, err := parseTopic(r.PathValue("topic"))
			if err != nil {
				writeError(w, r, ScopeDLQ, err)
				return
			}
			q, err := parseListQuery(r.URL.Query())
			if err != nil {
				writeError(w, r, ScopeDLQ, err)
				return
			}
			msgs, total, err := svc.List(r.Context(), dlq.ListFilter{Topic: topic, Status: q.Status, Page: q.Page, PageSize: q.PageSize})
			if err != nil {
				writeError(w, r, ScopeDLQ, err)
				return
			}
			body := ListBody{Messages: make([]dlq.JSON, len(msgs)), Pagination: Pagination{
				TotalCount: total, Page: q.Page, PageSize: q.PageSize, HasNext: int64(q.Page)*int64(q.PageSize) < total,
			}}
			for i := range msgs {
				body.Messages[i] = msgs[i].ToJSON()
			}
			writeJSON(w, http.StatusOK, body)
		})
		mux.HandleFunc("GET /api/v1/dlq/messages/{id}", func(w http.ResponseWriter, r *http.Request) {
			id, err := parseID(r.PathValue("id"))
			if err != nil {
				writeError(w, r, ScopeDLQ, err)
				return
			}
			m, err := svc.Get(r.Context(), id)
			if err != nil {
				writeError(w, r, ScopeDLQ, notFoundMessage(id, err))
				return
			}
			writeJSON(w, http.StatusOK, m.ToJSON())
		})
		mux.HandleFunc("DELETE /api/v1/dlq/messages/{id}", func(w http.ResponseWriter, r *http.Request) {
			id, err := parseID(r.PathValue("id"))
			if err != nil {
				writeError(w, r, ScopeDLQ, err)
				return
			}
			if err := svc.Delete(r.Context(), id); err != nil {
				writeError(w, r, ScopeDLQ, notFoundMessage(id, err))
				return
			}
			writeJSON(w, http.StatusOK, map[string]any{"success": true, "message": fmt.Sprintf("message %s deleted", id)})
		})
		mux.HandleFunc("POST /api/v1/dlq/messages/{id}/retry", func(w http.ResponseWriter, r *http.Request) {
			id, err := parseID(r.PathValue("id"))
			if err != nil {
				writeError(w, r, ScopeDLQ, err)
				return
			}
			m, err := svc.Retry(r.Context(), id)
			if err != nil {
				writeError(w, r, ScopeDLQ, notFoundMessage(id, err))
				return
			}
			writeJSON(w, http.StatusOK, map[string]any{"id": m.ID.String(), "status": m.Status, "message": "message retry initiated"})
		})
		// Revive: a DEAD message back to PENDING with its attempts reset. The
		// caller's uid goes into the message's history (and, like every
		// mutating request, into the audit log).
		mux.HandleFunc("POST /api/v1/dlq/messages/{id}/revive", func(w http.ResponseWriter, r *http.Request) {
			id, err := parseID(r.PathValue("id"))
			if err != nil {
				writeError(w, r, ScopeDLQ, err)
				return
			}
			m, err := svc.Revive(r.Context(), id, Peer(r.Context()).UID)
			if err != nil {
				writeError(w, r, ScopeDLQ, notFoundMessage(id, err))
				return
			}
			writeJSON(w, http.StatusOK, map[string]any{"id": m.ID.String(), "status": m.Status, "retry_count": m.RetryCount,
				"max_retries": m.MaxRetries, "message": "message revived"})
		})
		mux.HandleFunc("POST /api/v1/dlq/{topic}/retry-all", func(w http.ResponseWriter, r *http.Request) {
			topic, err := parseTopic(r.PathValue("topic"))
			if err != nil {
				writeError(w, r, ScopeDLQ, err)
				return
			}
			dryRun, err := parseDryRun(r.URL.Query())
			if err != nil {
				writeError(w, r, ScopeDLQ, err)
				return
			}
			if dryRun {
				n, err := svc.CountRetryable(r.Context(), topic)
				if err != nil {
					writeError(w, r, ScopeDLQ, err)
					return
				}
				writeJSON(w, http.StatusOK, RetryAllBody{DryRun: true, Retryable: &n,
					Message: fmt.Sprintf("%d messages would be retried in topic %s", n, topic)})
				return
			}
			res, err := svc.RetryAll(r.Context(), topic)
			if err != nil {
				writeError(w, r, ScopeDLQ, err)
				return
			}
			writeJSON(w, http.StatusOK, RetryAllBody{Retried: res.Retried, Failed: res.Failed, Unavailable: res.Unavailable,
				Message: fmt.Sprintf("%d messages retried in topic %s", res.Retried, topic)})
		})
	}
}

// notFoundMessage gives 404s the seed's wording.
func notFoundMessage(id uuid.UUID, err error) error {
	if ae := classify(err, ScopeDLQ); ae.kind == "NOT_FOUND" {
		return notFound("dlq message not found: %s", id)
	}
	return err
}
