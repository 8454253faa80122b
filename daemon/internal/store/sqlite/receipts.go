package sqlite

import "github.com/lifecycled/lifecycled/daemon/internal/store/sqlstore"

var sqliteReceipts = sqlstore.ReceiptSQL{
	Insert: `
		INSERT INTO deletion_receipts (job_id, key_id, body, issued_at) VALUES (?1, ?2, ?3, ?4)
		ON CONFLICT (job_id) DO NOTHING`,
	Get: `SELECT key_id, body FROM deletion_receipts WHERE job_id = ?1`,
	RegisterKey: `
		INSERT INTO receipt_keys (key_id, algorithm, public_key, registered_at) VALUES (?1, ?2, ?3, ?4)
		ON CONFLICT (key_id) DO NOTHING`,
	Key: `SELECT key_id, algorithm, public_key, registered_at FROM receipt_keys WHERE key_id = ?1`,
}
