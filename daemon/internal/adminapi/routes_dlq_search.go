package adminapi

import (
	"context"
	"net/http"

	"github.com/lifecycled/lifecycled/daemon/internal/dlq"
	"github.com/lifecycled/lifecycled/daemon/wire"
)

// DLQSearch is what the search and failure-group routes need.
type DLQSearch interface {
	Search(ctx context.Context, f dlq.SearchFilter) (dlq.SearchPage, error)
	Groups(ctx context.Context, f dlq.GroupFilter) ([]dlq.GroupSummary, error)
	SourceConfigured(name string) bool
}

func groupJSON(g *dlq.GroupSummary) wire.Group {
	out := wire.Group{ID: g.ID, Pattern: g.Pattern, ErrorGroup: g.ErrorGroup, Groups: g.Members, ExceptionClasses: g.ExceptionClasses,
		SampleError: g.SampleError, OriginalTopics: g.OriginalTopics, DLQTopics: g.DLQTopics, Counts: map[string]int64{},
		FirstSeen: formatTime(g.FirstSeen), LastSeen: formatTime(g.LastSeen)}
	if g.ExceptionClass != "" {
		out.ExceptionClass = &g.ExceptionClass
	}
	if out.OriginalTopics == nil {
		out.OriginalTopics = []string{}
	}
	if out.DLQTopics == nil {
		out.DLQTopics = []string{}
	}
	if out.Groups == nil {
		out.Groups = []string{}
	}
	if out.ExceptionClasses == nil {
		out.ExceptionClasses = []string{}
	}
	for _, s := range dlq.Statuses {
		out.Counts[string(s)] = g.Counts[s]
	}
	out.ArrivalsPerHour = g.Arrivals
	if out.ArrivalsPerHour == nil {
		out.ArrivalsPerHour = []int64{}
	} else {
		out.ArrivalsSince = formatTime(g.ArrivalsFrom)
	}
	return out
}

// DLQSearchRoutes serves search across topics and failure groups. These
// exact paths take precedence over GET /api/v1/dlq/{topic...}: a topic
// named "messages" or "groups" is listed with ?topic= here.
func DLQSearchRoutes(svc DLQSearch) func(*http.ServeMux) {
	return func(mux *http.ServeMux) {
		g := routeGroup{mux: mux, scope: ScopeDLQ}
		g.handle("GET /api/v1/dlq/messages", func(r *http.Request) (any, error) {
			f, err := parseSearchQuery(r.URL.Query())
			if err != nil {
				return nil, err
			}
			page, err := svc.Search(r.Context(), f)
			if err != nil {
				return nil, err
			}
			body := wire.SearchResult{Messages: make([]wire.Message, len(page.Messages)), Total: page.Total, TotalIsEstimate: page.TotalIsEstimate,
				NextCursor: encodeCursor(page.Next, filterDigest(r.URL.Query()))}
			for i := range page.Messages {
				body.Messages[i] = messageJSON(&page.Messages[i], svc.SourceConfigured(page.Messages[i].Position.Source))
			}
			return body, nil
		})
		g.handle("GET /api/v1/dlq/groups", func(r *http.Request) (any, error) {
			f, err := parseGroupsQuery(r.URL.Query())
			if err != nil {
				return nil, err
			}
			groups, err := svc.Groups(r.Context(), f)
			if err != nil {
				return nil, err
			}
			body := wire.Groups{Groups: make([]wire.Group, len(groups))}
			for i := range groups {
				body.Groups[i] = groupJSON(&groups[i])
			}
			return body, nil
		})
	}
}
