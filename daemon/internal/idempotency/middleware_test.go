package idempotency_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/internal/idempotency"
	"github.com/lifecycled/lifecycled/daemon/internal/store/storetest"
	"github.com/lifecycled/lifecycled/migrations"
)

// harness is the middleware over a real (SQLite) state store, a clock the
// test moves, and a route that counts its runs.
type harness struct {
	h     http.Handler
	now   time.Time
	mu    sync.Mutex
	runs  atomic.Int32
	block chan struct{} // when set, the route waits on it
	fail  atomic.Bool   // when set, the route answers 500
}

func newHarness(t *testing.T, mismatch int) *harness {
	hs := &harness{now: time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /jobs/{id}", func(w http.ResponseWriter, r *http.Request) {
		n := hs.runs.Add(1)
		if hs.block != nil {
			<-hs.block
		}
		if hs.fail.Load() {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		w.Header().Set("Location", "/jobs/"+r.PathValue("id")+"/"+strconv.Itoa(int(n)))
		w.Header().Set("X-Not-Kept", "x")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusAccepted)
		_, _ = w.Write([]byte(`{"run":` + strconv.Itoa(int(n)) + `}`))
	})
	m := idempotency.NewMiddleware(idempotency.Options{
		Store:          storetest.Open(t, migrations.SQLite),
		TTL:            func() time.Duration { return 72 * time.Hour },
		MismatchStatus: func() int { return mismatch },
		LockTimeout:    func() time.Duration { return 5 * time.Minute },
		CallerUID: func(r *http.Request) uint32 {
			uid, _ := strconv.Atoi(r.Header.Get("X-Test-UID"))
			return uint32(uid)
		},
		Fail: func(w http.ResponseWriter, r *http.Request, f idempotency.Failure) {
			if f.LogOnly {
				return
			}
			if f.Err != nil {
				f.Status, f.Code = 500, "STORE"
			}
			w.WriteHeader(f.Status)
			_ = json.NewEncoder(w).Encode(map[string]string{"code": f.Code, "message": f.Message})
		},
		Now: func() time.Time { hs.mu.Lock(); defer hs.mu.Unlock(); return hs.now },
	})
	hs.h = m.Wrap(mux)
	return hs
}

func (hs *harness) advance(d time.Duration) { hs.mu.Lock(); hs.now = hs.now.Add(d); hs.mu.Unlock() }

func (hs *harness) post(path, key, body string, uid int) *httptest.ResponseRecorder {
	req := httptest.NewRequest("POST", "http://localhost"+path, strings.NewReader(body))
	if key != "" {
		req.Header.Set(idempotency.Header, key)
	}
	req.Header.Set("X-Test-UID", strconv.Itoa(uid))
	rec := httptest.NewRecorder()
	hs.h.ServeHTTP(rec, req)
	return rec
}

