package sqlstore

import (
	"context"
	"fmt"

	"github.com/google/uuid"

	"github.com/lifecycled/lifecycled/daemon/internal/deletion"
)

// ReceiptSQL is the SQL of erasure receipts and their keys in one dialect
// (postgres/receipts.go, sqlite/receipts.go).
type ReceiptSQL struct {
	Insert      string // (job id, key id, body, now); stored once
	Get         string // (job id) -> key id, body
	RegisterKey string // (key id, algorithm, public key, now)
	Key         string // (key id)
}

// DeletionReceipt implements deletion.JobStore.
func (s *Store) DeletionReceipt(ctx context.Context, jobID uuid.UUID) (*deletion.SignedReceipt, error) {
	var r deletion.SignedReceipt
	if err := s.conn.QueryRow(ctx, s.sql.Receipts.Get, jobID).Scan(&r.KeyID, &r.Body); err != nil {
		return nil, fmt.Errorf("receipt of job %s: %w", jobID, err)
	}
	return &r, nil
}

// RegisterReceiptKey implements deletion.ReceiptKeyStore.
func (s *Store) RegisterReceiptKey(ctx context.Context, k deletion.ReceiptKey) error {
	if _, err := s.conn.Exec(ctx, s.sql.Receipts.RegisterKey, k.ID, k.Algorithm, k.PublicKey, k.RegisteredAt); err != nil {
		return fmt.Errorf("register receipt key %s: %w", k.ID, err)
	}
	return nil
}

// ReceiptKey implements deletion.ReceiptKeyStore.
func (s *Store) ReceiptKey(ctx context.Context, id string) (*deletion.ReceiptKey, error) {
	var k deletion.ReceiptKey
	if err := s.conn.QueryRow(ctx, s.sql.Receipts.Key, id).Scan(&k.ID, &k.Algorithm, &k.PublicKey, &k.RegisteredAt); err != nil {
		return nil, fmt.Errorf("receipt key %q: %w", id, err)
	}
	return &k, nil
}
