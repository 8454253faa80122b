package store

// SetSearchIndexBatchBytes makes s's search indexer bound its batches at n
// bytes instead of 8 MiB, so a test shows the bound with small payloads.
func SetSearchIndexBatchBytes(s Store, n int64) {
	switch st := s.(type) {
	case *Postgres:
		st.searchBatchBytes = n
	case *SQLite:
		st.searchBatchBytes = n
	default:
		panic("not a store of this package")
	}
}

// SetSearchCandidateLimit makes s read a text filter's candidates by id
// up to n of them instead of 2000, so a test passes the limit with few
// messages.
func SetSearchCandidateLimit(s Store, n int) {
	switch st := s.(type) {
	case *Postgres:
		st.searchCandidates = n
	case *SQLite:
		st.searchCandidates = n
	default:
		panic("not a store of this package")
	}
}