func TestMiddleware(t *testing.T) {
	tests := map[string]struct {
		run func(t *testing.T, hs *harness)
	}{
		"a replay gives back status, body and Location without running again": {func(t *testing.T, hs *harness) {
			first := hs.post("/jobs/a", "k1", `{"x":1}`, 1000)
			require.Equal(t, 202, first.Code)
			again := hs.post("/jobs/a", "k1", `{"x":1}`, 1000)
			require.Equal(t, 202, again.Code)
			require.Equal(t, first.Body.String(), again.Body.String())
			require.Equal(t, "/jobs/a/1", again.Header().Get("Location"), "Location survives the replay")
			require.Equal(t, "true", again.Header().Get(idempotency.ReplayedHeader))
			require.Empty(t, again.Header().Get("X-Not-Kept"), "only the headers that matter are stored")
			require.EqualValues(t, 1, hs.runs.Load())
		}},
		"the same key with another body is a mismatch": {func(t *testing.T, hs *harness) {
			hs.post("/jobs/a", "k1", `{"x":1}`, 1000)
			rec := hs.post("/jobs/a", "k1", `{"x":2}`, 1000)
			require.Equal(t, 409, rec.Code)
			require.Contains(t, rec.Body.String(), "SYS_IDEMPOTENCY_KEY_MISMATCH")
			require.EqualValues(t, 1, hs.runs.Load())
		}},
		"the same key on another path is a mismatch": {func(t *testing.T, hs *harness) {
			hs.post("/jobs/a", "k1", ``, 1000)
			require.Equal(t, 409, hs.post("/jobs/b", "k1", ``, 1000).Code)
		}},
		"keys are scoped by caller": {func(t *testing.T, hs *harness) {
			hs.post("/jobs/a", "k1", ``, 1000)
			rec := hs.post("/jobs/a", "k1", ``, 1001)
			require.Equal(t, 202, rec.Code)
			require.Empty(t, rec.Header().Get(idempotency.ReplayedHeader))
			require.EqualValues(t, 2, hs.runs.Load())
		}},
		"an expired key is a new request": {func(t *testing.T, hs *harness) {
			hs.post("/jobs/a", "k1", ``, 1000)
			hs.advance(72*time.Hour + time.Second)
			rec := hs.post("/jobs/a", "k1", ``, 1000)
			require.Empty(t, rec.Header().Get(idempotency.ReplayedHeader))
			require.EqualValues(t, 2, hs.runs.Load())
		}},
		"a 5xx releases the key so that a retry runs": {func(t *testing.T, hs *harness) {
			hs.fail.Store(true)
			require.Equal(t, 500, hs.post("/jobs/a", "k1", ``, 1000).Code)
			hs.fail.Store(false)
			require.Equal(t, 202, hs.post("/jobs/a", "k1", ``, 1000).Code)
			require.EqualValues(t, 2, hs.runs.Load())
		}},
		"an invalid key is a 400 and runs nothing": {func(t *testing.T, hs *harness) {
			rec := hs.post("/jobs/a", strings.Repeat("k", 256), ``, 1000)
			require.Equal(t, 400, rec.Code)
			require.Contains(t, rec.Body.String(), "SYS_IDEMPOTENCY_VALIDATION_ERROR")
			require.Zero(t, hs.runs.Load())
		}},
		"no key: no idempotency": {func(t *testing.T, hs *harness) {
			hs.post("/jobs/a", "", ``, 1000)
			hs.post("/jobs/a", "", ``, 1000)
			require.EqualValues(t, 2, hs.runs.Load())
		}},
		"a replay while the first runs is refused, and a stale one is taken over": {func(t *testing.T, hs *harness) {
			hs.block = make(chan struct{})
			done := make(chan *httptest.ResponseRecorder)
			go func() { done <- hs.post("/jobs/a", "k1", ``, 1000) }()
			require.Eventually(t, func() bool { return hs.runs.Load() == 1 }, 10*time.Second, 10*time.Millisecond)
			rec := hs.post("/jobs/a", "k1", ``, 1000)
			require.Equal(t, 409, rec.Code)
			require.Contains(t, rec.Body.String(), "SYS_IDEMPOTENCY_IN_FLIGHT")
			require.Equal(t, "1", rec.Header().Get("Retry-After"))
			hs.advance(6 * time.Minute) // the first request died (lock_timeout 5m)
			go func() { done <- hs.post("/jobs/a", "k1", ``, 1000) }()
			require.Eventually(t, func() bool { return hs.runs.Load() == 2 }, 10*time.Second, 10*time.Millisecond)
			close(hs.block)
			<-done
			<-done
		}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			tc.run(t, newHarness(t, 409))
		})
	}
	t.Run("mismatch status 422 (IETF draft)", func(t *testing.T) {
		hs := newHarness(t, 422)
		hs.post("/jobs/a", "k1", `1`, 1000)
		require.Equal(t, 422, hs.post("/jobs/a", "k1", `2`, 1000).Code)
	})
}
