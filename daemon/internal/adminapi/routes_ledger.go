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
		g := routeGroup{mux: mux, scope: ScopeTenant}
		g.handle("GET "+ledgerPath, func(r *http.Request) (any, error) {
			if err := onlyParams(r.URL.Query()); err != nil {
				return nil, err
			}
			data, n, err := svc.Export(r.Context())
			if err != nil {
				return nil, err
			}
			// Byte for byte as signed.
			return answer{header: http.Header{"X-Ledger-Entries": {strconv.Itoa(n)}}, raw: append(data, '\n')}, nil
		})
		g.handle("POST "+ledgerPath, func(r *http.Request) (any, error) {
			if err := strictRequest(r, bodyAllowed); err != nil {
				return nil, err
			}
			data, err := io.ReadAll(r.Body)
			if err != nil {
				return nil, invalid("cannot read the ledger file: %v (at most %d bytes)", err, MaxLedgerBytes)
			}
			res, err := svc.Import(r.Context(), data)
			if err != nil {
				return nil, err
			}
			if l := loggerFrom(r); l != nil {
				l.Info("erasure ledger imported", "entries", res.Entries, "added", res.Added, "key_id", res.KeyID,
					"uid", uidField(callerUID(r)), "request_id", requestID(r))
			}
			return wire.LedgerImport{Entries: res.Entries, Added: res.Added, AlreadyPresent: res.Present, KeyID: res.KeyID}, nil
		})
		g.handle("POST /api/v1/erasures/reverify", func(r *http.Request) (any, error) {
			if err := strictRequest(r, bodyAllowed); err != nil {
				return nil, err
			}
			var empty struct{}
			if _, err := decodeBody(r, &empty, "empty"); err != nil {
				return nil, err
			}
			if err := svc.Reverify(); err != nil {
				return nil, err
			}
			return accepted(wire.Reverify{Requested: true,
				Message: "a re-verification pass starts now, unless another daemon runs one; watch lifecycled_erasure_reverified_tenants_total and the log"}), nil
		})
	}
}
