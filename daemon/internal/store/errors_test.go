package store_test

import (
	"context"
	"errors"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/internal/derrors"
	"github.com/lifecycled/lifecycled/daemon/internal/store"
	"github.com/lifecycled/lifecycled/daemon/internal/store/storetest"
)

func TestStoreErrorsAreSentinels(t *testing.T) {
	storetest.Each(t, func(t *testing.T, ctx context.Context, s store.Store) {
		_, err := s.GetDLQ(ctx, uuid.New())
		require.True(t, errors.Is(err, derrors.ErrNotFound))
		require.NoError(t, s.Ping(ctx))
	})
}
