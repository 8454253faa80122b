package adminapi

import (
	"context"
	"crypto/ed25519"
	"net/http"

	"github.com/lifecycled/lifecycled/daemon/internal/deletion"
	"github.com/lifecycled/lifecycled/daemon/internal/receipt"
)

// Receipts is what the erasure receipt routes need.
type Receipts interface {
	Receipt(ctx context.Context, tenant string) (*deletion.SignedReceipt, error)
	ReceiptKey(ctx context.Context, id string) (*deletion.ReceiptKey, error)
}

// ReceiptRoutes serve signed erasure receipts and the keys that verify them.
func ReceiptRoutes(svc Receipts) func(*http.ServeMux) {
	return func(mux *http.ServeMux) {
		mux.HandleFunc("GET /api/v1/tenants/{tenant}/deletion/receipt", func(w http.ResponseWriter, r *http.Request) {
			rec, err := svc.Receipt(r.Context(), r.PathValue("tenant"))
			if err != nil {
				writeError(w, r, ScopeTenant, err)
				return
			}
			// Byte for byte as issued: a receipt verifies as it was signed.
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("X-Receipt-Key-Id", rec.KeyID)
			w.WriteHeader(http.StatusOK)
			_, _ = w.Write(append(append([]byte(nil), rec.Body...), '\n'))
		})
		mux.HandleFunc("GET /api/v1/receipts/key", func(w http.ResponseWriter, r *http.Request) {
			q := r.URL.Query()
			if err := onlyParams(q, "key_id"); err != nil {
				writeError(w, r, ScopeTenant, err)
				return
			}
			id, _, err := single(q, "key_id")
			if err != nil {
				writeError(w, r, ScopeTenant, err)
				return
			}
			k, err := svc.ReceiptKey(r.Context(), id)
			if err != nil {
				writeError(w, r, ScopeTenant, err)
				return
			}
			body := receipt.NewKeyBody(ed25519.PublicKey(k.PublicKey))
			body.RegisteredAt = deletion.FormatTime(k.RegisteredAt)
			writeJSON(w, http.StatusOK, body)
		})
	}
}
