package receipt

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/internal/deletion"
)

var t0 = time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)

// completedJob is a job as the runner leaves it when it is COMPLETED and
// verified: two deleters, one with a breakdown whose keys need escaping.
func completedJob() *deletion.Job {
	started := t0.Add(time.Minute)
	return &deletion.Job{
		ID: uuid.MustParse("0195e5a0-0000-7000-8000-000000000001"), TenantID: "44444444-dddd-4ddd-8ddd-444444444444",
		Status: deletion.JobCompleted, Attempts: 2, Verified: true, CreatedAt: t0, StartedAt: &started,
		Deleters: []deletion.DeleterState{
			{Name: "redis:sessions", Status: deletion.DeleterSucceeded, DeletedCount: 5, Total: 5,
				DeletedBreakdown: map[string]int64{"session:{tenant}:*": 3, "csrf:{tenant}:*": 2},
				Verification:     &deletion.Verification{Count: 0, Breakdown: map[string]int64{"session:{tenant}:*": 0, "csrf:{tenant}:*": 0}}},
			{Name: "postgres:workflows", Status: deletion.DeleterSucceeded, DeletedCount: 84, Total: 84,
				DeletedBreakdown: map[string]int64{`"Quoted"."Mixed Case"`: 40, "public.workflow_instances": 44},
				Verification:     &deletion.Verification{Count: 0, Breakdown: map[string]int64{`"Quoted"."Mixed Case"`: 0, "public.workflow_instances": 0}}},
		},
	}
}

func plugins() map[string]Plugin {
	return map[string]Plugin{
		"redis:sessions":     {Plugin: "redis", Version: "0.4.0", SHA256: strings.Repeat("a", 64), ConfigSHA256: "sha256:" + strings.Repeat("b", 64)},
		"postgres:workflows": {Plugin: "postgres", Version: "0.4.0", SHA256: strings.Repeat("c", 64), ConfigSHA256: "sha256:" + strings.Repeat("d", 64)},
	}
}

func issue(t *testing.T) (body []byte, pub ed25519.PublicKey) {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	n := NewNotary(priv, "host/1/abcd", plugins)
	n.now = func() time.Time { return t0.Add(3 * time.Minute) }
	rec, err := n.Issue(completedJob(), t0.Add(2*time.Minute))
	require.NoError(t, err)
	require.Equal(t, KeyID(pub), rec.KeyID)
	return rec.Body, pub
}

func keyOf(pub ed25519.PublicKey) KeyResolver {
	return func(string) (ed25519.PublicKey, string, error) { return pub, "the test", nil }
}

func TestIssuedReceiptVerifies(t *testing.T) {
	body, pub := issue(t)
	rep := Verify(body, keyOf(pub), Options{})
	require.True(t, rep.Valid, "%+v", rep.Checks)
	names := []string{}
	for _, c := range rep.Checks {
		require.True(t, c.OK, "%+v", c)
		names = append(names, c.Name)
	}
	require.Equal(t, []string{"json", "form", "key", "signature", "content", "layout"}, names, "every check ran")
	doc := rep.Doc
	require.Equal(t, "44444444-dddd-4ddd-8ddd-444444444444", doc.TenantID)
	require.EqualValues(t, 89, doc.DeletedTotal)
	require.Equal(t, "postgres:workflows", doc.Deleters[0].Name, "deleters in name order")
	require.Equal(t, "0.4.0", doc.Deleters[0].PluginVersion)
	require.Equal(t, "2026-11-01T12:01:00.000+00:00", doc.StartedAt)
	require.Equal(t, "2026-11-01T12:02:00.000+00:00", doc.FinishedAt)
	require.Nil(t, doc.NotBefore)
	// The fields read as they are: the body is plain JSON.
	require.Contains(t, string(body), `"tenant_id":"44444444-dddd-4ddd-8ddd-444444444444"`)
	require.Contains(t, string(body), `"deleted":{"\"Quoted\".\"Mixed Case\"":40,"public.workflow_instances":44}`)
	// A newline after it (as a shell redirect or the API leaves it) is fine.
	require.True(t, Verify(append(body, '\n'), keyOf(pub), Options{}).Valid)
}

// failedCheck returns the check that failed.
func failedCheck(t *testing.T, rep Report) Check {
	t.Helper()
	require.False(t, rep.Valid)
	last := rep.Checks[len(rep.Checks)-1]
	require.False(t, last.OK, "%+v", rep.Checks)
	return last
}

