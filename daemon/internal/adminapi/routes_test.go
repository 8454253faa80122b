package adminapi

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/internal/derrors"
)

// A route returns its answer; the group writes it: a body as 200 JSON, an
// answer with its status, headers or bytes as they are, an error in the
// envelope with the group's scope.
func TestARouteGroupWritesWhatItsRoutesReturn(t *testing.T) {
	mux := http.NewServeMux()
	g := routeGroup{mux: mux, scope: ScopeDLQ}
	g.handle("GET /body", func(*http.Request) (any, error) { return map[string]int{"n": 1}, nil })
	g.handle("GET /accepted", func(*http.Request) (any, error) {
		return accepted(map[string]int{"n": 2}, "Location", "/there"), nil
	})
	g.handle("GET /raw", func(*http.Request) (any, error) {
		return answer{header: http.Header{"X-Key": {"k1"}}, raw: []byte("{\"b\":  1}\n")}, nil
	})
	g.handle("GET /missing", func(*http.Request) (any, error) { return nil, derrors.ErrNotFound })
	g.handle("GET /broken", func(*http.Request) (any, error) { return nil, errors.New("disk on fire") })

	get := func(path string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		return rec
	}
	rec := get("/body")
	require.Equal(t, http.StatusOK, rec.Code)
	require.Equal(t, "application/json", rec.Header().Get("Content-Type"))
	require.Equal(t, "{\"n\":1}\n", rec.Body.String())

	rec = get("/accepted")
	require.Equal(t, http.StatusAccepted, rec.Code)
	require.Equal(t, "/there", rec.Header().Get("Location"))
	require.Equal(t, "{\"n\":2}\n", rec.Body.String())

	rec = get("/raw")
	require.Equal(t, http.StatusOK, rec.Code)
	require.Equal(t, "k1", rec.Header().Get("X-Key"))
	require.Equal(t, "{\"b\":  1}\n", rec.Body.String(), "bytes as they are, not re-encoded")

	rec = get("/missing")
	require.Equal(t, http.StatusNotFound, rec.Code)
	require.Contains(t, rec.Body.String(), `"code":"SYS_DLQ_NOT_FOUND"`, "the group's scope names the code")

	rec = get("/broken")
	require.Equal(t, http.StatusInternalServerError, rec.Code)
	require.Contains(t, rec.Body.String(), `"code":"SYS_DLQ_INTERNAL_ERROR"`)
	require.NotContains(t, rec.Body.String(), "disk on fire", "an internal error's text stays in the log")
}
