package sqlstore

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/lifecycled/lifecycled/daemon/internal/deletion"
	"github.com/lifecycled/lifecycled/daemon/internal/dlq"
)

// newID returns a time-ordered UUIDv7, so that rows created together list in
// the order they arrived and index inserts stay at the right edge.
func newID() uuid.UUID {
	return uuid.Must(uuid.NewV7())
}

func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// storedHeader is how a header is kept in the headers column (a JSON array):
// the key as text when it is UTF-8 ("key"), else as base64 ("key_b64"); the
// value always as base64. Rows written before header keys were bytes hold
// only "key", so both forms are read.
type storedHeader struct {
	Key    *string `json:"key,omitempty"`
	KeyB64 []byte  `json:"key_b64,omitempty"`
	Value  []byte  `json:"value"`
	Type   string  `json:"type,omitempty"`
}

// StoredName is the field a header's name is stored in and what it holds
// there: the name as text when it is UTF-8, else its base64. Both the
// writer (headersJSON) and the header filters (dlq_search.go) use it.
func StoredName(name string) (field, stored string) {
	if utf8.ValidString(name) {
		return "key", name
	}
	return "key_b64", base64.StdEncoding.EncodeToString([]byte(name))
}

func headersJSON(hs []dlq.Header) string {
	if len(hs) == 0 {
		return "[]"
	}
	out := make([]storedHeader, len(hs))
	for i, h := range hs {
		out[i].Value, out[i].Type = h.Value, h.Type
		if field, stored := StoredName(string(h.Key)); field == "key" {
			out[i].Key = &stored
		} else {
			out[i].KeyB64 = h.Key
		}
	}
	b, err := json.Marshal(out)
	if err != nil {
		// []byte and valid UTF-8 strings always encode; this cannot happen.
		panic(fmt.Sprintf("encode headers: %v", err))
	}
	return string(b)
}

func decodeHeaders(b []byte) ([]dlq.Header, error) {
	if len(b) == 0 || string(b) == "[]" {
		return nil, nil
	}
	var in []storedHeader
	if err := json.Unmarshal(b, &in); err != nil {
		return nil, err
	}
	out := make([]dlq.Header, len(in))
	for i, h := range in {
		out[i].Value, out[i].Type = h.Value, h.Type
		switch {
		case h.KeyB64 != nil:
			out[i].Key = h.KeyB64
		case h.Key != nil:
			out[i].Key = []byte(*h.Key)
		default:
			out[i].Key = []byte{}
		}
	}
	return out, nil
}

// attemptJSON encodes one history entry for the attempt_log column.
func attemptJSON(a *dlq.Attempt) *string {
	if a == nil {
		return nil
	}
	b, err := json.Marshal(a)
	if err != nil {
		panic(fmt.Sprintf("encode attempt: %v", err))
	}
	s := string(b)
	return &s
}

func attemptLog(a *dlq.Attempt) string {
	if a == nil {
		return "[]"
	}
	return "[" + *attemptJSON(a) + "]"
}

func decodeAttempts(b []byte) ([]dlq.Attempt, error) {
	if len(b) == 0 || string(b) == "[]" {
		return nil, nil
	}
	var out []dlq.Attempt
	err := json.Unmarshal(b, &out)
	return out, err
}

// deleterBreakdown is how a deleter's per-key counts are stored (one JSON
// column), next to initial_count and deleted_count.
type deleterBreakdown struct {
	Total   map[string]int64 `json:"total,omitempty"`
	Deleted map[string]int64 `json:"deleted,omitempty"`
	// Proof is what the deleter's last Delete checked of its own.
	Proof []deletion.ProofCheck `json:"proof,omitempty"`
}

// encodeDeleterDetail returns the breakdown and verification columns of a
// deleter's row as JSON text; nil is NULL (nothing known).
func encodeDeleterDetail(st deletion.DeleterState) (breakdown, verification *string, err error) {
	if st.TotalBreakdown != nil || st.DeletedBreakdown != nil || st.Proof != nil {
		if breakdown, err = jsonText(deleterBreakdown{Total: st.TotalBreakdown, Deleted: st.DeletedBreakdown, Proof: st.Proof}); err != nil {
			return nil, nil, fmt.Errorf("encode breakdown of %s: %w", st.Name, err)
		}
	}
	if st.Verification != nil {
		if verification, err = jsonText(st.Verification); err != nil {
			return nil, nil, fmt.Errorf("encode verification of %s: %w", st.Name, err)
		}
	}
	return breakdown, verification, nil
}

// Text is JSON as SQL text; nil is NULL.
func Text(b json.RawMessage) *string {
	if b == nil {
		return nil
	}
	s := string(b)
	return &s
}

func jsonText(v any) (*string, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	s := string(b)
	return &s, nil
}

// decodeDeleterDetail fills a deleter's breakdowns and verification from
// its columns.
func decodeDeleterDetail(d *deletion.DeleterState, breakdown, verification []byte) error {
	if len(breakdown) > 0 {
		var b deleterBreakdown
		if err := json.Unmarshal(breakdown, &b); err != nil {
			return fmt.Errorf("decode breakdown of %s: %w", d.Name, err)
		}
		d.TotalBreakdown, d.DeletedBreakdown, d.Proof = nonNilCounts(b.Total), nonNilCounts(b.Deleted), b.Proof
	}
	if len(verification) > 0 {
		var v deletion.Verification
		if err := json.Unmarshal(verification, &v); err != nil {
			return fmt.Errorf("decode verification of %s: %w", d.Name, err)
		}
		v.Breakdown = nonNilCounts(v.Breakdown)
		d.Verification = &v
	}
	return nil
}

func nonNilCounts(m map[string]int64) map[string]int64 {
	if m == nil {
		return map[string]int64{}
	}
	return m
}