func TestTamperedReceiptsFail(t *testing.T) {
	body, pub := issue(t)
	other, _, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	tests := map[string]struct {
		body  []byte
		key   KeyResolver
		check string
		want  string
	}{
		"changed count": {bytes.Replace(body, []byte(`"deleted_count":84`), []byte(`"deleted_count":85`), 1), keyOf(pub),
			"signature", "does NOT match"},
		"changed tenant id": {bytes.Replace(body, []byte(`44444444-dddd`), []byte(`44444444-eeee`), 1), keyOf(pub),
			"signature", "does NOT match"},
		"wrong key": {body, keyOf(other), "key", "but " + KeyID(pub) + " signed this receipt"},
		"wrong key named in the receipt": {bytes.Replace(body, []byte(KeyID(pub)), []byte(KeyID(other)), 1), keyOf(other),
			"signature", "does NOT match"},
		"truncated":         {body[:len(body)/2], keyOf(pub), "json", "end of JSON"},
		"truncated by one":  {body[:len(body)-1], keyOf(pub), "json", "end of JSON"},
		"empty":             {nil, keyOf(pub), "json", "end of JSON"},
		"signature dropped": {dropSignature(t, body), keyOf(pub), "form", `no "signature" field`},
		"key unknown": {body, func(string) (ed25519.PublicKey, string, error) { return nil, "", errors.New("no such key") },
			"key", "no such key"},
		"reformatted": {bytes.ReplaceAll(body, []byte(`,"`), []byte(`, "`)), keyOf(pub), "layout", "--allow-reformatted"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c := failedCheck(t, Verify(tc.body, tc.key, Options{}))
			require.Equal(t, tc.check, c.Name, "%+v", c)
			require.Contains(t, c.Detail, tc.want)
		})
	}
	require.True(t, Verify(bytes.ReplaceAll(body, []byte(`,"`), []byte(`, "`)), keyOf(pub), Options{AllowReformatted: true}).Valid,
		"a new layout of the same content passes when allowed")
}

func dropSignature(t *testing.T, body []byte) []byte {
	v, err := Parse(body)
	require.NoError(t, err)
	delete(v.(map[string]any), "signature")
	out, err := Canonical(v)
	require.NoError(t, err)
	return out
}

// TestAnyChangedByteFails changes every byte of an issued receipt, one at
// a time, in two ways, and every result fails verification.
func TestAnyChangedByteFails(t *testing.T) {
	body, pub := issue(t)
	for i := range body {
		for _, change := range []func(byte) byte{
			func(b byte) byte { return b ^ 0x01 },
			func(b byte) byte {
				if b == ' ' {
					return '\n'
				}
				return ' '
			},
		} {
			mutated := bytes.Clone(body)
			mutated[i] = change(mutated[i])
			if bytes.Equal(mutated, body) {
				continue
			}
			if rep := Verify(mutated, keyOf(pub), Options{}); rep.Valid {
				t.Fatalf("byte %d changed from %q to %q and the receipt still verifies", i, body[i], mutated[i])
			}
		}
	}
}

func TestContentChecks(t *testing.T) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	pub := priv.Public().(ed25519.PublicKey)
	base := build(completedJob(), t0.Add(2*time.Minute), t0.Add(3*time.Minute), plugins(), Daemon{Version: "dev"}, KeyID(pub))
	tests := map[string]struct {
		edit func(*Document)
		want string
	}{
		"not verified":    {func(d *Document) { d.Verified = false }, "verified false"},
		"left over":       {func(d *Document) { d.Deleters[1].Verification.Count = 1 }, "counted 1 items left"},
		"left in a table": {func(d *Document) { d.Deleters[0].Verification.Breakdown["x"] = 2 }, "2 items left in x"},
		"total off":       {func(d *Document) { d.DeletedTotal++ }, "not the sum"},
		"no deleters":     {func(d *Document) { d.Deleters = nil; d.DeletedTotal = 0 }, "names no deleter"},
		"time order":      {func(d *Document) { d.StartedAt = "2026-10-01T00:00:00.000+00:00" }, "before the time"},
		"unknown method":  {func(d *Document) { d.Deleters[0].Verification.Method = "trust" }, `method "trust"`},
		"proof without checks": {func(d *Document) {
			d.Deleters[0].Verification.Method, d.Deleters[0].Verification.Checks = deletion.MethodIndependent, nil
		}, "independent proof with no checks"},
		"a check found rows": {func(d *Document) {
			d.Deleters[0].Verification.Method = deletion.MethodIndependent
			d.Deleters[0].Verification.Checks = []ProofCheck{{Kind: "identities", Target: "public.t", Checked: 3, Found: 1}}
		}, "identities check of public.t found 1 items left"},
		"breakdown off its count": {func(d *Document) {
			d.Deleters[1].Deleted = map[string]int64{"public.workflow_instances": 1}
		}, "not the sum of its breakdown"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			doc := base
			doc.Deleters = append([]Deleter(nil), base.Deleters...)
			for i := range doc.Deleters {
				doc.Deleters[i].Verification.Breakdown = counts(doc.Deleters[i].Verification.Breakdown)
				doc.Deleters[i].Deleted = counts(doc.Deleters[i].Deleted)
			}
			tc.edit(&doc)
			// Signed as it is: the signature is right, the claim is not.
			body, err := Sign(doc, priv)
			require.NoError(t, err)
			c := failedCheck(t, Verify(body, keyOf(pub), Options{}))
			require.Equal(t, "content", c.Name, "%+v", c)
			require.Contains(t, c.Detail, tc.want)
		})
	}
}

// A receipt signs deletion's Verification as it is: a field added there
// would change what receipts sign without a new version.
func TestVerificationFieldsAreTheSignedOnes(t *testing.T) {
	v := Verification{Count: 1, Breakdown: map[string]int64{"public.t": 1}, Method: deletion.MethodIndependent,
		Checks: []ProofCheck{{Kind: "identities", Target: "public.t", Checked: 3, Found: 1, Detail: "d"}}}
	b, err := json.Marshal(v)
	require.NoError(t, err)
	require.JSONEq(t, `{"count":1,"breakdown":{"public.t":1},"method":"independent",
		"checks":[{"kind":"identities","target":"public.t","checked":3,"found":1,"detail":"d"}]}`, string(b))
}
