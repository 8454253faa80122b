package deletion

import (
	"context"
	"time"
)

// Notary issues the signed erasure receipt of a job that is COMPLETED and
// verified (package receipt). Issue must not block on the network: it is
// called between the last verification count and the write that records
// the job as COMPLETED.
type Notary interface {
	Issue(job *Job, finishedAt time.Time) (*SignedReceipt, error)
	// KeyID names the key this daemon signs with.
	KeyID() string
}

// ReceiptKey is a public key that signed receipts.
type ReceiptKey struct {
	ID           string
	Algorithm    string
	PublicKey    []byte
	RegisteredAt time.Time
}

// ReceiptKeyStore keeps every public key the daemons of a store signed
// with, so that receipts verify after a key rotation and whichever daemon
// issued them.
type ReceiptKeyStore interface {
	// RegisterReceiptKey records a key; registering it again changes nothing.
	RegisterReceiptKey(ctx context.Context, k ReceiptKey) error
	// ReceiptKey returns a registered key; derrors.ErrNotFound if unknown.
	ReceiptKey(ctx context.Context, id string) (*ReceiptKey, error)
}
