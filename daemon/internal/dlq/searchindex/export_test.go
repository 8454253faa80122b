package searchindex

import (
	"context"
	"time"

	"github.com/lifecycled/lifecycled/daemon/internal/periodic"
)

// Pass runs one pass of the indexer's loop, on the clock now.
func Pass(ctx context.Context, ix *Indexer, now func() time.Time) (periodic.Outcome, error) {
	ix.now = now
	return ix.pass(ctx)
}

// MaxDefer is how long the indexer defers to intake at most.
const MaxDefer = maxDefer
