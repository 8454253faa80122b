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
		g := routeGroup{mux: mux, scope: ScopeTenant}
		g.handle("GET /api/v1/tenants/{tenant}/deletion/receipt", func(r *http.Request) (any, error) {
			rec, err := svc.Receipt(r.Context(), r.PathValue("tenant"))
			if err != nil {
				return nil, err
			}
			// Byte for byte as issued: a receipt verifies as it was signed.
			return answer{header: http.Header{"X-Receipt-Key-Id": {rec.KeyID}}, raw: append(append([]byte(nil), rec.Body...), '\n')}, nil
		})
		g.handle("GET /api/v1/receipts/key", func(r *http.Request) (any, error) {
			q := r.URL.Query()
			if err := onlyParams(q, "key_id"); err != nil {
				return nil, err
			}
			id, _, err := single(q, "key_id")
			if err != nil {
				return nil, err
			}
			k, err := svc.ReceiptKey(r.Context(), id)
			if err != nil {
				return nil, err
			}
			body := receipt.NewKeyBody(ed25519.PublicKey(k.PublicKey))
			body.RegisteredAt = deletion.FormatTime(k.RegisteredAt)
			return body, nil
		})
	}
}
