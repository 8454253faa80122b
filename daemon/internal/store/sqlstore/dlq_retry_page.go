package sqlstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/lifecycled/lifecycled/daemon/internal/derrors"
	"github.com/lifecycled/lifecycled/daemon/internal/dlq"
)

// SkippedItem is the result of an item of a bulk retry whose message was
// not claimed.
func (s *Store) SkippedItem(ctx context.Context, it dlq.OperationItem) (dlq.ItemResult, error) {
	m, err := s.GetDLQ(ctx, it.ID)
	switch {
	case errors.Is(err, derrors.ErrNotFound):
		return dlq.SkippedItem(it, nil), nil
	case err != nil:
		return dlq.ItemResult{}, fmt.Errorf("read a dead letter that was not claimed: %w", err)
	default:
		return dlq.SkippedItem(it, m), nil
	}
}
