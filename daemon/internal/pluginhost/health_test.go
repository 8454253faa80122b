package pluginhost_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/internal/pluginhost"
	"github.com/lifecycled/lifecycled/internal/testsvc"
)

// A store's health is what the last probe found, never assumed: unknown
// before the first probe and for a plugin that cannot probe, down (with
// why and since when) when the probe fails or does not answer in time, and
// only a probe that succeeded makes it up. Check, which /readyz runs, fails
// only for down.
func TestStoreHealthIsProbedNeverAssumed(t *testing.T) {
	file := filepath.Join(t.TempDir(), "health")
	t.Setenv("TESTPLUGIN_HEALTH", file)
	h, _ := newHost(t, "", basic)
	set := func(s string) { require.NoError(t, os.WriteFile(file, []byte(s), 0o600)) }
	ctx := testsvc.Context(t, time.Minute)

	st := status(t, h, "test:a").Store
	require.Equal(t, pluginhost.StoreUnknown, st.State, "not probed yet")
	require.Nil(t, st.CheckedAt)
	require.NoError(t, h.Check("test:a"), "unknown is not down")

	require.True(t, h.ProbeStores(ctx, time.Second))
	st = status(t, h, "test:a").Store
	require.Equal(t, pluginhost.StoreUp, st.State)
	require.NotNil(t, st.Since)
	upSince := *st.Since
	require.False(t, h.ProbeStores(ctx, time.Second), "still up: no change")
	require.Equal(t, upSince, *status(t, h, "test:a").Store.Since, "since when, not since the last probe")

	set("down")
	require.True(t, h.ProbeStores(ctx, time.Second))
	st = status(t, h, "test:a").Store
	require.Equal(t, pluginhost.StoreDown, st.State)
	require.Contains(t, st.Error, "connection refused")
	require.ErrorContains(t, h.Check("test:a"), "store down since ")
	select {
	case <-h.StoreChanges():
		t.Fatal("ProbeStores alone does not signal: WatchStores does")
	default:
	}

	set("slow")
	start := time.Now()
	require.False(t, h.ProbeStores(ctx, 300*time.Millisecond), "down, and still down")
	require.Less(t, time.Since(start), 5*time.Second, "a probe is bounded by its timeout")
	require.Equal(t, "no answer within 300ms", status(t, h, "test:a").Store.Error)

	set("unsupported")
	require.True(t, h.ProbeStores(ctx, time.Second))
	st = status(t, h, "test:a").Store
	require.Equal(t, pluginhost.StoreUnknown, st.State, "a plugin that cannot probe is unknown, not up")
	require.NoError(t, h.Check("test:a"))

	set("up")
	require.True(t, h.ProbeStores(ctx, time.Second))
	require.Equal(t, pluginhost.StoreUp, status(t, h, "test:a").Store.State)
}

// WatchStores probes on its interval and signals a change.
func TestWatchStoresSignalsAChange(t *testing.T) {
	file := filepath.Join(t.TempDir(), "health")
	t.Setenv("TESTPLUGIN_HEALTH", file)
	h, _ := newHost(t, "", basic)
	ctx := testsvc.Context(t, time.Minute)
	go h.WatchStores(ctx, func() (time.Duration, time.Duration) { return 50 * time.Millisecond, time.Second })
	select {
	case <-h.StoreChanges():
	case <-time.After(20 * time.Second):
		t.Fatal("no change signalled for the first probe (unknown to up)")
	}
	require.NoError(t, os.WriteFile(file, []byte("down"), 0o600))
	select {
	case <-h.StoreChanges():
	case <-time.After(20 * time.Second):
		t.Fatal("no change signalled for up to down")
	}
	require.Equal(t, pluginhost.StoreDown, status(t, h, "test:a").Store.State)
}
