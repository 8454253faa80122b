package dlq

import (
	"context"
	"time"

	"github.com/lifecycled/lifecycled/daemon/internal/periodic"
)

// SearchIndexPass runs one pass of the indexer's loop, on the clock now.
func SearchIndexPass(ctx context.Context, ix *SearchIndexer, now func() time.Time) (periodic.Outcome, error) {
	ix.now = now
	return ix.pass(ctx)
}

// SearchIndexMaxDefer is how long the indexer defers to intake at most.
const SearchIndexMaxDefer = searchIndexMaxDefer
