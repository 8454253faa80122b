package store_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/internal/idempotency"
	"github.com/lifecycled/lifecycled/daemon/internal/store"
	"github.com/lifecycled/lifecycled/daemon/internal/store/storetest"
)

func TestIdempotencyKeys(t *testing.T) {
	storetest.Each(t, func(t *testing.T, ctx context.Context, s store.Store) {
		rec := idempotency.Record{CallerUID: 1000, Key: "k-1", Route: "POST /x", RequestHash: "h1", ExpiresAt: t0.Add(72 * time.Hour)}
		stale := t0.Add(-5 * time.Minute)
		holder, err := s.ReserveIdempotencyKey(ctx, rec, t0, stale)
		require.NoError(t, err)
		require.Nil(t, holder, "first use reserves")

		holder, err = s.ReserveIdempotencyKey(ctx, rec, t0.Add(time.Second), stale)
		require.NoError(t, err)
		require.NotNil(t, holder)
		require.Equal(t, idempotency.StateInFlight, holder.State)

		// Another caller's key with the same text is separate.
		other := rec
		other.CallerUID = 1001
		holder, err = s.ReserveIdempotencyKey(ctx, other, t0, stale)
		require.NoError(t, err)
		require.Nil(t, holder)

		require.NoError(t, s.CompleteIdempotencyKey(ctx, 1000, "k-1", "h1", idempotency.Response{Status: 202, Body: []byte(`{"ok":true}`),
			Headers: http.Header{"Location": {"/api/v1/tenants/t/deletion"}}}, t0.Add(72*time.Hour)))
		holder, err = s.ReserveIdempotencyKey(ctx, rec, t0.Add(time.Minute), t0.Add(time.Minute-5*time.Minute))
		require.NoError(t, err)
		require.Equal(t, idempotency.StateDone, holder.State)
		require.Equal(t, 202, holder.Response.Status)
		require.Equal(t, `{"ok":true}`, string(holder.Response.Body))
		require.Equal(t, http.Header{"Location": {"/api/v1/tenants/t/deletion"}}, holder.Response.Headers)
		require.Equal(t, "h1", holder.RequestHash)

		// Expired: treated as new.
		later := t0.Add(73 * time.Hour)
		rec2 := rec
		rec2.RequestHash = "h2"
		rec2.ExpiresAt = later.Add(72 * time.Hour)
		holder, err = s.ReserveIdempotencyKey(ctx, rec2, later, later.Add(-5*time.Minute))
		require.NoError(t, err)
		require.Nil(t, holder)

		// A stale in-flight record (its request died) may be taken over.
		holder, err = s.ReserveIdempotencyKey(ctx, rec2, later.Add(time.Minute), later.Add(-time.Minute))
		require.NoError(t, err)
		require.NotNil(t, holder, "fresh in-flight holds")
		holder, err = s.ReserveIdempotencyKey(ctx, rec2, later.Add(10*time.Minute), later.Add(5*time.Minute))
		require.NoError(t, err)
		require.Nil(t, holder, "stale in-flight is taken over")

		// Release forgets a reservation.
		require.NoError(t, s.ReleaseIdempotencyKey(ctx, 1001, "k-1", "h1"))
		holder, err = s.ReserveIdempotencyKey(ctx, other, t0.Add(time.Second), stale)
		require.NoError(t, err)
		require.Nil(t, holder)

		// Purge removes only expired keys.
		n, err := s.PurgeExpiredIdempotencyKeys(ctx, t0.Add(72*time.Hour+time.Second), 100)
		require.NoError(t, err)
		require.EqualValues(t, 1, n, "uid 1001's key expired; uid 1000's was renewed")
		holder, err = s.ReserveIdempotencyKey(ctx, rec2, later.Add(11*time.Minute), later)
		require.NoError(t, err)
		require.NotNil(t, holder, "live key survived the purge")
	})
}
