package ledger

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"time"

	"github.com/lifecycled/lifecycled/daemon/internal/buildinfo"
	"github.com/lifecycled/lifecycled/daemon/internal/deletion"
	"github.com/lifecycled/lifecycled/daemon/internal/derrors"
	"github.com/lifecycled/lifecycled/daemon/internal/receipt"
)

// Service is what the admin API calls for the ledger.
type Service struct {
	store  Store
	keys   deletion.ReceiptKeyStore
	signer Signer
	daemon string
	format func() string
	rv     *Reverifier
	now    func() time.Time
}

// NewService wires the ledger operations: signer signs exports (nil: no
// export), keys resolves the keys of imported files, format returns
// daemon.tenant_id_format, rv runs passes asked for (nil: none).
func NewService(store Store, keys deletion.ReceiptKeyStore, signer Signer, daemonID string, format func() string, rv *Reverifier) *Service {
	return &Service{store: store, keys: keys, signer: signer, daemon: daemonID, format: format, rv: rv, now: time.Now}
}

// Export returns the whole ledger as a signed file and its entry count.
func (s *Service) Export(ctx context.Context) ([]byte, int, error) {
	if s.signer == nil {
		return nil, 0, fmt.Errorf("%w: this daemon has no receipt key to sign the ledger with", derrors.ErrConflict)
	}
	entries, err := s.store.LedgerEntries(ctx)
	if err != nil {
		return nil, 0, err
	}
	bi := buildinfo.Get()
	data, err := Encode(entries, s.now(), receipt.Daemon{Version: bi.Version, Commit: bi.Commit, ID: s.daemon}, s.signer)
	if err != nil {
		return nil, 0, fmt.Errorf("sign the ledger: %w", err)
	}
	return data, len(entries), nil
}

// ImportResult is what an import did.
type ImportResult struct {
	// Entries is how many the file holds; Added how many were new here;
	// Present how many the ledger had already (an import is idempotent).
	Entries, Added, Present int
	KeyID                   string
}

// Import verifies a ledger file against the receipt keys registered in
// this state store and adds the entries the ledger lacks, all in one
// transaction. A file that does not verify changes nothing and fails with
// an error matching ErrInvalidFile or ErrKeyUnknown.
func (s *Service) Import(ctx context.Context, data []byte) (ImportResult, error) {
	rep := Verify(data, s.keyResolver(ctx), CanonicalIn(s.format()))
	if !rep.Valid {
		return ImportResult{}, rep.Err()
	}
	added, err := s.store.ImportLedger(ctx, rep.Entries, s.now())
	if err != nil {
		return ImportResult{}, err
	}
	return ImportResult{Entries: len(rep.Entries), Added: added, Present: len(rep.Entries) - added, KeyID: rep.File.KeyID}, nil
}

// keyResolver finds a file's key among those registered in the store: the
// keys every daemon of the store signed with (this one's is registered at
// its start).
func (s *Service) keyResolver(ctx context.Context) receipt.KeyResolver {
	return func(keyID string) (ed25519.PublicKey, string, error) {
		k, err := s.keys.ReceiptKey(ctx, keyID)
		if errors.Is(err, derrors.ErrNotFound) {
			return nil, "", errors.New("no such receipt key is registered in this state store (a daemon of this store never signed with it)")
		}
		if err != nil {
			return nil, "", err
		}
		if k.Algorithm != receipt.Algorithm || len(k.PublicKey) != ed25519.PublicKeySize {
			return nil, "", fmt.Errorf("registered key is %s, not %s", k.Algorithm, receipt.Algorithm)
		}
		return ed25519.PublicKey(k.PublicKey), "the state store's registered keys", nil
	}
}

// Resurrections lists a tenant's resurrections, newest first, whatever
// spelling of the id the caller used.
func (s *Service) Resurrections(ctx context.Context, tenant string) ([]*Resurrection, error) {
	t, err := deletion.CanonicalTenantID(tenant, s.format())
	if err != nil {
		return nil, err
	}
	return s.store.Resurrections(ctx, t)
}

// Reverify asks for a re-verification pass now.
func (s *Service) Reverify() error {
	if s.rv == nil {
		return fmt.Errorf("%w: re-verification does not run on this daemon", derrors.ErrConflict)
	}
	s.rv.Reverify()
	return nil
}
