package store

import "github.com/lifecycled/lifecycled/daemon/internal/store/sqlstore"

// SetSearchIndexBatchBytes makes s's search indexer bound its batches at n
// bytes instead of 8 MiB, so a test shows the bound with small payloads.
func SetSearchIndexBatchBytes(s Store, n int64) { coreOf(s).SearchBatchBytes = n }

// SetSearchCandidateLimit makes s read a text filter's candidates by id
// up to n of them instead of 2000, so a test passes the limit with few
// messages.
func SetSearchCandidateLimit(s Store, n int) { coreOf(s).SearchCandidates = n }

// AfterBulkCandidates makes s run fn between the read of a bulk
// operation's text candidates and the read of its set.
func AfterBulkCandidates(s Store, fn func()) { coreOf(s).AfterCandidates = fn }

// coreOf is the shared Go of s, which every driver's store embeds.
func coreOf(s Store) *sqlstore.Store {
	return s.(interface{ Core() *sqlstore.Store }).Core()
}
