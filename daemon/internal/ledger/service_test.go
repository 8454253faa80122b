package ledger_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/internal/deletion"
	"github.com/lifecycled/lifecycled/daemon/internal/derrors"
	"github.com/lifecycled/lifecycled/daemon/internal/ledger"
	"github.com/lifecycled/lifecycled/daemon/internal/receipt"
	"github.com/lifecycled/lifecycled/daemon/internal/store"
	"github.com/lifecycled/lifecycled/daemon/internal/store/storetest"
)

func register(t *testing.T, ctx context.Context, st store.Store, n *receipt.Notary) {
	t.Helper()
	require.NoError(t, st.RegisterReceiptKey(ctx, deletion.ReceiptKey{ID: n.KeyID(), Algorithm: receipt.Algorithm,
		PublicKey: n.PublicKey(), RegisteredAt: t0}))
}

// TestExportImportAcrossStores: a ledger exported from one store imports
// into another (a restored one) signed by a key that store knows; again,
// it adds nothing; a tampered file or one signed by an unknown key fails
// with its error and changes nothing.
func TestExportImportAcrossStores(t *testing.T) {
	storetest.Each(t, func(t *testing.T, ctx context.Context, st store.Store) {
		n, stranger := newNotary(t), newNotary(t)
		register(t, ctx, st, n)
		src := storetest.Open(t, st.Dialect())
		register(t, ctx, src, n)
		in := sampleEntries()
		_, err := src.ImportLedger(ctx, in, t0)
		require.NoError(t, err)
		data, count, err := ledger.NewService(src, src, n, "d1", func() string { return "uuid" }, nil).Export(ctx)
		require.NoError(t, err)
		require.Equal(t, 3, count)

		svc := ledger.NewService(st, st, n, "d2", func() string { return "uuid" }, nil)
		// The restored store already has one of them.
		_, err = st.ImportLedger(ctx, in[:1], t0)
		require.NoError(t, err)
		before, err := st.LedgerEntries(ctx)
		require.NoError(t, err)

		tampered := bytes.Replace(data, []byte(in[2].TenantID), []byte(uuid.NewString()), 1)
		_, err = svc.Import(ctx, tampered)
		require.ErrorIs(t, err, ledger.ErrInvalidFile)
		require.ErrorIs(t, err, derrors.ErrInvalid)
		require.ErrorContains(t, err, "signature")
		foreign, err := ledger.Encode(in, t0, receipt.Daemon{}, stranger)
		require.NoError(t, err)
		_, err = svc.Import(ctx, foreign)
		require.ErrorIs(t, err, ledger.ErrKeyUnknown)
		require.ErrorIs(t, err, derrors.ErrInvalid)
		after, err := st.LedgerEntries(ctx)
		require.NoError(t, err)
		require.Equal(t, before, after, "a refused file changes nothing")

		res, err := svc.Import(ctx, data)
		require.NoError(t, err)
		require.Equal(t, ledger.ImportResult{Entries: 3, Added: 2, Present: 1, KeyID: n.KeyID()}, res)
		res, err = svc.Import(ctx, data)
		require.NoError(t, err)
		require.Equal(t, ledger.ImportResult{Entries: 3, Added: 0, Present: 3, KeyID: n.KeyID()}, res)
		got, err := st.LedgerEntries(ctx)
		require.NoError(t, err)
		require.Len(t, got, 3)

		// Exports of the same ledger verify and carry the same entries.
		again, _, err := svc.Export(ctx)
		require.NoError(t, err)
		rep := ledger.Verify(again, keysOf(n), ledger.CanonicalIn("uuid"))
		require.True(t, rep.Valid)
		require.Len(t, rep.Entries, 3)

		_, err = svc.Resurrections(ctx, "not-a-uuid")
		require.ErrorIs(t, err, derrors.ErrInvalid)
		require.ErrorIs(t, svc.Reverify(), derrors.ErrConflict, "no reverifier on this service")
	})
}
