package bulk

import "github.com/lifecycled/lifecycled/daemon/internal/dlq"

// undone cuts items (in seq order, following each other) where a range
// done already begins: it returns the first items up to there, and where
// the next read starts (after the page, or after the done range that
// begins the items, when the page is empty).
func undone(items []dlq.OperationItem, done []dlq.SeqRange) ([]dlq.OperationItem, int64) {
	for i, it := range items {
		for _, d := range done {
			if d.After < it.Seq && it.Seq <= d.Upto {
				if i == 0 {
					return nil, d.Upto
				}
				return items[:i], items[i-1].Seq
			}
		}
	}
	return items, items[len(items)-1].Seq
}
