package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/internal/testsvc"
	"github.com/lifecycled/lifecycled/sdk"
)

func (e *schemaEnv) deleteChecked(t *testing.T, tenant, fingerprint string) (*sdk.DeleteResponse, error) {
	return e.d.Delete(testsvc.Context(t, 5*time.Minute), &sdk.DeleteRequest{TenantID: tenant, PlanFingerprint: fingerprint}, func(int64) {})
}

// TestDeleteRefusesAPlanThatChangedAfterTheCheck: the daemon checks the
// plan at the start of an attempt, then calls Delete. A table with the
// tenant column created in between was deleted from without anyone having
// approved it (found by an outside attack: in discover mode Delete read the
// schema again and took the new table in). Delete now gets the checked
// fingerprint, recomputes its own from the schema it deletes with, and
// refuses, naming the table, with nothing deleted.
func TestDeleteRefusesAPlanThatChangedAfterTheCheck(t *testing.T) {
	t.Parallel()
	e := newSchemaEnv(t, driftSchema)
	e.mustConfigure(t, map[string]any{"discover": true, "ignore_tables": []any{"audit_log"}})
	checked := e.mustPlan(t, "a").Fingerprint

	// Between the daemon's check and its Delete call.
	e.exec(t, `CREATE TABLE invoices (id int PRIMARY KEY, tenant_id text NOT NULL); INSERT INTO invoices VALUES (1, 'a'), (2, 'b')`)

	before := e.snapshot(t)
	_, err := e.deleteChecked(t, "a", checked)
	require.Error(t, err, "Delete with the fingerprint checked before the table was added must be refused")
	t.Logf("refusal: %v", err)
	require.Equal(t, before, e.snapshot(t), "a refused Delete changes nothing: every tenant's rows, checksummed, are as they were")
	require.Equal(t, sdk.ClassPermanent, sdk.ClassOf(err), "%v", err)
	require.ErrorIs(t, err, sdk.ErrInvalidConfig)
	deleted, _ := sdk.DeletedBefore(err)
	require.Zero(t, deleted)
	require.Contains(t, err.Error(), "the plan changed between the daemon's plan check and Delete")
	require.Contains(t, err.Error(), checked)
	require.Contains(t, err.Error(), `new: table "public.invoices" tenant "tenant_id"`, "the refusal names what changed")

	// The new plan, checked again, deletes the new table too.
	now := e.mustPlan(t, "a").Fingerprint
	require.NotEqual(t, checked, now)
	resp, err := e.deleteChecked(t, "a", now)
	require.NoError(t, err)
	require.Equal(t, int64(1), resp.Breakdown["public.invoices"])
	require.Equal(t, []string{"invoices (2,b)"}, e.rowsWhere(t, "public.invoices", "true"), "tenant b's row stays")
}

// A changed key is a changed plan as well: an outside table's key into
// the deleted tables that becomes ON DELETE CASCADE makes Delete reach its
// rows, which the checked plan did not.
func TestDeleteRefusesAKeyChangedAfterTheCheck(t *testing.T) {
	t.Parallel()
	e := newSchemaEnv(t, driftSchema)
	cfg := map[string]any{"tables": []any{"notes", "accounts"}, "ignore_tables": []any{"audit_log", "note_reactions"}}
	e.mustConfigure(t, cfg)
	checked := e.mustPlan(t, "a").Fingerprint
	e.exec(t, `ALTER TABLE notes DROP CONSTRAINT notes_account_id_fkey,
		ADD CONSTRAINT notes_account_id_fkey FOREIGN KEY (account_id) REFERENCES accounts (id) ON DELETE CASCADE`)
	before := e.snapshot(t)
	_, err := e.deleteChecked(t, "a", checked)
	require.Error(t, err)
	require.Equal(t, before, e.snapshot(t))
	require.Equal(t, sdk.ClassPermanent, sdk.ClassOf(err))
	require.Contains(t, err.Error(), "notes_account_id_fkey")
}

// Without a fingerprint (a daemon built before the field) Delete deletes
// as it always did; with the current one it deletes.
func TestDeleteWithoutAFingerprintDoesNotCheck(t *testing.T) {
	t.Parallel()
	e := newSchemaEnv(t, driftSchema)
	e.mustConfigure(t, map[string]any{"discover": true, "ignore_tables": []any{"audit_log"}})
	e.exec(t, `CREATE TABLE invoices (id int PRIMARY KEY, tenant_id text NOT NULL); INSERT INTO invoices VALUES (1, 'a'), (2, 'b')`)
	e.expectErased(t, "a", victimRows{
		"public.invoices": "x.tenant_id = 'a'",
		"public.notes":    "x.tenant_id = 'a'",
		"public.accounts": "x.tenant_id = 'a'",
	})
	fp := e.mustPlan(t, "b").Fingerprint
	resp, err := e.deleteChecked(t, "b", fp)
	require.NoError(t, err)
	require.Equal(t, int64(3), resp.DeletedCount)
}

// A fingerprint this plugin process never computed (it restarted since the
// check) is refused all the same; the error says why it cannot name the change.
func TestDeleteRefusesAnUnknownFingerprint(t *testing.T) {
	t.Parallel()
	e := newSchemaEnv(t, driftSchema)
	e.mustConfigure(t, map[string]any{"discover": true, "ignore_tables": []any{"audit_log"}})
	before := e.snapshot(t)
	_, err := e.deleteChecked(t, "a", "sha256:0000000000000000000000000000000000000000000000000000000000000000")
	require.Error(t, err)
	require.Equal(t, before, e.snapshot(t))
	require.Equal(t, sdk.ClassPermanent, sdk.ClassOf(err))
	require.Contains(t, err.Error(), "did not compute the checked plan")
}
