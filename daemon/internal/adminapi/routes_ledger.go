package adminapi

import (
	"context"
	"io"
	"net/http"
	"strconv"

	"github.com/lifecycled/lifecycled/daemon/internal/ledger"
	"github.com/lifecycled/lifecycled/daemon/wire"
)

// Ledger is what the erasure ledger routes need.
type Ledger interface {
	Export(ctx context.Context) ([]byte, int, error)
	Import(ctx context.Context, data []byte) (ledger.ImportResult, error)
	Resurrections(ctx context.Context, tenant string) ([]*ledger.Resurrection, error)
	Reverify() error
}

// MaxLedgerBytes caps the body of a ledger import, which carries the whole
// ledger (about 200 bytes an entry): other bodies stay under MaxBodyBytes.
const MaxLedgerBytes = 256 << 20

// ledgerPath is the route of the signed ledger file.
const ledgerPath = "/api/v1/erasures/ledger"

// LedgerRoutes serve the signed erasure ledger and re-verification.
func LedgerRoutes(svc Ledger) func(*http.ServeMux) {
	return func(mux *http.ServeMux) {
		mux.HandleFunc("GET "+ledgerPath, func(w http.ResponseWriter, r *http.Request) {
			if err := onlyParams(r.URL.Query()); err != nil {
				writeError(w, r, ScopeTenant, err)
				return
			}
			data, n, err := svc.Export(r.Context())
			if err != nil {
				writeError(w, r, ScopeTenant, err)
				return
			}
			// Byte for byte as signed.
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("X-Ledger-Entries", strconv.Itoa(n))
			w.WriteHeader(http.StatusOK)
			_, _ = w.Write(append(data, '\n'))
		})
		mux.HandleFunc("POST "+ledgerPath, func(w http.ResponseWriter, r *http.Request) {
			if err := strictRequest(r, bodyAllowed); err != nil {
				writeError(w, r, ScopeTenant, err)
				return
			}
			data, err := io.ReadAll(r.Body)
			if err != nil {
				writeError(w, r, ScopeTenant, invalid("cannot read the ledger file: %v (at most %d bytes)", err, MaxLedgerBytes))
				return
			}
			res, err := svc.Import(r.Context(), data)
			if err != nil {
				writeError(w, r, ScopeTenant, err)
				return
			}
			if l := loggerFrom(r); l != nil {
				l.Info("erasure ledger imported", "entries", res.Entries, "added", res.Added, "key_id", res.KeyID,
					"uid", uidField(callerUID(r)), "request_id", requestID(r))
			}
			writeJSON(w, http.StatusOK, wire.LedgerImport{Entries: res.Entries, Added: res.Added, AlreadyPresent: res.Present, KeyID: res.KeyID})
		})
		mux.HandleFunc("POST /api/v1/erasures/reverify", func(w http.ResponseWriter, r *http.Request) {
			if err := strictRequest(r, bodyAllowed); err != nil {
				writeError(w, r, ScopeTenant, err)
				return
			}
			var empty struct{}
			if _, err := decodeBody(r, &empty, "empty"); err != nil {
				writeError(w, r, ScopeTenant, err)
				return
			}
			if err := svc.Reverify(); err != nil {
				writeError(w, r, ScopeTenant, err)
				return
			}
			writeJSON(w, http.StatusAccepted, wire.Reverify{Requested: true,
				Message: "a re-verification pass starts now, unless another daemon runs one; watch lifecycled_erasure_reverified_tenants_total and the log"})
		})
	}
}
