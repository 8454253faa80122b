package console

import (
	"net/http"
	"net/http/httptest"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/wire"
)

// TestATopicWithASlashIsOnePathSegmentOfItsForms: a queue's name may hold
// "/" (orders/order.created); html/template leaves it as it is in a path,
// so the pause form posted to /ui/dlq/topics/orders/order.created/pause,
// which no route takes. The form's action escapes it, and the route reads
// the name back whole.
func TestATopicWithASlashIsOnePathSegmentOfItsForms(t *testing.T) {
	c := New(Options{})
	names := []string{"orders/order.created", "orders:dlq", "Bestellungen dlq/ä", "orders.dlq.v1"}
	var topics []wire.Topic
	for i, n := range names {
		tp := wire.Topic{Topic: n, Counts: map[string]int64{"PENDING": 1}}
		if i%2 == 1 {
			tp.Paused = &wire.Pause{Reason: "incident"}
		}
		topics = append(topics, tp)
	}
	rec := httptest.NewRecorder()
	c.render(rec, http.StatusOK, "dlq", &page{CanMutate: true, Data: dlqIndexData{Topics: topics, Statuses: dlqStatuses}})
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())

	var seen []string
	mux := http.NewServeMux()
	mux.HandleFunc("POST /ui/dlq/topics/{topic}/{action}", func(w http.ResponseWriter, r *http.Request) {
		seen = append(seen, r.PathValue("topic"))
	})
	actions := regexp.MustCompile(`action="(/ui/dlq/topics/[^"]+)"`).FindAllStringSubmatch(rec.Body.String(), -1)
	require.Len(t, actions, len(names))
	for _, a := range actions {
		req := httptest.NewRequest(http.MethodPost, a[1], nil)
		mux.ServeHTTP(httptest.NewRecorder(), req)
	}
	require.Equal(t, names, seen, "each form reaches its own topic, whole")
}
