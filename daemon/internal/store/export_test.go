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
