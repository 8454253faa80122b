package store

// SetSearchIndexBatchBytes makes s's search indexer bound its batches at n
// bytes instead of 8 MiB, so a test shows the bound with small payloads.
func SetSearchIndexBatchBytes(s Store, n int64) { sqlStoreOf(s).searchBatchBytes = n }

// SetSearchCandidateLimit makes s read a text filter's candidates by id
// up to n of them instead of 2000, so a test passes the limit with few
// messages.
func SetSearchCandidateLimit(s Store, n int) { sqlStoreOf(s).searchCandidates = n }

// AfterBulkCandidates makes s run fn between the read of a bulk
// operation's text candidates and the read of its set.
func AfterBulkCandidates(s Store, fn func()) { sqlStoreOf(s).afterCandidates = fn }

func sqlStoreOf(s Store) *sqlStore {
	switch st := s.(type) {
	case *Postgres:
		return &st.sqlStore
	case *SQLite:
		return &st.sqlStore
	}
	panic("not a store of this package")
}
