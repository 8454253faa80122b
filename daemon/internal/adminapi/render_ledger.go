package adminapi

import (
	"github.com/lifecycled/lifecycled/daemon/internal/deletion"
	"github.com/lifecycled/lifecycled/daemon/internal/ledger"
	"github.com/lifecycled/lifecycled/daemon/wire"
)

func resurrectionJSON(r *ledger.Resurrection) wire.Resurrection {
	out := wire.Resurrection{ID: r.ID.String(), TenantID: r.TenantID, ErasureJobID: r.ErasureJobID.String(),
		ReceiptSHA256: r.ReceiptSHA256, Counts: r.Counts, FoundAt: deletion.FormatTime(r.FoundAt),
		LastSeenAt: deletion.FormatTime(r.LastSeenAt), SeenCount: r.SeenCount, Action: string(r.Action)}
	if out.Counts == nil {
		out.Counts = map[string]int64{}
	}
	if r.ResolvedAt != nil {
		s := deletion.FormatTime(*r.ResolvedAt)
		out.ResolvedAt = &s
	}
	if r.ReeraseJobID != nil {
		s := r.ReeraseJobID.String()
		out.ReeraseJobID = &s
	}
	return out
}
