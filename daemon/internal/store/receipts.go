package store

import (
	"context"
	"fmt"

	"github.com/google/uuid"

	"github.com/lifecycled/lifecycled/daemon/internal/deletion"
)

// receiptSQL is the SQL of erasure receipts and their keys in one dialect
// (postgres_receipts.go, sqlite_receipts.go).
type receiptSQL struct {
	insert      string // (job id, key id, body, now); stored once
	get         string // (job id) -> key id, body
	registerKey string // (key id, algorithm, public key, now)
	key         string // (key id)
}

// DeletionReceipt implements deletion.JobStore.
func (s *sqlStore) DeletionReceipt(ctx context.Context, jobID uuid.UUID) (*deletion.SignedReceipt, error) {
	var r deletion.SignedReceipt
	if err := s.db.queryRow(ctx, s.sql.receipts.get, jobID).Scan(&r.KeyID, &r.Body); err != nil {
		return nil, fmt.Errorf("receipt of job %s: %w", jobID, err)
	}
	return &r, nil
}

// RegisterReceiptKey implements deletion.ReceiptKeyStore.
func (s *sqlStore) RegisterReceiptKey(ctx context.Context, k deletion.ReceiptKey) error {
	if _, err := s.db.exec(ctx, s.sql.receipts.registerKey, k.ID, k.Algorithm, k.PublicKey, k.RegisteredAt); err != nil {
		return fmt.Errorf("register receipt key %s: %w", k.ID, err)
	}
	return nil
}

// ReceiptKey implements deletion.ReceiptKeyStore.
func (s *sqlStore) ReceiptKey(ctx context.Context, id string) (*deletion.ReceiptKey, error) {
	var k deletion.ReceiptKey
	if err := s.db.queryRow(ctx, s.sql.receipts.key, id).Scan(&k.ID, &k.Algorithm, &k.PublicKey, &k.RegisteredAt); err != nil {
		return nil, fmt.Errorf("receipt key %q: %w", id, err)
	}
	return &k, nil
}
