package adminapi

import (
	"context"
	"net/http"

	"github.com/lifecycled/lifecycled/daemon/internal/dlq"
)

// DLQSearch is what the search and failure-group routes need.
type DLQSearch interface {
	Search(ctx context.Context, f dlq.SearchFilter) (dlq.SearchPage, error)
	Groups(ctx context.Context, f dlq.GroupFilter) ([]dlq.GroupSummary, error)
	SourceConfigured(name string) bool
}

// SearchBody is GET /api/v1/dlq/messages.
type SearchBody struct {
	Messages []MessageJSON `json:"messages"`
	// NextCursor continues the search; "" on the last page.
	NextCursor      string `json:"next_cursor"`
	Total           int64  `json:"total"`
	TotalIsEstimate bool   `json:"total_is_estimate"`
}

// GroupJSON is one failure group of GET /api/v1/dlq/groups.
type GroupJSON struct {
	ID             string           `json:"id"`
	Pattern        string           `json:"pattern"`
	ExceptionClass *string          `json:"exception_class"`
	SampleError    string           `json:"sample_error"`
	OriginalTopics []string         `json:"original_topics"`
	DLQTopics      []string         `json:"dlq_topics"`
	Counts         map[string]int64 `json:"counts"`
	FirstSeen      string           `json:"first_seen"`
	LastSeen       string           `json:"last_seen"`
}

// GroupsBody is GET /api/v1/dlq/groups.
type GroupsBody struct {
	Groups []GroupJSON `json:"groups"`
}

func groupJSON(g *dlq.GroupSummary) GroupJSON {
	out := GroupJSON{ID: g.ID, Pattern: g.Pattern, SampleError: g.SampleError, OriginalTopics: g.OriginalTopics,
		DLQTopics: g.DLQTopics, Counts: map[string]int64{}, FirstSeen: formatTime(g.FirstSeen), LastSeen: formatTime(g.LastSeen)}
	if g.ExceptionClass != "" {
		out.ExceptionClass = &g.ExceptionClass
	}
	if out.OriginalTopics == nil {
		out.OriginalTopics = []string{}
	}
	if out.DLQTopics == nil {
		out.DLQTopics = []string{}
	}
	for _, s := range dlq.Statuses {
		out.Counts[string(s)] = g.Counts[s]
	}
	return out
}

// DLQSearchRoutes serves search across topics and failure groups. These
// exact paths take precedence over GET /api/v1/dlq/{topic...}: a topic
// named "messages" or "groups" is listed with ?topic= here.
func DLQSearchRoutes(svc DLQSearch) func(*http.ServeMux) {
	return func(mux *http.ServeMux) {
		mux.HandleFunc("GET /api/v1/dlq/messages", func(w http.ResponseWriter, r *http.Request) {
			f, err := parseSearchQuery(r.URL.Query())
			if err != nil {
				writeError(w, r, ScopeDLQ, err)
				return
			}
			page, err := svc.Search(r.Context(), f)
			if err != nil {
				writeError(w, r, ScopeDLQ, err)
				return
			}
			body := SearchBody{Messages: make([]MessageJSON, len(page.Messages)), Total: page.Total, TotalIsEstimate: page.TotalIsEstimate,
				NextCursor: encodeCursor(page.Next, filterDigest(r.URL.Query()))}
			for i := range page.Messages {
				body.Messages[i] = messageJSON(&page.Messages[i], svc.SourceConfigured(page.Messages[i].Position.Source))
			}
			writeJSON(w, http.StatusOK, body)
		})
		mux.HandleFunc("GET /api/v1/dlq/groups", func(w http.ResponseWriter, r *http.Request) {
			f, err := parseGroupsQuery(r.URL.Query())
			if err != nil {
				writeError(w, r, ScopeDLQ, err)
				return
			}
			groups, err := svc.Groups(r.Context(), f)
			if err != nil {
				writeError(w, r, ScopeDLQ, err)
				return
			}
			body := GroupsBody{Groups: make([]GroupJSON, len(groups))}
			for i := range groups {
				body.Groups[i] = groupJSON(&groups[i])
			}
			writeJSON(w, http.StatusOK, body)
		})
	}
}
